"""Parsers of what nodes print (the probe, docker's formats, rsync progress, transfer state) on damaged
output: they keep what they can read and never raise (parse_poll alone refuses with ValueError)."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from sparktui.core.diagnosis import dockerts
from sparktui.core.nodes.probes import parse_docker_images, parse_docker_ps, parse_image_ids, parse_labels, parse_probe
from sparktui.core.transfers.model_sync import parse_file_list
from sparktui.core.transfers.rsync_progress import ProgressParser, parse_log
from sparktui.core.transfers.state import TransferMeta, parse_listing, parse_poll

from ..unit.test_transfer_progress import FIVE_FILES
from .strategies import budget, mutated

SAMPLES = Path(__file__).resolve().parents[1] / "unit" / "samples" / "probes"
sample = lambda name: (SAMPLES / name).read_text()  # noqa: E731


def _section(name: str, out: str, rc: int = 0, err: str = "") -> str:
    return f"@@sparktui:out {name}@@\n{out}\n@@sparktui:err {name}@@\n{err}\n@@sparktui:rc {name} {rc}@@\n"


PROBE = "".join(
    [
        _section("nvidia-smi", sample("nvidia-smi-gb10.csv")),
        _section("meminfo", sample("meminfo-spark.txt")),
        _section("df", sample("df-spark.txt")),
        _section("docker-version", "28.3.3"),
        _section("docker-images", sample("docker-images.jsonl")),
        _section("docker-ids", sample("docker-image-ids.txt")),
        _section("docker-ps", sample("docker-ps.jsonl")),
        _section("docker-runtimes", '{"nvidia":{},"runc":{}}'),
        _section("ip", sample("ip-addr-spark1.json")),
        _section("ib-sys", sample("ib-sys-spark.txt")),
        _section("ibdev2netdev", sample("ibdev2netdev-spark.txt")),
        _section("infiniband", ""),
        _section("user", "ubuntu"),
        _section("rsync", sample("rsync-version.txt")),
        "@@sparktui:done@@\n",
    ]
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
LISTING = (
    f"@@ {META.id} rc=0 alive=0 cancelled=0 now=2000\nmeta={json.dumps(META.to_json())}\n"
    f"verified=ok\ncount=6\ntail={FIVE_FILES[-80:]!s}\n"
)


@budget(150)
@given(mutated(PROBE, edits=10))
def test_probe_output_damaged(text):
    facts = parse_probe("n", "h", text)
    assert facts.name == "n" and isinstance(facts.notes, list)


@budget(100)
@given(st.text(max_size=3000))
def test_probe_output_random(text):
    parse_probe("n", "h", text)


@budget(150)
@given(
    mutated(sample("docker-ps.jsonl")), mutated(sample("docker-images.jsonl")), mutated(sample("docker-image-ids.txt"))
)
def test_docker_formats_damaged(ps, images, ids):
    notes: list[str] = []
    parse_docker_ps(ps, notes)
    parse_docker_images(images, notes)
    parse_image_ids(ids)
    parse_labels(ps)
    stamp, key, rest = dockerts.split(ids)
    assert (stamp is None) == (key is None)


@budget(150)
@given(mutated(FIVE_FILES, edits=10), st.lists(st.integers(1, 200), min_size=1, max_size=20))
def test_rsync_progress_damaged_in_any_chunks(text, cuts):
    parse_log(text)
    p = ProgressParser()
    i = 0
    for c in cuts:  # the same bytes arriving in pieces of any size
        p.feed(text[i : i + c])
        i += c
    p.feed(text[i:])
    p.pending()
    p.latest()


@budget(150)
@given(
    mutated(LISTING, edits=8),
    mutated("rc= alive=1 size=120 count= now=5 cancelled=0 n=20\n" + FIVE_FILES),
    mutated("links=0\nmark=\n123 a.safetensors\x00456 b.safetensors\x00"),
)
def test_transfer_state_damaged(listing, poll, files):
    for rec in parse_listing(listing):
        rec.state, rec.message, rec.progress, rec.to_dict()  # noqa: B018 - every view of a record must work
    try:
        parse_poll(poll)
    except ValueError:
        pass  # "not a poll answer" is its documented refusal
    parse_file_list(files)
