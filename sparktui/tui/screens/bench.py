"""`b`: the serving benchmark of the deployment, run on its head node, with the previous engine's rows beside.

While the client runs, its progress (read from its log on the head) is shown; esc stops it there (the
core's cancellation removes the client, see core/bench/run.py). Once done, the new rows, and after a pivot
the previous engine's latest rows beside them, for comparing.
"""

from __future__ import annotations

from typing import Any

from rich import box
from rich.columns import Columns
from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static
from textual.worker import Worker, WorkerState

from ...core.bench.client import Progress, Workload

COLUMNS = [
    ("conc", "concurrency", "{}"),
    ("TTFT p50", "ttft_p50_ms", "{:.0f} ms"),
    ("TTFT p99", "ttft_p99_ms", "{:.0f} ms"),
    ("ITL p50", "itl_p50_ms", "{:.1f} ms"),
    ("out tok/s", "output_tokens_per_s", "{:.1f}"),
    ("req/s", "requests_per_s", "{:.2f}"),
]


def rows_table(rows: list[Any], title: str) -> Table:
    tab = Table(title=title, title_justify="left", expand=False, box=box.SIMPLE_HEAD)
    for head, _, _ in COLUMNS:
        tab.add_column(head, justify="right")
    for r in rows:
        d = r.to_json()
        tab.add_row(*(fmt.format(d[key]) for _, key, fmt in COLUMNS))
    return tab


def title_of(rows: list[Any]) -> str:
    r = rows[0]
    return f"{r.engine} {r.mode} TP{r.tp} · {r.image or 'image ?'}".strip()


def results_view(rows: list[Any], previous: list[Any]) -> Group:
    """The new rows; after a pivot, the previous engine's beside them (below them where the screen is narrow)."""
    tables = [rows_table(rows, "now: " + title_of(rows))]
    if previous:
        tables.append(rows_table(previous, "before: " + title_of(previous)))
    return Group(Columns(tables, padding=(0, 3)))


class BenchScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    BenchScreen { align: center middle; }
    BenchScreen > Vertical { width: 132; max-width: 100%; height: auto; max-height: 90%;
        border: thick $accent; background: $surface; padding: 0 1; }
    BenchScreen #bench-title { text-style: bold; }
    """
    BINDINGS = [Binding("escape", "close", "Stop / close", id="bench.close")]

    def __init__(self, controller: Any, workload: Workload | None = None) -> None:
        super().__init__()
        self.controller = controller
        self.workload = workload or Workload([1, 8, 32])
        self.progress: Progress | None = None  # set from the core thread, shown by a timer here
        self.rows: list[Any] = []
        self.previous: list[Any] = []
        self.error: str | None = None
        self._worker: Worker | None = None

    def compose(self) -> ComposeResult:
        with Vertical():
            c = ",".join(map(str, self.workload.concurrency))
            yield Static(
                f"Benchmark on the head node · concurrency {c} · {self.workload.input_len}/"
                f"{self.workload.output_len} tokens",
                id="bench-title",
                markup=False,
            )
            yield Static("starting the client on the head…", id="bench-body", markup=False)
            yield Static("esc stops the client on the node", id="bench-hint", markup=False)

    def on_mount(self) -> None:
        self._worker = self.run_worker(self._go(), exclusive=True, exit_on_error=False)
        self.set_interval(0.25, self._show_progress)

    def _progress(self, p: Progress) -> None:  # may run on the core thread: only stores
        self.progress = p

    def _show_progress(self) -> None:
        if self.running and self.progress is not None:
            self.query_one("#bench-body", Static).update(Text("running: " + self.progress.words()))

    @property
    def running(self) -> bool:
        return self._worker is not None and self._worker.state in (WorkerState.PENDING, WorkerState.RUNNING)

    async def _go(self) -> None:
        self.rows, self.previous = await self.controller.bench(self.workload, self._progress)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        body, hint = self.query_one("#bench-body", Static), self.query_one("#bench-hint", Static)
        if event.state is WorkerState.SUCCESS:
            body.update(results_view(self.rows, self.previous))
            hint.update("esc closes · `sparktui bench --history` lists every run kept")
        elif event.state is WorkerState.ERROR:
            self.error = str(event.worker.error) or type(event.worker.error).__name__
            body.update(Text(self.error))
            hint.update("esc closes")

    def action_close(self) -> None:
        if self.running and self._worker is not None:
            self._worker.cancel()  # the core stops the client on the head before it lets go
            self.app.notify("benchmark stopped; the client on the head was stopped too", timeout=6)
        self.dismiss(None)
