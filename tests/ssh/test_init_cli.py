"""`sparktui init` against in-process SSH nodes whose GPU, `ip` and RDMA tools answer like two DGX Sparks."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import asyncssh
import pytest

from sparktui.core.config.config import load_config
from tests.tui.sshnodes import start_nodes, stop_nodes

REPO = Path(__file__).resolve().parents[2]


async def init(tmp_path: Path, *args: str, extra_env: dict | None = None) -> tuple[int, str, str]:
    """Run `python3 -m sparktui init ARGS` with HOME in tmp_path (no ~/.ssh of this machine is read)."""
    env = {**os.environ, "HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO)}
    for name in ("SPARKTUI_CONFIG", "XDG_STATE_HOME", "XDG_CONFIG_HOME"):
        env.pop(name, None)
    env.update(extra_env or {})
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sparktui",
        "init",
        *args,
        env=env,
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    # messages on stderr are wrapped at the terminal width: read them as one text
    return proc.returncode, out.decode(), " ".join(err.decode().split())


@pytest.fixture
async def nodes(tmp_path):
    cfg, servers = await start_nodes(tmp_path / "nodes")
    (tmp_path / "home").mkdir()
    yield cfg
    stop_nodes(servers)


def node_args(cfg) -> list[str]:
    return [
        a for n in cfg.nodes for a in ("--node", f"{n.name}=127.0.0.1,port={n.port},user=root,key={n.identity_file}")
    ]


def fingerprints(cfg) -> dict[int, str]:
    """port -> SHA256 fingerprint of that node's host key, from the known_hosts the fixture wrote."""
    out = {}
    for line in Path(cfg.ssh.known_hosts).read_text().splitlines():
        pattern, key = line.split(" ", 1)
        out[int(pattern.rsplit(":", 1)[1])] = asyncssh.import_public_key(key).get_fingerprint("sha256")
    return out


async def test_unknown_host_keys_are_shown_and_nothing_is_trusted_or_written(tmp_path, nodes):
    kh = tmp_path / "kh"
    out = tmp_path / "out.yaml"
    rc, stdout, err = await init(
        tmp_path, *node_args(nodes), "--model-path", nodes.model.path, "--known-hosts", str(kh), "--output", str(out)
    )
    assert rc == 1, err
    for n in nodes.nodes:
        assert fingerprints(nodes)[n.port] in err and f"{n.name} (127.0.0.1 port {n.port})" in err
    assert "--accept-new-host-keys" in err and "nothing written" in err
    assert not out.exists()
    assert not kh.exists() or kh.read_text() == ""


async def test_accepted_keys_are_recorded_and_the_probed_fabric_is_written(tmp_path, nodes):
    kh = tmp_path / "kh"
    out = tmp_path / "conf" / "sparktui.yaml"
    rc, stdout, err = await init(
        tmp_path,
        *node_args(nodes),
        "--model-path",
        nodes.model.path,
        "--known-hosts",
        str(kh),
        "--output",
        str(out),
        "--accept-new-host-keys",
        "--cluster",
        "lab",
        "--json",
    )
    assert rc == 0, err
    report = json.loads(stdout)
    assert report["written"] is True and report["path"] == str(out)
    assert all(n["ok"] for n in report["nodes"])
    # exactly the nodes' own keys, in OpenSSH's [host]:port form
    assert sorted(kh.read_text().splitlines()) == sorted(Path(nodes.ssh.known_hosts).read_text().splitlines())
    cfg = load_config(out)
    assert [(n.name, n.port, n.user, n.role) for n in cfg.nodes] == [
        (n.name, n.port, "root", n.role) for n in nodes.nodes
    ]
    assert cfg.ssh.known_hosts == str(kh) and cfg.ssh.host_key_policy == "strict"
    assert cfg.cluster == "lab" and cfg.model.path == nodes.model.path and cfg.model.name == "m"
    fabric = report["fabric"]
    assert fabric["subnet"] == "192.168.100.0/24" and fabric["rdma"] is True
    assert {n.name: n.interfaces for n in cfg.nodes} == {
        name: {"192.168.100.0/24": a["iface"]} for name, a in fabric["nodes"].items()
    }
    text = out.read_text()
    assert (
        f"# the fabric, found by probing: {fabric['nodes']['spark1']['ip']}, RoCE device "
        f"{fabric['nodes']['spark1']['rdma']}" in text
    )
    assert text.startswith("# sparktui cluster configuration, written by sparktui init")
    # what ran on the nodes is in the journal, under the cluster just written
    lines = (tmp_path / "home" / ".local" / "state" / "sparktui" / "journal.jsonl").read_text().splitlines()
    entries = [json.loads(line) for line in lines]
    assert {e["node"] for e in entries} == {"spark1", "spark2"} and {e["cluster"] for e in entries} == {"lab"}


async def test_the_model_source_is_the_node_that_holds_it(tmp_path, nodes):
    # the in-process nodes share this machine's files, so the head "lacks" a path the probe cannot see;
    # only the writer's choice is tested here: a present model on the head needs no source line
    out = tmp_path / "c.yaml"
    kh = tmp_path / "kh"
    kh.write_text(Path(nodes.ssh.known_hosts).read_text())
    rc, _, err = await init(
        tmp_path, *node_args(nodes), "--model-path", nodes.model.path, "--known-hosts", str(kh), "--output", str(out)
    )
    assert rc == 0, err
    assert load_config(out).model.source is None
    assert "source:" not in out.read_text()


async def test_an_existing_file_is_refused_before_any_connection(tmp_path, nodes):
    out = tmp_path / "mine.yaml"
    out.write_text("cluster: keep me\n")
    rc, _, err = await init(tmp_path, "--node", "a=127.0.0.1,port=1", "--model-path", "/m", "--output", str(out))
    assert rc == 2 and "--force" in err
    assert out.read_text() == "cluster: keep me\n"


async def test_no_probe_writes_without_connecting(tmp_path):
    out = tmp_path / "c.yaml"
    rc, stdout, err = await init(
        tmp_path,
        "--node",
        "spark1=10.0.0.11,user=ubuntu",
        "--node",
        "spark2",
        "--model-path",
        "/models/Q",
        "--no-probe",
        "--output",
        str(out),
    )
    assert rc == 0, err
    cfg = load_config(out)
    assert [(n.name, n.host, n.user, n.role) for n in cfg.nodes] == [
        ("spark1", "10.0.0.11", "ubuntu", "head"),
        ("spark2", "spark2", None, "worker"),
    ]
    assert cfg.model.name == "Q" and all(not n.interfaces for n in cfg.nodes)
    assert f"wrote {out}; next: sparktui --config {out} check" in stdout


@pytest.mark.parametrize(
    "spec,why",
    [
        ("a=h,colour=red", "user=, key=, port="),
        ("a=h,port=x", "not a number"),
        ("a/b=h", "starting with a letter"),
        ("a=h,key=/no/such/key", "does not exist"),
    ],
)
async def test_bad_node_specs_are_named(tmp_path, spec, why):
    rc, _, err = await init(
        tmp_path, "--node", spec, "--model-path", "/m", "--no-probe", "--output", str(tmp_path / "c.yaml")
    )
    assert rc == 2 and why in err, err
    assert not (tmp_path / "c.yaml").exists()


async def test_a_changed_host_key_is_never_trusted(tmp_path, nodes):
    kh = tmp_path / "kh"
    lines = Path(nodes.ssh.known_hosts).read_text().splitlines()
    swapped = [lines[0].split(" ", 1)[0] + " " + lines[1].split(" ", 1)[1], lines[1]]
    kh.write_text("\n".join(swapped) + "\n")
    rc, _, err = await init(
        tmp_path,
        *node_args(nodes),
        "--model-path",
        "/m",
        "--known-hosts",
        str(kh),
        "--accept-new-host-keys",
        "--output",
        str(tmp_path / "c.yaml"),
    )
    assert rc == 1 and "CHANGED" in err
    assert kh.read_text() == "\n".join(swapped) + "\n"
    assert not (tmp_path / "c.yaml").exists()


async def test_a_fabric_that_joins_no_nodes_is_refused_with_the_choices(tmp_path, nodes):
    kh = tmp_path / "kh"
    kh.write_text(Path(nodes.ssh.known_hosts).read_text())
    out = tmp_path / "c.yaml"
    rc, _, err = await init(
        tmp_path,
        *node_args(nodes),
        "--model-path",
        "/m",
        "--known-hosts",
        str(kh),
        "--fabric",
        "10.99.0.0/24",
        "--output",
        str(out),
    )
    assert rc == 2 and "no subnet 10.99.0.0/24 joins spark1, spark2" in err and "192.168.100.0/24" in err, err
    assert not out.exists()
    rc, stdout, err = await init(
        tmp_path,
        *node_args(nodes),
        "--model-path",
        "/m",
        "--known-hosts",
        str(kh),
        "--fabric",
        "enp1s0f1np1",
        "--output",
        str(out),
    )
    assert rc == 0, err
    assert "fabric: 192.168.100.0/24 [RoCE]" in stdout


async def test_without_output_it_writes_the_file_sparktui_reads_next(tmp_path):
    env_file = tmp_path / "from-env.yaml"
    rc, _, err = await init(
        tmp_path, "--node", "a=h", "--model-path", "/m", "--no-probe", extra_env={"SPARKTUI_CONFIG": str(env_file)}
    )
    assert rc == 0, err
    assert load_config(env_file).nodes[0].host == "h"
    rc, _, err = await init(tmp_path, "--node", "a=h", "--model-path", "/m", "--no-probe")
    assert rc == 0, err
    assert load_config(tmp_path / "home" / ".config" / "sparktui" / "config.yaml").nodes[0].name == "a"


async def test_images_are_named_per_engine_and_the_older_flags_still_work(tmp_path):
    from sparktui.core.config.config import default_image
    from sparktui.core.engines import ENGINES

    first, *rest = ENGINES
    out = tmp_path / "c.yaml"
    args = [
        "--node",
        "a=h",
        "--model-path",
        "/m",
        "--no-probe",
        "--output",
        str(out),
        "--image",
        f"{first}=one/engine:1",
        *(a for e in rest for a in (f"--image-{e}", f"{e}/older:2")),
    ]
    rc, _, err = await init(tmp_path, *args)
    assert rc == 0, err
    cfg = load_config(out)
    assert cfg.image_for(first) == "one/engine:1"
    assert all(cfg.image_for(e) == f"{e}/older:2" for e in rest)
    rc, _, err = await init(
        tmp_path, "--node", "a=h", "--model-path", "/m", "--no-probe", "--force", "--output", str(out)
    )
    assert rc == 0, err
    assert load_config(out).engine_images() == {e: ref for e in ENGINES if (ref := default_image(e))}


@pytest.mark.parametrize("spec,why", [("nothing", "expected ENGINE=IMAGE"), ("llama=x:1", "unknown engine 'llama'")])
async def test_a_bad_image_spec_is_named_and_nothing_is_written(tmp_path, spec, why):
    rc, _, err = await init(
        tmp_path,
        "--node",
        "a=h",
        "--model-path",
        "/m",
        "--no-probe",
        "--image",
        spec,
        "--output",
        str(tmp_path / "c.yaml"),
    )
    assert rc == 2 and why in err, err
    assert not (tmp_path / "c.yaml").exists()
