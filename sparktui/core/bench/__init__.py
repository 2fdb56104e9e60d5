"""`sparktui bench`: a serving benchmark run on the head node, its results kept locally.

client.py  the node side: which `vllm bench serve` to run, the detached job, its progress and stop
results.py one row per concurrency from the client's own result file; the local history file
taint.py   whether a run measured the deployment alone (other traffic, failed requests, a changed deployment)
"""
