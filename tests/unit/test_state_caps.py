"""State files read back from a node (the deployment record, a transfer's meta.json) are read capped:
a damaged or planted file far larger than a real one is refused, never pulled over SSH whole."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sparktui.core.state import statefile
from sparktui.core.deploy.record import MAX_BYTES, load_record
from sparktui.core.transfers.remote import list_states


async def test_a_record_larger_than_the_cap_is_refused_not_read_whole():
    asked = []

    class Node:
        name = "spark1"

        async def run(self, command, timeout=None, **_):
            asked.append(command)
            return SimpleNamespace(ok=True, stdout="{" + " " * MAX_BYTES + "}", stderr="", exit_status=0)

    with pytest.raises(statefile.StateFileError, match="larger than 1024 KiB"):
        await load_record(Node(), "lab")
    assert f"head -c {MAX_BYTES + 1} " in asked[0] and "cat " not in asked[0]


def test_a_transfer_listing_reads_each_file_capped():
    script = list_states()
    assert 'head -c 131072 "$d/meta.json" | head -n 1' in script
