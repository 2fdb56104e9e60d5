"""First run against real nodes (OpenSSH, real host keys): `sparktui init` and the setup screen each
write a config that `sparktui check` accepts, with the fabric the probe found pinned per node."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from textual.widgets import Select

from sparktui.core.config.config import SshConfig, load_config
from sparktui.tui.screens.hostkey import HostKeyScreen
from sparktui.tui.setup_app import SetupApp

from ..tui.conftest import wait_for
from ..tui.test_setup import add_node, message, setup_screen, type_into

pytestmark = pytest.mark.lab
REPO = Path(__file__).resolve().parents[2]


def sparktui(home: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """The CLI with HOME in a folder of the test: no ~/.ssh of this machine takes part."""
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(REPO)}
    env.pop("SPARKTUI_CONFIG", None)
    return subprocess.run(
        [sys.executable, "-m", "sparktui", *args], cwd=home, env=env, capture_output=True, text=True, timeout=timeout
    )


def assert_accepted_by_check(lab, home: Path, config: Path) -> None:
    r = sparktui(home, "--config", str(config), "check", "--json")
    assert r.returncode == 0, r.stderr + r.stdout[-2000:]
    out = json.loads(r.stdout)
    assert all(n["reachable"] for n in out["nodes"]), [n["error"] for n in out["nodes"]]
    assert out["fabric"][0]["subnet"] == lab.fabric_subnet
    cfg = load_config(config)
    # each node's own interface name on the fabric, as the probe found it
    assert {n.name: n.interfaces for n in cfg.nodes} == {n.name: {lab.fabric_subnet: n.fabric_iface} for n in lab.nodes}


def assert_real_keys_recorded(lab, kh: Path) -> None:
    recorded = {line.split()[0]: " ".join(line.split()[1:3]) for line in kh.read_text().splitlines()}
    assert recorded == {n.mgmt_ip: n.host_key for n in lab.nodes}


def test_init_writes_a_config_that_check_accepts(lab, tmp_path):
    home, kh, out = tmp_path / "home", tmp_path / "known_hosts", tmp_path / "sparktui.yaml"
    home.mkdir()
    nodes = [a for n in lab.nodes for a in ("--node", f"{n.name}={n.mgmt_ip},user=root,key={lab.identity}")]
    args = [
        "init",
        *nodes,
        "--model-path",
        f"/models/{lab.model}",
        "--known-hosts",
        str(kh),
        "--output",
        str(out),
        "--cluster",
        "lab-init",
        "--image-sglang",
        "sparktui/engine-sim:latest",
    ]
    refused = sparktui(home, *args)
    assert refused.returncode == 1 and not out.exists()
    assert all(lab.host_key_fingerprint(n) in refused.stderr.replace("\n", "") for n in lab.nodes)
    assert not kh.exists() or kh.read_text() == ""

    r = sparktui(home, *args, "--accept-new-host-keys")
    assert r.returncode == 0, r.stderr
    assert f"fabric: {lab.fabric_subnet} [RoCE]" in r.stdout
    assert_real_keys_recorded(lab, kh)
    assert_accepted_by_check(lab, home, out)
    assert load_config(out).images.sglang == "sparktui/engine-sim:latest"


async def test_the_setup_screen_writes_a_config_that_check_accepts(lab, tmp_path):
    home, kh, target = tmp_path / "home", tmp_path / "known_hosts", tmp_path / "home" / "sparktui.yaml"
    home.mkdir()
    app = SetupApp(target, ssh=SshConfig(known_hosts=str(kh), ssh_config=[], connect_timeout=lab.connect_timeout))
    async with app.run_test(size=(80, 24)) as pilot:
        for n in lab.nodes:
            await add_node(pilot, n.name, n.mgmt_ip, user="root", key=str(lab.identity))
        await pilot.press("ctrl+t")
        for n in lab.nodes:  # each key asked about by name, with the fingerprint the node really has
            modal = await wait_for(
                pilot,
                lambda: isinstance(app.screen, HostKeyScreen) and app.screen.key.node == n.name and app.screen,
                30,
                f"{n.name}'s key prompt",
            )
            assert modal.key.fingerprint == lab.host_key_fingerprint(n)
            await pilot.press("y")
        await wait_for(pilot, lambda: "probed" in message(app), 60, "the probe")
        assert setup_screen(app).query_one("#fabric", Select).value == lab.fabric_subnet
        await type_into(pilot, "model-path", f"/models/{lab.model}")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: app.return_value is not None, 20, "the config written")
    assert app.return_value == target
    assert_real_keys_recorded(lab, kh)
    assert_accepted_by_check(lab, home, target)
