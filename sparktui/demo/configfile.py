"""The config file `sparktui demo` writes for its nodes: a normal sparktui config, commented for a reader."""

from __future__ import annotations

import json
from dataclasses import dataclass

from . import checkpoint

SCENARIOS = {
    # demo scenario -> engine simulator scenarios passed to the containers through docker.env
    "pivot": ("sglang-host-ip",),
    "happy": (),
    "collective-timeout": ("collective-timeout",),
    "unsupported": (),
    "memory": ("slow-load",),
}
STORIES = {  # what the user sees in each demo scenario: `sparktui demo --help` lists these
    "pivot": "SGLang hangs at the rendezvous and you pivot to vLLM",
    "happy": "everything works the first time",
    "collective-timeout": "it serves, then the all-reduce between the nodes hangs mid-serving",
    "unsupported": "the SGLang image cannot load the model's architecture, and the check says so first",
    "memory": "another job holds 80 GiB on spark2; its memory runs out while the weights load: the memory "
    "guard warns, then stops the launch before the node wedges",
}
WHY = {  # what each demo scenario's simulator scenarios do, for the config file's reader
    "pivot": "SGLang's message queue wanders off the fabric: the rendezvous hangs",
    "collective-timeout": "after ~20 s of serving under load the all-reduce between the nodes hangs; torch's "
    "NCCL watchdog ends it 600 engine seconds later",
    "memory": "weight loading ten times slower, as from a disk, so spark2's memory falls shard by shard",
}
# demo scenario -> node index -> memory (kB) already in use on that node before anything is launched: the
# engines size their KV cache from the GPU's total (a share of it), not from what is left, as on a GB10
SCENARIO_IN_USE_KB = {"memory": {2: 80 * 1024 * 1024}}
# demo scenario -> the engine images of the config (default: the config's defaults)
SCENARIO_IMAGES = {"unsupported": {"sglang": "lmsysorg/sglang:spark"}}
# demo scenario -> config.json fields over the demo checkpoint's (checkpoint.py)
SCENARIO_MODELS = {"unsupported": checkpoint.QWEN35}
MEMORY_FLOOR = "4GiB"  # the guard's default, written out in the memory scenario's config
MEMORY_WARN = "16GiB"  # a wide band, so the warning shows for a while before the floor
CLUSTER_NAME = "DEMO \u2014 simulated cluster"


@dataclass
class NodeEntry:
    name: str
    host: str
    port: int
    role: str


def _q(value: object) -> str:
    """A YAML scalar that reads back as exactly this string (JSON strings are valid YAML)."""
    return json.dumps(str(value))


def render(
    nodes: list[NodeEntry],
    *,
    identity_file: str,
    known_hosts: str,
    model_name: str,
    model_path: str,
    source: str,
    speed: float,
    scenario: str,
    ports: dict[str, int],
    hang_after: float,
) -> str:
    lines = [
        "# sparktui demo: a SIMULATED cluster on this machine. No real GPU, no real network.",
        "# Each node is an SSH server on a loopback address with its own namespaces (model directory,",
        "# processes, hostname); docker, nvidia-smi, ibdev2netdev and ip are stand-ins, and the engines",
        "# are sparktui's simulator (same flags, log lines, rendezvous and HTTP API as SGLang, vLLM and TensorRT-LLM).",
        f"cluster: {_q(CLUSTER_NAME)}",
        "nodes:",
    ]
    for n in nodes:
        lines += [
            f"  - name: {n.name}",
            f"    host: {n.host}",
            f"    port: {n.port}",
            "    user: root",
            f"    identity_file: {_q(identity_file)}",
            f"    role: {n.role}",
        ]
    lines += [
        "model:",
        f"  name: {_q(model_name)}",
        f"  path: {_q(model_path)}  # the same path on every node; only {source} holds the files at first",
        f"  source: {source}",
        "docker:",
        "  env:",
        f"    SPARKTUI_SIM_SPEED: {_q(f'{speed:g}')}  # the simulated engines run this many times faster",
    ]
    sims = SCENARIOS[scenario]
    if sims:
        lines.append(f"    SPARKTUI_SIM_SCENARIO: {_q(','.join(sims))}  # {WHY[scenario]}")
    images = SCENARIO_IMAGES.get(scenario)
    if images:  # the stock SGLang image of the seed's story: it lacks the model's architecture
        lines += ["images:"] + [
            f"  {k}: {_q(v)}  # cannot load the model: the support check says so" for k, v in images.items()
        ]
    lines += [
        "ssh:",
        f"  known_hosts: {_q(known_hosts)}  # the demo nodes' host keys: still verified",
        "  ssh_config: []  # leave your ~/.ssh/config out of it",
        "  connect_timeout: 5",
        "engine:",
        f"  sglang_port: {ports['sglang']}",
        f"  vllm_port: {ports['vllm']}",
        f"  dist_port: {ports['dist']}",
        f"  ray_port: {ports['ray']}",
        f"  hang_after: {hang_after:g}  # seconds of silence in distributed init, scaled to the demo's speed",
        # the engines' own step timeouts count engine seconds: the wedge shows well before they end it
        f"  wedge_after: {max(5.0, round(150.0 / speed, 1)):g}  # seconds without a token while requests wait",
    ]
    in_use = SCENARIO_IN_USE_KB.get(scenario)
    if in_use:
        names = ", ".join(
            f"{nodes[k - 1].name} ({kb / (1 << 20):g} GiB)" for k, kb in in_use.items() if k <= len(nodes)
        )
        lines += [
            "memory:",
            f"  floor: {_q(MEMORY_FLOOR)}  # already in use on {names} before any launch: its",
            "  # MemAvailable falls through the warning band, then under the floor, as the weights load",
            f"  warn: {_q(MEMORY_WARN)}",
            "  interval: 1",
        ]
    if "trtllm" in ports:  # its playbook port (8355) would clash with anything else holding it on this machine
        lines += ["engines:", "  trtllm:", f"    port: {ports['trtllm']}"]
    return "\n".join(lines) + "\n"
