"""`sparktui bench` on real nodes (sshd + dockerd in namespaces) with the engine simulator image: vLLM native
to ready, a row per concurrency from the real `vllm bench serve` run on the head, a pivot to SGLang, the same
bench again, and the history holding both engines.

The simulator image holds no benchmark client (it is a lean rootfs; vLLM's client needs torch), so the head
gets the real one on its PATH the way a node with vLLM installed has it: a vLLM contract environment's
packages (tests/contract/venvs.py; CI builds them), hard-linked into the head's own /models (a node sees
neither this machine's /root nor its /tmp), run by the node's Debian python3.11, and a `vllm` in the head's
/usr/local/sbin (its own, where the lab's shims are).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.simhelpers import make_model
from tests.benchclient import CONTRACT, client_python

from .netlab import SIM_BUILDER, Lab

pytestmark = pytest.mark.lab
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench_lab(lab: Lab, tmp_path_factory):
    if client_python() is None:
        pytest.skip("the vLLM contract environment is not built: python3 -m tests.contract.venvs")
    work = tmp_path_factory.mktemp("bench")
    tar = work / "sim.tar"
    subprocess.run([sys.executable, str(SIM_BUILDER), "-o", str(tar)], check=True, capture_output=True, timeout=300)
    lab.load_image(tar)
    for n in lab.nodes:
        model = make_model(n.path / "models" / lab.model, shards=2, total_bytes=256 * 1024**2)
    head_model = lab.nodes[0].path / "models" / lab.model
    subprocess.run(
        [str(client_python()), str(CONTRACT / "make_tokenizer.py"), str(head_model)],
        check=True,
        capture_output=True,
        timeout=300,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    install_client(lab.nodes[0].path / "models" / "_bench")
    wrapper = Path(lab.nodes[0].dir) / "sbin" / "vllm"  # the head's /usr/local/sbin, beside its shims
    shutil.copy2(lab.nodes[0].path / "models" / "_bench" / "bin" / "vllm", wrapper)
    data = lab.config_data()
    data["docker"]["env"] = {"SPARKTUI_SIM_SPEED": "20"}
    path = lab.write_config(data, work / "sparktui.yaml")
    yield path
    cli(path, "stop", "--yes")
    wrapper.unlink()
    del model


def install_client(dest: Path) -> None:
    """The client's packages and CPU torch as hard links (same filesystem: no copy), and `vllm` to run it."""
    site = next((client_python().parent.parent / "lib").glob("python3*/site-packages"))
    torch_site = site.parents[3] / "torch-cpu" / "site"
    dest.mkdir(parents=True, exist_ok=True)
    for src, name in ((site, "site"), (torch_site, "torch")):
        if not (dest / name).exists():
            subprocess.run(["cp", "-al", str(src), str(dest / name)], check=True, timeout=300)
    shutil.copy(CONTRACT / "vllm_bench.py", dest / "vllm_bench.py")
    (dest / "bin").mkdir(exist_ok=True)
    w = dest / "bin" / "vllm"
    w.write_text(
        '#!/bin/sh\n[ "$1" = bench ] && shift\n'
        "export PYTHONPATH=/models/_bench/site:/models/_bench/torch HF_HUB_OFFLINE=1 HF_HOME=/tmp/hf "
        'PYTHONUNBUFFERED=1\nexec /usr/bin/python3.11 -s /models/_bench/vllm_bench.py "$@"\n'
    )
    w.chmod(0o755)


def cli(path: Path, *args: str, timeout: float = 400) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if k != "SPARKTUI_CONFIG"}
    env.update(XDG_STATE_HOME=str(path.parent / "state"), COLUMNS="200")
    r = subprocess.run(
        [sys.executable, "-m", "sparktui", *args, "--config", str(path)],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return r.returncode, r.stdout, r.stderr


def bench(path: Path) -> dict:
    rc, out, err = cli(path, "bench", "--concurrency", "1,8", "--input-len", "32", "--output-len", "8", "--json")
    assert rc == 0, (out[-2000:], err[-3000:])
    return json.loads(out)


def test_bench_vllm_then_pivot_to_sglang_and_bench_again_both_in_the_history(lab: Lab, bench_lab: Path):
    rc, out, err = cli(
        bench_lab,
        "launch",
        "--engine",
        "vllm",
        "--mode",
        "native",
        "--yes",
        "--wait",
        "--no-preflight",
        "--timeout",
        "150",
        "--json",
    )
    doc = json.loads(out)
    assert rc == 0 and doc.get("state") == "ready", (out[-3000:], err[-2000:])

    first = bench(bench_lab)
    assert [(r["engine"], r["concurrency"]) for r in first["rows"]] == [("vllm", 1), ("vllm", 8)]
    for r in first["rows"]:
        assert 0 < r["ttft_p50_ms"] <= r["ttft_p99_ms"] and r["itl_p50_ms"] > 0 and r["output_tokens_per_s"] > 0
        assert r["failed"] == 0 and r["mode"] == "native"

    rc, out, err = cli(bench_lab, "pivot", "--to", "sglang", "--yes", "--wait", "--timeout", "150", "--json")
    doc = json.loads(out)
    assert rc == 0 and doc.get("state") == "ready", (out[-3000:], err[-2000:])

    second = bench(bench_lab)
    assert [(r["engine"], r["concurrency"]) for r in second["rows"]] == [("sglang", 1), ("sglang", 8)]
    assert [r["engine"] for r in second["previous_engine"]] == ["vllm", "vllm"]

    rc, out, err = cli(bench_lab, "bench", "--history", "--json")
    assert rc == 0, err
    hist = json.loads(out)
    assert {r["engine"] for r in hist["rows"]} == {"vllm", "sglang"} and len(hist["rows"]) == 4
    # nothing of the client is left on the head
    left = lab.sh(lab.head, ["sh", "-c", "ps -eo args | grep -c '[b]ench serve' || true"]).stdout
    assert int(left.strip() or 0) == 0
