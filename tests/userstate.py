"""A user's own sparktui state, as ordinary use leaves it: finished transfers, a deployment record, a journal.

Written with sparktui's own record types, so sparktui would read them back (`status` lists the transfers).
The guard's test fills a home with it and checks the suite leaves it byte for byte; by hand, to run
the whole suite against a home that holds it:

    python3 -m tests.userstate /tmp/user-home && HOME=/tmp/user-home python3 -m pytest -q
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

from sparktui.core.deploy.record import STATE_DIR as DEPLOYMENTS, Record
from sparktui.core.state.journal import Entry
from sparktui.core.plan.plan import PlanOptions
from sparktui.core.transfers.remote import STATE_ROOT as TRANSFERS
from sparktui.core.transfers.state import TransferMeta

STARTED = 1_780_000_000.0  # a fixed past time, so two fills write the same bytes


def fill(home: Path, transfers: int = 20, journal_bytes: int = 10 << 20) -> list[Path]:
    """Writes the state under home/.local/state/sparktui; returns the files written."""
    written: list[Path] = []

    def put(path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)

    for i in range(transfers):
        kind = "model" if i % 2 == 0 else "image"
        tid = f"{kind}-spark2-20260601T{i:02d}0000-{i:04x}"
        meta = TransferMeta(
            id=tid,
            kind=kind,
            source="spark1",
            dest="spark2",
            addr="192.168.100.11",
            user="root",
            path="/models/Qwen3-235B" if kind == "model" else None,
            image="nvcr.io/nvidia/vllm:26.10-py3" if kind == "image" else None,
            started=STARTED + 600 * i,
            total_bytes=4 << 30,
            total_files=12,
        )
        d = home / TRANSFERS / tid
        put(d / "meta.json", json.dumps(meta.to_json()))
        put(d / "pid", f"{40000 + i}\n")
        put(d / "log", "sent 4,294,967,296 bytes  received 1,234 bytes\n")
        put(d / "rc", "0\n")
        put(d / "verified", json.dumps({"ok": True, "files": 12, "bytes": 4 << 30}) + "\n")

    record = Record(
        deployment="qwen3",
        engine="vllm",
        mode="ray",
        options=PlanOptions(engine="vllm", tp=2),
        plan_id="p-1",
        tp=2,
        pp=1,
        subnet="192.168.100.0/24",
        head_ip="192.168.100.11",
        port=8000,
        image="nvcr.io/nvidia/vllm:26.10-py3",
        nodes=["spark1", "spark2"],
        containers={"spark1": "sparktui-qwen3-0", "spark2": "sparktui-qwen3-1"},
        saved=STARTED,
    )
    put(home / DEPLOYMENTS / "qwen3.json", json.dumps(record.to_json(), sort_keys=True) + "\n")

    lines, size, n = [], 0, 0
    while size < journal_bytes:
        entry = Entry(
            node=f"spark{1 + n % 2}",
            started=STARTED + n,
            command=f"nvidia-smi --query-gpu=memory.used #{n}",
            exit_status=0,
            duration=0.05,
            cluster="lab",
        )
        line = json.dumps(asdict(entry)) + "\n"
        lines.append(line)
        size += len(line)
        n += 1
    put(home / ".local/state/sparktui/journal.jsonl", "".join(lines))
    return written


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python3 -m tests.userstate HOME")
    files = fill(Path(sys.argv[1]))
    print(f"{len(files)} files under {Path(sys.argv[1]) / '.local/state/sparktui'}")
