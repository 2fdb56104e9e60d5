"""`sparktui bench`: a serving benchmark run on the head node, its results kept locally.

- `client` — the benchmark client on the head node, detached: which `vllm bench serve` to run, its job, progress, stop
- `run` — a benchmark on a deployment's head through its SSH connection: start, follow, stop, collect
- `results` — one row per concurrency from the client's own result file; the local history file
- `taint` — whether a run measured the deployment alone (other traffic, failed requests, a changed deployment)
"""
