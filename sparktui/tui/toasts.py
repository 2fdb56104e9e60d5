"""Toasts without repeats and without a pile.

The same news (message and title) replaces its earlier toast, and past MAX_TOASTS the oldest goes,
information before warnings before errors, so a hang never stacks toasts over half the screen; the
latest news always stays. A narrow screen keeps one (the app says how many).
"""

from __future__ import annotations

from typing import Any

from textual.notifications import Notification

MAX_TOASTS = 3
_RANK = {"information": 0, "warning": 1, "error": 2}


def make_room(app: Any, message: str, title: str, keep: int = MAX_TOASTS) -> None:
    """Before app.notify(message, title=title): drop its twin, then the least news until one fits
    among `keep`."""
    shown = []
    for n in list(app._notifications):
        if n.message == message and n.title == title:
            app._unnotify(n, refresh=False)
        else:
            shown.append(n)
    while shown and len(shown) >= keep:
        # the latest news stays, whatever its severity: "ready" must not vanish under an older failure;
        # with room for two only (a narrow screen), the incoming news and the gravest of the rest
        newest = max(shown, key=lambda n: n.raised_at)
        others = [n for n in shown if n is not newest] if keep > 2 else shown
        oldest = min(others, key=lambda n: (_RANK.get(n.severity, 0), n.raised_at))
        shown.remove(oldest)
        app._unnotify(oldest, refresh=False)


def show(
    app: Any, message: str, title: str, severity: str, timeout: float, markup: bool, keep: int = MAX_TOASTS
) -> None:
    """Add the toast now, not through a posted message, so news raised in one go is counted at once
    (the app's loop is the only caller)."""
    make_room(app, message, title, keep)
    app._notifications.add(Notification(message, title, severity, timeout, markup=markup))
    app._refresh_notifications()
