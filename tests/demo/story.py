"""The README's demo story walked by keys in a real terminal (tmux) and read from the screen: shared by
the demo tier's pivot story and the install tier's Quick start run."""

from __future__ import annotations

import re

from ..tmuxterm import Tmux


def toasts(screen: str) -> str:
    """Notifications are drawn right of a "▌" edge and wrap: their text as one string."""
    return " ".join(line.split("▌", 1)[1].strip() for line in screen.splitlines() if "▌" in line)


def walk_seed_story(tui: Tmux, start_timeout: float = 120) -> None:
    """From the demo's first screen to vLLM ready with a chat completion answered: t, l, ctrl+s, the
    hang, p, y (README: "The demo in two minutes", steps 1-5)."""
    # the status line shortens its words to keep the endpoint at 80 columns: "2/2 nodes up" or "2/2 up"
    tui.wait_for(
        lambda s: "DEMO — simulated cluster" in s and re.search(r"2/2 (nodes )?up", s) and "model missing" in s,
        start_timeout,
        "both nodes up, the model only on spark1",
    )
    tui.keys("t")
    tui.wait_for("verified:", 120)
    tui.keys("C-r", "BTab")  # probe again, back to the nodes pane
    tui.wait_for(
        lambda s: "model missing" not in s and len(re.findall(r"model \d+(\.\d+)? MiB", s)) == 2,
        60,
        "the model on both nodes",
    )
    tui.keys("l")
    form = tui.wait_for_all("Launch demo-moe-30b-a3b", "SGLang", timeout=30)
    assert "✗" not in form
    tui.keys("C-s")
    # the form goes, or says why it cannot launch (a toast gone in seconds: caught here, not later)
    left = tui.wait_for(
        lambda s: "Launch demo-moe-30b-a3b on spark1" not in s or "cannot launch" in toasts(s),
        30,
        "the form gone or its refusal",
    )
    assert "cannot launch" not in toasts(left), left
    tui.wait_for(
        lambda s: "Press p to pivot" in toasts(s) and "hang" in toasts(s).lower(),
        120,
        "the hang notification offering p",
    )
    tui.keys("p")
    tui.wait_for_all("Pivot (y)", "to vllm (ray), TP 2", timeout=60)  # what stops and starts where
    tui.keys("y")
    tui.wait_for(
        lambda s: "● READY" in s and "answered in" in s and "ray up" in s,
        240,
        "vLLM ready over Ray and a chat completion answered",
    )
