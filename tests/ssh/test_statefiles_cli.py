"""A damaged state file on a node, as a user meets it: `pivot`, `redeploy`, `sync status` and `status` say in
one line which file and what to do, exit 1 at most, and the rest of the command goes on (no traceback)."""

from __future__ import annotations

import json

import pytest

from .test_deploy_cli import ours, sparktui, write_config
from .test_deploy_fakes import fake_cluster  # noqa: F401 (fixture)

RECORD = ".local/state/sparktui/deployments/lab.json"
TRANSFERS = ".local/state/sparktui/transfers"


def _one_line_error(rc: int, err: str, *words: str) -> None:
    assert 1 <= rc <= 1 and "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    hit = [ln for ln in lines if all(w in ln for w in words)]
    assert hit, err


@pytest.mark.parametrize(
    "content,words",
    [
        ('{"deployment": "lab", "engine": "sglang", "mode": "native", "options": "x"}', "'options' is a string"),
        ('{"deployment": "lab", "engine": "sglang", "mode": "native", "options": {"env": ["A=1"]}}', "'env' is a list"),
        ('{"deployment": "lab", "engine": "sglang", "mode": "native", "tp": "two", "options": {}}', "'tp' is a string"),
        ("garbage{", "unreadable"),
        ("", "is empty"),
    ],
)
async def test_a_damaged_record_is_named_by_pivot_and_redeploy(fake_cluster, tmp_path, content, words):
    fc = await fake_cluster(2)
    conf = write_config(fc.config, tmp_path / "c.yaml")
    fc["n1"].add_container("sparktui-lab-sglang-0", ours("lab", 0))
    rec = tmp_path / "n1" / RECORD
    rec.parent.mkdir(parents=True)
    rec.write_text(content)
    for cmd in ("pivot", "redeploy"):
        rc, out, err = await sparktui(cmd, "--config", str(conf), "--yes")
        _one_line_error(rc, err, f"n1:~/{RECORD}", words, "launch the deployment again")
        assert "no record of deployment" not in err
    rc, out, err = await sparktui("pivot", "--config", str(conf), "--yes", "--json")
    doc = json.loads(out)
    assert rc == 1 and words in json.dumps(doc) and {"error", "fix"} <= set(doc)
    assert doc["fix"] == "launch the deployment again to rewrite it (or remove the file)", doc


async def test_a_damaged_transfer_is_listed_as_such_and_the_others_still_are(fake_cluster, tmp_path):
    fc = await fake_cluster(2)
    conf = write_config(fc.config, tmp_path / "c.yaml")
    good = tmp_path / "n1" / TRANSFERS / "model-n2-20250101T000000-abcd"
    good.mkdir(parents=True)
    (good / "meta.json").write_text(
        json.dumps(
            {
                "id": good.name,
                "kind": "model",
                "source": "n1",
                "dest": "n2",
                "addr": "10.0.0.2",
                "user": "root",
                "path": "/models/tiny",
                "started": 1000.0,
            }
        )
        + "\n"
    )
    (good / "rc").write_text("0\n")
    (good / "verified").write_text('{"ok": true, "message": "verified: 3 files"}\n')
    for name, meta in [
        ("model-n2-20250102T000000-dead", '["x"]'),
        (
            "image-n2-20250103T000000-beef",
            '{"id": ["x"], "kind": "image", "source": "n1", "dest": "n2", "addr": "a", "user": "u"}',
        ),
    ]:
        bad = tmp_path / "n1" / TRANSFERS / name
        bad.mkdir(parents=True)
        (bad / "meta.json").write_text(meta + "\n")

    rc, out, err = await sparktui("--config", str(conf), "sync", "status")
    assert rc == 1 and "Traceback" not in err, err
    assert "model-n2-20250101T000000-abcd" in out and "verified: 3 files" in out
    assert f"n1:~/{TRANSFERS}/model-n2-20250102T000000-dead/meta.json" in out and "unreadable" in out
    assert "image-n2-20250103T000000-beef" in out and "'id' is a list" in out

    rc, out, err = await sparktui("status", "--config", str(conf), "--json")
    assert "Traceback" not in err, err
    states = {t["id"]: t["state"] for t in json.loads(out)["transfers"]}
    assert states == {
        "model-n2-20250101T000000-abcd": "done",
        "model-n2-20250102T000000-dead": "unreadable",
        "image-n2-20250103T000000-beef": "unreadable",
    }


async def test_no_record_at_all_still_reads_as_no_record(fake_cluster, tmp_path):
    fc = await fake_cluster(2)
    conf = write_config(fc.config, tmp_path / "c.yaml")
    fc["n1"].add_container("sparktui-lab-sglang-0", ours("lab", 0))
    rc, out, err = await sparktui("pivot", "--config", str(conf), "--yes")
    _one_line_error(rc, err, "no record of deployment lab", "launch it first")
    assert "cannot be read" not in err
