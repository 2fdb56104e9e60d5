"""NVIDIA's Local AI Inference Recipes (NVIDIA/local-ai-inference-recipes, schema 3 and 4) as a plan's start.

One YAML per model, hardware and backend. What a plan takes from it:
- `hardware`: `dgx-spark`, `dgx-spark-2gpu`, `dgx-spark-4gpu` (catalog/hardware/: one GB10 per Spark, so the
  GPU count is the node count); `min_vidmem_gb`, where given, is per node (128 in the recipes for 128 GB Sparks);
- `backend` and `runtime.image`: the engine and the container;
- `serve.command`: the head's shell, `export NAME=value` lines and then the engine's command
  (`vllm serve MODEL ... --nnodes N --node-rank 0 --master-addr "$HEAD_IP"`);
- `serve.additional_commands`: the workers' commands, the same with their rank and `--headless`;
- `runtime.setup_command`: the `docker run` every node starts; its literal `-e` values become container env.

The result is a Recipe as for sparkrun's files, so apply_recipe carries it the same way: the flags the plan
writes itself (TP, PP, ranks, addresses, port, memory fraction) become options, every other flag passes
through. What a plan cannot carry is an error at FILE:LINE quoting the line: other hardware, a launch outside a
container, a shell step other than `export`, a worker command that differs from the head's beyond its rank, a
flag whose value is a shell variable.
"""

from __future__ import annotations

import re
import shlex

import yaml

from .recipe import PROGRAMS, RUNTIMES, Recipe, adopt_managed, expand_env, split_command
from ..config.secrets import shorten

SCHEMAS = (3, 4)
_HARDWARE = re.compile(r"dgx-spark(?:-(\d+)gpu)?\Z")
# Environment the plan sets per node itself (its interfaces, HCAs, rank and rendezvous address): the recipe
# fills these from placeholders (`<connectx-interface>`) each person replaces by hand.
PLAN_ENV = {
    "NODE_RANK",
    "HEAD_IP",
    "MASTER_PORT",
    "MASTER_ADDR",
    "MN_IF_NAME",
    "NCCL_SOCKET_IFNAME",
    "NCCL_IB_HCA",
    "NCCL_IB_DISABLE",
    "UCX_NET_DEVICES",
    "OMPI_MCA_btl_tcp_if_include",
    "GLOO_SOCKET_IFNAME",
    "TP_SOCKET_IFNAME",
}
# Flags that differ between the head's and a worker's command by design.
_RANK_FLAGS = {"--node-rank", "--headless"}
# Fields that describe the recipe for people (catalog pages); read, never needed by a plan.
_INFO_KEYS = {
    "schema_version",
    "title",
    "model",
    "hardware",
    "platform",
    "backend",
    "backend_version",
    "status",
    "variant",
    "validation",
    "precision",
    "checkpoint",
    "mtp",
    "spec_dec",
    "concurrency",
    "topology",
    "sampling",
    "security",
    "runtime",
    "serve",
    "notes",
    "limitations",
    "prerequisites",
    "min_vidmem_gb",
    "clients",
    "launch",
}
_VAR = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")


def is_nvidia(data: object) -> bool:
    """The format: a schema_version, a hardware id and a serve section (sparkrun's files have none of them)."""
    return (
        isinstance(data, dict)
        and "schema_version" in data
        and "hardware" in data
        and isinstance(data.get("serve"), dict)
    )


class _Lines:
    """Positions and text of the file's lines, for errors that quote the line at fault."""

    def __init__(self, text: str, path: str, root: yaml.Node | None):
        self.lines, self.path, self.root = text.splitlines(), path, root

    def node(self, *keys) -> yaml.Node | None:
        node = self.root
        for k in keys:
            if isinstance(node, yaml.MappingNode):
                node = next((v for kn, v in node.value if isinstance(kn, yaml.ScalarNode) and kn.value == k), None)
            elif isinstance(node, yaml.SequenceNode) and isinstance(k, int) and k < len(node.value):
                node = node.value[k]
            else:
                return None
        return node

    def line_of(self, *keys) -> int:
        """1-based line of the value at keys (of its key when the value is empty); 0 when absent."""
        node = self.node(*keys)
        return node.start_mark.line + 1 if node is not None else 0

    def block_start(self, node: yaml.Node) -> int:
        """1-based line of a scalar's first text line: the line after `|` for a block scalar."""
        return node.start_mark.line + (2 if getattr(node, "style", None) in ("|", ">") else 1)

    def error(self, line: int, why: str) -> str:
        if not line:
            return f"{self.path}: {why}"
        quoted = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""
        return f"{self.path}:{line}: {why}: `{shorten(quoted, 120)}`"


class _Shell:
    """One command text: its logical lines (backslash continuations joined), each word with its line."""

    def __init__(self, text: str, first_line: int):
        self.steps: list[tuple[int, str, list[tuple[str, int]]]] = []  # (line, text, [(word, line)])
        words: list[tuple[str, int]] = []
        start, parts = 0, []
        for i, raw in enumerate(text.splitlines()):
            line = first_line + i
            stripped = raw.strip()
            if not parts and (not stripped or stripped.startswith("#")):
                continue
            if not parts:
                start = line
            cont = stripped.endswith("\\")
            body = stripped[:-1] if cont else stripped
            parts.append(body)
            try:
                words += [(w, line) for w in shlex.split(body, comments=True)]
            except ValueError:  # a quote spanning lines: the logical line is split whole below
                words.append(("\0", line))
            if not cont:
                logical = " ".join(parts)
                if any(w == "\0" for w, _ in words):
                    try:
                        words = [(w, start) for w in shlex.split(logical)]
                    except ValueError:
                        words = [("\0", start)]
                self.steps.append((start, logical, words))
                parts, words = [], []
        if parts:
            self.steps.append((start, " ".join(parts), words))


def _program(words: list[str]) -> tuple[str, ...] | None:
    return next((p for p in PROGRAMS if tuple(words[: len(p)]) == p), None)


class _Command:
    """A serve command read from a shell text: its exports, its engine argv, and where each word came from."""

    def __init__(self, lines: _Lines, keys: tuple, errors: list[str]):
        self.env: dict[str, tuple[str, int]] = {}
        self.argv: list[tuple[str, int]] = []
        self.line = lines.line_of(*keys)
        node = lines.node(*keys)
        if not isinstance(node, yaml.ScalarNode) or not node.value.strip():
            errors.append(lines.error(self.line, f"{'.'.join(map(str, keys))} must hold the engine's command"))
            return
        others: list[tuple[int, str]] = []  # shell steps before the engine's command
        for start, text, words in _Shell(node.value, lines.block_start(node)).steps:
            if words and words[0][0] == "\0":
                errors.append(lines.error(start, "a line that cannot be read as shell words"))
            elif words and words[0][0] == "export" and not self.argv:
                for w, at in words[1:]:
                    name, eq, value = w.partition("=")
                    if eq:
                        self.env[name] = (value, at)
            elif not self.argv and _program([w for w, _ in words]):
                self.argv = words
            elif self.argv:
                errors.append(lines.error(start, "a step after the engine's command, which sparktui cannot run"))
            else:
                others.append((start, words[0][0] if words else text))
        if not self.argv:
            at, prog = others[0] if others else (self.line, "nothing")
            errors.append(
                lines.error(
                    at,
                    f"the command runs {shorten(prog, 40)}, not an engine sparktui runs ("
                    + ", ".join(" ".join(p) for p in PROGRAMS)
                    + ")",
                )
            )
        for at, _ in others[bool(not self.argv) :]:
            errors.append(
                lines.error(
                    at,
                    "a shell step other than `export` before the engine's command; "
                    "sparktui runs only the engine in the image",
                )
            )

    def flags(self) -> dict[str, str | None]:
        """flag -> value (None for a switch), as written; the positional model is left out."""
        out: dict[str, str | None] = {}
        words = [w for w, _ in self.argv[len(_program([w for w, _ in self.argv]) or ()) :]]
        i = 1 if words and not words[0].startswith("-") else 0
        while i < len(words):
            flag, eq, val = words[i].partition("=")
            if eq:
                out[flag] = val
            elif i + 1 < len(words) and not words[i + 1].startswith("-"):
                out[flag] = words[i + 1]
                i += 1
            else:
                out[flag] = None
            i += 1
        return out

    def where(self, word: str) -> int:
        return next((at for w, at in self.argv if w == word or w.startswith(word + "=")), self.line)

    def model(self) -> str | None:
        words = [w for w, _ in self.argv[len(_program([w for w, _ in self.argv]) or ()) :]]
        return words[0] if words and not words[0].startswith("-") else None


def _hardware(r: Recipe, data: dict, lines: _Lines) -> None:
    hw = data.get("hardware")
    m = _HARDWARE.match(str(hw)) if isinstance(hw, str) else None
    if not m:
        r.errors.append(
            lines.error(
                lines.line_of("hardware"),
                f"hardware {shorten(repr(hw), 40)} is not DGX Spark "
                f"(sparktui plans dgx-spark, dgx-spark-2gpu, dgx-spark-4gpu, ...)",
            )
        )
        return
    r.hardware = hw
    nodes = int(m[1] or 1)
    topo = data.get("topology") if isinstance(data.get("topology"), dict) else {}
    count = topo.get("node_count")
    if count is not None and count != nodes:
        r.errors.append(
            lines.error(
                lines.line_of("topology", "node_count"),
                f"topology.node_count {count!r} is not the {nodes} Sparks of {hw}",
            )
        )
    r.min_nodes = r.max_nodes = nodes
    mem = data.get("min_vidmem_gb")
    if isinstance(mem, (int, float)) and not isinstance(mem, bool) and mem > 0:
        r.min_memory_gb = int(mem)


def _platform(r: Recipe, data: dict, lines: _Lines) -> None:
    plat = data.get("platform") if isinstance(data.get("platform"), dict) else {}
    if plat.get("os", "linux") != "linux":
        r.errors.append(
            lines.error(lines.line_of("platform", "os"), f"platform.os {plat.get('os')!r}: a Spark runs Linux")
        )
    if plat.get("execution", "container") != "container":
        r.errors.append(
            lines.error(
                lines.line_of("platform", "execution"),
                f"platform.execution {plat.get('execution')!r}: sparktui runs the engine in a container",
            )
        )
    rt = data.get("runtime")
    if not isinstance(rt, dict) or not rt.get("image"):
        r.errors.append(lines.error(lines.line_of("runtime"), "runtime.image names no container image"))
        return
    if rt.get("kind", "container") != "container":
        r.errors.append(
            lines.error(lines.line_of("runtime", "kind"), f"runtime.kind {rt.get('kind')!r} is not a container")
        )
    r.container = str(rt["image"])


def _backend(r: Recipe, data: dict, lines: _Lines, head: _Command) -> None:
    backend = str(data.get("backend") or "")
    runtimes = [rt for rt, (engine, _) in RUNTIMES.items() if engine == backend]
    if not runtimes:
        engines = sorted({e for e, _ in RUNTIMES.values()})
        r.errors.append(
            lines.error(
                lines.line_of("backend"), f"backend {backend!r} is not an engine sparktui runs ({', '.join(engines)})"
            )
        )
        return
    flags = head.flags()
    want = "ray" if flags.get("--distributed-executor-backend") == "ray" else "native"
    r.runtime = next((rt for rt in runtimes if RUNTIMES[rt][1] == want), runtimes[0])


def _setup(r: Recipe, data: dict, lines: _Lines, environ: dict[str, str]) -> None:
    """The literal `-e NAME=value` of the setup's `docker run` become container env; the rest is reported."""
    node = lines.node("runtime", "setup_command")
    if not isinstance(node, yaml.ScalarNode) or not node.value.strip():
        return
    env: dict[str, str] = {}
    ignored: list[str] = []
    for start, _, words in _Shell(node.value, lines.block_start(node)).steps:
        ws = [w for w, _ in words]
        if ws[:2] != ["docker", "run"]:
            continue
        i = 2
        while i < len(ws):
            w = ws[i]
            if w in ("-e", "--env") and i + 1 < len(ws):
                name, eq, value = ws[i + 1].partition("=")
                at = words[i + 1][1]
                i += 2
                if not eq or name in PLAN_ENV:
                    continue
                refs = [v for v in _VAR.findall(value) if v not in environ]
                if refs and name != refs[0]:
                    r.errors.append(
                        lines.error(
                            at,
                            f"{name} takes its value from ${refs[0]}, a placeholder of the "
                            f"setup that sparktui cannot fill",
                        )
                    )
                    continue
                env[name] = value
            elif w.startswith("-"):
                ignored.append(w.split("=", 1)[0])
                i += (
                    2
                    if w
                    in (
                        "-v",
                        "--volume",
                        "--ulimit",
                        "--gpus",
                        "--ipc",
                        "--network",
                        "--entrypoint",
                        "--shm-size",
                        "--name",
                    )
                    else 1
                )
            else:
                i += 1
    r.env.update(expand_env(env, environ, r.warnings))
    if ignored:
        r.warnings.append(
            f"runtime.setup_command: docker options {', '.join(dict.fromkeys(ignored))} are not "
            f"used: sparktui writes each node's docker run itself"
        )


def _workers(r: Recipe, data: dict, lines: _Lines, head: _Command) -> None:
    extra = (data.get("serve") or {}).get("additional_commands") or []
    if not isinstance(extra, list):
        r.errors.append(
            lines.error(lines.line_of("serve", "additional_commands"), "serve.additional_commands must be a list")
        )
        return
    if extra and (r.max_nodes or 1) < 2:
        r.errors.append(
            lines.error(
                lines.line_of("serve", "additional_commands"), f"worker commands for {r.hardware}, a single Spark"
            )
        )
    mine = {k: v for k, v in head.flags().items() if k not in _RANK_FLAGS}
    for i, item in enumerate(extra):
        target = item.get("target") if isinstance(item, dict) else None
        if target != "workers":
            r.errors.append(
                lines.error(
                    lines.line_of("serve", "additional_commands", i, "target")
                    or lines.line_of("serve", "additional_commands", i),
                    f"an additional command for {target!r}; sparktui plans the head and its workers only",
                )
            )
            continue
        w = _Command(lines, ("serve", "additional_commands", i, "command"), r.errors)
        if not w.argv:
            continue
        for name, (value, at) in w.env.items():
            if head.env.get(name, (None,))[0] != value:
                r.errors.append(
                    lines.error(
                        at,
                        f"the workers export {name}={shorten(value, 40)}, the head "
                        f"{'does not' if name not in head.env else head.env[name][0]}; one "
                        f"plan runs every rank with the same env",
                    )
                )
        for name in head.env.keys() - w.env.keys():
            r.errors.append(
                lines.error(
                    w.line,
                    f"the workers do not export {name}, which the head does; one "
                    f"plan runs every rank with the same env",
                )
            )
        theirs = {k: v for k, v in w.flags().items() if k not in _RANK_FLAGS}
        for flag in sorted(mine.keys() | theirs.keys()):
            if mine.get(flag, "\0") != theirs.get(flag, "\0"):
                at = w.where(flag) if flag in theirs else head.where(flag)
                r.errors.append(
                    lines.error(
                        at,
                        f"{flag} differs between the head's and the workers' commands; one "
                        f"plan runs every rank with the same flags",
                    )
                )
        if w.model() != head.model():
            r.errors.append(lines.error(w.line, f"the workers serve {w.model()}, the head {head.model()}"))


def parse(data: dict, root: yaml.Node | None, text: str, path: str, environ: dict[str, str]) -> Recipe:
    r = Recipe(path=path, runtime="", kind="nvidia")
    lines = _Lines(text, path, root)
    schema = data.get("schema_version")
    if schema not in SCHEMAS:
        r.warnings.append(
            f"schema_version {shorten(repr(schema), 20)}: sparktui reads schema "
            f"{' and '.join(map(str, SCHEMAS))}; fields it does not know are reported below"
        )
    _hardware(r, data, lines)
    _platform(r, data, lines)
    head = _Command(lines, ("serve", "command"), r.errors)
    _backend(r, data, lines, head)
    target = (data.get("serve") or {}).get("target")
    if target not in (None, "head", "single-node"):
        r.errors.append(
            lines.error(
                lines.line_of("serve", "target"),
                f"serve.target {target!r}: sparktui runs the serve command on the head",
            )
        )
    _setup(r, data, lines, environ)
    r.env.update(expand_env({k: v for k, (v, _) in head.env.items()}, environ, r.warnings))
    _workers(r, data, lines, head)
    if head.argv:
        for word, at in head.argv:
            if _VAR.search(word) and _flag_of(head, word) not in _MANAGED_SHELL:
                r.errors.append(
                    lines.error(
                        at, f"{word} is a shell variable the recipe's setup fills by hand; give its value instead"
                    )
                )
        r.command = shlex.join(w for w, _ in head.argv)
        r.extra_args, managed, r.trust_remote_code = split_command(r.command, r.warnings)
        r.model = head.model()
        _managed(r, data, lines, head, managed)
    serve = data.get("serve") or {}
    if serve.get("api_model") and "served_model_name" not in r.defaults:
        r.defaults["served_model_name"] = str(serve["api_model"])  # the name the recipe's clients ask for
    if isinstance(serve.get("port"), int) and "port" not in r.defaults:
        r.defaults["port"] = serve["port"]
    if r.model is None:
        ck = data.get("checkpoint") if isinstance(data.get("checkpoint"), dict) else {}
        r.model = str(ck.get("target_label") or data.get("model") or "") or None
    if r.model is None:
        r.errors.append(lines.error(lines.line_of("serve", "command"), "the command names no model"))
    _notes(r, data)
    r.errors.sort(key=_line_key)  # in file order, as an editor walks them
    return r


def _line_key(message: str) -> int:
    m = re.match(r".*?:(\d+): ", message)
    return int(m[1]) if m else 0


# Flags whose shell-variable values the plan replaces with its own (the head's address, port and rank).
_MANAGED_SHELL = {"--master-addr", "--master-port", "--node-rank", "--dist-init-addr", "--nccl-init-addr"}


def _flag_of(cmd: _Command, word: str) -> str | None:
    words = [w for w, _ in cmd.argv]
    i = words.index(word)
    return words[i - 1] if i and words[i - 1].startswith("-") else word.split("=", 1)[0]


def _managed(r: Recipe, data: dict, lines: _Lines, head: _Command, managed: dict[str, str]) -> None:
    nnodes = managed.get("--nnodes")
    if nnodes is not None and r.max_nodes and nnodes != str(r.max_nodes):
        r.errors.append(
            lines.error(head.where("--nnodes"), f"--nnodes {nnodes} on {r.hardware}, which is {r.max_nodes} Spark(s)")
        )
    rank = managed.get("--node-rank")
    if rank is not None and rank != "0":
        r.errors.append(
            lines.error(head.where("--node-rank"), f"the head's command runs rank {rank}; the head is rank 0")
        )
    adopt_managed(
        r, {k: v for k, v in managed.items() if k not in ("--nnodes", "--node-rank", "--master-addr", "--master-port")}
    )


def _notes(r: Recipe, data: dict) -> None:
    """What the recipe tells its reader and the plan does not check: said, so nothing is dropped unseen."""
    if data.get("status") and data.get("status") != "optimized":
        r.warnings.append(f"status {data['status']}: NVIDIA has not validated this recipe as optimized")
    limits = data.get("limitations")
    for item in limits if isinstance(limits, list) else [limits] if limits else []:
        r.warnings.append(f"limitation: {shorten(item, 200)}")
    if data.get("backend_version"):
        r.warnings.append(
            f"validated with backend version {shorten(data['backend_version'], 60)}; the plan reads "
            f"the release in the image"
        )
    launch = data.get("launch")
    if isinstance(launch, dict) and launch.get("alternatives"):
        r.warnings.append("launch.alternatives: not used; the plan follows the primary launch")
    for key in data:
        if key not in _INFO_KEYS:
            r.warnings.append(f"{key}: not used by sparktui")
