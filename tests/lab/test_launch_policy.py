"""One launch policy for the TUI and the CLI, on real nodes (sshd + dockerd) with the engine simulator.

Both fronts prepare through the same core: the same plan and checks for the same choices; a fabric
link that is down refuses plan, preflight and launch in both, naming the node, the interface and its
state, and nothing starts; ports held on the head refuse a launch before any container starts; after
ready, `status` tells an endpoint whose engine was killed as unhealthy.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from sparktui.core.config.config import load_config
from sparktui.core.deploy.operations import Choices, Op
from sparktui.core.state.journal import Journal
from sparktui.core.plan.plan import PlanOptions
from sparktui.tui.app import SparkApp
from sparktui.tui.controller import Controller
from sparktui.tui.forms import choices as C
from sparktui.tui.forms.launch_form import LaunchForm

from ..tui.conftest import wait_for
from .labtools import sim_site
from .labtools import state_cli as cli
from .netlab import SIM_IMAGE, Lab

pytestmark = pytest.mark.lab
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def site(lab: Lab, tmp_path_factory) -> tuple[Lab, Path, Path]:
    """(lab, config path, state dir): the simulator image and the model on every node, a fast engine."""
    work = tmp_path_factory.mktemp("policy")
    sim_site(lab, work)
    data = lab.config_data()
    data["cluster"] = "policy"
    data["docker"]["env"] = {"SPARKTUI_SIM_SPEED": "20"}
    data["ssh"]["keepalive_interval"] = 1
    path = lab.write_config(data, work / "sparktui.yaml")
    yield lab, path, work / "state"
    cli(path, work / "state", "stop", "--yes")
    lab.on_each("docker rm -f squatter >/dev/null 2>&1; true")


def engine_containers(lab: Lab) -> dict[str, list[str]]:
    out = lab.on_each(["docker", "ps", "-a", "--filter", "label=sparktui.deployment=policy", "--format", "{{.Names}}"])
    return {name: sorted(r.stdout.split()) for name, r in out.items()}


async def prepared_by_the_tui(path: Path, form_values: C.FormValues, run=None):
    """What the app's own flow prepares for the form's choices: the form parses them, the controller
    (real SSH, its core thread) prepares; run(app, pilot) may then drive the app further."""
    config = load_config(path)
    controller = Controller(config, journal=Journal(), poll_interval=3600)
    app = SparkApp(config, controller=controller)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready, timeout=60, what="the first inventory")
        options = C.parse_form(form_values, C.node_order(config)).options
        prepared = await controller.prepare(Op.LAUNCH, Choices(options=options))
        if run is not None:
            await run(app, pilot)
        await controller.close()
    return prepared


async def test_the_tui_and_the_cli_prepare_the_same_plan_and_checks(site):
    lab, path, state = site
    values = C.FormValues(engine="vllm:ray", parallel="2:1", rendezvous=C.AUTO)
    tui = await prepared_by_the_tui(path, values)
    rc, out, err = cli(path, state, "launch", "--engine", "vllm", "--tp", "2", "--dry-run", "--json")
    assert rc == 0, err[-2000:]
    doc = json.loads(out)
    assert tui.ok and doc["errors"] == []
    assert doc["plan_id"] == tui.plan.plan_id  # the plan's hash covers every command, env and address
    # the same answer from the image; whichever asked first asked it, the other read it from the cache
    cli_plan, tui_plan = doc["plan"], tui.plan.to_json()
    assert {cli_plan["support"].pop("cached"), tui_plan["support"].pop("cached")} <= {True, False}
    assert cli_plan == tui_plan
    assert {k: doc[k] for k in ("errors", "warnings", "ports")} == tui.checks()
    assert doc["preview"] == tui.preview.to_json()
    assert tui.plan.subnet == lab.fabric_subnet
    assert engine_containers(lab) == {n.name: [] for n in lab.nodes}  # a dry run starts nothing


async def test_a_fabric_link_down_refuses_plan_preflight_and_launch_in_both_fronts(site):
    lab, path, state = site
    worker = lab.nodes[1]
    want = (worker.name, worker.fabric_iface, "no carrier")
    lab.link_down(worker)
    try:
        seen = {}
        for args in (("preflight",), ("launch", "--engine", "vllm", "--yes"), ("plan",)):
            rc, out, err = cli(path, state, *args)
            seen[args[0]] = rc, out + err
        for cmd, (rc, text) in seen.items():
            flat = " ".join(text.split())
            assert rc == 1, (cmd, text[-2000:])
            assert all(w in flat for w in want), (cmd, flat[-2000:])
            assert f"--iface {lab.mgmt_subnet}" in flat or "--iface" in flat  # another network only on purpose

        async def drive(app, pilot):
            await pilot.press("l")
            form = await wait_for(pilot, lambda: isinstance(app.screen, LaunchForm) and app.screen, what="form")
            issues = " ".join(str(form.query_one("#issues").content).split())
            assert all(w in issues for w in want), issues
            assert form.query_one("#launch").disabled
            await pilot.press("ctrl+s")  # refused in the form: nothing leaves it
            assert isinstance(app.screen, LaunchForm)
            await pilot.press("escape")
            app.flow.operate(Op.LAUNCH, Choices(options=PlanOptions(engine="vllm")))  # past the form: the core refuses
            await wait_for(pilot, lambda: app.launch_pane.state == "refused", timeout=60, what="refused")
            detail = " ".join((app.launch_pane.detail or "").split())
            assert all(w in detail for w in want), detail

        tui = await prepared_by_the_tui(path, C.FormValues(engine="vllm:ray", parallel="2:1", rendezvous=C.AUTO), drive)
        assert not tui.ok and all(w in " ".join(tui.errors[0].split()) for w in want)
    finally:
        lab.link_up(worker)
    assert engine_containers(lab) == {n.name: [] for n in lab.nodes}


def test_ports_held_on_the_head_refuse_a_launch_before_any_container_starts(site):
    lab, path, state = site
    lab.sh(
        lab.head.name,
        [
            "docker",
            "run",
            "-d",
            "--name",
            "squatter",
            "--network",
            "host",
            SIM_IMAGE,
            "python3",
            "-m",
            "http.server",
            "8000",
        ],
    )
    try:
        rc, out, err = cli(path, state, "launch", "--engine", "vllm", "--yes")
        flat = " ".join(err.split())
        assert rc == 1, err[-2000:]
        assert f"{lab.head.name}: port 8000 (HTTP port) is taken by container squatter" in flat, flat
        assert "--port" in flat
        assert engine_containers(lab) == {n.name: [] for n in lab.nodes}
    finally:
        lab.sh(lab.head.name, ["docker", "rm", "-f", "squatter"])


def test_status_shows_the_endpoint_unhealthy_once_the_engine_process_is_killed(site):
    lab, path, state = site
    rc, out, err = cli(path, state, "launch", "--engine", "vllm", "--yes", "--wait", "--timeout", "90", "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["state"] == "ready", (doc.get("detail"), err[-2000:])
    endpoint = f"http://{lab.head.mgmt_ip}:8000/v1"
    rc, out, err = cli(path, state, "status", "--json")
    [dep] = [d for d in json.loads(out)["deployments"] if d.get("name") == "policy"]
    assert (dep["endpoint"], dep["health"]) == (endpoint, "healthy"), dep
    head = "sparktui-policy-vllm-0"
    top = lab.sh(lab.head.name, ["docker", "top", head, "-o", "pid,args"]).stdout
    pids = [line.split()[0] for line in top.splitlines()[1:] if "vllm serve" in line]
    assert pids, top
    lab.sh(lab.head.name, ["kill", "-9", *pids])  # the engine dies; its container (Ray's head) lives on
    rc, out, err = cli(path, state, "status", "--json")
    [dep] = [d for d in json.loads(out)["deployments"] if d.get("name") == "policy"]
    assert dep["endpoint"] == endpoint and dep["health"].startswith(("unhealthy", "down")), dep
    rc, out, err = cli(path, state, "status")
    assert f"{endpoint} " in out and ("unhealthy" in out or "down" in out), out
    cli(path, state, "stop", "--yes")


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_a_tui_launch_in_a_terminal_shows_the_preflight_rows_and_reaches_ready(site, tmp_path):
    from ..tmuxterm import Tmux, app_command

    lab, path, state = site
    cli(path, state, "stop", "--yes")
    env = {
        "PYTHONPATH": str(REPO),
        "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
        "XDG_STATE_HOME": str(state),
        "TERM": "xterm-256color",
    }
    tmux = Tmux(
        app_command(env, sys.executable, "-m", "sparktui", "--config", str(path), unset=("SPARKTUI_CONFIG",)),
        120,
        40,
        prefix="sparktui-lab",
    )
    try:
        tmux.wait_for("2/2 nodes up", 60)
        tmux.keys("l")
        tmux.wait_for("Launch (ctrl+s)", 60)
        tmux.keys("Enter")  # the engine select: vLLM (Ray), the second choice
        tmux.wait_for("vLLM (native)")
        tmux.keys("Down")
        tmux.keys("Enter")
        tmux.wait_for("Ray port")
        tmux.keys("C-s")
        names = {n.name for n in lab.nodes}

        def ok_rows(screen: str) -> list[str]:
            return [ln for ln in screen.splitlines() if "✓ ok" in ln]

        # the header, the verdict and a row per node (waited for together: the pane paints them in parts)
        screen = tmux.wait_for(
            lambda s: (
                f"preflight {lab.head.fabric_ip}" in s
                and "every node met the head" in s
                and {r.split()[0] for r in ok_rows(s)} == names
            ),
            90,
            "the preflight's header, its verdict and an ok row per node",
        )
        rows = ok_rows(screen)
        assert all("tcp" in r for r in rows), screen  # transport (the simulator's image has no torch)
        screen = tmux.wait_for("READY", 180)
        assert engine_containers(lab) == {n.name: [f"sparktui-policy-vllm-{i}"] for i, n in enumerate(lab.nodes)}
        tmux.keys("q")
        tmux.wait_exit(30)
    finally:
        tmux.close()
        cli(path, state, "stop", "--yes")


def test_a_container_name_clash_reports_dockers_own_words(site):
    lab, path, state = site
    worker = lab.nodes[1]
    clash = "sparktui-policy-vllm-1"  # the name the plan gives the worker's engine, taken by a stranger
    cli(path, state, "stop", "--yes")
    lab.sh(worker.name, ["docker", "run", "-d", "--name", clash, SIM_IMAGE, "sleep", "600"])
    try:
        rc, out, err = cli(path, state, "launch", "--engine", "vllm", "--yes", "--no-preflight", "--json")
        doc = json.loads(out)
        assert rc == 1 and doc["state"] == "failed", err[-2000:]
        failed = [s for s in doc["steps"] if s["state"] == "failed"]
        assert failed and failed[0]["node"] == worker.name
        assert f'The container name "/{clash}" is already in use' in failed[0]["detail"], failed
        [problem] = [p for p in doc["problems"] if p["kind"] == "launch_step_failed"]
        assert "is not this deployment's" in problem["hint"] and clash in problem["hint"]
        rc, out, err = cli(path, state, "journal", "--json", "--limit", "400")
        entries = json.loads(out)
        docker_run = [e for e in entries if e["node"] == worker.name and f"--name {clash}" in e["command"]]
        assert docker_run and "is already in use" in (docker_run[-1]["error"] or "")  # docker's stderr kept
        assert lab.sh(worker.name, ["docker", "ps", "--format", "{{.Names}}"]).stdout.split().count(clash) == 1
    finally:
        cli(path, state, "stop", "--yes")
        lab.sh(worker.name, ["docker", "rm", "-f", clash], check=False)
