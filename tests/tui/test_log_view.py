"""The log view: batching, bounded history per node, follow/pause with a count, filters, colours."""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult

from sparktui.tui.widgets.log_view import SEP, LogView

from .conftest import screen_text, wait_for


class Host(App):
    def __init__(self, **kw) -> None:
        super().__init__()
        self.kw = kw

    def compose(self) -> ComposeResult:
        yield LogView(**self.kw)


async def test_writes_are_batched():
    app = Host(nodes=["a", "b"], flush_interval=0.05)
    async with app.run_test(size=(80, 24)) as pilot:
        view = app.query_one(LogView)
        for i in range(200):  # 200 arrivals inside one batch window
            view.add("a" if i % 2 else "b", [f"line {i}"])
        assert view.shown == []  # nothing written before the flush
        await wait_for(pilot, lambda: len(view.shown) == 200, what="the batch")
        assert view.flushes == 1
        assert view.shown[0].endswith("line 0") and view.shown[-1].endswith("line 199")  # arrival order


async def test_a_flood_repaints_at_most_every_interval_and_then_shows_every_line(monkeypatch):
    from sparktui.tui.widgets import log_view

    monkeypatch.setattr(log_view, "REPAINT", 1.0)  # wide enough that the held repaint is not due by itself
    app = Host(nodes=["a"])
    async with app.run_test(size=(80, 24)) as pilot:
        view = app.query_one(LogView)
        view.add("a", ["first"])
        view._flush()  # a slice of sorting-in, as the flood's timer runs it: the first repaint is at once
        assert view.log.virtual_size.height == 1
        view.add("a", [f"line {i}" for i in range(100)])
        view._flush()
        assert view.rows == 101 and view.log.virtual_size.height == 1  # sorted in, the repaint held
        await wait_for(pilot, lambda: view.log.virtual_size.height == 101, what="the held repaint")
        await wait_for(pilot, lambda: view.log.is_vertical_scroll_end, what="following to the end")
        view.add("a", ["last"])
        view.flush_now()  # tests, a rebuild, shutdown: shown at once
        assert view.log.virtual_size.height == 102


async def test_one_bounded_ring_says_how_many_lines_left_the_top():
    app = Host(nodes=["quiet", "chatty"], max_lines=50)
    async with app.run_test(size=(80, 24)) as pilot:
        view = app.query_one(LogView)
        view.add("quiet", ["an early line"])
        view.add("chatty", [f"noise {i}" for i in range(500)])
        view.flush_now()
        assert view.rows == 50 and view.history("chatty")[-1] == "noise 499"
        assert view.dropped_top == 451 and view.history("quiet") == []
        view.log.scroll_to(y=0, animate=False)
        await wait_for(pilot, lambda: "451 earlier lines dropped" in screen_text(app), what="the notice on top")
        assert "noise 451" in screen_text(app)  # the first line kept follows the notice


async def test_nodes_are_merged_by_docker_timestamp_not_arrival():
    app = Host(nodes=["a", "b"])
    async with app.run_test(size=(80, 24)):
        view = app.query_one(LogView)
        view.add("a", ["a1", "a3", "a5"], [100_001, 100_003, 100_005])
        view.flush_now()
        view.add("b", ["b2", "b4", "b6"], [100_002, 100_004, 100_006])  # a slower node's lines come later
        view.add("a", ["docker: no timestamp", "a7"], [None, 100_007])  # follows its node's previous line
        view.flush_now()
        assert [ln.split(SEP)[1] for ln in view.shown] == [
            "a1",
            "b2",
            "a3",
            "b4",
            "a5",
            "docker: no timestamp",
            "b6",
            "a7",
        ]
        view.add("b", ["b8 first", "b8 again"], [100_008, 100_008])
        view.add("a", ["a8 same instant, later"], [100_008])
        view.add("b", ["b7.5 late"], [100_007])  # the same instant as a7: placed after it, which came first
        view.flush_now()
        assert [ln.split(SEP)[1] for ln in view.shown][-5:] == [
            "a7",
            "b7.5 late",
            "b8 first",
            "b8 again",
            "a8 same instant, later",
        ]


async def test_each_batch_is_acknowledged_once_it_is_in_the_ring():
    app = Host(nodes=["a"], flush_interval=0.05)
    async with app.run_test(size=(80, 24)) as pilot:
        view = app.query_one(LogView)
        acked: list[int] = []
        for i in range(3):
            view.add("a", [f"x{i}"], ack=lambda i=i: acked.append(i))
        assert acked == []  # queued, not yet taken
        await wait_for(pilot, lambda: acked == [0, 1, 2], what="the acks")
        assert view.rows == 3


async def test_a_flood_repaints_the_view_without_a_relayout():
    app = Host(nodes=["a", "b"], max_lines=2000)
    async with app.run_test(size=(80, 24)) as pilot:
        view = app.query_one(LogView)
        view.add("a", ["warm up"])
        view.flush_now()
        await pilot.pause()
        layouts = []
        screen = app.screen
        original = screen._refresh_layout
        screen._refresh_layout = lambda *a, **kw: (layouts.append(1), original(*a, **kw))[1]
        for round_ in range(20):  # the ring fills, trims from the top, paused and following
            view.add("a", [f"a {round_} {i}" for i in range(300)])
            view.add("b", [f"b {round_} {i}" for i in range(300)])
            view.flush_now()
            if round_ == 10:
                view.toggle_follow()
            await pilot.pause()
        assert view.dropped_top > 0 and view.new_lines > 0
        assert layouts == []


async def test_scrolling_up_pauses_and_counts_new_lines():
    app = Host(nodes=["a"], max_lines=1000)
    async with app.run_test(size=(80, 12)) as pilot:
        view = app.query_one(LogView)
        view.add("a", [f"l{i}" for i in range(100)])
        view.flush_now()
        await pilot.pause()
        assert view.following and view.log.is_vertical_scroll_end
        view.log.scroll_to(y=0, animate=False)
        await wait_for(pilot, lambda: not view.following, what="pause on scroll up")
        view.add("a", [f"m{i}" for i in range(7)])
        view.flush_now()
        await pilot.pause()
        assert view.new_lines == 7
        assert view.log.scroll_y == 0  # the reader's place is kept
        await wait_for(pilot, lambda: "7 new lines" in screen_text(app), what="the marker")
        assert "press f to follow" in screen_text(app)
        view.log.scroll_end(animate=False)
        await wait_for(pilot, lambda: view.following, what="resume at the end")
        assert view.new_lines == 0


async def test_follow_toggle():
    app = Host(nodes=["a"])
    async with app.run_test(size=(80, 12)) as pilot:
        view = app.query_one(LogView)
        view.toggle_follow()
        assert not view.following
        view.add("a", [f"x{i}" for i in range(50)])
        view.flush_now()
        await pilot.pause()
        assert view.new_lines == 50 and not view.log.is_vertical_scroll_end
        view.toggle_follow()
        await pilot.pause()
        assert view.following and view.new_lines == 0 and view.log.is_vertical_scroll_end


async def test_filter_and_node_view_rebuild_from_history():
    app = Host(nodes=["a", "b"])
    async with app.run_test(size=(80, 24)) as pilot:
        view = app.query_one(LogView)
        view.add("a", ["Init torch distributed begin.", "loading"])
        view.add("b", ["Init torch distributed begin.", "NCCL WARN Bootstrap : no socket interface found"])
        view.flush_now()
        view.set_filter("INIT TORCH")  # case-insensitive
        assert [ln.split(SEP)[0].strip() for ln in view.shown] == ["a", "b"]
        view.add("a", ["init torch again"])  # new arrivals pass through the same filter
        view.add("b", ["unrelated"])
        view.flush_now()
        assert len(view.shown) == 3
        view.set_filter("")
        view.show_node("b")
        assert [ln.split(SEP)[1] for ln in view.shown] == [
            "Init torch distributed begin.",
            "NCCL WARN Bootstrap : no socket interface found",
            "unrelated",
        ]
        view.show_node(None)
        assert len(view.shown) == 6
        view.set_filter("node:B init")  # node: picks nodes (any case); the other words are the phrase
        assert view.shown == [f"b   {SEP}Init torch distributed begin."]
        view.set_filter("node:a,b nccl")
        assert [ln.split(SEP)[0].strip() for ln in view.shown] == ["b"]
        view.set_filter("node:nosuch")
        assert view.shown == []
        await pilot.pause()


async def test_carriage_returns_become_lines():
    app = Host(nodes=["a"])
    async with app.run_test(size=(80, 12)):
        view = app.query_one(LogView)
        view.add("a", ["10%\r20%\r30%"])
        view.flush_now()
        assert [ln.split(SEP)[1] for ln in view.shown] == ["10%", "20%", "30%"]


async def test_node_colours_and_problem_highlight():
    app = Host(nodes=["a", "b"])
    async with app.run_test(size=(80, 12)):
        view = app.query_one(LogView)
        hl = view.highlighter
        assert hl.styles["a"] != hl.styles["b"]
        plain = Text(f"a   {SEP}loading shard 3")
        hl.highlight(plain)
        assert plain.spans and all(s.end <= 4 for s in plain.spans)  # only the node prefix coloured
        bad = Text(f"b   {SEP}torch.OutOfMemoryError: CUDA out of memory")
        hl.highlight(bad)
        assert any(s.style == hl.problem for s in bad.spans)
        quiet = Text(f"a   {SEP}odd but fatal line")
        view.mark_problem("odd but fatal line")
        hl.highlight(quiet)
        assert any(s.style == hl.problem for s in quiet.spans)


async def test_start_up_arguments_naming_watchdogs_and_errors_are_not_problems():
    app = Host(nodes=["a"])
    async with app.run_test(size=(80, 12)):
        hl = app.query_one(LogView).highlighter
        args = Text(f"a   {SEP}server_args=ServerArgs(watchdog_timeout=300, log_level='error', dist_timeout=None)")
        hl.highlight(args)
        assert not any(s.style == hl.problem for s in args.spans)
        dead = Text(f"a   {SEP}[2026-11-29 19:05:44 TP1] Scheduler watchdog timeout (self.watchdog_timeout=300)")
        hl.highlight(dead)
        assert any(s.style == hl.problem for s in dead.spans)


async def test_the_app_keeps_its_built_screen_out_of_the_collectors_full_passes_while_it_runs(config, core):
    import gc
    import weakref

    from sparktui.tui.app import SparkApp

    first = SparkApp(config, controller=core)
    async with first.run_test(size=(100, 32)) as pilot:
        await wait_for(pilot, lambda: gc.get_freeze_count() > 0, what="the heap frozen after the first frame")
        gone = weakref.ref(first.launch_pane.log)
    assert gc.get_freeze_count() == 0  # handed back on the way out: nothing is kept for good
    del first, pilot
    second = SparkApp(config, controller=core)
    async with second.run_test(size=(100, 32)) as pilot:
        await wait_for(pilot, lambda: gc.get_freeze_count() > 0, what="the second app's heap frozen")
        assert gone() is None  # what the first app left was collected, not frozen with the second
