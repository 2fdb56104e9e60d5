"""The core: everything that talks to the nodes, plans, diagnoses and keeps state. It never imports Textual.

The TUI and the CLI drive the same objects; the core reports through an `EventBus` and the `Journal`.
Each package below holds one concept and maps its own modules in its docstring.

- `config` — the user's configuration: the YAML read, checked and written; first-run setup; secrets
- `remote` — reaching the nodes: one SSH connection per node, its channels, why a node is unreachable
- `nodes` — what each node is: the probe, its facts kept on disk, what a node needs
- `network` — the subnet joining the nodes, the fabric and its layout, the ports a plan needs
- `memory` — unified memory on the nodes: free memory before a launch, the guard while it runs
- `plan` — a launch plan and what it rests on: the fit, the model's config, the image, the export
- `recipes` — sparkrun's and NVIDIA's recipes as the start of a plan
- `engines` — the registry of engines; each engine's commands, flags, log lines and metrics
- `preflight` — the rendezvous check on every node before the big load
- `transfers` — model and image copies between nodes, detached, followed, verified
- `deploy` — running a plan: launch, follow, prove the endpoint, stop, pivot, redeploy, reattach
- `diagnosis` — engine logs read as they arrive: milestones, problems, the rendezvous hang
- `serving` — a ready endpoint's metrics, and the wedge judgement
- `bench` — `sparktui bench`: the benchmark client on the head node and its results
- `state` — a deployment's snapshot and states, the events, the journal, the state files
"""
