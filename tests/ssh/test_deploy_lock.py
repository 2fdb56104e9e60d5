"""A deployment's lock on the head: one launch, pivot, redeploy or stop at a time, named when refused."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from sparktui.core.deploy import Deployer
from sparktui.core.deploy.lock import LockHeld
from sparktui.core.deploy.operations import Choices, Operations
from sparktui.core.state.events import DeploymentChanged, EventBus
from sparktui.core.plan.plan import PlanOptions
from sparktui.core.remote.ssh import Cluster
from sparktui.core.state.states import Op

from .test_deploy_cli import ours, sparktui, write_config
from .test_deploy_fakes import Recorder, fake_cluster, plan_for, planner_for  # noqa: F401 (fixture)


def lock_file(fc, name: str = "lab"):
    return fc["n1"].dir.parent / ".local/state/sparktui/locks" / f"{name}.lock"


def ops_of(cluster, fc) -> Operations:
    factory = lambda c, cfg, bus: Deployer(c, cfg, bus, planner=planner_for(cfg), stop_grace=1)  # noqa: E731
    return Operations(cluster, fc.config, EventBus(), deployer_factory=factory)


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid  # reaped: no process has it now (pids are not reused this soon)


async def test_a_second_holder_is_refused_naming_the_first_until_it_lets_go(fake_cluster):
    fc = await fake_cluster(2)
    async with Cluster(fc.config) as one, Cluster(fc.config) as two:
        first, second = ops_of(one, fc), ops_of(two, fc)
        await first.lock(Op.LAUNCH)
        assert lock_file(fc).exists()
        with pytest.raises(LockHeld) as e:
            await second.lock(Op.STOP)
        h = e.value.holder
        assert (h.op, h.host, h.pid) == ("launch", socket.gethostname(), os.getpid()) and 0 <= h.age < 60
        assert f"launch by {h.user}@{h.host} (pid {os.getpid()})" in str(e.value) and "ago" in str(e.value)
        # a run without the lock taken first takes it itself: refused the same way, nothing stopped
        fc["n1"].add_container("sparktui-lab-sglang-0", ours("lab", 0))
        p = await second.prepare(Op.STOP, Choices())
        with pytest.raises(LockHeld):
            await second.run(p)
        assert fc["n1"].names() == ["sparktui-lab-sglang-0"]
        await first.close()  # every way out releases it
        assert not lock_file(fc).exists()
        assert await second.run(p) == "removed 1 container(s)"
        assert not lock_file(fc).exists()  # a run that took the lock itself gives it back


async def test_a_dead_holder_on_this_host_is_taken_over_and_another_hosts_is_broken_only_as_shown(fake_cluster):
    fc = await fake_cluster(2)
    f = lock_file(fc)
    f.parent.mkdir(parents=True)
    doc = {"host": socket.gethostname(), "user": "u", "pid": dead_pid(), "op": "launch", "token": "aa11"}
    f.write_text(f"1 {json.dumps(doc)}\n")
    async with Cluster(fc.config) as cluster:
        ops = ops_of(cluster, fc)
        await ops.lock(Op.REDEPLOY)
        assert "no longer runs on this host" in ops.lock_notes[0]
        assert f'"pid": {os.getpid()}' in f.read_text()
        await ops.close()

        doc.update(host="elsewhere.example", pid=1, token="bb22")  # another host's: never judged gone
        f.write_text(f"1 {json.dumps(doc)}\n")
        ops = ops_of(cluster, fc)
        with pytest.raises(LockHeld) as e:
            await ops.lock(Op.STOP)
        shown = e.value.holder
        assert shown.host == "elsewhere.example" and shown.age > 1000  # the head's clock, not ours
        doc.update(token="cc33")  # a newer holder came meanwhile: breaking the one shown must not touch it
        f.write_text(f"1 {json.dumps(doc)}\n")
        with pytest.raises(LockHeld):
            await ops.lock(Op.STOP, breaking=shown)
        with pytest.raises(LockHeld) as e:
            await ops.lock(Op.STOP)
        await ops.lock(Op.STOP, breaking=e.value.holder)
        assert '"op": "stop"' in f.read_text()
        await ops.close()
    assert not f.exists()


async def test_stop_refuses_while_another_holds_the_lock_and_breaks_it_when_asked(fake_cluster, tmp_path):
    fc = await fake_cluster(2)
    conf = write_config(fc.config, tmp_path / "c.yaml")
    fc["n1"].add_container("sparktui-lab-sglang-0", ours("lab", 0))
    async with Cluster(fc.config) as cluster:
        holder = ops_of(cluster, fc)
        await holder.lock(Op.LAUNCH)
        rc, out, err = await sparktui("stop", "--config", str(conf), "--yes")
        assert rc == 1 and "deployment lab is busy: launch by" in err and f"(pid {os.getpid()})" in err, err
        assert "--break-lock" in err
        assert fc["n1"].names() == ["sparktui-lab-sglang-0"]
        rc, out, err = await sparktui("stop", "--config", str(conf), "--break-lock")  # no terminal: not confirmed
        assert rc == 1 and f"(pid {os.getpid()})" in err and "nothing changed" in err, err
        assert fc["n1"].names() == ["sparktui-lab-sglang-0"]
        rc, out, err = await sparktui("stop", "--config", str(conf), "--break-lock", "--yes")
        assert rc == 0 and "is held: launch by" in err, err
        assert fc["n1"].names() == [] and not lock_file(fc).exists()
        await holder.close()  # its lock was broken: letting go removes nothing of another's


async def test_a_resume_that_fails_says_so_and_names_redeploy(fake_cluster):
    fc = await fake_cluster(2)
    plan = plan_for(fc.config, PlanOptions(engine="sglang"))
    async with Cluster(fc.config) as cluster:
        first = Deployer(cluster, fc.config, EventBus())
        await first.launch(plan)
        await first.close()
        bus = EventBus()
        rec = Recorder(bus)
        again = Deployer(cluster, fc.config, bus)
        try:
            await again.launch(plan_for(fc.config, PlanOptions(engine="sglang")))  # the same plan: resumed
            head = next(c for c in fc["n1"].names() if c.startswith("sparktui-lab-"))
            fc["n1"].write_log(head, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
            await rec.wait_for(lambda e: isinstance(e, DeploymentChanged) and e.state == "failed")
        finally:
            await again.close()
    p = next(p for p in again.problems if p.kind == "resumed_broken")
    assert "resumed 2 container(s)" in p.message and "`sparktui redeploy`" in p.hint
