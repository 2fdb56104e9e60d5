"""rsync --info=progress2 parsing on output captured from rsync 3.x, and exit-code wording."""

from __future__ import annotations

import random

import pytest

from sparktui.core.transfers.rsync_progress import (
    ProgressParser,
    parse_log,
    parse_update,
    rsync_exit_message,
    split_update,
    telling_lines,
)

MB = 1024 * 1024

# rsync 3.5.0, five 30 MB files and one small one, --bwlimit=40m, stdout to a file.
FIVE_FILES = (
    "\r         32,768   0%    0.00kB/s    0:00:00  "
    "\r     31,457,280  19%   43.37MB/s    0:00:00 (xfr#1, to-chk=6/8)"
    "\r     43,319,296  27%   40.04MB/s    0:00:02  "
    "\r     62,914,560  39%   40.17MB/s    0:00:01 (xfr#2, to-chk=5/8)"
    "\r     86,573,056  55%   40.02MB/s    0:00:01  "
    "\r     94,371,840  59%   41.19MB/s    0:00:02 (xfr#3, to-chk=4/8)"
    "\r    125,829,120  79%   41.24MB/s    0:00:02 (xfr#4, to-chk=3/8)"
    "\r    131,235,840  83%   40.03MB/s    0:00:00  "
    "\r    157,286,400  99%   40.31MB/s    0:00:03 (xfr#5, to-chk=2/8)"
    "\r    157,287,424 100%   40.30MB/s    0:00:03 (xfr#6, to-chk=0/8)"
    "\r    157,287,424 100%   40.29MB/s    0:00:03 (xfr#6, to-chk=0/8)\n"
)

# 1,861 entries: the file list grows while copying (ir-chk), counts move back and forth, then to-chk.
GROWING_LIST = (
    "\r      3,145,728   5%  742.19MB/s    0:00:00 (xfr#1, ir-chk=1097/1129)"
    "\r      3,145,728   5%  742.19MB/s    0:00:00 (xfr#1, ir-chk=1037/1129)"
    "\r      3,147,728   5%  742.66MB/s    0:00:00 (xfr#2, ir-chk=1096/1129)"
    "\r     39,188,736  41%   32.58MB/s    0:00:01 (xfr#732, ir-chk=1037/1800)"
    "\r     41,000,000  42%   31.90MB/s    0:00:02  "
    "\r     42,334,464  43%   32.07MB/s    0:00:01 (xfr#733, to-chk=1097/1861)"
)

# destination on a 5 MB tmpfs: the error lands in the same \r segment as the first update
DISK_FULL = (
    "\r         32,768   0%    0.00kB/s    0:00:00  rsync: [receiver] write failed on "
    '"/models/m/f1": No space left on device (28)\n'
    "rsync error: error in file IO (code 11) at receiver.c(657) [receiver=3.5.0]\n\n"
    "rsync: [sender] write error: Broken pipe (32)\n"
)


def test_comma_grouped_update_in_flight_has_eta_not_elapsed():
    u = parse_update("     43,319,296  27%   40.04MB/s    0:00:02  ")
    assert (u.bytes, u.percent, u.eta, u.elapsed) == (43_319_296, 27, 2.0, None)
    assert u.rate == pytest.approx(40.04 * MB)
    assert u.files_done is None


def test_update_closing_a_file_has_elapsed_and_counts():
    u = parse_update("     62,914,560  39%   40.17MB/s    0:01:01 (xfr#2, to-chk=5/8)")
    assert (u.elapsed, u.eta) == (61.0, None)
    assert (u.files_done, u.files_left, u.files_total, u.listing) == (2, 5, 8, False)


@pytest.mark.parametrize(
    "text,rate",
    [
        ("      1,024   0%  512.00kB/s    0:00:10  ", 512 * 1024),
        ("  9,000,000,000  50%    1.25GB/s    0:00:07  ", 1.25 * 1024 * MB),
        ("     12,345   1%    3.10MB/s    0:00:01  ", 3.10 * MB),
    ],
)
def test_rate_units(text, rate):
    assert parse_update(text).rate == pytest.approx(rate)


def test_unknown_eta_and_long_hours():
    assert parse_update("     32,768   0%    0.00kB/s    ??:??:??  ").eta is None
    assert parse_update("  1,000   0%    0.01kB/s  123:04:05  ").eta == 123 * 3600 + 4 * 60 + 5


def test_other_locales_and_human_readable_sizes():
    u = parse_update("  1.234.567.890  12%   40,04MB/s    0:00:02  ")  # de_DE grouping and decimal comma
    assert u.bytes == 1_234_567_890 and u.rate == pytest.approx(40.04 * MB)
    assert parse_update("          1.50G  12%  400.00MB/s    0:00:02  ").bytes == int(1.5 * 1024**3)


@pytest.mark.parametrize(
    "line",
    [
        'rsync: [receiver] write failed on "/m/f": No space left on device (28)',
        "sending incremental file list",
        "     32,768   0%    0.00kB/s    0:00:0",  # cut in the middle
        "",
    ],
)
def test_non_updates(line):
    assert parse_update(line) is None


def test_whole_log_rises_to_100_and_ends_complete():
    updates, lines = parse_log(FIVE_FILES)
    assert lines == []
    assert len(updates) == FIVE_FILES.count("\r")
    assert [u.bytes for u in updates] == sorted(u.bytes for u in updates)
    assert updates[-1].percent == 100 and updates[-1].files_left == 0 and updates[-1].files_total == 8


def test_counts_carry_forward_to_updates_without_them():
    p = ProgressParser()
    updates, _ = p.feed(GROWING_LIST)
    in_flight = updates[4]
    assert (in_flight.files_done, in_flight.files_total, in_flight.listing) == (732, 1800, True)
    assert [u.files_left for u in updates[:3]] == [1097, 1037, 1096]  # back and forth, kept as told
    assert len(updates) == 5  # the last update is not terminated yet
    assert p.latest().listing is False and p.latest().files_total == 1861


def test_any_chunking_gives_the_same_updates():
    whole, _ = parse_log(FIVE_FILES + GROWING_LIST)
    rng = random.Random(7)
    for _ in range(30):
        p, got, text, i = ProgressParser(), [], FIVE_FILES + GROWING_LIST, 0
        while i < len(text):
            n = rng.randint(1, 90)
            got += p.feed(text[i : i + n])[0]
            i += n
        if p.pending() is not None:
            got.append(p.pending())
        assert [(u.bytes, u.files_done) for u in got] == [(u.bytes, u.files_done) for u in whole]


def test_unterminated_update_is_visible_before_the_next_one_arrives():
    p = ProgressParser()
    p.feed("\r     31,457,280  19%   43.37MB/s    0:00:00 (xfr#1, to-chk=6/8)\r     43,319,296  27%   40.04MB/s")
    assert p.latest().bytes == 31_457_280  # the cut one is not guessed at
    p.feed("    0:00:02  ")
    assert p.latest().bytes == 43_319_296 and p.latest().files_done == 1


def test_error_sharing_a_segment_with_an_update():
    u, rest = split_update("   32,768   0%    0.00kB/s    0:00:00  rsync: [receiver] write failed")
    assert u.bytes == 32_768 and rest == "rsync: [receiver] write failed"
    updates, lines = parse_log(DISK_FULL)
    assert len(updates) == 1
    assert telling_lines(lines)[0].endswith("No space left on device (28)")
    assert not any(ln.startswith("rsync error:") for ln in telling_lines(lines, limit=2))


def test_exit_codes_in_words():
    assert "partial" in rsync_exit_message(23) or "not copied" in rsync_exit_message(23)
    assert "ssh" in rsync_exit_message(255)
    assert "signal 9" in rsync_exit_message(137)
    assert "77" in rsync_exit_message(77)
    for code in (0, 1, 5, 10, 11, 12, 20, 23, 24, 30, 35, 255):
        assert rsync_exit_message(code) != rsync_exit_message(-5)


def test_counts_agree_with_the_verifier_and_a_known_rate_has_an_eta():
    from sparktui.core.transfers.rsync_progress import in_verifier_terms

    # 7 files in a directory: rsync's to-chk counts the directory too (8), its xfr# only what it sent
    closing = parse_update("     62,914,560  39%   40.17MB/s    0:00:01 (xfr#2, to-chk=5/8)")
    assert closing.eta is None  # the closing update carries the elapsed time, not an ETA
    # 20 s in: bytes left at the measured rate
    assert in_verifier_terms(closing, 160_000_000, 7, 20.0) == (
        2,
        7,
        pytest.approx((160_000_000 - 62_914_560) / closing.rate),
    )
    last = parse_update("    160,000,000 100%   40.00MB/s    0:00:04 (xfr#3, to-chk=0/8)")  # 4 were in place
    assert in_verifier_terms(last, 160_000_000, 7)[:2] == (7, 7)  # then "verified: 7 files"
    flying = parse_update("     43,319,296  27%   40.04MB/s    0:00:02  ")
    assert in_verifier_terms(flying, 160_000_000, 7, 2.0)[2] == pytest.approx((160_000_000 - 43_319_296) / flying.rate)
    assert in_verifier_terms(flying, 160_000_000, 7)[2] is None  # no time measured: no rate, no ETA


def test_the_eta_comes_from_a_measured_rate_not_the_first_sample():
    from sparktui.core.transfers.eta import eta
    from sparktui.core.transfers.rsync_progress import in_verifier_terms

    total = 67_110_376  # a 64 MiB model that copies in about 2 s
    # rsync's update after the first small file: 517 bytes at 46.88 kB/s, once read as 23 minutes left
    first = parse_update("            517   0%   46.88kB/s    0:00:00 (xfr#2, to-chk=2/5)")
    assert in_verifier_terms(first, total, 7, 1.2)[2] is None
    assert eta(total, 9_372_165, 8.9 * 2**20, 0.3) is None  # under a second: nothing measured yet
    assert eta(total, 9_372_165, 8.9 * 2**20, 1.1) == pytest.approx((total - 9_372_165) / (8.9 * 2**20))
    # a stale low rate cannot make it longer than the average pace since the start predicts
    assert eta(total, total // 2, 1_000.0, 1.0) == pytest.approx(1.0, rel=1e-3)
    assert eta(total, total, 0.0, 2.0) == 0.0 and eta(None, 5, 1.0, 2.0) is None and eta(total, None, 1.0, 2.0) is None
    # a huge copy gets an ETA once 256 MiB have moved, not only after 1 % of it
    assert eta(10 << 40, 300 << 20, 1 << 30, 3.0) == pytest.approx(((10 << 40) - (300 << 20)) / (1 << 30))
