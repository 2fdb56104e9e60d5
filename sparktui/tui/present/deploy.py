"""The deployment as text: a state badge, a milestones timeline per node, problems with their hints."""

from __future__ import annotations

from textual.content import Content

from ...core.diagnosis.diagnose import Milestone, Problem
from ...core.engines import ENGINES, label, next_engine
from ...core.state.states import MilestoneKind as K, State
from ...core.state.words import check_words, milestone_short, problem_words

# The order a start goes through; the timeline shows each step once per node, latest data wins.
STEPS = (
    K.CONTAINER_STARTED,
    K.RAY_STARTED,
    K.RAY_CONNECTED,
    K.DIST_INIT_BEGIN,
    K.DIST_INIT_END,
    K.TRANSPORT,
    K.NCCL_NET,
    K.WEIGHTS_LOADING,
    K.SLOW_LOAD,
    K.KV_CACHE,
    K.CUDA_GRAPH,
    K.READY,
)

STATE_STYLE = {
    State.IDLE: "$text-muted",
    State.STARTING: "$accent",
    State.LOADING: "$accent",
    State.READY: "$success bold",
    State.HUNG: "$error bold",
    State.FAILED: "$error bold",
    State.STOPPING: "$warning",
    State.STOPPED: "$text-muted",
    State.UNHEALTHY: "$error bold",
    State.WEDGED: "$error bold",
    State.PREFLIGHT: "$accent",
    State.REFUSED: "$error bold",
}


def milestone_label(m: Milestone) -> str:
    return milestone_short(m.kind, m.data)


def milestone_style(m: Milestone) -> str:
    if m.kind == K.READY:
        return "$success bold"
    if m.kind == K.TRANSPORT and m.data.get("transport") == "socket":
        return "$warning"  # NCCL over TCP works but is the slow path (gloo on a CPU build has no other)
    if m.kind == K.SLOW_LOAD or (m.kind == K.NCCL_NET and (m.data.get("flags") or m.data.get("net") == "socket")):
        return "$warning"
    return "$success" if m.kind in (K.DIST_INIT_END, K.CONTAINER_STARTED, K.RAY_CONNECTED) else "$accent"


def latest_by_node(milestones: list[Milestone]) -> dict[str | None, dict[str, Milestone]]:
    """node -> kind -> the last milestone of that kind (later data replaces earlier)."""
    out: dict[str | None, dict[str, Milestone]] = {}
    for m in milestones:
        out.setdefault(m.node, {})[m.kind] = m
    return out


RAY_ONLY = {K.CONTAINER_STARTED, K.RAY_STARTED, K.RAY_CONNECTED}


def ray_head(by_node: dict[str | None, dict[str, Milestone]]) -> str | None:
    """Under Ray the node running the driver: Ray milestones and steps past them. The other nodes'
    ranks are Ray actors whose stdout and stderr Ray publishes to the driver, prefixed with their pid
    and ip (ray-project/ray doc/source/ray-observability/ray-logging.rst, ray-1.11.0; the same in
    https://docs.ray.io/en/latest/ray-observability/user-guides/configure-logging.html), so a worker
    node's own log stops at `ray start`."""
    for node, kinds in by_node.items():
        if node is not None and kinds.keys() & {K.RAY_STARTED, K.RAY_CONNECTED} and kinds.keys() - RAY_ONLY:
            return node
    return None


def timeline(milestones: list[Milestone], nodes: list[str]) -> Content:
    """One line per node: its steps in start order, the latest of each. A Ray worker, whose own log
    says no more than that Ray started, follows the head: its ranks log there."""
    by_node = latest_by_node(milestones)
    head = ray_head(by_node)
    width = max([len(n) for n in nodes] + [4])
    lines = []
    for node in nodes + [n for n in by_node if n not in nodes and n is not None]:
        kinds = by_node.get(node, {})
        parts: list = [(f"{node:<{width}} ", "bold")]
        shown = [kinds[k] for k in STEPS if k in kinds]
        if K.DIST_INIT_END in kinds:
            shown = [m for m in shown if m.kind != K.DIST_INIT_BEGIN]
        if not shown:
            parts.append(("waiting", "$text-muted"))
        for i, m in enumerate(shown):
            parts += ([" › "] if i else []) + [(milestone_label(m), milestone_style(m))]
        # the NCCL transport a worker's ranks use reaches the head's log too: it still follows the head
        if (
            head is not None
            and node != head
            and kinds.keys() & {K.RAY_STARTED, K.RAY_CONNECTED}
            and kinds.keys() - {K.NCCL_NET} <= RAY_ONLY
        ):
            if "ready" in by_node[head]:
                parts += [
                    " › ",
                    ("serving", "$success bold"),
                    (f" (Ray worker: its ranks log on {head})", "$text-muted"),
                ]
            else:
                parts += [" › ", (f"its ranks log on {head} (Ray worker)", "$text-muted")]
        lines.append(Content.assemble(*parts))
    return Content("\n").join(lines) if lines else Content("no deployment yet")


def state_badge(state: State, detail: str | None = None) -> Content:
    parts: list = [("●", STATE_STYLE.get(state, "")), " ", (state.upper(), STATE_STYLE.get(state, "bold"))]
    if detail:
        parts.append(f"  {detail}")
    return Content.assemble(*parts)


def problem_lines(p: Problem) -> Content:
    where = f"{p.node}: " if p.node else ""
    tag = "suspected " if p.provisional else ""
    first = Content.assemble(
        ("✗ ", "$error bold"), (f"{where}{tag}{problem_words(p.kind)}", "$error bold"), f" — {p.message}"
    )
    return Content("\n").join([first, Content.assemble(("  fix: ", "$warning bold"), p.hint)])


def pivot_advice(engine: str | None, pivot_key: str) -> str:
    """The way out of a hang, in a line: the key, the engine it pivots to, and why that one joins its ranks
    where this one hangs (when the engine says so)."""
    to = next_engine(engine or "")
    why = getattr(ENGINES.get(engine or ""), "hang_pivot", None)
    return f"press {pivot_key} to pivot to {label(to)}" + (f": {why[1]}" if why and why[0] == to else "")


def hang_notice(p: Problem, pivot_key: str) -> str:
    """The notification text for a hang: what is wrong, the key that pivots, then the fix (the key
    first: a narrow screen shows a notice's first lines only)."""
    where = f" on {p.node}" if p.node else ""
    return f"Distributed init hung{where}. Press {pivot_key} to pivot. {sentence(p.hint)}"


def sentence(words: str) -> str:
    """Words as a sentence of their own: a capital first, one full stop last (hints start lower-case, to
    follow a colon)."""
    words = words.strip().rstrip(". ")
    return words[:1].upper() + words[1:] + "." if words else ""


def endpoint_words(endpoint: str | None, local: str | None) -> str:
    """Both URLs of a ready engine, a line each saying where it works: the nodes' own address, and
    the forward this machine opened over SSH (the one to use from here)."""
    parts = []
    if endpoint:
        parts.append(f"on the nodes {endpoint}")
    if local:
        parts.append(f"local {local} (SSH forward from this machine)")
    return "\n".join(parts)


def sim_speed(env: dict[str, str]) -> float | None:
    """The demo's engine speed-up, from the containers' SPARKTUI_SIM_SPEED (sparktui/sim/clock.py);
    None for real engines (or a speed of 1, where engine time is wall time)."""
    try:
        speed = float(env.get("SPARKTUI_SIM_SPEED", ""))
    except ValueError:
        return None
    return speed if speed > 0 and speed != 1 else None


def speed_note(speed: float) -> str:
    """Why a demo engine says "after 300 s" 15 s after launch: its logs count engine seconds
    (sparktui/sim/clock.py), which pass `speed` times faster than the wall clock here."""
    return f"demo: engines {speed:g}× faster than real ones; their logs' 300 s pass in {300 / speed:.3g} s here"


def problem_key(p: Problem) -> tuple:
    return (p.kind, p.node, p.line)


PREFLIGHT_STAGES = {"starting": "starting the check container…", "rendezvous": "rendezvous…"}


def preflight_text(
    head: str, nodes: list[str], rows: dict, verdict=None, error: str | None = None, stages: dict | None = None
) -> Content:
    """The preflight as rows: node, transport, seconds, bandwidth, verdict; then the reason and fix. A node
    without a row yet says what its check waits for (stages: node -> starting | rendezvous)."""
    lines = [Content.assemble(("preflight ", "bold"), head)]
    width = max((len(n) for n in nodes), default=4)
    for n in nodes:
        r = rows.get(n)
        if r is None:
            waiting = PREFLIGHT_STAGES.get((stages or {}).get(n, ""), "checking…")
            lines.append(Content.assemble(f"  {n.ljust(width)}  ", (waiting, "$accent")))
            continue
        transport = r.transport or r.path or "-"
        took = f"{r.seconds:.1f} s" if r.seconds is not None else "-"
        bw = f"{r.bandwidth_gb_s:.2f} GB/s" if r.bandwidth_gb_s is not None else "-"
        mark = ("✓ ok", "$success") if r.ok else (f"✗ {check_words(r.kind)}", "$error bold")
        lines.append(Content.assemble(f"  {n.ljust(width)}  {transport:<7} {took:>7}  {bw:>11}  ", mark))
    if error:
        lines.append(Content.styled(f"  ✗ the check could not run: {error}", "$error"))
    elif verdict is not None and not verdict.ok:
        lines.append(Content.styled(f"  ✗ {verdict.reason}", "$error"))
        lines.append(Content.styled(f"  fix: {verdict.fix}", "$warning"))
    elif verdict is not None:
        lines.append(Content.styled(f"  ✓ every node met the head in {verdict.seconds:.1f} s", "$success"))
    return Content("\n").join(lines)
