"""`sparktui check` end to end against in-process SSH servers (the probe runs on this machine)."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path

from tests import configs


def write_config(cfg, path: Path) -> Path:
    return configs.write_config(
        cfg, path, user="root", model_name="m", connect_timeout=2, ssh_config=None, keepalive_interval=None
    )


async def sparktui(*args: str) -> tuple[int, str, str]:
    p = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sparktui", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(p.communicate(), 60)
    return p.returncode, out.decode(), err.decode()


async def test_check_reports_every_node_and_exit_1_for_the_unreachable(ssh_env, tmp_path):
    cfg, servers = await ssh_env(2)
    Path(cfg.model.path).mkdir(parents=True)
    (Path(cfg.model.path) / "model.safetensors").write_bytes(b"x" * 4096)
    conf = write_config(cfg, tmp_path / "c.yaml")
    rc, out, err = await sparktui("check", "--config", str(conf), "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert [n["name"] for n in doc["nodes"]] == ["n1", "n2"]
    n1 = doc["nodes"][0]
    assert n1["reachable"] and n1["error"] is None
    assert n1["model"]["present"] and n1["model"]["bytes"] >= 4096
    assert n1["memory"]["total_bytes"] > 0
    await servers[1].stop()
    rc, out, _ = await sparktui("check", "--config", str(conf), "--json")
    doc = json.loads(out)
    assert rc == 1
    assert doc["nodes"][0]["reachable"] and not doc["nodes"][1]["reachable"]
    assert "refused" in doc["nodes"][1]["error"]


async def test_status_adds_transfers_and_deployments(ssh_env, tmp_path):
    cfg, _ = await ssh_env(1)
    conf = write_config(cfg, tmp_path / "c.yaml")
    rc, out, err = await sparktui("status", "--config", str(conf), "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["transfers"] == []
    # this machine runs no docker daemon: the deployments section says so per node instead of failing
    assert [d["node"] for d in doc["deployments"]] == ["n1"] and "docker" in doc["deployments"][0]["error"].lower()
    assert doc["nodes"][0]["reachable"]


async def test_config_error_exits_2_with_position(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("cluster: x\nnodes:\n  - name: a\n    host: h\n    prot: 22\nmodel: {name: m, path: /m}\n")
    rc, out, err = await sparktui("check", "--config", str(bad))
    assert rc == 2
    assert f"{bad}:5:5:" in err and "port" in err and "Traceback" not in err


async def test_check_shows_an_unverified_copy_as_model_incomplete_with_the_fix(ssh_env, tmp_path):
    cfg, _ = await ssh_env(1)
    model = Path(cfg.model.path)
    model.mkdir(parents=True)
    (model / "model-00001-of-00002.safetensors").write_bytes(b"x" * 4096)  # the second shard never came
    (model / ".sparktui-incomplete").write_text("copy model-n1-20260101T100000-3fa2 from n0 started earlier\n")
    conf = write_config(cfg, tmp_path / "c.yaml")
    rc, out, err = await sparktui("check", "--config", str(conf))
    assert rc == 0, err
    row = next(ln for ln in out.splitlines() if ln.lstrip("│ ").startswith("n1"))
    assert "incomplete" in row
    said = " ".join(out.split())
    assert re.search(
        re.escape(f"n1: model incomplete at {model} (")
        + r"[\d.]+ KiB there\): "
        + re.escape(
            "copy model-n1-20260101T100000-3fa2 from n0 started earlier; "
            "`sparktui sync model` completes and verifies it"
        ),
        said,
    ), said
