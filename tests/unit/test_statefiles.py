"""The state-file loader and the files it reads besides the journal (tests/unit/test_journal_file.py) and
the deployment record (test_deploy_parts.py): a transfer's meta.json and the image-release cache. A bad
file is one line naming it and the way out; the rest of the listing or plan goes on."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from sparktui.cli.sync import status_rows
from sparktui.core.state import statefile
from sparktui.core.plan.image import parse_inspection
from sparktui.core.state.statefile import StateFileError
from sparktui.core.transfers.state import UNREADABLE, TransferMeta, Unreadable, parse_listing
from sparktui.core.transfers.status import transfer_status

from .test_image_inspect import ID, M, out
from .test_transfer_state import META, listing


@dataclass
class Shape:
    name: str
    n: int = 0
    x: float = 0.0
    flag: bool = False
    maybe: str | None = None
    words: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)


@pytest.mark.parametrize(
    "data,words",
    [
        ({"name": 1}, "'name' is a number"),
        ({"n": "1", "name": "a"}, "'n' is a string"),
        ({"name": "a", "n": True}, "'n' is true/false"),
        ({"name": "a", "x": 10**400}, "'x' is a number"),
        ({"name": "a", "flag": 1}, "'flag'"),
        ({"name": "a", "words": ["a", 2]}, "'words' is a list"),
        ({"name": "a", "env": {"A": None}}, "'env' is an object"),
        ({"name": "a", "maybe": []}, "'maybe'"),
        ({}, "has no 'name'"),
        (["name"], "holds a list where an object was expected"),
    ],
)
def test_every_field_is_checked_against_its_annotation(data, words):
    with pytest.raises(StateFileError) as e:
        statefile.load(Shape, data, "F", "do X")
    assert e.value.line().startswith("F: ") and words in e.value.line() and e.value.line().endswith("; do X")


def test_a_good_object_loads_and_unknown_keys_are_ignored():
    s = statefile.load(Shape, {"name": "a", "n": 2, "x": 3, "maybe": None, "words": ["w"], "new": {}}, "F")
    assert (s.name, s.n, s.x, s.maybe, s.words) == ("a", 2, 3, None, ["w"])


@pytest.mark.parametrize(
    "text", ["NaN", "Infinity", "-Infinity", '{"a": 1e400}', '{"a": -1e999}', "[" * 100_000, "", "{", b"\xff\xfe\xfa"]
)
def test_json_with_non_finite_numbers_or_damage_is_refused(text):
    with pytest.raises(StateFileError) as e:
        statefile.parse_json(text, "F", "fix")
    assert "unreadable" in e.value.problem


def test_state_files_are_written_without_non_finite_numbers():
    with pytest.raises(ValueError):
        statefile.dumps({"a": float("inf")})


@pytest.mark.parametrize(
    "meta",
    [
        '["x"]',
        '"x"',
        "{}",
        "null",
        "{broken",
        json.dumps({**META.to_json(), "dest": ["n2", "n3"]}),
        json.dumps({**META.to_json(), "total_bytes": "big"}),
        json.dumps({**META.to_json(), "started": 1e400}).replace("Infinity", "1e400"),
    ],
)
def test_one_bad_transfer_is_named_and_the_others_are_listed(meta):
    good = listing(rc="0", alive="0", verified='{"ok": true, "message": "verified"}')
    bad = f"@@ model-n3-bad rc=0 alive=0 cancelled=0 now=2000\nmeta={meta}\nverified=\ncount=\ntail=\n"
    problems: list[Unreadable] = []
    recs = parse_listing(bad + good, "n1", problems)
    assert [r.id for r in recs] == [META.id] and recs[0].to_dict()["state"] == "done"
    [p] = problems
    assert p.id == "model-n3-bad" and p.problem.startswith(
        "n1:~/.local/state/sparktui/transfers/model-n3-bad/meta.json: "
    )
    assert "remove that transfer's directory" in p.problem and "\n" not in p.problem


@pytest.mark.parametrize("verified", ['["x"]', '"ok"', '{"ok": "yes"}', '{"ok": true, "message": 5}', "{no"])
def test_a_damaged_verification_reads_as_failed_not_as_a_crash(verified):
    [rec] = parse_listing(listing(rc="0", alive="0", verified=verified))
    assert rec.state == "failed" and rec.to_dict()["message"] == "unreadable verification record"


class _Node:
    connected = True

    def __init__(self, stdout):
        self.stdout = stdout

    async def run(self, cmd, timeout=None):
        from sparktui.core.remote.ssh import Result

        return Result(0, self.stdout, "", 0.0)


class _Cluster:
    def __init__(self, nodes):
        self.nodes = nodes

    def __getitem__(self, name):
        return self.nodes[name]


async def test_status_lists_an_unreadable_transfer_beside_the_good_ones():
    bad = '@@ image-n2-x rc= alive=0 cancelled=0 now=1\nmeta=["x"]\nverified=\ncount=\ntail=\n'
    items = await transfer_status(_Cluster({"n1": _Node(listing()), "n2": _Node(bad)}))
    assert [(t["id"], t["state"]) for t in items] == [(META.id, "running"), ("image-n2-x", UNREADABLE)]
    assert set(items[0]) <= set(items[1])  # every key a reader of the good ones uses
    json.dumps(items, allow_nan=False)
    rows = status_rows(items)
    assert "image-n2-x  on n2  unreadable" in rows[1] and "n2:~/.local/state/sparktui/transfers/image-n2-x" in rows[1]


def test_meta_from_json_refuses_wrong_types():
    with pytest.raises(StateFileError):
        TransferMeta.from_json({**META.to_json(), "kind": ["model"]})
    assert TransferMeta.from_json(META.to_json()) == META


@pytest.mark.parametrize(
    "cache", ['["0.11"]', '{"vllm": ["0.11"]}', '{"vllm": 0.11}', '{"ray": {"v": 1}}', '{"vllm": NaN}', "{broken"]
)
def test_a_damaged_release_cache_is_a_problem_naming_the_file(cache):
    info = parse_inspection("img", "spark1", out(f"{M}cached\n{cache}\n"))
    assert info.versions == {} and info.id == ID
    assert info.problem.startswith(f"spark1:~/.cache/sparktui/images/{ID.replace(':', '_')}.json: ")
    assert "remove it" in info.problem


@pytest.mark.parametrize("config", [{"Labels": ["a"]}, {"Entrypoint": "python3"}, {"Cmd": 5}, {"Labels": None}])
def test_an_image_config_of_odd_shapes_is_read_without_an_exception(config):
    text = f'{M}inspect\n{json.dumps(config)}\n{ID}\n{M}cached\n{{"vllm": "0.31.0"}}\n'
    info = parse_inspection("img", "n", text)
    assert info.version("vllm") == "0.31.0" and all(isinstance(w, str) for w in info.entrypoint + info.cmd)
