"""SGLang multi-node: every rank runs the same launch_server with its own --node-rank.

Workers start first and the head last (SGLang's own multi-node recipe); only rank 0 serves HTTP.
"""
from __future__ import annotations

from .versions import sglang_balance_switch
from .common import HOST_ALL, Context, Spot, Step, Word, docker_run, make_step, opt

NAME = "sglang"
MODES = ("native",)
HEALTH_PATHS = ("/health", "/health_generate", "/v1/models")
READY_LINE = "The server is fired up and ready to roll!"


def node_env(ctx: Context, spot: Spot) -> dict[str, str]:
    # Without it SGLang's cross-node message queue picks its own address (often the management NIC)
    # and both ranks freeze after "Custom allreduce is disabled ...".
    env = {"SGLANG_HOST_IP": spot.ip} if spot.ip else {}
    return {**env, **sglang_balance_switch(ctx.engine_version)}


def launch_words(ctx: Context, spot: Spot) -> list[Word]:
    w: list[Word] = ["python3", "-m", "sglang.launch_server", "--model-path", ctx.model_path,
                     "--tp", str(ctx.tp)]
    if ctx.pp > 1:
        w += ["--pp-size", str(ctx.pp)]
    w += ["--nnodes", str(len(ctx.nodes)), "--node-rank", str(spot.rank),
          "--dist-init-addr", f"{ctx.head_ip}:{ctx.dist_port}",
          "--host", HOST_ALL, "--port", str(ctx.port)]
    w += opt("--mem-fraction-static", ctx.mem_fraction)
    w += opt("--context-length", ctx.max_model_len)
    w += opt("--served-model-name", ctx.served_name)
    # the serving view reads Prometheus /metrics, which SGLang serves only with this flag
    # (0.5.3.post3 server_args.py "--enable-metrics"; 0.5.23 arg_groups/fields/observability.py enable_metrics)
    w.append("--enable-metrics")
    if ctx.trust_remote_code:
        w.append("--trust-remote-code")
    return w + list(ctx.extra_args)


def steps(ctx: Context) -> list[Step]:
    """Workers first, head last: the head's rendezvous then finds every rank already waiting."""
    out = []
    for spot in ctx.workers + [ctx.head]:
        what = "head, serves HTTP" if spot.rank == 0 else "worker"
        out.append(make_step(spot.name, spot.rank, "run", docker_run(ctx, spot, launch_words(ctx, spot)),
                             f"start SGLang rank {spot.rank} ({what})", ctx.container(spot)))
    return out


# -- the support check (core/support.py): how to ask an SGLang image what it can load, run by its python3.
# SGLang's ModelRegistry (sglang/srt/models/registry.py, 0.5.3.post3 and 0.5.23) is the EntryClass names of
# the modules of sglang.srt.models, less SGLANG_DISABLED_MODEL_ARCHS; importing them needs the GPU stack, so
# the source is read the same way without importing (ast), and the imported registry is asked only where
# no source holds an EntryClass. Quantization: the keys of sglang/srt/layers/quantization/__init__.py's
# QUANTIZATION_METHODS. Own configs for model types transformers lacks: _CONFIG_REGISTRY
# (0.5.3.post3 srt/utils/hf_transformers_utils.py; 0.5.23 srt/utils/hf_transformers/common.py).
SUPPORT_PROBE = '''
def _sources(package):
    import importlib.util, os
    spec = importlib.util.find_spec(package)
    where = list(spec.submodule_search_locations or []) if spec else []
    return [os.path.join(d, n) for d in where for n in sorted(os.listdir(d)) if n.endswith(".py")]

def registry_archs():
    import ast, os
    off = {x.strip() for x in os.environ.get("SGLANG_DISABLED_MODEL_ARCHS", "").split(",") if x.strip()}
    out = set()
    for path in _sources("sglang.srt.models"):
        if os.path.basename(path)[:-3] in off:
            continue
        text = open(path, encoding="utf-8-sig", errors="replace").read()
        if "EntryClass" not in text:
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:  # as SGLang skips a module that does not import
            continue
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "EntryClass" for t in node.targets):
                vals = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
                out |= {v.id for v in vals if isinstance(v, ast.Name)}
    if not out:
        from sglang.srt.models.registry import ModelRegistry
        out = set(ModelRegistry.get_supported_archs())
    return out

def quant_methods():
    try:
        from sglang.srt.layers.quantization import QUANTIZATION_METHODS
        return set(QUANTIZATION_METHODS)
    except Exception:
        import ast
        paths = [p for p in _sources("sglang.srt.layers.quantization") if p.endswith("__init__.py")]
        tree = ast.parse(open(paths[0], encoding="utf-8-sig").read())
        return {k.value for d in ast.walk(tree) if isinstance(d, ast.Dict)
                for k in d.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}

def config_types():
    import importlib
    for name in ("sglang.srt.utils.hf_transformers.common", "sglang.srt.utils.hf_transformers_utils"):
        try:
            return set(importlib.import_module(name)._CONFIG_REGISTRY)
        except Exception:
            continue
    raise RuntimeError("SGLang's own config registry did not import")
'''
# What to name as the way out when this image's SGLang lacks an architecture: the newest release the
# contract tier checks (tests/contract/venvs.py), in NVIDIA's SGLang playbook image.
SUPPORT_NEWER_IMAGE = "lmsysorg/sglang:latest-cu130 (SGLang 0.5.23)"
