"""Every command sparktui plans for TensorRT-LLM, checked against the real tools; every variable it sets, one
that TensorRT-LLM, OpenMPI, UCX or NCCL reads.

- `trtllm-serve`: its options as the release declares them (tensorrt_llm/commands/serve.py of TensorRT-LLM
  trtllm_source.RELEASE, read with ast: the package does not import without CUDA); the release is in each test's id.
  Where that release cannot be fetched (CI), the options and launcher of a named release stored as facts
  (tests/contract/data/trtllm_<release>_serve_options.json, the release named by the same copy's version.py).
- `trtllm-llmapi-launch`: the release's script takes no options of its own (everything after it is the command).
- `mpirun`: the real Open MPI (apt's openmpi-bin) runs the planned line on this host with one slot.
- OMPI_MCA_* names: parameters `ompi_info` lists; OMPI_ALLOW_RUN_AS_ROOT*: mpirun obeys them (as root).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from sparktui.core.engines import trtllm as eng
from sparktui.core.engines.common import Nested, render

from ..unit.test_trtllm_engine import make_ctx
from . import trtllm_source as src

pytestmark = pytest.mark.contract
NODES = (2, 4, 8)
# Read by the libraries under TensorRT-LLM, with where each is documented.
DOCUMENTED = {
    "NCCL_SOCKET_IFNAME": "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html",
    "NCCL_IB_HCA": "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html",
    "NCCL_IB_DISABLE": "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html",
    "UCX_NET_DEVICES": "https://openucx.readthedocs.io/en/master/faq.html",
}
MPI_ROOT_ENV = ("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM")


def contexts():
    out = []
    for n in NODES:
        out.append((f"{n}-plain", make_ctx(n)))
        out.append((f"{n}-tuned", make_ctx(n, mem_fraction=0.85, max_model_len=32768, trust_remote_code=True)))
    return out


def mpirun_argvs() -> list[tuple[str, list[str]]]:
    out = []
    for label, ctx in contexts():
        for step in eng.steps(ctx):
            for w in step.words:
                if isinstance(w, Nested):
                    inner = render(list(w.words), "run")
                    out.append((label, shlex.split(inner)))
    assert len(out) == len(NODES) * 2
    return out


def serve_part(argv: list[str]) -> list[str]:
    return argv[argv.index("trtllm-serve") + 1 :]


@pytest.fixture(scope="module")
def release_files():
    d = src.release_dir()
    if not src.ready():
        pytest.skip(f"TensorRT-LLM {src.RELEASE} sources not fetched: python3 -m tests.contract.trtllm_source")
    return d


@pytest.mark.parametrize("release", [src.RELEASE])
def test_serve_flags_are_the_releases_options(release, release_files):
    options = src.click_options((release_files / "serve.py").read_text(), "serve")
    source = (release_files / "source").read_text().strip()
    assert options["<arguments>"] == ["model"], (
        f"TensorRT-LLM {release} ({source}): serve takes {options['<arguments>']}"
    )
    check_serve_flags(options, f"{release} ({source})")


DATA = Path(__file__).parent / "data"
STORED = DATA / "trtllm_serve_options.json"  # NVIDIA/TensorRT-LLM at a commit whose release is not named
# a named release's facts: tensorrt_llm/version.py of the same copy names it
RELEASES = {json.loads(p.read_text())["version"]: p for p in sorted(DATA.glob("trtllm_[0-9]*_serve_options.json"))}


def check_serve_flags(options: dict, where: str) -> None:
    """Every planned trtllm-serve word is the model or an option `options` declares (a flag takes no value)."""
    for label, argv in mpirun_argvs():
        words = serve_part(argv)
        assert not words[0].startswith("-"), label  # MODEL first
        i = 1
        while i < len(words):
            flag = words[i]
            assert flag in options, f"TensorRT-LLM {where} has no {flag} (plan {label})"
            i += 1 if options[flag]["flag"] else 2


def test_serve_flags_against_the_stored_facts_when_the_release_is_not_fetched():
    """CI reaches neither GitHub nor pypi.nvidia.com: check against the facts read from a stored copy of
    serve.py (names and kinds only, tests/contract/data). The fetched release wins where it is present."""
    if src.ready():
        pytest.skip(
            f"TensorRT-LLM {src.RELEASE} sources are fetched: test_serve_flags_are_the_releases_options "
            "checks the release itself"
        )
    facts = json.loads(STORED.read_text())
    where = (
        f"{facts['version'] or 'release not named'} at commit {facts['commit'][:12]} (stored facts of {facts['url']})"
    )
    assert facts["arguments"] == ["model"], where
    check_serve_flags(facts["options"], where)


@pytest.mark.parametrize("release", sorted(RELEASES))
def test_serve_flags_and_launcher_of_a_named_release(release):
    """The release's own options, stored as facts (names and kinds) with where they were read and the
    release its version.py names; checked always, so the contract tier names a release without a network."""
    facts = json.loads(RELEASES[release].read_text())
    where = f"{release} (stored facts of {facts['url']})"
    assert facts["version"] == release and facts["arguments"] == ["model"], where
    check_serve_flags(facts["options"], where)
    launcher = facts["launcher"]
    assert not launcher["parses_options"] and launcher["runs_its_arguments_as_the_command"], where
    for label, argv in mpirun_argvs():
        assert argv[argv.index("trtllm-llmapi-launch") + 1] == "trtllm-serve", label


@pytest.mark.parametrize("release", sorted(RELEASES))
def test_the_simulator_and_the_reader_follow_the_releases_metric_series(release):
    """The simulated trtllm-serve serves exactly the release's series (names, kinds, buckets), and the serving
    view's latency fields read series the release has."""
    from sparktui.sim.metrics_catalog import catalog

    facts = json.loads(RELEASES[release].read_text())
    series = {x["name"]: (x["kind"], tuple(x["buckets"] or ())) for x in facts["metrics"]["series"]}
    specs, _ = catalog("trtllm", release)
    assert {s.name: (s.kind, tuple(s.buckets)) for s in specs} == series, f"{release} ({facts['url']})"
    names = eng.ENGINE.metric_names(release)
    for field in ("ttft", "itl"):
        assert series.get(names[field], ("",))[0] == "histogram", f"{release} has no {names[field]}"


def test_a_named_release_is_stored():
    assert RELEASES, "no stored facts of a named TensorRT-LLM release in tests/contract/data"


@pytest.mark.parametrize("release", [src.RELEASE])
def test_llmapi_launch_takes_the_command_as_is(release, release_files):
    text = (release_files / "trtllm-llmapi-launch").read_text()
    # 1.2.x runs "${@:1}"; later releases keep ("$@") and run "${task_with_command[@]}"
    runs_args = '"${@:1}"' in text or ('("$@")' in text and '"${task_with_command[@]}"' in text)
    assert "getopts" not in text and runs_args, f"TensorRT-LLM {release}: the launcher parses options"
    for label, argv in mpirun_argvs():
        after = argv[argv.index("trtllm-llmapi-launch") + 1 :]
        assert after[0] == "trtllm-serve", label


def test_click_reader_on_a_declaration():
    # the reader itself, on the shape serve.py uses (aliases, flags, the argument)
    text = """
import click
@click.command("serve")
@click.argument("model", type=str)
@click.option("--tensor_parallel_size", "--tp_size", type=int, default=1)
@click.option("--trust_remote_code", is_flag=True, default=False)
def serve(model, tensor_parallel_size, trust_remote_code):
    pass
@click.command("other")
@click.option("--nope")
def other(nope):
    pass
"""
    opts = src.click_options(text, "serve")
    assert opts == {
        "<arguments>": ["model"],
        "--tensor_parallel_size": {"flag": False},
        "--tp_size": {"flag": False},
        "--trust_remote_code": {"flag": True},
    }
    with pytest.raises(LookupError):
        src.click_options(text, "serve_encoder")


def test_collector_reader_on_a_declaration():
    text = """
class MetricsCollector:
    def __init__(self, labels):
        from prometheus_client import Counter, Histogram
        self.metric_prefix = "trtllm_"
        self.c = Counter(name=self.metric_prefix + "request_success_total", documentation="d", labelnames=[])
        self.h = Histogram(name=self.metric_prefix + "time_to_first_token_seconds", documentation="d",
                           buckets=[0.1, 1.0], labelnames=[])
        self.other = dict(name="not a metric")
"""
    assert src.collector_series(text) == [
        {"name": "trtllm_request_success_total", "kind": "counter", "buckets": None},
        {"name": "trtllm_time_to_first_token_seconds", "kind": "histogram", "buckets": [0.1, 1.0]},
    ]


def _need_openmpi():
    if not shutil.which("mpirun") or not shutil.which("ompi_info"):
        pytest.skip("Open MPI is not installed (apt-get install openmpi-bin)")
    if "Open MPI" not in subprocess.run(["mpirun", "--version"], capture_output=True, text=True).stdout:
        pytest.skip("mpirun on PATH is not Open MPI")


def test_mpirun_takes_the_planned_options(tmp_path):
    _need_openmpi()
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("localhost\n")  # one node here: -np 1 with the plan's every other option
    for label, argv in mpirun_argvs():
        line = argv[: argv.index("trtllm-llmapi-launch")]
        line[line.index("-np") + 1] = "1"
        line[line.index("--hostfile") + 1] = str(hostfile)
        p = subprocess.run(line + ["true"], capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, f"plan {label}: {shlex.join(line)}\n{p.stderr[-2000:]}"


def test_every_variable_is_read_by_mpi_ucx_or_nccl(tmp_path):
    _need_openmpi()
    names = set()
    for _, ctx in contexts():
        for spot in ctx.nodes:
            names |= set(spot.env)
    params = subprocess.run(
        ["ompi_info", "--param", "all", "all", "--level", "9", "--parsable"],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    known = {f.split(":")[4] for f in params.splitlines() if f.split(":")[3:4] == ["param"]}
    unread = []
    for n in sorted(names):
        if n in DOCUMENTED or n in MPI_ROOT_ENV:
            continue
        if n.startswith("OMPI_MCA_") and n[len("OMPI_MCA_") :] in known:
            continue
        unread.append(n)
    assert not unread, f"nobody reads {unread}"
    if os.geteuid() == 0:
        # mpirun refuses root unless told; the two variables tell it (as the playbook sets them)
        base = ["mpirun", "-np", "1", "true"]
        env = {k: v for k, v in os.environ.items() if k not in MPI_ROOT_ENV}
        assert subprocess.run(base, env=env, capture_output=True, timeout=60).returncode != 0
        ok = subprocess.run(base, env=dict(env, **{k: "1" for k in MPI_ROOT_ENV}), capture_output=True, timeout=60)
        assert ok.returncode == 0, ok.stderr
