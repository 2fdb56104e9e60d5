"""`sparktui stop | logs | status` as a user runs them, against in-process nodes with the stand-in docker."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from tests import configs
from .test_deploy_fakes import fake_cluster  # noqa: F401 (fixture)


def write_config(cfg, path: Path) -> Path:
    return configs.write_config(cfg, path, user="root", connect_timeout=3, keepalive_interval=None)


async def sparktui(*args: str) -> tuple[int, str, str]:
    # the journal goes next to the config (the test's tmp dir), not into this machine's ~/.local/state
    conf = Path(args[args.index("--config") + 1])
    env = dict(os.environ, XDG_STATE_HOME=str(conf.parent / "state"))
    env.pop("SPARKTUI_CONFIG", None)
    p = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sparktui",
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    out, err = await asyncio.wait_for(p.communicate(), 90)
    return p.returncode, out.decode(), err.decode()


def ours(dep: str, rank: int, engine: str = "sglang") -> dict:
    return {
        "sparktui.deployment": dep,
        "sparktui.engine": engine,
        "sparktui.rank": str(rank),
        "sparktui.role": "head" if rank == 0 else "worker",
        "sparktui.plan": "p1",
    }


async def test_status_of_a_container_without_an_engine_label_names_no_port_and_asks_nothing(fake_cluster, tmp_path):
    """A container that carries sparktui's deployment label but not its engine (a label edited by hand, an
    older sparktui): no port is known, so status shows no endpoint and does not wait on a probe."""
    fc = await fake_cluster(1)
    conf = write_config(fc.config, tmp_path / "c.yaml")
    labels = {k: v for k, v in ours("bare", 0).items() if k != "sparktui.engine"}
    fc["n1"].add_container("sparktui-bare-0", labels)
    rc, out, err = await sparktui("status", "--config", str(conf), "--json")
    [dep] = json.loads(out)["deployments"]
    assert "endpoint" not in dep and "None" not in dep["summary"], dep
    assert dep["health"] == "unknown: sparktui-bare-0 has no sparktui.engine label, so its port is not known"


async def test_stop_names_what_it_removes_asks_first_and_spares_other_containers(fake_cluster, tmp_path):
    fc = await fake_cluster(2)
    conf = write_config(fc.config, tmp_path / "c.yaml")
    fc["n1"].add_container("sparktui-lab-sglang-0", ours("lab", 0))
    fc["n2"].add_container("sparktui-lab-sglang-1", ours("lab", 1))
    fc["n1"].add_container("postgres", {"com.example": "db"})
    fc["n2"].add_container("sparktui-other-vllm-0", ours("other", 0, "vllm"))

    rc, out, err = await sparktui("stop", "--config", str(conf))  # no terminal to confirm on: refuses
    assert rc == 1
    assert "n1:\n    stop  sparktui-lab-sglang-0" in err and "n2:\n    stop  sparktui-lab-sglang-1" in err
    assert "--yes" in err
    assert "postgres" not in err and "other" not in err
    assert fc["n1"].names() == ["postgres", "sparktui-lab-sglang-0"]

    rc, out, err = await sparktui("stop", "--config", str(conf), "--yes", "--json")
    assert rc == 0, err
    assert json.loads(out)["removed"] == 2
    assert fc["n1"].names() == ["postgres"] and fc["n2"].names() == ["sparktui-other-vllm-0"]

    rc, out, _ = await sparktui("stop", "--config", str(conf), "--yes")
    assert rc == 0 and "nothing to stop" in out


async def test_logs_of_one_node_as_json_lines(fake_cluster, tmp_path):
    fc = await fake_cluster(2)
    conf = write_config(fc.config, tmp_path / "c.yaml")
    fc["n1"].add_container("sparktui-lab-sglang-0", ours("lab", 0))
    fc["n2"].add_container("sparktui-lab-sglang-1", ours("lab", 1))
    fc["n1"].write_log("sparktui-lab-sglang-0", "head one", "head two")
    fc["n2"].write_log("sparktui-lab-sglang-1", "worker one")
    rc, out, err = await sparktui("logs", "n1", "--config", str(conf), "--json")
    assert rc == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["node"], r["line"]) for r in rows] == [("n1", "head one"), ("n1", "head two")]
    assert all(r["ts"].endswith("Z") for r in rows)
    rc, out, err = await sparktui("logs", "n9", "--config", str(conf))
    assert rc == 2 and "n9" in err


async def test_status_lists_deployments_found_by_label(fake_cluster, tmp_path):
    fc = await fake_cluster(2)
    conf = write_config(fc.config, tmp_path / "c.yaml")
    fc["n1"].add_container("sparktui-lab-vllm-0", ours("lab", 0, "vllm"))
    fc["n2"].add_container("sparktui-lab-vllm-1", ours("lab", 1, "vllm"), state="exited")
    fc["n1"].add_container("postgres", {})
    rc, out, err = await sparktui("status", "--config", str(conf), "--json")
    doc = json.loads(out)
    [dep] = doc["deployments"]
    assert (dep["name"], dep["engine"], dep["state"]) == ("lab", "vllm", "partial")
    assert sorted((c["node"], c["state"]) for c in dep["containers"]) == [("n1", "running"), ("n2", "exited")]
