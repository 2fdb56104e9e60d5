"""Leftovers named before a launch: stale sparktui containers, other deployments' running ones and the
page cache, read in the preflight's one look per node; and the semaphore trap failing the verdict."""

from __future__ import annotations

import json
import subprocess

import pytest

from sparktui.core.nodes.facts import Memory
from sparktui.core.preflight import NodeResult, Setting, Verdict
from sparktui.core.preflight.ipc import IpcLook, judge_ipc
from sparktui.core.preflight.leftovers import leftovers_of, parse_size, parse_stats
from sparktui.core.preflight.remote import look_command, parse_look
from sparktui.core.preflight.verdict import judge_ipc_risks

GiB = 1 << 30


def _row(name: str, deployment: str | None, state: str, engine: str = "vllm") -> str:
    labels = f"sparktui.deployment={deployment},sparktui.engine={engine}" if deployment else "other=1"
    return json.dumps(
        {"ID": name + "id", "Names": name, "Image": "img", "State": state, "Status": state, "Labels": labels}
    )


ROWS = [
    _row("old-r0", "old", "exited"),
    _row("mine-r1", "mine", "exited"),
    _row("mine-r0", "mine", "running"),
    _row("other-r0", "other", "running", "sglang"),
    _row("dead-r0", "gone", "dead"),
    _row("plain", None, "exited"),
]


@pytest.mark.parametrize(
    "text, want",
    [("1.5GiB", int(1.5 * GiB)), ("512MiB", 512 << 20), ("0B", 0), ("12.3MB", 12_300_000), ("", None), ("--", None)],
)
def test_docker_sizes_are_read_in_their_own_units(text, want):
    assert parse_size(text) == want


def test_stats_lines_give_the_memory_used_per_container():
    assert parse_stats(["other-r0 3.5GiB / 119.7GiB", "x -- / --"]) == {"other-r0": int(3.5 * GiB), "x": None}


def test_stopped_containers_of_other_deployments_are_stale_and_running_ones_only_named():
    lo = leftovers_of("spark2", "mine", ROWS, ["other-r0 3.5GiB / 119.7GiB"], None, unified=True)
    # this deployment's own stopped rank (mine-r1) is no question to ask: the launch or pivot clears it
    assert [(s.name, s.deployment, s.state) for s in lo.stale] == [
        ("old-r0", "old", "exited"),
        ("dead-r0", "gone", "dead"),
    ]
    assert [(h.name, h.deployment, h.memory) for h in lo.running] == [("other-r0", "other", int(3.5 * GiB))]
    text = "\n".join(lo.lines())
    assert "docker rm old-r0" in text and "other-r0 of deployment other (sglang) holds 3.5" in text
    assert "not stale" in text and "plain" not in text and "mine-r0" not in text
    assert lo.to_json()["remove"] == "docker rm old-r0 dead-r0"


def test_page_cache_is_named_on_unified_memory_only_and_only_when_it_matters():
    mem = Memory(total_bytes=128 * GiB, free_bytes=40 * GiB, cached_bytes=60 * GiB)
    lo = leftovers_of("spark2", "mine", [], [], mem, unified=True)
    assert lo.page_cache == 60 * GiB and "`sparktui drop-caches spark2` frees it" in lo.lines()[0]
    assert lo.to_json()["drop_caches"] == "sparktui drop-caches spark2"
    assert not leftovers_of("spark2", "mine", [], [], mem, unified=False).any
    small = Memory(total_bytes=128 * GiB, free_bytes=100 * GiB, cached_bytes=GiB // 2)
    assert not leftovers_of("spark2", "mine", [], [], small, unified=True).any


def test_the_whole_look_runs_under_sh_and_gives_leftovers_and_the_ipc_facts(tmp_path):
    """The real look script against a stub docker: the sections it prints parse into what the verdict reads."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (tmp_path / "rows").write_text("\n".join(ROWS) + "\n")
    docker = bindir / "docker"
    docker.write_text(f"""#!/bin/sh
case "$1 $2" in
  "image inspect") case "$4" in *User*) echo 1000:1000;; *) echo sha256:{"ab" * 32};; esac;;
  "ps -a") cat {tmp_path}/rows;;
  "ps -q") echo other-r0id;;
  "stats --no-stream") echo "other-r0 3.5GiB / 119.7GiB";;
  *) exit 1;;
esac
""")
    docker.chmod(0o755)
    (bindir / "loginctl").write_text("#!/bin/sh\necho yes\n")
    (bindir / "loginctl").chmod(0o755)
    out = subprocess.run(
        ["sh", "-c", look_command("img:1", root=str(tmp_path / "root"))],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": f"{bindir}:/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    look = parse_look(out.stdout, str(tmp_path / "root"))
    assert look.image_id and look.image_user == "1000:1000"
    assert look.containers is not None and len(look.containers) == len(ROWS)
    lo = leftovers_of("spark2", "mine", look.containers, look.stats, look.memory, unified=False)
    assert [s.name for s in lo.stale] == ["old-r0", "dead-r0"]
    assert lo.running[0].memory == int(3.5 * GiB)
    assert look.ipc is not None and look.ipc.live is True and look.ipc.systemd is False


def _verdict() -> Verdict:
    v = Verdict(Setting(addr="10.0.0.1", port=29501, subnet="10.0.0.0/24", image="img", timeout=30))
    v.nodes = {"spark1": NodeResult("spark1", 0, ok=True), "spark2": NodeResult("spark2", 1, ok=True)}
    return v


def test_the_semaphore_trap_fails_the_node_with_the_fix_before_the_weights_load():
    v = _verdict()
    look = IpcLook(uid=1000, user="alice", systemd=True)
    judge_ipc_risks(
        v,
        {
            "spark1": judge_ipc("spark1", look, None, None, "host"),
            "spark2": judge_ipc("spark2", look, "1000", None, "host"),
        },
    )
    assert not v.ok and v.root.node == "spark2" and v.root.kind == "ipc"
    assert "enable-linger alice" in v.fix and "RemoveIPC" in v.reason
    doc = v.to_json()
    assert doc["ipc_at_risk"] == ["spark2"]
    assert doc["nodes"][0]["ipc"]["at_risk"] is False and doc["nodes"][1]["ipc"]["container_user"] == "1000"


def test_the_verdict_carries_the_leftovers_in_its_summary_and_json():
    v = _verdict()
    v.leftovers["spark2"] = leftovers_of("spark2", "mine", ROWS, [], None, unified=False)
    assert v.stale == {"spark2": ["old-r0", "dead-r0"]}
    assert "left over: spark2: stale container old-r0" in v.summary()
    (doc,) = v.to_json()["leftovers"]
    assert doc["node"] == "spark2" and [s["name"] for s in doc["stale"]] == ["old-r0", "dead-r0"]
