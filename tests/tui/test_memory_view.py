"""The launch pane's memory lines: one per node, MemAvailable's sparkline, coloured by the guard's level."""

from __future__ import annotations

from sparktui.core.state.events import NodeMemory
from sparktui.core.memory.sample import MemSample
from sparktui.tui.app import SparkApp
from sparktui.tui.present.memory import memory_line

from .conftest import wait_for

GiB = 2**30


def reading(node: str, avail: float, level: str = "ok", psi: float | None = 0.5) -> NodeMemory:
    return NodeMemory("sparks", MemSample(node, 0.0, total=128 * GiB, available=int(avail * GiB), psi_full=psi), level)


def test_the_line_names_the_node_the_numbers_and_the_level_in_its_colour():
    e = reading("spark2", 11.5, "warn")
    line = memory_line(e, [128 * GiB, 64 * GiB, 11.5 * GiB], 7)
    assert line.plain == "spark2  mem █▅▂ 11.5 of 128.0 GiB free psi 0.5% warn"
    assert any("$warning" in str(span.style) for span in line.spans)
    failed = memory_line(NodeMemory("sparks", MemSample("spark1", 0.0, error="x"), "unwatched"), [])
    assert failed.plain.startswith("spark1 mem not read")


async def test_the_pane_keeps_one_line_per_node_at_80_columns(config, core):
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready)
        pane = app.launch_pane
        app.query_one("#panes").active = "pane-launch"
        assert not pane.has_class("-memory")
        for avail in (100.0, 60.0, 20.0):
            core.bus.emit(reading("spark1", 110.0))
            core.bus.emit(reading("spark2", avail, "warn" if avail < 30 else "ok"))
        block = pane.query_one("#memory")
        await wait_for(pilot, lambda: "20.0 of 128.0" in str(block.render()), what="the memory lines")
        await wait_for(pilot, lambda: block.region.height > 0, what="the lines on screen")
        lines = [strip.text.rstrip() for strip in block.render_lines(block.region.reset_offset)]
        assert len(lines) == 2 and lines[0].startswith("spark1") and lines[1].startswith("spark2"), lines
        assert lines[1].endswith("warn") and all(len(ln) <= 80 for ln in lines), lines
