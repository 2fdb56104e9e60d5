"""A relaunch of the same deployment in another mode: the ports its own running engine holds are not
a conflict (the plan stops that engine first), on the demo's nodes, where containers have no cgroups."""

from __future__ import annotations

import json

from .conftest import sparktui


async def test_a_relaunch_in_another_mode_is_not_refused_for_its_own_ports(demo, cli_env):
    conf = ["--config", str(demo.config_path)]
    rc, out, err = await sparktui(cli_env, *conf, "sync", "model", "--wait", "--json")
    assert rc == 0, out + err
    try:
        rc, out, err = await sparktui(
            cli_env,
            *conf,
            "launch",
            "--engine",
            "vllm",
            "--mode",
            "ray",
            "--wait",
            "--no-preflight",
            "--yes",
            "--json",
            timeout=240,
        )
        assert rc == 0 and json.loads(out)["state"] == "ready", out + err
        rc, out, err = await sparktui(
            cli_env, *conf, "launch", "--engine", "vllm", "--mode", "native", "--dry-run", "--json", timeout=120
        )
        doc = json.loads(out)
        taken = [e for e in doc.get("errors", []) if "is taken by" in e]
        assert taken == [], taken  # the HTTP port is held by this deployment's own vllm serve
        assert "sparktui-" in json.dumps(doc)  # and the dry run names what it would stop
    finally:
        await sparktui(cli_env, *conf, "stop", "--yes", timeout=120)
