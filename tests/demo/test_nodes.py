"""The demo's nodes as sparktui sees them: `check`, model sync, node-to-node ssh, image copies.

All of it runs the real CLI (`python -m sparktui --config <demo config> ...`) against a running demo.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import asyncssh
import pytest

from sparktui.core.config.config import load_config
from sparktui.core.remote.ssh import Cluster
from sparktui.demo import checkpoint

from .conftest import sparktui


def digests(d: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.iterdir()) if p.is_file()}


async def test_check_sees_two_gb10_nodes_joined_by_a_roce_fabric(demo, cli_env):
    rc, out, err = await sparktui(cli_env, "--config", str(demo.config_path), "check", "--json")
    assert rc == 0, err
    inv = json.loads(out)
    nodes = {n["name"]: n for n in inv["nodes"]}
    assert sorted(nodes) == ["spark1", "spark2"]
    for n in nodes.values():
        assert n["reachable"] and n["gpu"]["name"] == "NVIDIA GB10" and n["gpu"]["count"] == 1
        assert n["gpu"]["memory_total_bytes"] is None  # [N/A] on unified memory
        assert n["memory"]["total_bytes"] > 100 << 30  # a Spark's MemTotal, not this machine's
    # each node has its own files at the one model path: only the source holds the checkpoint
    assert nodes["spark1"]["model"]["present"] and nodes["spark1"]["model"]["files"] >= 4
    assert not nodes["spark2"]["model"]["present"]
    best = inv["fabric"][0]
    assert best["rdma"] and not best["management"]
    assert {a["iface"] for a in best["nodes"].values()} == {"enp1s0f1np1"}
    assert any(s["management"] for s in inv["fabric"])


async def test_model_sync_copies_the_real_bytes_over_the_fabric(demo, cli_env):
    src, dst = demo.node_model_dir("spark1"), demo.node_model_dir("spark2")
    assert not dst.exists()
    rc, out, err = await sparktui(cli_env, "--config", str(demo.config_path), "sync", "model", "--wait", "--json")
    assert rc == 0, out + err
    assert digests(dst) == digests(src)
    assert sum(p.stat().st_size for p in dst.iterdir()) >= demo.options.model_bytes
    # the transfer ran on spark1 towards spark2's fabric address
    journal = (Path(cli_env["XDG_STATE_HOME"]) / "sparktui" / "journal.jsonl").read_text()
    assert "rsync" in journal and demo.node("spark2").addresses["fabric"] in journal
    # the cipher both ends agreed on is recorded; shards this small (under 16 MiB) get no streams of their own
    rc, out, err = await sparktui(cli_env, "--config", str(demo.config_path), "sync", "status", "--json")
    [rec] = [t for t in json.loads(out)["transfers"] if t["dest"] == "spark2"]
    assert rec["state"] == "done" and rec["streams"] == 1
    assert rec["cipher"] in ("aes128-gcm@openssh.com", "chacha20-poly1305@openssh.com")


async def test_a_node_has_a_sparks_cores_for_its_copy_streams(demo):
    config = load_config(demo.config_path)
    async with Cluster(config) as cluster:
        r = await cluster["spark1"].run("nproc; nproc --ignore=4")
    assert r.stdout.split() == ["20", "16"]


async def test_a_nodes_dev_is_a_real_dev_for_whoever_runs_the_demo(demo):
    # A world-writable sticky /dev made every `>/dev/null` fail for an unprivileged user (the kernel
    # refuses O_CREAT of a device its opener does not own there); `mktemp` then failed and both nodes'
    # probes shared one scratch directory.
    config = load_config(demo.config_path)
    async with Cluster(config) as cluster:
        r = await cluster["spark1"].run(
            "stat -c %a /dev; echo x >/dev/null && echo null-ok; "
            "ls /dev/infiniband; d=$(mktemp -d) && echo tmp-ok && rmdir $d"
        )
    assert r.ok, r.stderr
    lines = r.stdout.split()
    assert lines[0] == "755" and "null-ok" in lines and "tmp-ok" in lines and "uverbs0" in lines


async def test_node_to_node_ssh_is_verified_and_stays_inside_the_demo(demo):
    config = load_config(demo.config_path)
    async with Cluster(config) as cluster:
        fabric2 = demo.node("spark2").addresses["fabric"]
        ok = await cluster["spark1"].run(["ssh", "-o", "BatchMode=yes", f"root@{fabric2}", "hostname"], timeout=60)
        assert ok.ok and ok.stdout.strip() == "spark2", ok.stderr
        # a recorded key the peer does not hold: refused the way OpenSSH refuses a changed host key
        other = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().split()[1]
        kh = demo.node("spark1").home / ".ssh" / "known_hosts"
        saved = kh.read_text()
        kh.write_text(
            "".join(
                f"{fabric2} ssh-ed25519 {other}\n" if ln.split()[0] == fabric2 else ln + "\n"
                for ln in saved.splitlines()
            )
        )
        try:
            bad = await cluster["spark1"].run(["ssh", "-o", "BatchMode=yes", f"root@{fabric2}", "true"], timeout=60)
        finally:
            kh.write_text(saved)
        assert bad.exit_status == 255 and "host key" in bad.stderr.lower()
        # an address outside the demo is refused on the node itself: nothing is dialled
        out = await cluster["spark1"].run(["ssh", "-o", "BatchMode=yes", "root@192.0.2.7", "true"], timeout=30)
        assert out.exit_status == 255 and "192.0.2.7" in out.stderr


async def test_image_copy_with_docker_save_and_load_gives_the_same_id(demo, cli_env):
    config = load_config(demo.config_path)
    image = config.images.vllm
    async with Cluster(config) as cluster:
        r = await cluster["spark2"].run(["docker", "rmi", image])
        assert r.ok, r.stderr
        gone = await cluster["spark2"].run(["docker", "image", "inspect", image])
        assert gone.exit_status == 1
    rc, out, err = await sparktui(
        cli_env, "--config", str(demo.config_path), "sync", "image", "vllm", "--wait", "--json"
    )
    assert rc == 0, out + err
    async with Cluster(config) as cluster:
        ids = [
            (await cluster[n].run(["docker", "image", "inspect", "--format", "{{.Id}}", image])).stdout.strip()
            for n in ("spark1", "spark2")
        ]
    assert ids[0].startswith("sha256:") and ids[0] == ids[1]


def test_checkpoint_reads_as_the_model_it_stands_for(tmp_path):
    written = checkpoint.write(tmp_path / "m", 1 << 20, shards=3)
    cfg = json.loads((tmp_path / "m" / "config.json").read_text())
    assert cfg["num_attention_heads"] % 2 == 0  # TP 2 divides the heads
    shards = sorted((tmp_path / "m").glob("*.safetensors"))
    assert len(shards) == 3 and written >= 1 << 20
    head = shards[0].read_bytes()
    n = int.from_bytes(head[:8], "little")
    meta = json.loads(head[8 : 8 + n])
    ((name, tensor),) = [(k, v) for k, v in meta.items() if k != "__metadata__"]
    assert tensor["data_offsets"][1] == len(head) - 8 - n  # the header describes the bytes that follow


@pytest.mark.parametrize("tool", ["ip -j addr", "ibdev2netdev", "nvidia-smi -L"])
async def test_nodes_answer_as_different_machines(demo, tool):
    config = load_config(demo.config_path)
    async with Cluster(config) as cluster:
        a, b = [(await cluster[n].run(tool)).stdout for n in ("spark1", "spark2")]
    assert a and b
    if tool.startswith("ip"):
        assert demo.node("spark1").addresses["fabric"] in a and demo.node("spark2").addresses["fabric"] not in a
    elif tool.startswith("nvidia"):
        assert a != b  # each GPU has its own UUID
    else:
        assert "enp1s0f1np1 (Up)" in a


async def test_preflight_launch_and_stop_from_the_cli(demo, cli_env):
    """The headless story: the rendezvous check passes, vLLM (Ray) comes up and answers, stop removes it."""
    conf = ["--config", str(demo.config_path)]
    rc, out, err = await sparktui(cli_env, *conf, "sync", "model", "--wait", "--json")
    assert rc == 0, out + err
    rc, out, err = await sparktui(cli_env, *conf, "preflight", "--json")
    pre = json.loads(out)
    assert rc == 0 and pre["ok"] and pre["rendezvous"]["subnet"] == "127.0.1.0/24", out + err
    assert {n["iface"] for n in pre["nodes"]} == {"enp1s0f1np1"}
    rc, out, err = await sparktui(
        cli_env, *conf, "launch", "--engine", "vllm", "--mode", "ray", "--wait", "--yes", timeout=240
    )
    assert rc == 0 and "ready" in out, out + err
    rc, out, err = await sparktui(cli_env, *conf, "stop", "--yes")
    assert rc == 0, out + err
    config = load_config(demo.config_path)
    async with Cluster(config) as cluster:
        for n in ("spark1", "spark2"):
            left = await cluster[n].run(["docker", "ps", "-aq", "--filter", "label=sparktui.deployment"])
            assert left.stdout.strip() == ""


async def test_drop_caches_frees_the_nodes_own_page_cache_and_nothing_of_this_machine(demo, cli_env):
    from sparktui.demo.pagecache import rewrite

    node = demo.root / "nodes" / "spark2"
    meminfo = node / "meminfo"
    before = meminfo.read_text()
    # the checkpoint just arrived: 100 GiB more page cache, as much less free memory
    kb = {ln.split(":")[0]: int(ln.split()[1]) for ln in before.splitlines()}
    filled = before.replace(f"MemFree:        {kb['MemFree']}", f"MemFree:        {kb['MemFree'] - 104857600}").replace(
        f"Cached:          {kb['Cached']}", f"Cached:          {kb['Cached'] + 104857600}"
    )
    assert filled != before
    try:
        for _ in range(2):  # the second drop proves the node takes its lease on drop_caches back
            rewrite(meminfo, filled)
            rc, out, err = await sparktui(
                cli_env, "--config", str(demo.config_path), "drop-caches", "spark2", "--yes", "--json"
            )
            assert rc == 0, err
            (r,) = json.loads(out)
            assert r["node"] == "spark2" and r["ok"]
            assert r["free_before"] == (kb["MemFree"] - 104857600) * 1024  # what the node said, not this machine
            # done before the write returned, as the kernel's drop is: the read right after sees it
            assert r["free_after"] - r["free_before"] >= 100 << 30 and r["cached_after"] < 1 << 30
            assert (node / "drop_caches").read_text().strip() == "3"  # the write landed in the node's own file
    finally:
        rewrite(meminfo, before)
