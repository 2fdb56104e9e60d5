"""`sparktui drop-caches` against in-process SSH nodes (the flush runs on this machine, as root in CI)."""

from __future__ import annotations

import json
import os


from sparktui.core.memory.free import DropPreview

from .test_check_cli import sparktui, write_config


async def test_drop_caches_asks_first_then_flushes_each_node_and_reports_free_memory(ssh_env, tmp_path):
    cfg, servers = await ssh_env(2)
    conf = write_config(cfg, tmp_path / "c.yaml")
    rc, out, err = await sparktui("drop-caches", "--config", str(conf))
    assert rc == 1 and "not confirmed" in " ".join(err.split()) and not any(s.stats.commands for s in servers)
    # the question is the TUI's confirmation text: what runs, where, and how
    assert " ".join(DropPreview(["n1", "n2"]).text().split()) in " ".join(err.split()), err  # wrapped to the width
    rc, out, err = await sparktui("drop-caches", "--config", str(conf), "n2", "--yes", "--json")
    doc = json.loads(out)
    assert [r["node"] for r in doc] == ["n2"]
    assert not servers[0].stats.commands  # only the node named
    if os.geteuid() == 0:
        assert rc == 0 and doc[0]["ok"] and doc[0]["free_after"] > 0, err
    else:
        assert rc == 1 and not doc[0]["ok"] and "root or passwordless sudo" in doc[0]["error"]


async def test_an_unknown_node_is_refused_before_any_connection(ssh_env, tmp_path):
    cfg, servers = await ssh_env(1)
    rc, _, err = await sparktui("drop-caches", "--config", str(write_config(cfg, tmp_path / "c.yaml")), "nope", "-y")
    assert rc == 2 and "unknown node 'nope'" in err and not servers[0].stats.commands
