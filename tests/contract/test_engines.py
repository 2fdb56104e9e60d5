"""Every engine command sparktui plans, parsed by the real vLLM, SGLang and Ray of each release in
the matrix; every environment variable it sets, one that release (or its documented library) reads."""

from __future__ import annotations

import shlex

import pytest

from sparktui.core.engines import get_engine
from sparktui.core.engines.common import Nested, render
from sparktui.core.engines.sglang import sglang_program
from sparktui.core.engines.vllm import VLLM_AUTO_LEN_SINCE, VLLM_KV_BYTES_SINCE, VLLM_NATIVE_SINCE
from sparktui.core.plan.plan import PlanOptions, make_plan
from sparktui.core.recipes.recipe import apply_recipe, parse_recipe

from ..unit.test_plan import MODEL, SGLANG_IMAGE, VLLM_IMAGE, cluster, parse_run
from ..unit.test_recipe import SGLANG_RECIPE, VLLM_RECIPE
from .conftest import probe

NODES = (2, 4, 8)
# Variables read by the libraries under the engines, with where each is documented.
DOCUMENTED = {
    # https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html
    "NCCL_SOCKET_IFNAME",
    "NCCL_IB_HCA",
    "NCCL_IB_DISABLE",
    "NCCL_DEBUG",
    # https://pytorch.org/docs/stable/distributed.html (Gloo and TensorPipe interfaces, the store address)
    "GLOO_SOCKET_IFNAME",
    "TP_SOCKET_IFNAME",
    "MASTER_ADDR",
    "MASTER_PORT",
    # https://openucx.readthedocs.io/en/master/faq.html (UCX_NET_DEVICES)
    "UCX_NET_DEVICES",
    # https://docs.open-mpi.org/en/main/tuning-apps/networking/tcp.html (btl_tcp_if_include as OMPI_MCA_)
    "OMPI_MCA_btl_tcp_if_include",
    # https://github.com/NVIDIA/nvidia-container-toolkit (which GPUs the runtime exposes)
    "NVIDIA_VISIBLE_DEVICES",
    # Set as NVIDIA's DGX Spark playbooks set them for three or more nodes (NVIDIA/dgx-spark-playbooks,
    # nvidia/connect-three-sparks and the switch playbook): NCCL's net_ib reads it in the builds those playbooks
    # use; a build that does not know a variable ignores it
    "NCCL_IB_SUBNET_AWARE_ROUTING",
    # Ray reads RAY_<name> for each entry of its ray_config_def.h; NVIDIA's DGX Spark playbook sets this one
    "RAY_memory_monitor_refresh_ms",
    # https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf:
    # read by torch's CUDA caching allocator (c10), which holds vLLM's and SGLang's KV cache; the engines
    # themselves need not name it
    "PYTORCH_CUDA_ALLOC_CONF",
}


def plans(engine: str, mode: str, version: str | None):
    """(label, plan) for 2, 4 and 8 nodes, plainly and from a sparkrun recipe of that engine."""
    out = []
    for n in NODES:
        config, facts, subnets = cluster(n)
        opts = PlanOptions(
            engine=engine,
            mode=mode,
            engine_version=version,
            extra_args=["--api-key", "sk-contract"] if engine == "vllm" else [],
        )
        out.append((f"{engine}-{mode}-{n}", make_plan(config, facts, subnets, opts)))
        recipe = parse_recipe(SGLANG_RECIPE if engine == "sglang" else VLLM_RECIPE, "r.yaml", environ={})
        image = SGLANG_IMAGE if engine == "sglang" else VLLM_IMAGE  # the one the nodes hold
        ropts, _ = apply_recipe(
            recipe, PlanOptions(engine=engine, mode=mode, engine_version=version, image=image), MODEL, nodes=n
        )
        ropts.tp = n  # the recipes are written for two nodes
        out.append((f"{engine}-{mode}-{n}-recipe", make_plan(config, facts, subnets, ropts)))
    return out


def engine_argvs(plan) -> list[list[str]]:
    """The engine command of each step: the container's (entrypoint + command) or the exec'd line."""
    out = []
    for step in plan.steps:
        argv = step.argv  # the docker command itself: secrets reach it as -e, not in the env-file wrapper
        if argv[:2] == ["docker", "run"]:
            run = parse_run(argv)
            assert "--entrypoint" in run, f"{step.description}: no --entrypoint, so the image's own one would run first"
            out.append(run["cmd"])
        elif argv[:2] == ["docker", "exec"]:
            for w in step.words:
                if isinstance(w, Nested):
                    out.append(shlex.split(render(list(w.words), "run")))
    return out


def of(argvs, head: list[str]) -> list[list[str]]:
    return [a for a in argvs if a[: len(head)] == head]


def env_names(plan) -> set[str]:
    names = set()
    for n in plan.nodes:
        names |= set(n.env)
    for step in plan.steps:
        argv = step.argv  # the docker command itself: secrets reach it as -e, not in the env-file wrapper
        names |= {argv[i + 1].split("=", 1)[0] for i, a in enumerate(argv[:-1]) if a == "-e"}
    return names


def _newer(version: str, than: str) -> bool:
    from sparktui.core.engines.versions import at_least

    return at_least(version, than)


def test_sglang_commands_parse(sglang_release):
    argvs = []
    for label, plan in plans("sglang", "native", sglang_release.version):
        assert plan.ok, (label, plan.errors)
        got = of(engine_argvs(plan), sglang_program(sglang_release.version))
        assert len(got) == len(plan.nodes), label
        argvs += got
    res = probe(sglang_release, argvs)
    bad = [(a, r["error"]) for a, r in zip(argvs, res["results"]) if not r["ok"]]
    assert not bad, bad[:3]
    assert res["version"] == sglang_release.version


def test_sglang_serve_is_planned_only_where_the_release_has_the_command(sglang_release):
    v = sglang_release.version
    config, facts, subnets = cluster(2)
    newest = make_plan(config, facts, subnets, PlanOptions(engine="sglang", engine_version=None))
    argvs = of(engine_argvs(newest), ["sglang", "serve"])
    assert len(argvs) == 2
    res = probe(sglang_release, argvs)
    has = sglang_program(v) == ["sglang", "serve"]
    assert all(r["ok"] == has for r in res["results"]), (v, res["results"])
    if not has:
        assert all("no `sglang` command" in r["error"] for r in res["results"])


def _unknown_flags(engine: str, release) -> list[str]:
    """Pivot renames flags through Engine.vocabulary: each one must exist in every release of the matrix."""
    e = get_engine(engine)
    known = set(probe(release, [])["options"])
    return sorted((set(e.vocabulary.values()) | set(e.companions.values()) | set(e.companions)) - known)


def test_sglang_knows_every_flag_of_its_shared_vocabulary(sglang_release):
    assert _unknown_flags("sglang", sglang_release) == []


def test_vllm_knows_every_flag_of_its_shared_vocabulary(vllm_release):
    assert _unknown_flags("vllm", vllm_release) == []


@pytest.mark.parametrize("mode", ["ray", "native"])
def test_vllm_commands_parse_or_the_plan_refuses(vllm_release, mode):
    v = vllm_release.version
    argvs = []
    for label, plan in plans("vllm", mode, v):
        if mode == "native" and not _newer(v, VLLM_NATIVE_SINCE):
            assert not plan.ok and any(v in e and "--mode ray" in e for e in plan.errors), (label, plan.errors)
            continue
        assert plan.ok, (label, plan.errors)
        got = of(engine_argvs(plan), ["vllm", "serve"])
        assert got, label
        argvs += got
    if not argvs:
        # the refusal is right only if this release's parser really rejects the native flags
        config, facts, subnets = cluster(2)
        forced = make_plan(config, facts, subnets, PlanOptions(engine="vllm", mode="native", engine_version=None))
        argvs = of(engine_argvs(forced), ["vllm", "serve"])
        res = probe(vllm_release, argvs)
        assert all(not r["ok"] and "--nnodes" in r["error"] for r in res["results"]), res["results"]
        return
    res = probe(vllm_release, argvs)
    bad = [(a, r["error"]) for a, r in zip(argvs, res["results"]) if not r["ok"]]
    assert not bad, bad[:3]


def test_vllm_kv_bytes_and_auto_length_parse_where_the_release_has_them_else_the_plan_refuses(vllm_release):
    v = vllm_release.version
    config, facts, subnets = cluster(2)
    asks = {"kv": {"kv_cache_bytes": 20 << 30}, "auto": {"max_model_len_auto": True}}
    since = {"kv": VLLM_KV_BYTES_SINCE, "auto": VLLM_AUTO_LEN_SINCE}
    for what, ask in asks.items():
        plan = make_plan(config, facts, subnets, PlanOptions(engine="vllm", mode="ray", engine_version=v, **ask))
        has = _newer(v, since[what])
        # asked of the release's own parser, as the plan writes it for a release it cannot read
        forced = make_plan(config, facts, subnets, PlanOptions(engine="vllm", mode="ray", engine_version=None, **ask))
        argvs = of(engine_argvs(forced), ["vllm", "serve"])
        assert argvs and all(since[what] not in e for e in forced.errors), forced.errors
        res = probe(vllm_release, argvs)
        assert all(r["ok"] == has for r in res["results"]), (what, v, res["results"])
        assert plan.ok == has, (what, v, plan.errors)
        if not has:
            assert any(v in e and since[what] in e for e in plan.errors), plan.errors


def test_ray_commands_parse(ray_release):
    argvs = []
    for _, plan in plans("vllm", "ray", None):
        argvs += of(engine_argvs(plan), ["ray"])
    assert any("--head" in a for a in argvs) and any("--address" in a for a in argvs)
    res = probe(ray_release, argvs)
    bad = [(a, r["error"]) for a, r in zip(argvs, res["results"]) if not r["ok"]]
    assert not bad, bad[:3]


@pytest.mark.parametrize("engine,mode", [("sglang", "native"), ("vllm", "ray"), ("vllm", "native")])
def test_every_environment_variable_is_read_by_someone(engine, mode, vllm_release=None):
    from .conftest import releases

    for release in releases(engine):
        names = set()
        for _, plan in plans(engine, mode, release.version):
            if plan.ok:
                names |= env_names(plan)
        own = sorted(n for n in names if n not in DOCUMENTED and not n.startswith(("HF_",)))
        res = probe(release, [], own)
        unread = [n for n, read in res["env_read"].items() if not read]
        # RAY_ADDRESS is Ray's, read by the vllm process's ray.init
        if unread and engine == "vllm":
            ray = probe(releases("ray")[0], [], unread)
            unread = [n for n, read in ray["env_read"].items() if not read]
        assert not unread, f"{release.key} reads none of {unread}"
