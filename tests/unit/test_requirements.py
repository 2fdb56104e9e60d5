"""What the nodes need, judged from probe output: real command output (tests/unit/samples/probes)
through the real probe parser, then core/nodes/requirements.py; every unmet need names its fix."""

from __future__ import annotations

import dataclasses
import os
import subprocess
from pathlib import Path

from sparktui.core.config.config import Config, DockerConfig, ImagesConfig, ModelConfig, NodeConfig
from sparktui.core.nodes.inventory import analyse
from sparktui.core.nodes.probe_needs import parse_rsync_version, parse_runtimes, parse_toolkit
from sparktui.core.nodes.probes import parse_probe, probe_script
from sparktui.core.nodes.requirements import TOOLKIT_FIX, node_needs, unmet

SAMPLES = Path(__file__).parent / "samples" / "probes"
MODEL = "/models/m"
HOSTS = {"spark1": "192.168.1.101", "spark2": "192.168.1.102"}
IMAGE = "lmsysorg/sglang:spark"  # in docker-image-ids.txt


def read(name: str) -> str:
    return (SAMPLES / name).read_text().rstrip("\n")


def section(name: str, out: str, rc: int = 0, err: str = "") -> str:
    return f"@@sparktui:out {name}@@\n{out}\n@@sparktui:err {name}@@\n{err}\n@@sparktui:rc {name} {rc}@@\n"


def probe(
    node: str,
    *,
    model: bool = True,
    docker_err: str | None = None,
    runtimes: str | None = None,
    rsync: bool = True,
    toolkit: str = "tool /usr/bin/nvidia-container-runtime-hook",
) -> str:
    parts = [
        section("nvidia-smi", read("nvidia-smi-gb10.csv")),
        section("meminfo", read("meminfo-spark.txt")),
        section("df", read("df-spark.txt")),
        section("model", f"path {MODEL}\n" + ("dir" if model else "missing")),
    ]
    if model:
        parts += [section("du", f"1000\t{MODEL}"), section("files", "3")]
    if docker_err is None:
        parts += [
            section("docker-version", "28.3.3"),
            section("docker-images", read("docker-images.jsonl")),
            section("docker-ids", read("docker-image-ids.txt")),
            section("docker-ps", ""),
            section("docker-runtimes", runtimes or read("docker-runtimes-runc.json")),
        ]
    else:
        parts.append(section("docker-version", "", 1, docker_err))
    parts += [
        section("ip", read(f"ip-addr-{node}.json")),
        section("ib-sys", read("ib-sys-spark.txt")),
        section("speed", read("speed-spark.txt")),
        section("user", "ubuntu"),
        section("rsync", read("rsync-version.txt")) if rsync else section("rsync", "", 127, "sh: rsync: not found"),
        section("gpu-toolkit", toolkit),
    ]
    return "".join(parts) + "@@sparktui:done@@\n"


def config(style: str = "gpus-all") -> Config:
    return Config(
        cluster="c",
        nodes=[NodeConfig("spark1", HOSTS["spark1"], role="head"), NodeConfig("spark2", HOSTS["spark2"])],
        model=ModelConfig(name="m", path=MODEL),
        images=ImagesConfig(sglang=IMAGE, vllm="nvcr.io/none:1"),
        docker=DockerConfig(gpu_style=style),
    )


def needs(texts: dict[str, str], style: str = "gpus-all") -> dict[tuple[str, str], object]:
    facts = {n: parse_probe(n, HOSTS[n], t) for n, t in texts.items()}
    return {(n.node, n.id): n for n in node_needs(config(style), analyse(config(style), facts))}


def test_two_good_sparks_need_only_what_sparktui_copies_and_one_image_pull():
    got = needs({"spark1": probe("spark1"), "spark2": probe("spark2", model=False)})
    for node in HOSTS:
        for need in ("gpu", "docker", "gpu-runtime", "rsync", "fabric", "image:sglang"):
            assert got[node, need].status == "ok", got[node, need]
    assert got["spark1", "docker"].what == "docker usable by ubuntu without sudo"
    assert got["spark1", "rsync"].detail == "3.5.0"
    assert "enp1s0f1np1" in got["spark1", "fabric"].detail and "RoCE" in got["spark1", "fabric"].detail
    assert got["spark2", "model"].status == "todo" and "sync model" in got["spark2", "model"].fix
    vllm = got["spark1", "image:vllm"]  # on no node: pull it once, sparktui copies it
    assert (
        vllm.status == "fail" and vllm.fix == "`docker pull nvcr.io/none:1` on spark1, then `sparktui sync image vllm`"
    )


def test_docker_permission_denied_names_the_group_fix():
    got = needs(
        {"spark1": probe("spark1", docker_err=read("docker-version-permission-denied.err")), "spark2": probe("spark2")}
    )
    d = got["spark1", "docker"]
    assert d.status == "fail" and d.detail.startswith("permission denied while trying to connect")
    assert "`sudo usermod -aG docker ubuntu`" in d.fix
    assert got["spark1", "image:sglang"].status == "unknown"  # docker could not say
    assert got["spark2", "docker"].status == "ok"


def test_docker_daemon_down_names_systemctl():
    got = needs({"spark1": probe("spark1", docker_err=read("docker-version-no-daemon.err")), "spark2": probe("spark2")})
    assert got["spark1", "docker"].fix == "start the daemon: `sudo systemctl enable --now docker`"


def test_missing_toolkit_rsync_and_model_source_each_say_what_to_do():
    got = needs(
        {"spark1": probe("spark1", model=False, rsync=False, toolkit=""), "spark2": probe("spark2", model=False)}
    )
    assert got["spark1", "gpu-runtime"].status == "fail" and got["spark1", "gpu-runtime"].fix == TOOLKIT_FIX
    assert got["spark1", "rsync"].fix == "`sudo apt-get install -y rsync`"
    assert got["spark1", "model"].status == "fail" and "model.source" in got["spark1", "model"].fix
    assert got["spark2", "model"].status == "todo"
    assert {n.node for n in unmet(list(got.values())) if n.id != "image:vllm"} == {"spark1"}


def test_gpu_style_picks_what_counts_as_the_toolkit():
    # what `nvidia-ctk runtime configure --runtime=docker` adds to daemon.json, as docker info lists it
    nvidia = '{"nvidia":{"path":"nvidia-container-runtime"},"runc":{"path":"runc"}}'
    ok = needs({n: probe(n, runtimes=nvidia, toolkit="") for n in HOSTS}, "runtime-nvidia")
    assert ok["spark1", "gpu-runtime"].status == "ok"
    bad = needs({n: probe(n) for n in HOSTS}, "runtime-nvidia")  # the hook alone registers no runtime
    assert bad["spark1", "gpu-runtime"].status == "fail"
    cdi = needs({n: probe(n, toolkit="cdi /etc/cdi/nvidia.yaml") for n in HOSTS}, "cdi")
    assert cdi["spark1", "gpu-runtime"].status == "ok"
    assert needs({n: probe(n) for n in HOSTS}, "cdi")["spark1", "gpu-runtime"].fix.startswith("`sudo nvidia-ctk cdi")
    assert ("spark1", "gpu-runtime") not in needs({n: probe(n) for n in HOSTS}, "none")


def test_unreachable_node_gets_one_ssh_need():
    facts = {"spark1": parse_probe("spark1", HOSTS["spark1"], probe("spark1"))}
    from sparktui.core.nodes.facts import NodeFacts

    facts["spark2"] = NodeFacts("spark2", HOSTS["spark2"], reachable=False, error="Connection refused")
    rows = [n for n in node_needs(config(), analyse(config(), facts)) if n.node == "spark2"]
    assert [(n.id, n.status, n.detail) for n in rows] == [("ssh", "fail", "Connection refused")]


def test_fabric_missing_when_only_the_management_lan_joins_the_nodes():
    facts = {n: parse_probe(n, HOSTS[n], probe(n)) for n in HOSTS}
    for f in facts.values():
        f.interfaces = [i for i in f.interfaces if any(a.startswith("192.168.1.") for a in i.ipv4)]
    rows = {(n.node, n.id): n for n in node_needs(config(), analyse(config(), facts))}
    assert rows["spark1", "fabric"].status == "fail" and "interfaces:" in rows["spark1", "fabric"].fix


def test_parsers_on_real_output():
    assert parse_rsync_version(read("rsync-version.txt")) == "3.5.0"
    assert parse_rsync_version("rsync: command not found") is None
    assert parse_runtimes(read("docker-runtimes-runc.json")) == [  # dockerd 20.10 in the lab
        "io.containerd.runc.v2",
        "io.containerd.runtime.v1.linux",
        "runc",
        "runc-clamp",
    ]
    assert parse_runtimes("template: :1: bad") == [] and parse_runtimes("") == []
    assert parse_toolkit("tool /usr/bin/nvidia-ctk\ncdi /etc/cdi/nvidia.yaml\n") == (
        ["/usr/bin/nvidia-ctk"],
        ["/etc/cdi/nvidia.yaml"],
    )


def test_the_probe_script_finds_the_hook_and_rsync_on_the_path(tmp_path):
    """The real script on this machine, with a prestart hook on PATH: the sections feed the facts."""
    hook = tmp_path / "nvidia-container-runtime-hook"
    hook.write_text("#!/bin/sh\nexit 0\n")
    hook.chmod(0o755)
    env = dict(os.environ, PATH=f"{tmp_path}:{os.environ['PATH']}")
    out = subprocess.run(["sh", "-c", probe_script(MODEL)], env=env, capture_output=True, text=True, timeout=120).stdout
    f = parse_probe("here", "127.0.0.1", out)
    assert f.gpu_toolkit[0] == str(hook)
    assert f.user == subprocess.run(["id", "-un"], capture_output=True, text=True).stdout.strip()
    want = parse_rsync_version(subprocess.run(["rsync", "--version"], capture_output=True, text=True).stdout)
    assert f.rsync == want and want


def test_check_json_shape_is_plain_data():
    facts = {n: parse_probe(n, HOSTS[n], probe(n)) for n in HOSTS}
    row = node_needs(config(), analyse(config(), facts))[0].to_json()
    assert set(row) == {f.name for f in dataclasses.fields(type(node_needs(config(), analyse(config(), facts))[0]))}
    assert row["node"] == "spark1" and row["status"] in ("ok", "todo", "fail", "unknown")


def test_a_probe_cut_short_leaves_the_tools_unknown_not_missing():
    text = probe("spark1").split("@@sparktui:out user@@")[0]  # the connection dropped before the last sections
    f = parse_probe("spark1", HOSTS["spark1"], text)
    assert any("cut short" in n for n in f.notes)
    rows = {n.id: n for n in node_needs(config(), analyse(config(), {"spark1": f}))}
    assert rows["rsync"].status == rows["gpu-runtime"].status == "unknown"
    assert rows["docker"].status == "ok"


def test_check_prints_every_unmet_need_whole_at_80_columns(monkeypatch):
    import io

    from rich.console import Console

    from sparktui.cli import check

    buf = io.StringIO()
    monkeypatch.setattr(check, "console", Console(file=buf, width=80, color_system=None))
    rows = needs(
        {
            "spark1": probe("spark1", docker_err=read("docker-version-permission-denied.err")),
            "spark2": probe("spark2", model=False, rsync=False, toolkit=""),
        }
    ).values()
    check.print_needs(list(rows))
    out = buf.getvalue()
    flat = " ".join(out.split())
    assert "…" not in out
    for n in rows:
        if n.status != "ok" and n.fix:
            assert "fix: " + " ".join(n.fix.split()) in flat, n.fix
    assert "spark2  ✓ gpu  ✓ docker  ✗ gpu-runtime  ✗ rsync  → model  ✓ image:sglang" in out
    assert "\n        ✗ image:vllm  ✓ fabric\n" in out  # wrapped between marks, under the first
    assert not [ln for ln in out.splitlines() if ln.startswith("  ✓")]  # a met need is only its mark
    assert "4 needs to fix on spark1, spark2: each fix is above" in flat  # docker; toolkit, rsync, vllm image


def test_an_unreachable_node_does_not_take_the_fabric_from_the_others():
    from sparktui.core.nodes.facts import NodeFacts

    cfg = Config(
        cluster="c",
        nodes=[
            NodeConfig("spark1", HOSTS["spark1"], role="head"),
            NodeConfig("spark2", HOSTS["spark2"]),
            NodeConfig("spark3", "192.168.1.103"),
        ],
        model=ModelConfig(name="m", path=MODEL),
    )
    facts = {n: parse_probe(n, HOSTS[n], probe(n)) for n in HOSTS}
    facts["spark3"] = NodeFacts("spark3", "192.168.1.103", reachable=False, error="timed out")
    rows = {(n.node, n.id): n for n in node_needs(cfg, analyse(cfg, facts))}
    assert rows["spark1", "fabric"].status == rows["spark2", "fabric"].status == "ok"


def test_a_fabric_link_down_is_a_need_with_its_fix():
    facts = {n: parse_probe(n, HOSTS[n], probe(n)) for n in HOSTS}
    for i in facts["spark2"].interfaces:
        i.up = i.up and not i.rdma  # both ConnectX-7 ports down: only the management LAN is left up
    rows = {(n.node, n.id): n for n in node_needs(config(), analyse(config(), facts))}
    fab = rows["spark1", "fabric"]
    assert fab.status == "fail" and "down" in fab.detail and "bring the fabric port up" in fab.fix
