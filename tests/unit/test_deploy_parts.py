"""Deploy pieces without nodes: timestamps and dedupe, pivot options, the record, status rows."""

from __future__ import annotations

import json
import os
import shlex
import subprocess

import pytest
from calendar import timegm
from dataclasses import asdict

from sparktui.core.deploy import Deployment as Record, options_of, pivot_options, split_ts, summarize
from sparktui.core.deploy.containers import Found, remove_command
from sparktui.core.deploy.logstream import Deduper
from sparktui.core.deploy.orchestrator import exec_signature
from sparktui.core.deploy.record import load_record, save_command
from sparktui.core.nodes.facts import Container
from sparktui.core.state.journal import Journal
from sparktui.core.plan.plan import PlanOptions
from sparktui.core.remote.ssh import Result
from sparktui.core.state.statefile import StateFileError

from sparktui.core.config.config import Config, ModelConfig, NodeConfig
from sparktui.core.nodes.facts import DockerInfo, Gpu, ModelDir, NodeAddr, NodeFacts, Subnet
from sparktui.core.plan.plan import make_plan


def two_node_plan(engine: str, mode: str | None):
    cfg = Config(
        cluster="c",
        nodes=[NodeConfig("a", "10.0.0.1", role="head"), NodeConfig("b", "10.0.0.2")],
        model=ModelConfig("m", "/models/m"),
    )
    cfg.images.sglang = cfg.images.vllm = "img:1"
    facts = {
        n: NodeFacts(
            n,
            n,
            True,
            gpu=Gpu("GB10", 1),
            docker=DockerInfo("28", {"img:1": "sha256:" + "a" * 64}),
            model=ModelDir("/models/m", True, 1 << 30),
        )
        for n in ("a", "b")
    }
    fabric = Subnet(
        "192.168.100.0/24",
        {"a": NodeAddr("enp1s0f1np1", "192.168.100.10"), "b": NodeAddr("enP2p1s0f1np1", "192.168.100.11")},
    )
    plan = make_plan(cfg, facts, [fabric], PlanOptions(engine=engine, mode=mode))
    assert plan.ok, plan.errors
    return plan


def test_docker_timestamps_keep_every_nanosecond_and_any_zone():
    a = split_ts("2026-03-04T05:06:07.123456789Z hello world")
    assert (a.ts, a.text) == ("2026-03-04T05:06:07.123456789Z", "hello world")
    base = timegm((2026, 3, 4, 5, 6, 7, 0, 0, 0))
    assert a.key == base * 10**9 + 123456789  # unix nanoseconds, exact
    trimmed = split_ts("2026-03-04T05:06:07.1234Z x")  # older clients trim trailing zeros
    assert trimmed.key == base * 10**9 + 123400000
    zoned = split_ts("2026-03-04T07:06:07.5+02:00 y")
    assert zoned.key == base * 10**9 + 500000000
    plain = split_ts("Error response from daemon: No such container: x")
    assert plain.key is None and plain.text.startswith("Error")


def test_dedupe_skips_exactly_the_lines_already_seen_at_the_resume_instant():
    d = Deduper()
    first = [split_ts(f"2026-01-01T00:00:0{s}.000000001Z {t}") for s, t in ((1, "a"), (2, "b"), (2, "b"), (2, "c"))]
    assert [d.accept(x) for x in first] == [True] * 4
    assert d.last_ts == "2026-01-01T00:00:02.000000001Z"
    d.begin_pass()  # a resumed read starts at 00:00:02.000000001 and repeats b, b, c
    again = [split_ts(f"2026-01-01T00:00:02.000000001Z {t}") for t in ("b", "b", "c", "b")]
    later = split_ts("2026-01-01T00:00:03Z d")
    assert [d.accept(x) for x in again] == [False, False, False, True]  # the third b is new
    assert d.accept(later) and d.last_ts == "2026-01-01T00:00:03Z"


def test_pivot_options_keep_model_parallelism_and_network_and_drop_engine_specifics():
    opts = PlanOptions(
        engine="sglang",
        image="lmsysorg/sglang:x",
        model_path="/models/m",
        tp=None,
        rendezvous=None,
        extra_args=["--disable-cuda-graph"],
        env={"NCCL_DEBUG": "WARN"},
        mem_fraction=0.8,
        model_config={"big": 1},
    )
    rec = Record("d", "sglang", "native", opts, tp=2, pp=1, subnet="192.168.100.0/24", nodes=["a", "b"])
    new = pivot_options(opts, "vllm", rec)
    assert (new.engine, new.mode, new.image, new.extra_args) == ("vllm", None, None, ["--enforce-eager"])
    assert (new.tp, new.pp, new.rendezvous, new.nodes) == (2, 1, "192.168.100.0/24", ["a", "b"])
    assert (new.model_path, new.mem_fraction, new.env) == ("/models/m", 0.8, {"NCCL_DEBUG": "WARN"})
    assert new.model_config is None and opts.extra_args == ["--disable-cuda-graph"]  # the original is untouched
    explicit = pivot_options(PlanOptions(engine="vllm", rendezvous="enp1s0f1np1", tp=4), "sglang", rec)
    assert (explicit.rendezvous, explicit.tp) == ("enp1s0f1np1", 4)  # what the user said wins


def test_pivot_keeps_what_the_other_engine_understands_and_names_the_rest():
    from sparktui.core.deploy.options import pivot_notes

    opts = PlanOptions(
        engine="sglang",
        served_model_name="qwen",
        max_model_len=32768,
        mem_fraction=0.8,
        env={"HF_TOKEN": "hf_x"},
        extra_args=[
            "--api-key",
            "sk-1 2",
            "--disable-radix-cache",
            "--tp",
            "2",
            "--context-length=4096",
            "--tool-call-parser",
            "qwen25",
            "--random-seed",
            "7",
            "--enable-metrics",
        ],
    )
    new = pivot_options(opts, "vllm")
    assert new.extra_args == [
        "--api-key",
        "sk-1 2",
        "--max-model-len=4096",
        "--tool-call-parser",
        "qwen25",
        "--seed",
        "7",
        "--enable-auto-tool-choice",
    ]
    assert (new.served_model_name, new.max_model_len, new.mem_fraction, new.env) == (
        "qwen",
        32768,
        0.8,
        {"HF_TOKEN": "hf_x"},
    )
    notes = pivot_notes(opts, "vllm")
    assert notes[0] == "not carried over to vLLM (no equivalent): --disable-radix-cache, --enable-metrics"
    assert notes[1].startswith("carried over to vLLM: --api-key, --context-length as --max-model-len")
    assert "sk-1" not in " ".join(notes)
    back = pivot_options(new, "sglang")
    assert back.extra_args == [
        "--api-key",
        "sk-1 2",
        "--context-length=4096",
        "--tool-call-parser",
        "qwen25",
        "--random-seed",
        "7",
    ]


def test_pivot_to_sglang_keeps_a_key_vllm_read_from_its_environment():
    from sparktui.core.deploy.options import api_key_of

    opts = PlanOptions(engine="vllm", env={"VLLM_API_KEY": "sk-env-key"})
    assert api_key_of(opts) == "sk-env-key"
    new = pivot_options(opts, "sglang")
    assert new.extra_args == ["--api-key", "sk-env-key"] and api_key_of(new) == "sk-env-key"


def test_options_of_a_plan_reproduce_it():
    plan = two_node_plan("vllm", "ray")
    o = options_of(plan)
    assert (o.engine, o.mode, o.tp, o.rendezvous, o.nodes, o.port) == (
        "vllm",
        "ray",
        plan.tp,
        plan.subnet,
        [n.name for n in plan.nodes],
        plan.port,
    )


def test_exec_signature_names_the_served_process():
    plan = two_node_plan("vllm", "ray")
    execs = [s for s in plan.steps if s.kind == "exec"]
    # the non-carry-over list has no process to find: a resumed launch writes it again (the same file)
    assert [exec_signature(s) for s in execs] == [None, "vllm serve"]
    assert exec_signature(plan.steps[0]) is None


def test_the_record_is_written_by_a_plain_shell_and_read_back(tmp_path):
    plan = two_node_plan("sglang", None)
    opts = PlanOptions(engine="sglang", served_model_name='it\'s "quoted" $HOME `x`', env={"A": "b c"})
    rec = Record.from_plan(plan, opts)
    env = dict(os.environ, HOME=str(tmp_path))
    r = subprocess.run(["sh", "-c", save_command(rec)], env=env, capture_output=True, text=True, timeout=10)
    assert r.returncode == 0, r.stderr
    path = tmp_path / ".local/state/sparktui/deployments" / f"{plan.deployment}.json"
    back = Record.from_json(json.loads(path.read_text()))
    assert back.options.served_model_name == opts.served_model_name and back.options.env == {"A": "b c"}
    assert (back.engine, back.tp, back.subnet, back.plan_id) == ("sglang", plan.tp, plan.subnet, plan.plan_id)
    assert not list(path.parent.glob(".*.tmp"))


def test_the_record_keeps_its_secrets_private_and_the_journal_line_masked(tmp_path):
    plan = two_node_plan("sglang", None)
    key, token = "sk-live secret 'quoted'", "hf_abcdefgh12345678"
    opts = PlanOptions(engine="sglang", extra_args=["--api-key", key], env={"HF_TOKEN": token})
    rec = Record.from_plan(plan, opts)
    env = dict(os.environ, HOME=str(tmp_path))
    r = subprocess.run(["sh", "-c", save_command(rec)], env=env, capture_output=True, text=True, timeout=10)
    assert r.returncode == 0, r.stderr
    path = tmp_path / ".local/state/sparktui/deployments" / f"{plan.deployment}.json"
    assert path.stat().st_mode & 0o777 == 0o600 and path.parent.stat().st_mode & 0o777 == 0o700
    back = Record.from_json(json.loads(path.read_text()))
    assert back.options.extra_args == ["--api-key", key]  # a pivot from another process keeps the key
    shown = save_command(rec, masked=True)
    assert key not in shown and token not in shown and "sk-live" not in shown and "hf_" not in shown
    data = json.loads(next(w for w in shlex.split(shown) if w.startswith("{")))  # still valid JSON
    assert data["options"]["extra_args"] == ["--api-key", "****"] and data["options"]["env"] == {"HF_TOKEN": "****"}
    j = Journal()
    e = j.start("n1", shown)
    assert json.loads(json.dumps(asdict(e)))["command"] == shown


class _RecordNode:
    name = "spark1"

    def __init__(self, r):
        self.r = r

    async def run(self, cmd, timeout=None, input=None):
        return self.r


async def test_load_record_none_when_missing_and_a_broken_one_is_named_not_hidden():
    assert await load_record(_RecordNode(Result(1, "", "cat: x: No such file or directory", 0.0)), "x") is None
    assert await load_record(_RecordNode(Result(3, "", "", 0.0)), "x") is None  # the head's test: no file
    for out, err, rc, words in [
        ("{not json", "", 0, "unreadable"),
        ("", "", 0, "is empty"),
        ("  \n", "", 0, "is empty"),
        ("", "cat: x: Is a directory", 1, "Is a directory"),
        ('["x"]', "", 0, "a list"),
    ]:
        with pytest.raises(StateFileError) as e:
            await load_record(_RecordNode(Result(rc, out, err, 0.0)), "x")
        line = e.value.line()
        assert "spark1:~/.local/state/sparktui/deployments/x.json" in line and words in line and "\n" not in line
        assert "launch the deployment again" in line


@pytest.mark.parametrize(
    "change,name",
    [
        ({"options": "x"}, "options"),
        ({"options": {"env": ["A=1"]}}, "env"),
        ({"tp": "two"}, "tp"),
        ({"nodes": "spark1"}, "nodes"),
        ({"containers": {"spark1": 3}}, "containers"),
        ({"options": {"tp": True}}, "tp"),
        ({"engine": None}, "engine"),
        ({"options": {"extra_args": [1]}}, "extra_args"),
    ],
)
async def test_a_record_of_the_wrong_types_is_one_error_naming_the_field(change, name):
    d = Record.from_plan(two_node_plan("sglang", None), PlanOptions(engine="sglang")).to_json()
    for k, v in change.items():
        d[k] = {**d[k], **v} if isinstance(v, dict) and isinstance(d.get(k), dict) and k == "options" else v
    with pytest.raises(StateFileError) as e:
        await load_record(_RecordNode(Result(0, json.dumps(d), "", 0.0)), "x")
    assert repr(name) in e.value.line()


def test_remove_command_passes_the_label_filter_as_one_word(tmp_path):
    seen = tmp_path / "argv"
    docker = tmp_path / "docker"
    docker.write_text(f'#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done >> {seen}\n')
    docker.chmod(0o755)
    env = dict(os.environ, PATH=f"{tmp_path}:{os.environ['PATH']}")
    r = subprocess.run(
        ["sh", "-c", remove_command("lab; touch pwned", grace=3)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert r.returncode == 0, r.stderr
    assert seen.read_text().splitlines() == [
        "ps",
        "-aq",
        "--no-trunc",
        "--filter",
        "label=sparktui.deployment=lab; touch pwned",
    ]
    assert not (tmp_path / "pwned").exists()


def test_status_rows_group_containers_by_deployment():
    def c(name, dep, state, rank):
        return Container(
            name,
            name,
            "img",
            state,
            "Up" if state == "running" else "Exited (0)",
            {"sparktui.deployment": dep, "sparktui.engine": "vllm", "sparktui.rank": rank},
        )

    rows = summarize(
        {
            "a": Found("a", [c("x0", "d1", "running", "0"), c("y0", "d2", "exited", "0")]),
            "b": Found("b", [c("x1", "d1", "exited", "1")]),
            "c": Found("c", [], "c: connection refused"),
        }
    )
    by = {r.get("name", r.get("node")): r for r in rows}
    assert by["d1"]["state"] == "partial" and len(by["d1"]["containers"]) == 2
    assert by["d2"]["state"] == "exited"
    assert "connection refused" in by["c"]["summary"]


def test_log_lines_that_echo_a_secret_are_masked_before_anyone_sees_them():
    plan = two_node_plan("sglang", None)
    raw = "2026-01-01T10:00:00.000000001Z server_args=ServerArgs(api_key='short', port=30000)"
    assert split_ts(raw).text == "server_args=ServerArgs(api_key='****', port=30000)"
    make_plan_key = "sk-echoed-by-the-engine-1"
    opts = PlanOptions(engine="sglang", extra_args=["--api-key", make_plan_key])
    from .test_plan import cluster

    config, facts, subnets = cluster(2)
    make_plan(config, facts, subnets, opts)  # the plan learns the value, so any echo of it is hidden
    line = split_ts(f"2026-01-01T10:00:01Z request from key {make_plan_key} accepted")
    assert make_plan_key not in line.text and line.ts == "2026-01-01T10:00:01Z"
    assert plan.ok


def test_reading_a_record_back_teaches_this_process_its_secrets():
    from sparktui.core.config import secrets

    secrets.forget()
    opts = PlanOptions(
        engine="vllm",
        extra_args=["--api-key", "sk-from-the-record", "--hf-token=hf_from_record"],
        env={"HF_TOKEN": "hf_env_from_record", "NCCL_DEBUG": "INFO"},
    )
    rec = Record.from_json(json.loads(json.dumps(Record.from_plan(two_node_plan("vllm", "ray"), opts).to_json())))
    assert rec.options.extra_args[1] == "sk-from-the-record"
    line = split_ts("2026-01-01T10:00:00Z echo sk-from-the-record hf_from_record hf_env_from_record INFO").text
    assert line == "echo **** **** **** INFO"
    secrets.forget()


def test_the_hang_hint_knows_what_the_launched_plan_set_on_every_node():
    from sparktui.core.deploy.orchestrator import Deployer
    from sparktui.core.state.deployment import Deployment
    from sparktui.core.engines import get_engine
    from sparktui.core.state.events import EventBus

    from .test_plan import make_config, plan_for

    plan, _ = plan_for(2, engine="sglang")
    d = Deployer(None, make_config(2), EventBus(), planner=lambda o: None)
    d.plan = plan
    cur = Deployment("sparks", "sglang", plan.mode, None, plan_id=plan.plan_id, port=plan.port, head="spark1")
    env = d._env_everywhere(cur)
    assert {"SGLANG_HOST_IP", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"} <= env
    assert "already set" in get_engine("sglang").hang_hint(frozenset(env))
    # a reattached deployment of another plan: nothing known, the plain hint
    assert (
        d._env_everywhere(
            Deployment("sparks", "sglang", plan.mode, None, plan_id="other", port=plan.port, head="spark1")
        )
        == set()
    )
