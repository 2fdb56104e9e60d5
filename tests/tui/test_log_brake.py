"""Keys first during a log flood: a key press holds the log readers in step with the screen, then lets them go."""

from __future__ import annotations

from sparktui.core.state.events import Gate, LogLines
from sparktui.tui.app import SparkApp

from .conftest import wait_for


class RecordingGate(Gate):
    def __init__(self) -> None:
        super().__init__()
        self.brakes: list[bool] = []

    def brake(self, on: bool) -> None:
        self.brakes.append(on)
        super().brake(on)


async def test_a_key_brakes_the_log_readers_and_a_timer_releases_them(config, core):
    app = SparkApp(config, controller=core)
    gate = RecordingGate()
    async with app.run_test(size=(100, 32)) as pilot:
        core.bus.emit(LogLines("spark1", "c", ["flood line"], flow=gate))
        await wait_for(pilot, lambda: any("flood line" in ln for ln in app.launch_pane.log.shown), what="the line")
        assert gate.held == 0 and gate.brakes == []
        await pilot.press("f")
        assert gate.brakes[:1] == [True]
        await wait_for(pilot, lambda: gate.brakes[-1:] == [False] and not gate.braked, what="the brake's release")
        assert not gate.over
