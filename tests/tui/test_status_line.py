"""The status line keeps the endpoint and the state at any width; operations read as words."""

from __future__ import annotations

import pytest

from sparktui.tui.present.status import status_line

DEMO = "DEMO — simulated cluster"
ENDPOINT = "http://127.0.0.1:30000/v1"


@pytest.mark.parametrize("width", [60, 80, 100, 160])
def test_the_endpoint_and_state_survive_any_width(width):
    line = status_line(DEMO, 2, 2, "ready", "", ENDPOINT, ["sync_model", "refresh"], width).plain
    assert len(line) <= width - 2
    assert ENDPOINT in line and "ready" in line and "2/2" in line


def test_words_not_identifiers_when_there_is_room():
    line = status_line("sparks", 2, 2, "loading", "", None, ["sync_model"], 120).plain
    assert line == "sparks · 2/2 nodes up · deployment loading · syncing model"
    assert "sync_model" not in status_line(DEMO, 1, 2, "idle", "", ENDPOINT, ["sync_model"], 80).plain
