"""The check program's NCCL path on real GPUs: two ranks as two "nodes" on loopback, one GPU each.

Needs torch with two CUDA devices; skips anywhere else (CI has none). Each rank is a process fed the
program on stdin, exactly as `docker run -i IMAGE python3 -` feeds it on a node. With SPARKTUI_GPU_OUT
set, every case's results and timings are written there as JSON lines (bench/preflight_gpu.md quotes them).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import sparktui.core.preflight.check_program as pc

torch = pytest.importorskip("torch")
if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
    pytest.skip("needs two CUDA devices", allow_module_level=True)

PROGRAM = Path(pc.__file__)
OUT = os.environ.get("SPARKTUI_GPU_OUT")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(rank: int, gpu: int, addr: str, port: int, timeout: float, env: dict | None = None) -> subprocess.Popen:
    e = dict(os.environ, CUDA_VISIBLE_DEVICES=str(gpu), NCCL_SOCKET_IFNAME="lo")
    e.update(env or {})
    argv = [
        sys.executable,
        "-",
        "--rank",
        str(rank),
        "--world",
        "2",
        "--addr",
        addr,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--iface",
        "lo",
        "--timeout",
        str(timeout),
        "--mode",
        "nccl",
    ]
    with PROGRAM.open("rb") as f:
        return subprocess.Popen(argv, stdin=f, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e)


def collect(case: str, procs: list[subprocess.Popen], t0: float) -> list[dict]:
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        lines = [ln for ln in out.decode(errors="replace").splitlines() if ln.startswith(pc.MARK)]
        assert len(lines) == 1, (out[-3000:], err[-3000:])
        results.append(json.loads(lines[0][len(pc.MARK) :]))
    wall = round(time.monotonic() - t0, 2)
    for r in results:
        print(
            f"\n[{case}] rank {r['rank']} ok={r['ok']} kind={r.get('kind')} transport={r.get('transport')} "
            f"net={r.get('net')} bw={r.get('bandwidth_gb_s')} GB/s seconds={r['seconds']} wall={wall} "
            f"stage={r.get('stage')} timings={r.get('timings')}"
        )
        for key in ("line", "error", "transport_line", "net_line"):
            if r.get(key):
                print(f"    {key}: {str(r[key])[:300]}")
    if OUT:
        with open(os.path.join(OUT, "gpu_results.jsonl"), "a") as f:
            f.write(json.dumps({"case": case, "wall": wall, "results": results}) + "\n")
    return results


def test_right_setup_is_ok_with_the_transport_and_bandwidth():
    port, t0 = free_port(), time.monotonic()
    r0, r1 = collect("ok", [start(0, 0, "127.0.0.1", port, 30), start(1, 1, "127.0.0.1", port, 30)], t0)
    for r in (r0, r1):
        assert r["ok"] and r["path"] == "nccl"
        assert r["transport"] in ("p2p", "shm", "socket") and r["net"] == "socket"
        assert "lo" in r["net_line"]  # NET/Socket : Using [0]lo:127.0.0.1<0>
        assert r["bandwidth_gb_s"] > 0 and r["seconds"] < 30
        assert any("NCCL INFO" in ln for ln in r["nccl_lines"])


def test_sockets_only_is_reported_as_socket():
    port, t0 = free_port(), time.monotonic()
    env = {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}  # what two separate hosts without RDMA get
    results = collect("socket", [start(0, 0, "127.0.0.1", port, 30, env), start(1, 1, "127.0.0.1", port, 30, env)], t0)
    for r in results:
        assert r["ok"] and r["transport"] == "socket" and "via NET/Socket" in r["transport_line"]
        assert r["bandwidth_gb_s"] > 0


def test_a_missing_interface_on_the_head_fails_both_ranks_quickly():
    port, t0 = free_port(), time.monotonic()
    bad = {"NCCL_SOCKET_IFNAME": "doesnotexist0"}
    r0, r1 = collect("iface-head", [start(0, 0, "127.0.0.1", port, 30, bad), start(1, 1, "127.0.0.1", port, 30)], t0)
    assert r0["kind"] == "interface_missing" and not r0["ok"]
    assert not r1["ok"] and r1["kind"] in ("peer_failed", "peer_missing", "nccl")
    assert time.monotonic() - t0 < 25  # NCCL refuses at once; only Python and torch start-up count


def test_a_missing_interface_on_a_worker_is_named_and_the_head_is_bounded():
    port, t0 = free_port(), time.monotonic()
    bad = {"NCCL_SOCKET_IFNAME": "doesnotexist0"}
    r0, r1 = collect("iface-worker", [start(0, 0, "127.0.0.1", port, 15), start(1, 1, "127.0.0.1", port, 15, bad)], t0)
    assert r1["kind"] == "interface_missing"
    assert not r0["ok"]
    assert time.monotonic() - t0 < 15 + pc.GRACE + 10


def test_an_address_nobody_listens_on_times_out_within_the_bound():
    port, wrong, t0 = free_port(), free_port(), time.monotonic()
    # rank 1 calls a loopback port where no store listens: it retries until the store's timeout
    r0, r1 = collect("unreachable", [start(0, 0, "127.0.0.1", port, 15), start(1, 1, "127.0.0.1", wrong, 15)], t0)
    assert r0["kind"] == "peer_missing" and "1/2" in (r0.get("line") or r0.get("error"))
    assert r1["kind"] in ("unreachable", "refused", "timeout")
    assert time.monotonic() - t0 < 15 + pc.GRACE + 10
