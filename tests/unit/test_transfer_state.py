"""State directories read back: listing records, poll headers, states and their wording."""

from __future__ import annotations

import json

import pytest

from sparktui.core.transfers.remote import RS
from sparktui.core.transfers.state import (
    CANCELLED,
    DONE,
    FAILED,
    LOST,
    RUNNING,
    UNVERIFIED,
    TransferMeta,
    new_id,
    parse_listing,
    parse_poll,
)

META = TransferMeta(
    id="model-n2-20250101T000000-abcd",
    kind="model",
    source="n1",
    dest="n2",
    addr="192.168.100.11",
    user="root",
    path="/models/m",
    started=1000.0,
    total_bytes=157_287_424,
    total_files=6,
)


def listing(rc="", alive="1", cancelled="0", verified="", tail="", meta=META, count=""):
    return (
        f"@@ {meta.id} rc={rc} alive={alive} cancelled={cancelled} now=2000\n"
        f"meta={json.dumps(meta.to_json())}\nverified={verified}\ncount={count}\ntail={tail}\n"
    )


def test_running_record_shows_the_last_update():
    tail = RS.join(
        [
            "",
            "     43,319,296  27%   40.04MB/s    0:00:02  ",
            "     62,914,560  39%   40.17MB/s    0:00:01 (xfr#2, to-chk=5/8)",
        ]
    )
    [rec] = parse_listing(listing(tail=tail))
    assert rec.state == RUNNING and rec.meta == META
    d = rec.to_dict()
    assert (d["bytes"], d["percent"], d["files_done"], d["total_bytes"]) == (62_914_560, 39.0, 2, 157_287_424)
    assert d["message"] is None


@pytest.mark.parametrize(
    "rc,alive,cancelled,verified,state",
    [
        ("", "1", "0", "", RUNNING),
        ("", "0", "0", "", LOST),
        ("", "0", "1", "", CANCELLED),
        ("20", "0", "1", "", CANCELLED),
        ("0", "0", "0", "", UNVERIFIED),
        ("0", "0", "0", '{"ok": true, "message": "verified: 6 files"}', DONE),
        ("0", "0", "0", '{"ok": false, "message": "n2 has 5 files"}', FAILED),
        ("11", "0", "0", "", FAILED),
    ],
)
def test_states(rc, alive, cancelled, verified, state):
    [rec] = parse_listing(listing(rc=rc, alive=alive, cancelled=cancelled, verified=verified))
    assert rec.state == state
    assert (rec.message() is None) == (state == RUNNING)


def test_failure_message_names_the_cause_from_the_log():
    tail = RS.join(
        [
            "",
            "         32,768   0%    0.00kB/s    0:00:00  rsync: [receiver] write failed on "
            '"/models/m/f1": No space left on device (28)',
            "rsync error: error in file IO (code 11) at receiver.c(657) [receiver=3.5.0]",
            "",
        ]
    )
    [rec] = parse_listing(listing(rc="11", alive="0", tail=tail))
    msg = rec.message()
    assert "rsync exit 11" in msg and "No space left on device" in msg
    assert msg.endswith("counts as model incomplete until a sync completes it (partial files are kept)")


def test_image_record_progress_from_the_byte_count():
    meta = TransferMeta(
        id="image-n2-x",
        kind="image",
        source="n1",
        dest="n2",
        addr="a",
        user="u",
        image="img:1",
        image_id="sha256:ab",
        total_bytes=1000,
        started=1.0,
    )
    [rec] = parse_listing(listing(meta=meta, count="250"))
    assert rec.to_dict()["bytes"] == 250 and rec.to_dict()["percent"] == 25.0


def test_broken_records_are_skipped_and_order_is_by_start():
    later = TransferMeta(**{**META.to_json(), "id": "model-n3-later", "dest": "n3", "started": 5000.0})
    text = listing(meta=later) + "@@ junk rc= alive=0\nmeta={not json\n" + listing()
    recs = parse_listing(text)
    assert [r.id for r in recs] == [META.id, "model-n3-later"]


def test_poll_header_and_data():
    p = parse_poll("rc= alive=1 size=120 count= now=5 cancelled=0 n=20\n\r  1,024  1%  1.00kB/s  0:00:01  ")
    assert (p.rc, p.alive, p.size, p.nbytes, p.count) == (None, True, 120, 20, None)
    assert p.data.startswith("\r")
    with pytest.raises(ValueError):
        parse_poll("sh: 1: syntax error\n")


def test_ids_are_unique_and_safe():
    ids = {new_id("model", "node 2/../x") for _ in range(50)}
    assert len(ids) > 1
    for i in ids:
        assert "/" not in i and " " not in i and i.startswith("model-node_2_.._x-")


def test_meta_ignores_unknown_keys_from_newer_versions():
    d = {**META.to_json(), "future_field": 1}
    assert TransferMeta.from_json(d) == META
