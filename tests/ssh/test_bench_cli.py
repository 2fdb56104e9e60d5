"""`sparktui bench` as a user runs it: the real `vllm bench serve` (a contract environment's, on the head's
PATH) started by sparktui on the in-process head node, against a simulated engine on 127.0.0.1 reached as
the head's 127.0.0.1:PORT. Skipped, naming why, where the contract environment is not built."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path

import pytest

from sparktui.core.config.config import ImagesConfig

from tests.benchclient import client_bin, model_with_tokenizer, sim_engine

from .test_deploy_cli import ours, write_config
from .test_deploy_fakes import fake_cluster  # noqa: F401 (fixture)


def group_alive(pgid: int) -> bool:
    """A live (non-zombie) process in group `pgid` (an orphan's zombie waits for a reaper that may not come)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            return True
    return False


async def group_gone(pgid: int, timeout: float = 10.0) -> bool:
    """Whether the group ends within `timeout` (rc is written just before its shell exits)."""
    deadline = time.monotonic() + timeout
    while group_alive(pgid):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


def env_for(conf: Path) -> dict:
    env = dict(os.environ, XDG_STATE_HOME=str(conf.parent / "state"))
    env.pop("SPARKTUI_CONFIG", None)
    return env


async def sparktui(*args: str, timeout: float = 400) -> tuple[int, str, str]:
    conf = Path(args[args.index("--config") + 1])
    p = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sparktui",
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env_for(conf),
    )
    out, err = await asyncio.wait_for(p.communicate(), timeout)
    return p.returncode, out.decode(), err.decode()


async def cluster_with_client(fake_cluster, tmp_path, with_client: bool = True):  # noqa: F811
    fc = await fake_cluster(1)
    if with_client and client_bin(tmp_path, tmp_path / "bin") is None:
        pytest.skip("the vLLM contract environment is not built: python3 -m tests.contract.venvs")
    fc.nodes[0].server.forwarding = True
    model = model_with_tokenizer(tmp_path) if with_client else tmp_path / "model"
    fc.config.model.path = str(model)
    conf = write_config(fc.config, tmp_path / "c.yaml")
    return fc, conf, model


def serve(fc, conf: Path, engine: str, port: int) -> None:
    """The head's container of `engine` (the fake docker's; a pivot removed the other), and the engine's port
    in the config."""
    for name in fc["n1"].names():
        shutil.rmtree(fc["n1"].containers / name)
    fc["n1"].add_container(f"sparktui-lab-{engine}-0", ours("lab", 0, engine))
    text = conf.read_text().split("engine:\n")[0]
    conf.write_text(text + f"engine:\n  {engine}_port: {port}\n")


async def test_bench_rows_per_concurrency_then_after_a_pivot_both_engines_in_the_history(fake_cluster, tmp_path):
    fc, conf, model = await cluster_with_client(fake_cluster, tmp_path)
    args = ("bench", "--concurrency", "1,4", "--input-len", "32", "--output-len", "8", "--json", "--config", str(conf))
    with sim_engine("sglang", model) as port:
        serve(fc, conf, "sglang", port)
        rc, out, err = await sparktui(*args)
    assert rc == 0, err
    first = json.loads(out)
    assert [(r["engine"], r["concurrency"]) for r in first["rows"]] == [("sglang", 1), ("sglang", 4)]
    for r in first["rows"]:
        assert 0 < r["ttft_p50_ms"] <= r["ttft_p99_ms"] and r["itl_p50_ms"] > 0
        assert r["output_tokens_per_s"] > 0 and r["requests_per_s"] > 0 and r["failed"] == 0
    assert first["rows"][0]["completed"] == 8 and first["rows"][1]["completed"] == 16
    assert "bench: concurrency 4" in err  # progress, read from the client's log on the node
    # nothing of the client is left running on the head
    pids = [int(p.read_text()) for p in (tmp_path / "n1").glob(".local/state/sparktui/bench/*/pid")]
    assert len(pids) == 1 and await group_gone(pids[0])

    with sim_engine("vllm", model) as port:  # the pivot: vLLM serves now, the same client and workload
        serve(fc, conf, "vllm", port)
        rc, out, err = await sparktui(*args)
    assert rc == 0, err
    second = json.loads(out)
    assert [r["engine"] for r in second["rows"]] == ["vllm", "vllm"]
    assert [(r["engine"], r["concurrency"]) for r in second["previous_engine"]] == [("sglang", 1), ("sglang", 4)]

    rc, out, err = await sparktui("bench", "--history", "--json", "--config", str(conf))
    assert rc == 0, err
    hist = json.loads(out)
    assert sorted({r["engine"] for r in hist["rows"]}) == ["sglang", "vllm"] and len(hist["rows"]) == 4
    assert hist["problems"] == []


async def test_ctrl_c_stops_the_client_on_the_head_and_leaves_nothing_running(fake_cluster, tmp_path):
    fc, conf, model = await cluster_with_client(fake_cluster, tmp_path)
    with sim_engine("vllm", model) as port:
        serve(fc, conf, "vllm", port)
        p = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "sparktui",
            "bench",
            "--concurrency",
            "1",
            "--config",
            str(conf),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env_for(conf),
            # as in a terminal: Ctrl-C's default action, whatever this test process inherited (an ignored
            # SIGINT would pass to the child through exec, and Python then never raises KeyboardInterrupt)
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        seen = b""
        while b"bench: concurrency 1" not in seen:  # the client has started on the node
            line = await asyncio.wait_for(p.stderr.readline(), 120)
            assert line, seen.decode()
            seen += line
        pidfiles = list((tmp_path / "n1").glob(".local/state/sparktui/bench/*/pid"))
        assert len(pidfiles) == 1
        pid = int(pidfiles[0].read_text())
        assert group_alive(pid)  # running now
        p.send_signal(signal.SIGINT)
        out, err = await asyncio.wait_for(p.communicate(), 60)
    assert p.returncode == 130, err
    assert "the client on the head was stopped too" in (seen + err).decode()
    assert not group_alive(pid)  # stopped before sparktui exited: no wait here
    assert (pidfiles[0].parent / "rc").exists()
    assert not (tmp_path / "state" / "sparktui" / "bench.jsonl").exists()  # no rows from a cut-off run


async def test_a_head_without_the_client_is_named_with_the_fix(fake_cluster, tmp_path):
    fc, conf, model = await cluster_with_client(fake_cluster, tmp_path, with_client=False)
    with sim_engine("vllm", _bare_model(tmp_path)) as port:
        serve(fc, conf, "vllm", port)
        rc, out, err = await sparktui("bench", "--concurrency", "1", "--json", "--config", str(conf))
    assert rc == 1
    doc = json.loads(out)
    image = ImagesConfig().vllm  # the configured (default) vLLM image
    assert doc["reason"] == "client missing" and doc["fix"].startswith("sparktui sync image vllm --to n1 ")
    assert "no benchmark client on n1" in doc["error"] and image in doc["error"]


def _bare_model(tmp_path: Path) -> Path:
    from tests.simhelpers import make_model

    return make_model(tmp_path / "model", shards=2)
