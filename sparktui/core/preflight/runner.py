"""run_preflight: the rendezvous check on every node at once, bounded in time, leaving nothing behind.

1. One look per node (interfaces, addresses, image, /dev/infiniband, ports): a missing interface or
   address fails at once, before any container starts.
2. The check program in the plan's image on every node, with the plan's container flags and env,
   against the head's address and a free port near the dist port. A node's container gets a start
   window of its own (a large image on slow storage can take minutes before Python runs); the check's
   timeout counts from the program's first line on that node. A container that never starts is that
   node's failure, not the rendezvous's.
3. As soon as one node fails on its own, the others get a moment to report, then are stopped: the
   verdict should not wait out a timeout that can no longer change it.
4. Whatever happens (cancel included), every container of this check is removed by name.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import secrets
import time
from typing import Callable

from ..config.config import Config
from ..nodes.facts import Subnet
from ..plan.plan import NodePlan, Plan
from ..remote.ssh import Cluster, SshError
from .check_program import STARTED
from .remote import (
    Look,
    check_command,
    container_name,
    free_port,
    held_command,
    judge_look,
    look_command,
    parse_look,
    pid_from_line,
    program_text,
    result_from_output,
    sweep_command,
)
from ..engines.common import Spot, docker_flags
from .ipc import IpcRisk, engine_identity, judge_ipc
from .leftovers import leftovers_of
from . import transit
from .halves import probe as probe_halves
from .rails import measure as measure_rails
from ..state.states import CheckKind as C
from .verdict import (
    LOCAL,
    SECONDARY,
    NodeResult,
    Setting,
    Verdict,
    explain,
    judge_ipc_risks,
    judge_late_peers,
    judge_memory,
)

DEFAULT_TIMEOUT = 30.0
DEFAULT_START_WINDOW = 300.0  # docker run until the program's first line: minutes for a big image on slow disks
LOOK_TIMEOUT = 10.0  # the look is one small script
START_SLACK = 12.0  # the program's own grace, its output and the container's removal, on top of its timeout
STARTING, RENDEZVOUS = "starting", "rendezvous"  # what a node's check waits for (on_stage)
EARLY_GRACE = 3.0  # after a node fails on its own, what the others get to say why before they are stopped
SWEEP_TIMEOUT = 15.0
_MISSING = re.compile(r"(?:missing ranks: |rank\(s\) )([\d,]+)")


class PreflightError(ValueError):
    """The plan gives nothing to check (no rendezvous address, no image, a node off the subnet)."""


def checkable(plan: Plan) -> list[str]:
    """Why this plan cannot be checked; empty when it can."""
    problems = []
    if not plan.nodes:
        problems.append("the plan has no nodes")
    if not plan.head_ip:
        problems.append("the plan has no rendezvous address (no subnet joins all nodes)")
    if not plan.image:
        problems.append("the plan has no image")
    for n in plan.nodes:
        if not n.ip or not n.iface:
            problems.append(f"{n.name} has no address on the rendezvous subnet")
    return problems


def _alternatives(subnets: list[Subnet] | None, plan: Plan) -> list[str]:
    names = [n.name for n in plan.nodes]
    return [s.subnet for s in subnets or [] if s.joins(names) and s.subnet != plan.subnet and s.up]


async def _look(cluster: Cluster, n: NodePlan, image: str) -> tuple[Look | None, NodeResult | None]:
    node = cluster.nodes.get(n.name)
    if node is None:
        return None, NodeResult.failed(n.name, n.rank, n.iface, n.ip, C.SSH, f"{n.name} is not in the config")
    r = await node.run(look_command(image), timeout=LOOK_TIMEOUT)
    if r.exit_status == 255 and not r.stdout:
        return None, NodeResult.failed(n.name, n.rank, n.iface, n.ip, C.SSH, r.stderr.strip() or str(node.error))
    look = parse_look(r.stdout)
    kind, error, notes = judge_look(n, look)
    if kind:
        res = NodeResult.failed(n.name, n.rank, n.iface, n.ip, kind, error)
        res.line, res.stage, res.notes = error, "look", notes
        return look, res
    look.notes = notes  # e.g. the link has no carrier: the check runs and the verdict says it
    return look, None


async def _lines(session, out: list[str], deadline: float, until: str | None, seen) -> str:
    """Read lines into out until the line `until` ("stop"), the end of output ("eof") or the deadline ("late")."""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return "late"
        try:
            line = await asyncio.wait_for(session.readuntil("\n"), left)
        except asyncio.TimeoutError:
            return "late"
        if not line:
            return "eof"
        line = line.rstrip("\r\n")
        seen(line)
        out.append(line)
        if until is not None and line == until:
            return "stop"


async def _check(
    cluster: Cluster,
    n: NodePlan,
    command: str,
    name: str,
    program: str,
    timeout: float,
    start_window: float,
    pids: dict[str, int],
    on_stage: Callable[[str, str], None],
) -> NodeResult:
    node = cluster[n.name]

    def fail(kind: C | None, error: str, text: str = "") -> NodeResult:
        return NodeResult.failed(n.name, n.rank, n.iface, n.ip, kind, error, text)

    def seen(line: str) -> None:
        pid = pid_from_line(line)
        if pid is not None:
            pids[n.name] = pid

    t0 = time.monotonic()
    try:
        session = await node.session(held_command(command), slot_timeout=start_window)
    except asyncio.TimeoutError:
        return fail(C.SSH, f"no SSH channel free on {n.name} within {start_window:g} s: {node.channel_note()}")
    except SshError as e:
        return fail(C.SSH, str(e))
    out: list[str] = []
    start_s: float | None = None
    try:
        session.send(program)
        session.end_input()
        _stage(on_stage, n.name, STARTING)
        how = await _lines(session, out, t0 + start_window, STARTED, seen)
        if how == "stop":
            start_s = time.monotonic() - t0
            _stage(on_stage, n.name, RENDEZVOUS)
            how = await _lines(session, out, time.monotonic() + timeout + START_SLACK, None, seen)
        if how == "late":
            with contextlib.suppress(Exception):  # stop it now: its group, then its container
                await node.run(sweep_command([name], _pid(pids, n.name)), timeout=SWEEP_TIMEOUT)
    finally:
        await session.close()
    text = "\n".join(x for x in out if pid_from_line(x) is None and x != STARTED)
    if start_s is None and how == "late":
        r = fail(C.NOT_STARTED, f"the container did not start within {start_window:g} s", text)
        r.stage = "container start"
        return r
    data = result_from_output(text)
    if data is not None:
        r = NodeResult.from_check(n.name, n.rank, n.iface, n.ip, data)
    elif how == "late":
        r = fail(C.TIMEOUT, f"no result within {timeout + START_SLACK:g} s of the check's start", text)
    elif session.exit_status is None and not node.connected:
        r = fail(C.SSH, str(node.error or "the connection dropped"), text)
    else:
        r = fail(None, f"the check exited {session.exit_status} without a result", text)
    r.start_seconds = round(start_s, 3) if start_s is not None else None
    return r


def _pid(pids: dict[str, int], name: str) -> list[int]:
    return [pids[name]] if name in pids else []


def _stage(on_stage: Callable[[str, str], None] | None, node: str, stage: str) -> None:
    if on_stage is not None:
        with contextlib.suppress(Exception):  # a display callback must not break the check
            on_stage(node, stage)


async def _sweep(cluster: Cluster, names: dict[str, str], pids: dict[str, int] | None = None) -> None:
    async def one(node_name: str, name: str) -> None:
        node = cluster.nodes.get(node_name)
        if node is not None:
            with contextlib.suppress(Exception):
                await node.run(sweep_command([name], _pid(pids or {}, node_name)), timeout=SWEEP_TIMEOUT)

    await asyncio.gather(*(one(k, v) for k, v in names.items()), return_exceptions=True)


def _notify(on_node: Callable[[NodeResult], None] | None, r: NodeResult) -> None:
    if on_node is not None:
        with contextlib.suppress(Exception):  # a display callback must not break the check
            on_node(r)


async def _run_all(
    cluster: Cluster,
    order: list[NodePlan],
    commands: dict[str, str],
    timeout: float,
    start_window: float,
    names: dict[str, str],
    started: dict[str, str],
    pids: dict[str, int],
    on_node,
    on_stage,
) -> dict[str, NodeResult]:
    program = program_text()
    starting: set[str] = set()
    ran: dict[str, tuple[float, float]] = {}  # node -> (when its program started, when its result came)
    began: dict[str, float] = {}

    def stage(node: str, what: str) -> None:
        (starting.add if what == STARTING else starting.discard)(node)
        if what == RENDEZVOUS:
            began[node] = time.monotonic()
        _stage(on_stage, node, what)

    tasks: dict[asyncio.Task, NodePlan] = {}
    for n in order:
        started[n.name] = names[n.name]
        starting.add(n.name)
        check = _check(cluster, n, commands[n.name], names[n.name], program, timeout, start_window, pids, stage)
        tasks[asyncio.create_task(check)] = n
    results: dict[str, NodeResult] = {}
    stopped: set[str] = set()
    stop_at: float | None = None
    pending = set(tasks)
    try:
        while pending:
            # Until a node fails on its own, wait for results; then until the grace ends; once the rest
            # are stopped, for their (now quick) ends.
            wait = None if stop_at is None or stopped else max(0.0, stop_at - time.monotonic())
            done, pending = await asyncio.wait(pending, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
            for t in done:
                n = tasks[t]
                starting.discard(n.name)
                try:
                    r = t.result()
                except Exception as e:  # noqa: BLE001 - one node's surprise is that node's failure
                    r = NodeResult.failed(n.name, n.rank, n.iface, n.ip, C.UNKNOWN, f"{type(e).__name__}: {e}")
                if n.name in stopped and not r.ok and r.stage is None:  # killed by the sweep: no result line
                    r.kind, r.error = C.STOPPED, "stopped after another node failed"
                if n.name in began:
                    ran[n.name] = (began[n.name], time.monotonic())
                results[r.node] = r
                _notify(on_node, r)
                # A rendezvous that failed while a peer's container is still starting says nothing yet:
                # that peer gets its start window before anyone is stopped.
                if not r.ok and r.kind not in SECONDARY and stop_at is None and (r.kind in LOCAL or not starting):
                    stop_at = time.monotonic() + EARLY_GRACE
            if pending and stop_at is not None and time.monotonic() >= stop_at and not stopped:
                late = [tasks[t] for t in pending]
                stopped.update(n.name for n in late)
                await _sweep(cluster, {n.name: started[n.name] for n in late}, pids)
    finally:
        for t in pending:
            t.cancel()
    judge_late_peers(results, ran)
    return results


async def run_preflight(
    cluster: Cluster,
    config: Config,
    plan: Plan,
    timeout: float = DEFAULT_TIMEOUT,
    *,
    subnets: list[Subnet] | None = None,
    mode: str = "auto",
    on_node: Callable[[NodeResult], None] | None = None,
    rails: bool = False,
    start_window: float = DEFAULT_START_WINDOW,
    on_stage: Callable[[str, str], None] | None = None,
) -> Verdict:
    """Check the plan's rendezvous on every node in the plan's image; bounded by about start_window +
    timeout + 12 s (each container's start, then its check).

    subnets (the inventory's) lets a failed verdict suggest another subnet joining all nodes; mode is
    the check program's (auto: NCCL where torch sees a GPU, plain TCP otherwise); on_node is called
    with each node's result as it arrives, on_stage with (node, STARTING | RENDEZVOUS) as its check
    waits for its container, then for the rendezvous; rails measures each RDMA half of the plan alone afterwards
    (ib_write_bw, a few seconds each). Raises PreflightError when the plan gives nothing to check.
    """
    problems = checkable(plan)
    if problems:
        raise PreflightError("; ".join(problems))
    t0 = time.monotonic()
    check_id = secrets.token_hex(4)
    order = sorted(plan.nodes, key=lambda n: n.rank)
    setting = Setting(
        addr=plan.head_ip or "",
        port=0,
        subnet=plan.subnet,
        image=plan.image,
        timeout=timeout,
        start_window=start_window,
        engine=plan.engine,
        head=order[0].name,
        alternatives=_alternatives(subnets, plan),
        ranks={n.rank: n.name for n in order},
        fabric=dict(plan.fabric),
    )
    verdict = Verdict(setting=setting, check_id=check_id)
    started: dict[str, str] = {}
    pids: dict[str, int] = {}  # node -> the process group of its `docker run`
    try:
        looked = await asyncio.gather(*(_look(cluster, n, plan.image) for n in order))
        looks = {n.name: lk for n, (lk, _) in zip(order, looked)}
        early = {n.name: res for n, (_, res) in zip(order, looked) if res is not None}
        head_look = looks.get(order[0].name)
        port = None
        if head_look is not None and not early:
            port = free_port(head_look.listening, plan.dist_port, {plan.port, plan.ray_port, plan.dist_port})
            if port is None:
                n = order[0]
                early[n.name] = NodeResult.failed(
                    n.name, n.rank, n.iface, n.ip, C.PORT_IN_USE, f"no free port near {plan.dist_port} on {n.name}"
                )
        setting.port = port or plan.dist_port
        for n in order:
            for note in looks[n.name].notes if looks.get(n.name) else []:
                verdict.warnings.append(note)
        if early:
            for n in order:
                r = early.get(n.name) or NodeResult(node=n.name, rank=n.rank, iface=n.iface, ip=n.ip, kind=C.SKIPPED)
                verdict.nodes[n.name] = r
                _notify(on_node, r)
        else:
            commands = {
                n.name: check_command(
                    config.docker,
                    plan.image,
                    n,
                    looks[n.name].infiniband,
                    check_id=check_id,
                    addr=setting.addr,
                    port=setting.port,
                    world=len(order),
                    timeout=timeout,
                    mode=mode,
                )
                for n in order
            }
            names = {n.name: container_name(check_id, n.rank) for n in order}
            results = await _run_all(
                cluster, order, commands, timeout, start_window, names, started, pids, on_node, on_stage
            )
            for n in order:
                verdict.nodes[n.name] = results.get(n.name) or NodeResult.failed(
                    n.name, n.rank, n.iface, n.ip, C.STOPPED, "no result"
                )
        _judge(verdict, order, looks, plan, config)
        if plan.fabric.get("rails"):  # every half's subnet, not only the one the rendezvous crossed
            verdict.halves = await probe_halves(cluster, plan.fabric["rails"])
        if rails and plan.fabric.get("rails"):
            verdict.rails = await measure_rails(cluster, plan.fabric["rails"])
    finally:
        if started:
            await _sweep(cluster, started, pids)
        verdict.seconds = time.monotonic() - t0
    return verdict


def _ipc_risks(order: list[NodePlan], looks: dict[str, Look | None], config: Config) -> dict[str, IpcRisk]:
    """Each node's semaphore-trap judgement, from the engine container's own flags (docker_flags: the
    --user and --ipc it will get) and the image's USER."""
    out = {}
    for n in order:
        look = looks.get(n.name)
        if look is None or look.ipc is None:
            continue
        spot = Spot(name=n.name, rank=n.rank, role=n.role, iface=n.iface, ip=n.ip, rdma=n.rdma, infiniband=False)
        user, ipc = engine_identity(docker_flags(config.docker, spot))
        out[n.name] = judge_ipc(n.name, look.ipc, user, look.image_user, ipc)
    return out


def _judge(verdict: Verdict, order: list[NodePlan], looks: dict[str, Look | None], plan: Plan, config: Config) -> None:
    """Reasons, fixes and warnings, once every node has a result."""
    s = verdict.setting
    plans = {n.name: n for n in order}
    judge_memory(verdict, {k: lk.memory for k, lk in looks.items() if lk is not None}, plan.unified, plan.mem_fraction)
    judge_ipc_risks(verdict, _ipc_risks(order, looks, config))
    for n in order:
        lk = looks.get(n.name)
        if lk is not None:
            lo = leftovers_of(
                n.name, plan.deployment, lk.containers, lk.stats, lk.memory, n.name in plan.unified, lk.containers_error
            )
            if lo.any:
                verdict.leftovers[n.name] = lo
    ring = plan.fabric.get("ring") if plan.fabric else None
    for n in order if ring else []:
        lk = looks.get(n.name)
        problems, notes = transit.judge(n.name, lk.transit if lk is not None else None, ring)
        verdict.transit += problems
        verdict.warnings += notes
    for r in verdict.nodes.values():
        n = plans[r.node]
        if not r.ok:
            r.reason, r.fix = explain(r, s, rdma=n.rdma)
            m = _MISSING.search(r.error or "")
            if r.kind == C.PEER_MISSING and m:
                who = [s.ranks.get(int(x), f"rank {x}") for x in m[1].split(",") if x.isdigit()]
                r.reason = f"{r.node} waited for {', '.join(who)}, which never joined ({r.line or r.error})"
        look = looks.get(r.node)
        if r.ok and r.transport == "socket" and n.rdma and look is not None and look.infiniband:
            verdict.warnings.append(
                f"{r.node}: NCCL used sockets although the plan's data path is {n.rdma} "
                f"(bootstrap {n.iface}): check NCCL_IB_HCA and /dev/infiniband"
            )
    if any(r.ok and r.path == "tcp" for r in verdict.nodes.values()):
        verdict.warnings.append(
            "the image has no torch with a GPU: the check proved TCP reachability between "
            "the ranks on the plan's addresses, not NCCL itself"
        )
