"""Every key of the app, once: id, key, description, dangerous, and when it can act.

From this one registry come the App's Bindings (each with its id, so config.keymap can remap it
through App.set_keymap), the `?` help screen, the command palette entries and the greyed-out
footer keys (check_action answers None when `enabled` says no).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

from textual.binding import Binding

from ..core.state.states import Op, State


class UiState(Protocol):
    """What the predicates read; the app implements it from its own message-fed state."""

    deploy_state: State
    inventory_ready: bool  # the first probe of every node has come back
    running: frozenset[Op]  # operations in flight
    has_plan: bool  # something was launched since the app started (redeploy knows what)
    log_visible: bool  # the launch pane (with the log view) is showing
    modal: bool  # a form or dialog is on top
    typing: bool  # a text field has the focus: printable keys are its text


@dataclass(frozen=True)
class Action:
    id: str  # binding id: the keymap's key, stable across versions
    key: str  # default key(s), comma-separated
    action: str  # the App action it runs
    description: str  # footer / help / palette words
    dangerous: bool = False  # stops something: asks first
    enabled: Callable[[UiState], bool] = lambda s: True
    show: bool = True  # in the footer
    priority: bool = False  # checked before the focused widget (tab must not move focus inside a pane)
    why: str = ""  # why it cannot act, once modal / already running / not yet probed are ruled out
    short: str = ""  # the footer's word when the screen is narrow


def _active(s: UiState) -> bool:
    """Something of the deployment runs on the nodes (stop / pivot / redeploy make sense)."""
    return State(s.deploy_state).active


def _deploying(s: UiState) -> bool:
    """Something runs on the nodes, or a launch is on its way there."""
    return not s.modal and (_active(s) or Op.LAUNCH in s.running)


def _free(s: UiState, op: str) -> bool:
    return not s.modal and op not in s.running


ACTIONS: tuple[Action, ...] = (
    Action(
        "launch",
        "l",
        "launch",
        "Launch",
        enabled=lambda s: _free(s, "launch") and s.inventory_ready and not _active(s),
        why="a deployment is running: stop or pivot it instead",
    ),
    Action(
        "pivot", "p", "pivot", "Pivot", dangerous=True, enabled=_deploying, why="nothing is deployed to pivot away from"
    ),
    Action(
        "redeploy",
        "r",
        "redeploy",
        "Redeploy",
        dangerous=True,
        enabled=lambda s: not s.modal and (s.has_plan or _active(s)),
        why="nothing was launched yet",
    ),
    Action("stop", "s", "stop", "Stop", dangerous=True, enabled=_deploying, why="nothing is deployed"),
    Action(
        "sync_model",
        "t",
        "sync_model",
        "Sync model",
        short="Sync",
        enabled=lambda s: _free(s, "sync_model") and s.inventory_ready,
        why="needs the nodes probed",
    ),
    Action(
        "sync_image",
        "i",
        "sync_image",
        "Sync image",
        short="Image",
        enabled=lambda s: _free(s, "sync_image") and s.inventory_ready,
        why="needs the nodes probed",
    ),
    Action(
        "bench",
        "b",
        "bench",
        "Benchmark",
        short="Bench",
        enabled=lambda s: _free(s, "bench") and s.deploy_state in (State.READY, State.WEDGED, State.UNHEALTHY),
        why="needs a deployment that serves (READY)",
    ),
    Action(
        "drop_caches",
        "d",
        "drop_caches",
        "Drop caches",
        dangerous=True,
        show=False,
        enabled=lambda s: _free(s, "drop_caches") and s.inventory_ready,
        why="needs the nodes probed",
    ),
    # priority: the app opens the filter as / arrives, so keys typed right behind it land in the filter
    # (else each is handed to the log, which had the focus when it came, and acts as an app key)
    Action(
        "filter",
        "slash",
        "filter",
        "Filter",
        priority=True,
        enabled=lambda s: s.log_visible and not s.modal and not s.typing,
        why="only on the Launch pane, where the log is",
    ),
    Action(
        "follow",
        "f",
        "follow",
        "Follow",
        enabled=lambda s: s.log_visible and not s.modal,
        why="only on the Launch pane, where the log is",
    ),
    Action(
        "log_node",
        "n",
        "log_node",
        "Log node",
        show=False,
        enabled=lambda s: s.log_visible and not s.modal,
        why="only on the Launch pane, where the log is",
    ),
    Action(
        "log_node_back",
        "N",
        "log_node_back",
        "Log node back",
        show=False,
        enabled=lambda s: s.log_visible and not s.modal,
        why="on the launch pane",
    ),
    Action("refresh", "ctrl+r", "refresh", "Refresh", show=False, enabled=lambda s: not s.modal),
    Action("next_pane", "tab", "next_pane", "Next pane", show=False, priority=True, enabled=lambda s: not s.modal),
    Action(
        "prev_pane", "shift+tab", "prev_pane", "Prev pane", show=False, priority=True, enabled=lambda s: not s.modal
    ),
    Action("help", "question_mark", "help", "Keys"),
    Action("palette", "ctrl+p", "command_palette", "Palette", priority=True),
    Action("quit", "q", "quit", "Quit"),
)
# Footer keys given up first when even the short words do not fit (all stay in help and the palette).
FOOTER_DROP_ORDER = ("sync_image", "redeploy", "filter", "sync_model")
BY_ACTION = {a.action: a for a in ACTIONS}
BY_ID = {a.id: a for a in ACTIONS}


def bindings() -> list[Binding]:
    return [Binding(a.key, a.action, a.description, show=a.show, priority=a.priority, id=a.id) for a in ACTIONS]


def state_of(action: str, state: UiState) -> bool | None:
    """check_action's answer: True, or None (greyed out, still shown) when it cannot act now."""
    a = BY_ACTION.get(action)
    if a is None:
        return True
    if a.enabled(state):
        return True
    # A priority key that is the focused widget's own (inside a modal, or text in a field): False (hidden, not
    # handled); elsewhere greyed out like any other.
    return False if a.priority and (state.modal or state.typing) else None


class _Assume:
    """A UiState with some answers replaced: what would the predicates say if ...?"""

    def __init__(self, state: UiState, **changes: object) -> None:
        self._state, self._changes = state, changes

    def __getattr__(self, name: str) -> object:
        return self._changes[name] if name in self._changes else getattr(self._state, name)


def waits_for_probe(a: Action, state: UiState) -> bool:
    """True when only the nodes' first probe stands in the way: the key can be kept until it is in."""
    return not state.inventory_ready and not a.enabled(state) and a.enabled(_Assume(state, inventory_ready=True))


def why_not(a: Action, state: UiState) -> str | None:
    """None when the action can run now, else the reason in a few plain words."""
    if a.enabled(state):
        return None
    if state.modal:
        return "close the open dialog first"
    if a.id in state.running:
        return f"{a.description.lower()} is already running"
    if waits_for_probe(a, state):
        return "the nodes are still being probed"
    return a.why or "not possible right now"


def keys_for(action_id: str, keymap: dict[str, str]) -> str:
    """The keys bound to an id after the user's keymap."""
    return keymap.get(action_id) or BY_ID[action_id].key


def help_rows(state: UiState, keymap: dict[str, str]) -> list[tuple[str, str, str, str]]:
    """(keys, description, id, note) for the help screen; note says why a key cannot act now."""
    rows = []
    for a in ACTIONS:
        note = "asks first" if a.dangerous else ""
        reason = why_not(a, state)
        if reason:
            note = "not now: " + reason
        rows.append((display_keys(keys_for(a.id, keymap)), a.description, a.id, note))
    return rows


_NAMES = {"slash": "/", "question_mark": "?", "shift+tab": "⇧tab"}


def display_keys(keys: str) -> str:
    return ", ".join(_NAMES.get(k.strip(), k.strip()) for k in keys.split(","))
