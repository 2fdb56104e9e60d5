"""The check program's TCP path, run as it runs in a container (`python3 -` fed the file on stdin), with
each rank a local process on its own loopback address (127.0.0.2, 127.0.0.3, ...)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import sparktui.core.preflight.check_program as pc
from sparktui.core.engines import host_ip_vars
from sparktui.core.preflight.remote import program_text

PROGRAM = program_text().encode()  # as sent to a node: the registry's host-IP variables written in
PROGRAM_FILE = Path(pc.__file__)  # the program's file alone, as a node holds it


def free_port(host: str = "127.0.0.2") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def start(
    rank: int,
    world: int,
    addr: str,
    port: int,
    bind: str = "",
    timeout: float = 10,
    env: dict | None = None,
    extra: tuple = (),
) -> subprocess.Popen:
    argv = [
        sys.executable,
        "-",
        "--rank",
        str(rank),
        "--world",
        str(world),
        "--addr",
        addr,
        "--port",
        str(port),
        "--timeout",
        str(timeout),
        "--mode",
        "tcp",
        "--tcp-mb",
        "1",
        *extra,
    ]
    if bind:
        argv += ["--bind", bind]
    e = {k: v for k, v in os.environ.items() if k not in pc.IFNAME_VARS + host_ip_vars()}
    e.update(env or {})
    with tempfile.TemporaryFile() as f:  # a file, as `python3 -` reads it whole before running
        f.write(PROGRAM)
        f.seek(0)
        return subprocess.Popen(argv, stdin=f, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e)


def result(p: subprocess.Popen, timeout: float = 30) -> dict:
    out, err = p.communicate(timeout=timeout)
    lines = [ln for ln in out.decode().splitlines() if ln.startswith(pc.MARK)]
    assert len(lines) == 1, (out, err)
    data = json.loads(lines[0][len(pc.MARK) :])
    assert p.returncode == (0 if data["ok"] else 1)
    return data


def test_two_ranks_meet_and_exchange_on_their_own_addresses():
    port = free_port()
    procs = [start(0, 2, "127.0.0.2", port), start(1, 2, "127.0.0.2", port, bind="127.0.0.3")]
    r0, r1 = (result(p) for p in procs)
    for r in (r0, r1):
        assert r["ok"] and r["path"] == "tcp" and r["transport"] == "tcp"
        assert r["peers"] == {"0": "127.0.0.2", "1": "127.0.0.3"}  # each rank was seen from its own address
        assert r["bandwidth_gb_s"] > 0 and r["bytes"] == 1 << 20
        assert r["seconds"] < 10


def test_three_ranks_connect_every_pair():
    port = free_port()
    procs = [
        start(0, 3, "127.0.0.2", port),
        start(1, 3, "127.0.0.2", port, bind="127.0.0.3"),
        start(2, 3, "127.0.0.2", port, bind="127.0.0.4"),
    ]
    results = [result(p) for p in procs]
    assert all(r["ok"] for r in results)
    assert results[2]["peers"] == {"0": "127.0.0.2", "1": "127.0.0.3", "2": "127.0.0.4"}
    assert all(set(r["timings"]) >= {"rendezvous", "mesh"} for r in results)


def test_the_engine_host_ip_is_where_a_rank_listens():
    port = free_port()
    procs = [
        start(0, 2, "127.0.0.2", port, env={"SGLANG_HOST_IP": "127.0.0.2"}),
        start(1, 2, "127.0.0.2", port, bind="127.0.0.3", env={"SGLANG_HOST_IP": "127.0.0.5"}),
    ]
    r0, r1 = (result(p) for p in procs)
    assert r0["ok"] and r1["ok"]
    assert r1["peers"]["1"] == "127.0.0.5"


def test_a_missing_interface_fails_at_once_with_that_reason():
    t0 = time.monotonic()
    r = result(start(1, 2, "127.0.0.2", free_port(), bind="127.0.0.3", extra=("--iface", "doesnotexist0")))
    assert time.monotonic() - t0 < 5
    assert (r["ok"], r["kind"], r["stage"]) == (False, "interface_missing", "checks")
    assert "doesnotexist0" in r["error"] and "lo" in r["error"]
    r = result(start(1, 2, "127.0.0.2", free_port(), env={"NCCL_SOCKET_IFNAME": "=nosuch0"}))
    assert r["kind"] == "interface_missing" and "NCCL_SOCKET_IFNAME==nosuch0" in r["error"]


def test_an_address_the_node_lacks_fails_before_any_traffic():
    # 192.0.2.1 (TEST-NET-1) is on no interface here: binding to it fails locally, nothing is sent.
    r = result(start(0, 1, "192.0.2.1", free_port()))
    assert r["kind"] == "address_missing" and "192.0.2.1" in r["error"]
    r = result(start(1, 2, "127.0.0.2", free_port(), env={"VLLM_HOST_IP": "192.0.2.1"}))
    assert r["kind"] == "address_missing" and "VLLM_HOST_IP 192.0.2.1" in r["error"]


def test_a_wrong_rendezvous_address_fails_both_ranks_within_the_bound():
    port = free_port()
    t0 = time.monotonic()
    # rank 1 calls 127.0.0.9, where nobody listens; the head waits at 127.0.0.2
    procs = [start(0, 2, "127.0.0.2", port, timeout=3), start(1, 2, "127.0.0.9", port, bind="127.0.0.3", timeout=3)]
    r0, r1 = (result(p) for p in procs)
    assert time.monotonic() - t0 < 3 + pc.GRACE + 3
    assert r0["kind"] == "peer_missing" and "1/2 ranks joined (missing ranks: 1)" in r0["error"]
    assert r1["kind"] == "refused" and r1["target"] == f"127.0.0.9:{port}"


def test_a_port_in_use_on_the_head_is_named():
    with socket.socket() as holder:
        holder.bind(("127.0.0.2", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        r = result(start(0, 2, "127.0.0.2", port, timeout=3))
    assert r["kind"] == "port_in_use" and str(port) in r["error"]


def test_a_hung_check_is_killed_at_the_deadline_and_says_where_it_hung():
    # The child's work replaced by one that never returns, as NCCL's C code can: the parent must bound it.
    # The program loaded from its file alone, as on a node (its package's imports would eat the deadline).
    code = (
        "import importlib.util, sys, time\n"
        "spec = importlib.util.spec_from_file_location('pc', %r)\n"
        "pc = sys.modules['pc'] = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(pc)\n"
        "def hang(a, deadline):\n    pc._stage('all-reduce')\n    time.sleep(600)\n"
        "pc.work = hang\nsys.exit(pc.main(sys.argv[1:]))\n" % str(PROGRAM_FILE)
    )
    t0 = time.monotonic()
    p = subprocess.Popen(
        [
            sys.executable,
            "-c",
            code,
            "--rank",
            "0",
            "--world",
            "1",
            "--addr",
            "127.0.0.2",
            "--port",
            "1",
            "--timeout",
            "1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    r = result(p)
    assert time.monotonic() - t0 < 1 + pc.GRACE + 3
    assert (r["kind"], r["stage"], r["hung_in"]) == ("timeout", "all-reduce", "all-reduce")
    assert "hung in all-reduce" in r["error"]


def test_bad_arguments_exit_2_without_a_result():
    p = subprocess.run(
        [sys.executable, "-", "--rank", "2", "--world", "2", "--addr", "127.0.0.2", "--port", "1"],
        input=PROGRAM,
        capture_output=True,
        timeout=30,
    )
    assert p.returncode == 2 and pc.MARK.encode() not in p.stdout


@pytest.mark.parametrize("mode", ["nccl"])
def test_forcing_nccl_without_torch_says_so(mode):
    try:
        import torch  # noqa: F401

        pytest.skip("torch is installed here: the GPU tier covers the NCCL path")
    except ImportError:
        pass
    p = start(0, 1, "127.0.0.2", free_port(), extra=("--mode", mode))
    r = result(p)
    assert r["kind"] == "gpu" and "no torch" in r["error"]


def test_the_program_as_sent_reads_every_registered_engines_host_ip_variable(monkeypatch):
    """The node cannot import the registry: the list written into the sent program is the registry's, a new
    engine's variable included."""
    from sparktui.core import engines as registry
    from tests.unit.test_engines import Toy

    ns: dict = {}  # no __name__: the program's main does not run
    exec(compile(program_text(), "preflight_check.py", "exec"), ns)
    every = tuple(dict.fromkeys(e.host_ip_env for e in registry.ENGINES.values() if e.host_ip_env))  # MPI: none
    assert ns["HOST_IP_VARS"] == host_ip_vars() == every and every
    monkeypatch.setitem(registry.ENGINES, "toy", Toy())
    ns = {}
    exec(compile(program_text(), "preflight_check.py", "exec"), ns)
    assert ns["HOST_IP_VARS"][-1] == Toy.host_ip_env and len(ns["HOST_IP_VARS"]) == len(set(ns["HOST_IP_VARS"]))
