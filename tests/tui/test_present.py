"""Presentation functions: facts and events in, text out."""

from __future__ import annotations

import dataclasses

from sparktui.core.diagnosis.diagnose import Milestone, Problem
from sparktui.core.state.events import TransferProgress
from sparktui.core.nodes.facts import Container, ModelDir, NodeFacts
from sparktui.core.nodes.inventory import analyse
from sparktui.core.state.journal import Entry
from sparktui.tui.present import fmt
from sparktui.tui.present.deploy import hang_notice, milestone_label, milestone_style, problem_lines, timeline
from sparktui.tui.present.journal import entry_cells
from sparktui.tui.present.nodes import Link, fabric_subnet, memory_used, node_card, status
from sparktui.tui.present.transfers import fraction, summary, transfer_lines

from .samples import spark_config, spark_facts


def test_sizes_rates_durations():
    assert fmt.size(None) == "?"
    assert fmt.size(512) == "512 B"
    assert fmt.size(1536) == "1.5 KiB"
    assert fmt.size(118 * 1024**3) == "118.0 GiB"
    assert fmt.rate(412_000_000) == "412.0 MB/s"
    assert fmt.rate(None) == "—"
    assert fmt.duration(45) == "45s"
    assert fmt.duration(125) == "2m05s"
    assert fmt.duration(3720) == "1h02m"
    assert fmt.duration(None) == "—"


def test_bar_fills_in_eighths_and_clamps():
    assert fmt.bar(0.5, 8) == "████░░░░"
    assert fmt.bar(1.0, 4) == "████"
    assert fmt.bar(2.0, 4) == "████"  # over 100 % never overflows the cell budget
    assert fmt.bar(-1, 4) == "░░░░"
    assert fmt.bar(0.25, 2) == "▌░"  # half of the first of two cells
    assert fmt.bar(1 / 16, 2) == "▏░"  # an eighth of it
    assert fmt.bar(None, 3) == "···"
    for f in (0, 0.13, 0.5, 0.99, 1):
        assert len(fmt.bar(f, 10)) == 10


def test_ellipsize():
    assert fmt.ellipsize("abcdef", 4) == "abc…"
    assert fmt.ellipsize("abc", 4) == "abc"


def test_status_words():
    assert status(None, Link(False, "no answer within 10 s"))[2] == "no answer within 10 s"
    assert status(None, Link())[2] == "connecting…"
    assert status(None, Link(True))[2].startswith("connected")
    down = NodeFacts("a", "h", reachable=False, error="login refused")
    assert status(down, Link(True))[:1] == ("✗",)
    assert status(down, Link(True))[2] == "login refused"


def test_card_marks_fabric_and_management_and_hides_idle_ports():
    cfg = spark_config()
    facts = spark_facts()
    inv = analyse(cfg, facts)
    fabric = fabric_subnet(inv.subnets)
    assert fabric == "192.168.100.0/24"  # the best RDMA subnet, not the management one
    text = node_card("spark1", "192.168.1.101", "head", facts["spark1"], Link(True), inv.subnets, fabric).plain
    lines = text.splitlines()
    fab = next(ln for ln in lines if "enp1s0f1np1" in ln)
    assert "◆ fabric" in fab and "192.168.100.10/24" in fab and "rocep1s0f1" in fab
    assert "⚠ mgmt" in next(ln for ln in lines if "enP7s7" in ln)
    assert not any("enp1s0f0np0" in ln for ln in lines)  # down, no address: counted only
    assert any("idle interface" in ln for ln in lines)
    # choosing the twin subnet moves the fabric mark there
    text2 = node_card("spark1", "h", "head", facts["spark1"], Link(True), inv.subnets, "192.168.101.0/24").plain
    assert "◆ fabric" in next(ln for ln in text2.splitlines() if "enP2p1s0f1np1" in ln)
    assert "◆ fabric" not in next(ln for ln in text2.splitlines() if "enp1s0f1np1" in ln)


def test_card_shows_the_port_with_both_halves_and_an_idle_one_as_what_it_costs():
    cfg = spark_config()
    facts = spark_facts()
    inv = analyse(cfg, facts)
    text = node_card("spark1", "h", "head", facts["spark1"], Link(True), inv.subnets, "192.168.100.0/24").plain
    assert not any("PORT" in ln for ln in text.splitlines())  # both halves in use: each on its own line
    assert "MTU" not in next(ln for ln in text.splitlines() if "enP2p1s0f1np1" in ln)  # 9000: nothing to say
    twin = next(i for i in facts["spark1"].interfaces if i.name == "enP2p1s0f1np1")
    twin.up, twin.ipv4, twin.state, twin.mtu = False, [], "link down", 1500
    next(i for i in facts["spark1"].interfaces if i.name == "enp1s0f1np1").mtu = 1500
    text = node_card(
        "spark1", "h", "head", facts["spark1"], Link(True), analyse(cfg, facts).subnets, "192.168.100.0/24"
    ).plain
    port = next(ln for ln in text.splitlines() if "PORT" in ln)
    assert "p1s0f1np1 enP2p1s0f1np1 (roceP2p1s0f1) link down, no address MTU 1500" in port
    assert "idle half: about half the link" in port
    assert sum("enP2p1s0f1np1" in ln for ln in text.splitlines()) == 1  # on its port's line only
    assert "MTU 1500" in next(ln for ln in text.splitlines() if "enp1s0f1np1" in ln and "PORT" not in ln)


def test_card_memory_and_containers():
    f = spark_facts()["spark1"]
    used, total = memory_used(f)
    assert total == f.memory.total_bytes and used == f.memory.total_bytes - f.memory.available_bytes
    f = dataclasses.replace(
        f,
        containers=[
            Container("1", "sparktui-x-sglang-0", "img", "running", "Up 2 hours"),
            Container("2", "sparktui-x-sglang-1", "img", "exited", "Exited (137)"),
        ],
    )
    text = node_card("spark1", "h", "head", f, Link(True), [], None).plain
    assert "sparktui-x-sglang-0 running (Up 2 hours)" in text
    assert "sparktui-x-sglang-1 exited (Exited (137))" in text
    assert "MEM" in text and "GB10" in text


def test_card_says_model_incomplete_for_an_unverified_copy():
    f = spark_facts()["spark1"]
    f = dataclasses.replace(
        f,
        model=ModelDir(
            "/models/m", present=False, bytes=3 << 30, files=2, incomplete="copy x from spark2 started today"
        ),
    )
    text = node_card("spark1", "h", "head", f, Link(True), [], None).plain
    assert "model incomplete (3.0 GiB)" in text and "model 3.0 GiB" not in text


def test_unreachable_card_is_one_line():
    f = NodeFacts("b", "10.0.0.2", reachable=False, error="connection refused")
    text = node_card("b", "10.0.0.2", "worker", f, Link(False, "connection refused"), [], None).plain
    assert text.count("\n") == 0 and "connection refused" in text


def _tp(**kw) -> TransferProgress:
    base = dict(id="t", kind="model", source="spark1", dest="spark2", state="running")
    base.update(kw)
    return TransferProgress(**base)


def test_transfer_lines():
    t = _tp(bytes=50, total_bytes=200, rate=430e6, eta=130)
    assert fraction(t) == 0.25
    text = transfer_lines(t, 78).plain
    first = text.splitlines()[0]
    assert "spark1→spark2" in first and " 25.0%" in first and "430.0 MB/s" in first and "ETA 2m10s" in first
    assert len(first) <= 78
    failed = transfer_lines(_tp(state="failed", message="rsync: no space left on device (exit 11)")).plain
    assert failed.splitlines()[-1].strip() == "rsync: no space left on device (exit 11)"
    assert "ETA" not in failed
    assert fraction(_tp(state="done")) == 1.0
    assert fraction(_tp()) is None


def test_transfer_summary():
    ts = [_tp(), _tp(state="done"), _tp(state="done"), _tp(state="failed")]
    assert summary(ts) == "1 running, 2 done, 1 failed"
    assert summary([]) == "no transfers"


def _m(kind, node="spark1", **data):
    return Milestone(kind, 1, node, 0.0, data)


def test_timeline_keeps_the_latest_of_each_step():
    ms = [
        _m("container_started"),
        _m("dist_init_begin"),
        _m("weights_loading", percent=12),
        _m("weights_loading", percent=62),
        _m("container_started", node="spark2"),
    ]
    lines = timeline(ms, ["spark1", "spark2"]).plain.splitlines()
    assert "weights 62%" in lines[0] and "weights 12%" not in lines[0]
    assert "dist init…" in lines[0]
    assert lines[1].startswith("spark2") and "started" in lines[1]
    done = timeline(ms + [_m("dist_init_end")], ["spark1"]).plain
    assert "dist init ✓" in done and "dist init…" not in done  # the end replaces the begin
    assert timeline([], ["a"]).plain.strip().endswith("waiting")


def test_a_ray_worker_row_follows_the_head_to_serving():
    """Under Ray the worker's own log stops at `ray start`; its ranks log on the head, so its row must not
    read "started › ray up" while the deployment serves."""
    worker = [_m("container_started", node="spark2"), _m("ray_started", node="spark2")]
    head = [_m("container_started"), _m("ray_started"), _m("ray_connected"), _m("dist_init_end")]
    loading = timeline(worker + head, ["spark1", "spark2"]).plain.splitlines()
    assert loading[1] == "spark2 started › ray up › its ranks log on spark1 (Ray worker)", loading
    ready = timeline(worker + head + [_m("ready")], ["spark1", "spark2"]).plain.splitlines()
    assert ready[1] == "spark2 started › ray up › serving (Ray worker: its ranks log on spark1)", ready
    assert ready[0].endswith("READY") and "Ray worker" not in ready[0]
    # no Ray, or Ray not yet past its own start: nothing is said on anyone's behalf
    native = timeline(
        [_m("container_started", node="spark2"), _m("container_started"), _m("ready")], ["spark1", "spark2"]
    ).plain
    assert "Ray worker" not in native and "serving" not in native
    early = timeline(worker + [_m("ray_started")], ["spark1", "spark2"]).plain
    assert "Ray worker" not in early


def test_tcp_transport_is_a_warning():
    assert milestone_style(_m("transport", transport="socket")) == "$warning"
    assert milestone_style(_m("transport", transport="rdma")) != "$warning"
    gloo = _m("transport", transport="gloo", backend="gloo")  # a CPU build: gloo is its only path
    assert milestone_label(gloo) == "gloo" and milestone_style(gloo) != "$warning"


def test_live_transport_per_node_in_the_timeline_flagged_against_the_plan():
    ok = _m("nccl_net", net="ib", label="NET/IB (rocep1s0f1, roceP2p1s0f1, GDR)", flags=[])
    short = _m(
        "nccl_net",
        node="spark2",
        net="ib",
        label="NET/IB (rocep1s0f1)",
        flags=["spark2: NCCL uses rocep1s0f1 of the planned rocep1s0f1, roceP2p1s0f1: roceP2p1s0f1 idle"],
    )
    lines = timeline([_m("dist_init_end"), ok, short], ["spark1", "spark2"]).plain.splitlines()
    assert lines[0].endswith("dist init ✓ › NET/IB (rocep1s0f1, roceP2p1s0f1, GDR)")
    assert lines[1].endswith("NET/IB (rocep1s0f1) ⚠")
    assert milestone_style(short) == "$warning" and milestone_style(ok) != "$warning"
    assert milestone_style(_m("nccl_net", net="socket", label="NET/Socket (eth0)", flags=[])) == "$warning"


def test_problem_and_hang_text():
    p = Problem(
        "rendezvous_hang", 4, "distributed init stalled on spark1", "set SGLANG_HOST_IP.", "spark1", provisional=True
    )
    text = problem_lines(p).plain
    assert "spark1: suspected rendezvous hang" in text and "fix: set SGLANG_HOST_IP." in text
    notice = hang_notice(p, "ctrl+p")
    assert "on spark1" in notice and notice.endswith(". Set SGLANG_HOST_IP.")
    assert notice.startswith("Distributed init hung on spark1. Press ctrl+p to pivot.")  # first: a short toast keeps it


def test_hang_notice_starts_each_sentence_with_a_capital():
    p = Problem(
        "rendezvous_hang",
        4,
        "distributed init stalled",
        "the plan already set SGLANG_HOST_IP. ",
        "spark1",
        provisional=True,
    )
    assert (
        hang_notice(p, "p") == "Distributed init hung on spark1. Press p to pivot. The plan already set SGLANG_HOST_IP."
    )


def test_journal_cells():
    ok = entry_cells(Entry("spark1", 0.0, "docker ps\n  -a", 0, 0.25))
    assert ok[1] == "spark1" and ok[2].plain == "✓ 0" and ok[3] == "250ms" and ok[4] == "docker ps -a"
    bad = entry_cells(Entry("spark2", 0.0, "rsync x", 255, 12.0, "link down"))
    assert bad[2].plain == "✗ 255" and bad[3] == "12s" and bad[4].endswith("[link down]")
    assert entry_cells(Entry("a", 0.0, "sleep 9"))[2].plain == "…"


def test_transfer_lines_name_the_streams_and_the_cipher():
    rows = [
        {"n": 0, "bytes": 40, "percent": 41, "rate": 120.3e6, "done": False},
        {"n": 1, "bytes": 38, "percent": 38, "rate": 118e6, "done": False},
        {"n": 2, "bytes": 50, "percent": 100, "rate": None, "done": True, "rc": 0},
    ]
    t = _tp(bytes=128, total_bytes=300, rate=238.3e6, streams=rows, cipher="aes128-gcm@openssh.com")
    line = transfer_lines(t, 120).plain.splitlines()[2].strip()
    assert line == "3 streams: #0 41% 120.3 MB/s · #1 38% 118.0 MB/s · #2 done — ssh aes128-gcm"
    short = transfer_lines(t, 40).plain.splitlines()[2]
    assert len(short) <= 40 and short.rstrip().endswith("…")
    done = transfer_lines(_tp(state="done", streams=rows, cipher="chacha20-poly1305@openssh.com")).plain
    assert "3 streams — ssh chacha20-poly1305" in done
    one = transfer_lines(_tp(bytes=5, total_bytes=10)).plain  # a single stream, cipher unknown: no such line
    assert len(one.splitlines()) == 2


def test_card_says_the_fabric_layout_all_nodes_describe():
    f = spark_facts()["spark1"]
    text = node_card("spark1", "h", "head", f, Link(True), [], None, layout="ring, per-half subnets").plain
    assert "FABRIC ring, per-half subnets" in text
    assert "FABRIC" not in node_card("spark1", "h", "head", f, Link(True), [], None).plain


def test_card_tells_the_bootstrap_interface_from_the_data_path():
    f = spark_facts()["spark1"]
    words = "bootstrap enP7s7 (management), data RDMA rocep1s0f1,roceP2p1s0f1"
    text = node_card("spark1", "h", "head", f, Link(True), [], None, paths=words).plain
    assert f"PATHS {words}" in text
    assert "PATHS" not in node_card("spark1", "h", "head", f, Link(True), [], None).plain
