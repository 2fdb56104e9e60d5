"""Recipes as a starting point for a plan: sparkrun's, and NVIDIA's (nvidia.py, told apart by their keys).

A recipe (YAML) names a model, a runtime (vllm | sglang | ...), a container, `defaults` (port,
tensor_parallel, gpu_memory_utilization, max_model_len, served_model_name, ... and any key its
command template uses), `env`, and a `command` template with {placeholders}. We take what maps onto
a plan, pass the template's other flags through as extra engine args, and list everything we do
not use as a warning: nothing is dropped silently.
"""

from __future__ import annotations

import math
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from . import mods as recipe_mods
from ..engines import ENGINES
from ..plan.plan import PlanOptions
from .rules import defaults_to_flags, resolve_runtime, switch
from ..config.secrets import shorten
from ..config.yamlpos import FLOAT, INT, MAX_BYTES, ConfigError, Source

# sparkrun runtime (after resolve_runtime) -> (engine, mode): each engine's Engine.recipe_runtimes
RUNTIMES = {rt: (e.name, mode) for e in ENGINES.values() for rt, mode in e.recipe_runtimes.items()}
TOP_KEYS = {
    "model",
    "runtime",
    "container",
    "defaults",
    "env",
    "command",
    "min_nodes",
    "max_nodes",
    "mode",
    "mods",
    "solo_only",
    "cluster_only",
    "metadata",
    "sparkrun_version",
    "recipe_version",
    "builder",
    "name",
    "description",
}
# defaults keys that become plan options
OPTION_KEYS = {
    "port",
    "host",
    "tensor_parallel",
    "pipeline_parallel",
    "gpu_memory_utilization",
    "max_model_len",
    "served_model_name",
}
# Flags the plan writes itself (value taken from the options above); everything else passes through.
_VALUE_FLAGS = {
    "--model",
    "--model-path",
    "--tp",
    "--tp-size",
    "-tp",
    "--tensor-parallel-size",
    "--pp",
    "--pp-size",
    "-pp",
    "--pipeline-parallel-size",
    "--host",
    "--port",
    "--mem-fraction-static",
    "--gpu-memory-utilization",
    "--context-length",
    "--max-model-len",
    "--served-model-name",
    "--nnodes",
    "--node-rank",
    "--dist-init-addr",
    "--nccl-init-addr",
    "--distributed-executor-backend",
    "--master-addr",
    "--master-port",
}
_BOOL_FLAGS = {"--headless", "--trust-remote-code"}
PROGRAMS = tuple(p for e in ENGINES.values() for p in e.recipe_programs)
_PLACEHOLDER = re.compile(r"\{(\w+)\}")
_ENV_REF = re.compile(r"\$\{(\w+)\}|\$(\w+)")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class RecipeError(Exception):
    """The file is not a readable recipe; str() says where and why."""


@dataclass
class Recipe:
    path: str
    model: str | None = None
    runtime: str = "vllm-distributed"  # as sparkrun resolves it (resolve_runtime)
    builder: str = ""
    container: str | None = None
    defaults: dict = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    command: str | None = None
    min_nodes: int | None = None
    max_nodes: int | None = None
    metadata: dict = field(default_factory=dict)
    extra_args: list[str] = field(default_factory=list)  # template flags the plan does not write itself
    mods: list[str] = field(default_factory=list)  # sparkrun mods, as the recipe names them (mods.py)
    trust_remote_code: bool = False
    kind: str = "sparkrun"  # the file's format: "sparkrun", or "nvidia" (nvidia.py)
    hardware: str | None = None  # the NVIDIA recipe's hardware id (dgx-spark-2gpu)
    min_memory_gb: int | None = None  # memory each node needs (an NVIDIA recipe's min_vidmem_gb)
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def engine(self) -> tuple[str, str | None] | None:
        return RUNTIMES.get(self.runtime)


def _fill(template: str, values: dict, warnings: list[str]) -> str:
    """sparkrun's substitution: repeat until nothing changes; unknown placeholders stay and are reported."""
    for _ in range(10):
        new = _PLACEHOLDER.sub(lambda m: str(values[m[1]]) if m[1] in values else m[0], template)
        if len(new) > MAX_TEXT:  # values that name themselves would double it every round
            warnings.append(
                f"command template grows past {MAX_TEXT} characters when filled; none of its flags are used"
            )
            return ""
        if new == template:
            break
        template = new
    for name in sorted(set(_PLACEHOLDER.findall(template))):
        warnings.append(f"command template: {{{name}}} has no value in defaults")
    return template


def split_command(text: str, warnings: list[str]) -> tuple[list[str], dict[str, str], bool]:
    """Template flags -> (pass-through args, managed flag values, trust_remote_code)."""
    try:
        argv = shlex.split(text.replace("\\\n", " "))
    except ValueError as e:
        warnings.append(f"command template could not be read ({e}); none of its flags are used")
        return [], {}, False
    for prog in PROGRAMS:
        if tuple(argv[: len(prog)]) == prog:
            argv = argv[len(prog) :]
            break
    else:
        if argv:
            warnings.append(
                f"command template starts with {' '.join(argv[:3])!r}, not an engine sparktui runs; "
                f"its flags are kept as extra args"
            )
    if argv and not argv[0].startswith("-"):
        argv = argv[1:]  # the positional model of `vllm serve MODEL`
    extra: list[str] = []
    managed: dict[str, str] = {}
    trust = False
    i = 0
    while i < len(argv):
        a = argv[i]
        flag, eq, val = a.partition("=")
        if flag in _VALUE_FLAGS:
            if eq:
                managed[flag] = val
            elif i + 1 < len(argv):
                managed[flag] = argv[i + 1]
                i += 1
        elif a == "--trust-remote-code":
            trust = True
        elif a in _BOOL_FLAGS:
            pass  # --headless: the plan adds it on the ranks that need it
        else:
            extra.append(a)
        i += 1
    return extra, managed, trust


def expand_env(env: dict, environ: dict[str, str], warnings: list[str]) -> dict[str, str]:
    """Values may name control-machine variables (${HF_TOKEN}); an unset one leaves the variable out."""
    out: dict[str, str] = {}
    for k, v in env.items():
        v = "" if v is None else str(v)
        missing = [a or b for a, b in _ENV_REF.findall(v) if (a or b) not in environ]
        if missing:
            warnings.append(f"env {k}: ${missing[0]} is not set here, so {k} is left out")
            continue
        out[str(k)] = _ENV_REF.sub(lambda m: environ[m[1] or m[2]], v)
    return out


MAX_TEXT = 65536  # characters in one recipe value, and in a filled command template
_NUMBERS = {
    "port": (int, 1, 65535),
    "tensor_parallel": (int, 1, 4096),
    "pipeline_parallel": (int, 1, 4096),
    "gpu_memory_utilization": (float, 0.0, 1.0),
    "max_model_len": (int, 1, 1 << 40),
}


def _at(path: str, node: yaml.Node) -> str:
    return f"{path}:{node.start_mark.line + 1}:{node.start_mark.column + 1}"


def _read(text: str, path: str) -> tuple[object, yaml.Node | None]:
    """The recipe's data and its root node: bounded like a config (size, nesting, aliases), safe tags only,
    every scalar constructible; problems are RecipeErrors at FILE:LINE:COL."""
    src = Source(text, path)
    try:
        root = src.compose()
    except ConfigError as e:
        raise RecipeError(str(e).replace("(expected valid YAML", "(not valid YAML", 1)) from None
    if root is None:
        return None, None
    loader = yaml.SafeLoader("")
    seen: set[int] = set()
    stack = [root]
    while stack:  # iterative: the depth is bounded, but aliases may revisit nodes
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            if len(node.value) > MAX_TEXT:
                raise RecipeError(f"{_at(path, node)}: a value of {len(node.value)} characters (at most {MAX_TEXT})")
            if node.tag in (INT, FLOAT):
                try:
                    if len(node.value) > 64:
                        raise ValueError
                    loader.construct_object(node)
                except (ValueError, IndexError, OverflowError):
                    kind = "an integer" if node.tag == INT else "a number"
                    raise RecipeError(f"{_at(path, node)}: {shorten(repr(node.value), 60)} is not {kind}") from None
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, yaml.MappingNode):
            stack.extend(x for kv in node.value for x in kv)
    try:
        return loader.construct_document(root), root
    except yaml.MarkedYAMLError as e:  # an unknown tag (!!python/...), an unhashable key
        mark = e.problem_mark or e.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else path
        raise RecipeError(f"{where}: {shorten(e.problem or e.context or 'not a plain value', 120)}") from None
    except (ValueError, TypeError) as e:
        raise RecipeError(f"{path}: {shorten(e, 120)}") from None


def _nodes(root: yaml.Node | None, *keys: str) -> dict[str, yaml.Node]:
    """key -> value node of the mapping at root[keys...] (for positions in messages)."""
    node = root
    for k in keys:
        if not isinstance(node, yaml.MappingNode):
            return {}
        node = next((v for kn, v in node.value if isinstance(kn, yaml.ScalarNode) and kn.value == k), None)
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {kn.value: v for kn, v in node.value if isinstance(kn, yaml.ScalarNode)}


def _check_values(r: Recipe, data: dict, root: yaml.Node | None) -> None:
    """Fields of the wrong kind are errors at their place; a bad number is dropped, never half-used."""
    top = _nodes(root)
    where = lambda k: _at(r.path, top[k]) if k in top else r.path
    for key in ("model", "runtime", "container", "command"):
        v = data.get(key)
        if v is not None and not isinstance(v, (str, int, float)) or isinstance(v, bool):
            r.errors.append(f"{where(key)}: {key} must be text (got {type(v).__name__})")
            data[key] = None
    for key in ("env", "defaults", "metadata"):
        v = data.get(key)
        if v is not None and not isinstance(v, dict):
            r.errors.append(f"{where(key)}: {key} must be a mapping")
            data[key] = None
    env = data.get("env") or {}
    spots = _nodes(root, "env")
    for k, v in list(env.items()):
        if not isinstance(k, str) or not _ENV_NAME.match(k) or isinstance(v, (dict, list)):
            at = _at(r.path, spots[k]) if isinstance(k, str) and k in spots else where("env")
            r.errors.append(f"{at}: env {shorten(repr(k), 60)} must be NAME: value")
            del env[k]
    defaults = data.get("defaults") or {}
    spots = _nodes(root, "defaults")
    for k, (kind, lo, hi) in _NUMBERS.items():
        if k not in defaults:
            continue
        v = defaults[k]
        try:
            if isinstance(v, bool) or isinstance(v, (list, dict)) or (isinstance(v, str) and len(v) > 64):
                raise ValueError
            num = kind(float(v)) if kind is float else int(v)
            ok = math.isfinite(float(num)) and (lo < num <= hi if kind is float else lo <= num <= hi)
        except (ValueError, TypeError, OverflowError):
            ok = False
        if not ok:
            at = _at(r.path, spots[k]) if k in spots else where("defaults")
            span = f"above {lo:g} and at most {hi:g}" if kind is float else f"{lo}-{hi}"
            r.errors.append(
                f"{at}: defaults.{k} {shorten(repr(v), 60)} is not {'a number' if kind is float else 'an integer'} {span}"
            )
            del defaults[k]


def parse_recipe(text: str, path: str = "<recipe>", environ: dict[str, str] | None = None) -> Recipe:
    environ = dict(os.environ) if environ is None else environ
    data, root = _read(text, path)
    if not isinstance(data, dict):
        raise RecipeError(f"{path}: a recipe is a mapping (model, runtime, container, defaults, command)")
    from . import nvidia as recipe_nvidia  # here, not above: it imports this module

    if recipe_nvidia.is_nvidia(data):
        return recipe_nvidia.parse(data, root, text, path, environ)
    r = Recipe(path=path)
    _check_values(r, data, root)
    w = r.warnings
    r.model = str(data["model"]) if data.get("model") is not None else None
    if r.model is None:
        r.errors.append("recipe has no model")
    r.runtime, r.builder, why = resolve_runtime(data)
    if why:
        w.append(f"runtime {r.runtime}: {why}")
    if r.runtime not in RUNTIMES:
        r.errors.append(f"runtime {r.runtime!r} is not supported (sparktui runs: {', '.join(RUNTIMES)})")
    if r.builder:
        w.append(
            f"builder {r.builder}: sparkrun would build the image (with its mods); sparktui runs the container as named"
        )
    r.container = str(data["container"]) if data.get("container") else None
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict):
        r.errors.append("defaults must be a mapping")
        defaults = {}
    r.defaults = dict(defaults)
    env = data.get("env") or {}
    if not isinstance(env, dict):
        r.errors.append("env must be a mapping")
        env = {}
    r.env = expand_env(env, environ, w)
    for key in ("min_nodes", "max_nodes"):
        v = data.get(key)
        if v is not None:
            if isinstance(v, int) and not isinstance(v, bool):
                setattr(r, key, v)
            else:
                r.errors.append(f"{key} must be a whole number (got {v!r})")
    if data.get("solo_only"):
        r.max_nodes = 1
    if data.get("cluster_only"):
        r.min_nodes = max(r.min_nodes or 0, 2)
    mode = data.get("mode")
    if mode == "solo":
        r.max_nodes = 1
    r.metadata = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
    mods = data.get("mods")
    if mods is not None:
        if isinstance(mods, list) and all(isinstance(m, str) and m for m in mods):
            r.mods = list(mods)
        else:
            top = _nodes(root)
            at = _at(path, top["mods"]) if "mods" in top else path
            r.errors.append(f"{at}: mods must be a list of mod names")
    for key in data:
        if key not in TOP_KEYS:
            w.append(f"{key}: not used by sparktui")
    if isinstance(data.get("command"), str):
        r.command = data["command"]
        # The model's place in the template is taken by the plan's own model path, so any value does.
        values = {**r.defaults, "model": r.model or "model"}
        used = set(_PLACEHOLDER.findall(r.command))
        filled = _fill(r.command, values, w)
        r.extra_args, managed, r.trust_remote_code = split_command(filled, w)
        for k in r.defaults:
            if k not in OPTION_KEYS and k not in used:
                w.append(f"defaults.{k}: not used by the command template")
        adopt_managed(r, managed)
    return r


def adopt_managed(r: Recipe, managed: dict[str, str]) -> None:
    """A template flag with a literal value the defaults do not carry: adopt it as the default."""
    pairs = (
        ("--port", "port"),
        ("--host", "host"),
        ("--served-model-name", "served_model_name"),
        ("--max-model-len", "max_model_len"),
        ("--context-length", "max_model_len"),
        ("--gpu-memory-utilization", "gpu_memory_utilization"),
        ("--mem-fraction-static", "gpu_memory_utilization"),
        ("--tensor-parallel-size", "tensor_parallel"),
        ("--tp", "tensor_parallel"),
        ("--tp-size", "tensor_parallel"),
        ("-tp", "tensor_parallel"),
        ("--pipeline-parallel-size", "pipeline_parallel"),
        ("--pp-size", "pipeline_parallel"),
    )
    for flag, key in pairs:
        if flag in managed and key not in r.defaults:
            r.defaults[key] = managed[flag]
    for flag in (
        "--nnodes",
        "--node-rank",
        "--dist-init-addr",
        "--nccl-init-addr",
        "--master-addr",
        "--master-port",
        "--distributed-executor-backend",
    ):
        if flag in managed:
            r.warnings.append(f"command template: {flag} {managed[flag]} is replaced by the plan's own value")


def load_recipe(path: str | Path, environ: dict[str, str] | None = None) -> Recipe:
    p = Path(path)
    shown = shorten(p, 200)
    try:
        with p.open("rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as e:
        raise RecipeError(f"{shown}: {e.strerror or type(e).__name__}") from None
    if len(data) > MAX_BYTES:
        raise RecipeError(f"{shown}: larger than 1 MiB (a recipe is a few KiB)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise RecipeError(f"{shown}:{line}:{col}: not UTF-8 text") from None
    return parse_recipe(text, str(p), environ)


def _num(v, kind, what: str, warnings: list[str]):
    try:
        n = kind(v)
        if not math.isfinite(n):
            raise ValueError(v)
        return n
    except (TypeError, ValueError, OverflowError):
        warnings.append(f"defaults.{what}: {shorten(repr(v), 60)} is not a number; ignored")
        return None


def apply_recipe(
    r: Recipe, opts: PlanOptions, model_path: str | None = None, nodes: int | None = None, engine_given: bool = True
) -> tuple[PlanOptions, list[str]]:
    """Options with the recipe's values filled in where opts has none; returns (options, warnings).

    model_path: the checkpoint directory the plan serves (to compare with the recipe's model);
    nodes: how many nodes the plan uses (to compare with min_nodes / max_nodes);
    engine_given: False when the user named no engine, so the recipe's runtime picks it.
    """
    w = list(r.warnings)
    w += [f"recipe error: {e}" for e in r.errors]
    mapped = r.engine
    if mapped:
        engine, mode = mapped
        if not engine_given:
            opts.engine = engine
        if opts.engine == engine and opts.mode is None and mode:
            opts.mode = mode
        if opts.engine != engine:
            w.append(f"recipe is for {r.runtime}; planning {opts.engine} as asked, so its command flags may not apply")
    d = r.defaults
    if opts.image is None and r.container:
        opts.image = r.container
    if opts.port is None and "port" in d:
        opts.port = _num(d["port"], int, "port", w)
    if opts.tp is None and "tensor_parallel" in d:
        opts.tp = _num(d["tensor_parallel"], int, "tensor_parallel", w)
    if opts.pp is None and "pipeline_parallel" in d:
        opts.pp = _num(d["pipeline_parallel"], int, "pipeline_parallel", w)
    if opts.mem_fraction is None and "gpu_memory_utilization" in d:
        opts.mem_fraction = _num(d["gpu_memory_utilization"], float, "gpu_memory_utilization", w)
    if opts.max_model_len is None and "max_model_len" in d:
        opts.max_model_len = _num(d["max_model_len"], int, "max_model_len", w)
    if opts.served_model_name is None and d.get("served_model_name"):
        opts.served_model_name = str(d["served_model_name"])
    if "host" in d and str(d["host"]) != "0.0.0.0":
        w.append(f"defaults.host {d['host']} is replaced by 0.0.0.0: other machines must reach the head")
    if r.command is None:  # sparkrun then writes the engine's flags from the defaults itself
        flags, notes = defaults_to_flags(d, opts.engine)
        w += notes
        args = list(flags)
        trust = switch(d.get("trust_remote_code")) if d.get("trust_remote_code") is not None else None
        if trust is None and d.get("trust_remote_code") is not None:
            w.append(
                f"defaults.trust_remote_code: {shorten(repr(d['trust_remote_code']), 60)} is neither true "
                f"nor false; not used"
            )
        elif trust is not None and opts.trust_remote_code is None:
            opts.trust_remote_code = trust
    else:
        args = list(r.extra_args)
        if r.trust_remote_code and opts.trust_remote_code is None:
            opts.trust_remote_code = True
    if r.mods:  # files the mods put in the workspace travel with the plan; the rest is refused, with why
        mods = recipe_mods.resolve(r.mods, r.path)
        w += mods.applied + mods.refused
        opts.files = {**opts.files, **mods.files}
        args = recipe_mods.rewrite_args(args, mods.names)
        for flag in recipe_mods.missing_files(args, mods.names):
            w.append(
                f"{flag}: no mod carries this file, so the engine looks for it in the image's working "
                f"directory; the launch fails unless the image has it"
                + (" (a mod above was not applied)" if mods.refused else "")
            )
    opts.extra_args = args + list(opts.extra_args)
    opts.env = {**r.env, **opts.env}
    if r.model and model_path:
        if Path(model_path.rstrip("/")).name.lower() != r.model.split(":")[0].rsplit("/", 1)[-1].lower():
            w.append(
                f"recipe model {r.model} is not the configured checkpoint {model_path}; the plan serves {model_path}"
            )
    if r.max_nodes and opts.nodes is None:
        opts.node_limit = r.max_nodes  # the plan then takes the first max_nodes nodes, head first
    if nodes is not None:
        if r.min_nodes and nodes < r.min_nodes:
            w.append(f"recipe wants at least {r.min_nodes} nodes; the plan has {nodes}")
        if r.max_nodes and nodes > r.max_nodes and opts.nodes is not None:
            w.append(f"recipe supports at most {r.max_nodes} node(s); --nodes names {nodes}")
    if r.min_memory_gb:  # the plan's fit estimate weighs it against the nodes' own memory
        w.append(
            f"recipe is written for {r.hardware or 'nodes'} with {r.min_memory_gb} GB each (min_vidmem_gb); "
            f"its memory fraction and context length assume that much"
        )
    return opts, w
