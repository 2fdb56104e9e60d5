"""Probe parsers on real output formats, and the probe script itself run through sh."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from sparktui.core.nodes import probes
from sparktui.core.nodes.probes import (
    parse_df,
    parse_docker_images,
    parse_docker_ps,
    parse_docker_version,
    parse_ib_sysfs,
    parse_ibdev2netdev,
    parse_image_ids,
    parse_ip_addr,
    parse_labels,
    parse_meminfo,
    parse_nvidia_smi,
    parse_probe,
    parse_speeds,
    probe_command,
    probe_script,
    split_sections,
)

SAMPLES = Path(__file__).parent / "samples" / "probes"
MiB = 1024 * 1024


def sample(name: str) -> str:
    return (SAMPLES / name).read_text()


def run_sh(script: str, env: dict | None = None, timeout: float = 60, cwd: Path | None = None) -> str:
    done = subprocess.run(
        ["sh", "-c", script], capture_output=True, text=True, errors="replace", timeout=timeout, env=env, cwd=cwd
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


# --- nvidia-smi -------------------------------------------------------------------------------


def test_gb10_memory_is_unified_and_unknown():
    notes: list[str] = []
    gpu = parse_nvidia_smi(sample("nvidia-smi-gb10.csv"), notes)
    assert (gpu.name, gpu.count, gpu.memory_total_bytes, gpu.unified) == ("NVIDIA GB10", 1, None, True)
    assert gpu.utilization == 0
    assert notes == []


def test_h200_rows_count_gpus_and_mib_become_bytes():
    text = sample("nvidia-smi-h200x8.csv")
    rows = [r.split(", ") for r in text.splitlines()]
    gpu = parse_nvidia_smi(text)
    assert gpu.count == len(rows)
    assert gpu.memory_total_bytes == int(rows[0][1]) * MiB
    assert gpu.utilization == float(rows[0][3])
    assert gpu.unified is False


def test_mixed_gpus_note_and_not_supported_fields():
    notes: list[str] = []
    gpu = parse_nvidia_smi(sample("nvidia-smi-h100x2-mixed.csv"), notes)
    assert gpu.count == 2
    assert gpu.name == "NVIDIA H100 80GB HBM3"
    assert gpu.memory_total_bytes == 81559 * MiB
    assert any("mixed" in n for n in notes)


def test_nvidia_smi_driver_failure_leaves_no_gpu_and_a_note():
    notes: list[str] = []
    gpu = parse_nvidia_smi(sample("nvidia-smi-no-driver.txt"), notes)
    assert gpu.count == 0 and gpu.name is None
    assert notes and "unreadable" in notes[0]


def test_nvidia_smi_bad_row_is_skipped_not_counted():
    text = sample("nvidia-smi-gb10.csv") + "NVIDIA GB10, lots, [N/A], 3\n"
    notes: list[str] = []
    gpu = parse_nvidia_smi(text, notes)
    assert gpu.count == 1
    assert len(notes) == 1


# --- memory and disk --------------------------------------------------------------------------


def test_meminfo_kib_to_bytes():
    text = sample("meminfo-spark.txt")
    kb = {ln.split(":")[0]: int(ln.split()[1]) for ln in text.splitlines()}
    mem = parse_meminfo(text)
    assert mem.total_bytes == kb["MemTotal"] * 1024
    assert mem.available_bytes == kb["MemAvailable"] * 1024


def test_meminfo_without_memavailable_falls_back_to_free_plus_cache():
    text = "MemTotal: 1000 kB\nMemFree: 100 kB\nBuffers: 10 kB\nCached: 200 kB\n"
    assert parse_meminfo(text).available_bytes == (100 + 10 + 200) * 1024


@pytest.mark.parametrize("name", ["df-spark.txt", "df-nfs.txt"])
def test_df_available_column(name):
    text = sample(name)
    expected = int(text.splitlines()[1].split()[3])
    assert parse_df(text) == expected


# --- interfaces and RDMA ----------------------------------------------------------------------


def test_ip_addr_spark_skips_lo_keeps_ipv4_and_state():
    text = sample("ip-addr-spark1.json")
    ifs = {i.name: i for i in parse_ip_addr(text)}
    raw = [link["ifname"] for link in json.loads(text)]
    assert list(ifs) == [n for n in raw if n != "lo"]
    assert ifs["enp1s0f1np1"].ipv4 == ["192.168.100.10/24"] and ifs["enp1s0f1np1"].up
    assert ifs["enP2p1s0f1np1"].ipv4 == ["192.168.101.10/24"]
    assert ifs["enP7s7"].up and ifs["enP7s7"].ipv4 == ["192.168.1.101/24"]
    # Admin-up but no carrier: down, whatever the UP flag says.
    assert not ifs["docker0"].up and ifs["docker0"].ipv4 == ["172.17.0.1/16"]
    assert not ifs["wlP9s9"].up and not ifs["enp1s0f0np0"].up


def test_ip_addr_lab_unknown_operstate_uses_flags():
    ifs = {i.name: i for i in parse_ip_addr(sample("ip-addr-lab.json"))}
    assert ifs["mgmt0"].up
    assert ifs["fab0"].up  # operstate UNKNOWN, flags UP,LOWER_UP
    assert not ifs["spare0"].up  # operstate UNKNOWN but NO-CARRIER


def test_ibdev2netdev_maps_netdev_to_roce_device():
    m = parse_ibdev2netdev(sample("ibdev2netdev-spark.txt"))
    assert m["enp1s0f1np1"] == "rocep1s0f1"
    assert m["enP2p1s0f1np1"] == "roceP2p1s0f1"
    assert len(m) == 4


def test_ib_sysfs_agrees_with_ibdev2netdev():
    assert parse_ib_sysfs(sample("ib-sys-spark.txt")) == parse_ibdev2netdev(sample("ibdev2netdev-spark.txt"))


def test_speeds_keep_only_known_values():
    s = parse_speeds(sample("speed-spark.txt"))
    assert s == {"enP2p1s0f1np1": 200000, "enP7s7": 10000, "enp1s0f1np1": 200000}


# --- docker -----------------------------------------------------------------------------------


def test_docker_ps_json_lines_with_labels():
    text = sample("docker-ps.jsonl")
    rows = [json.loads(ln) for ln in text.splitlines()]
    cs = parse_docker_ps(text)
    assert [c.id for c in cs] == [r["ID"] for r in rows]
    assert [c.state for c in cs] == ["running", "exited"]
    assert cs[0].labels["sparktui.deployment"] == "qwen-tp2"
    assert cs[0].labels["com.nvidia.volumes.needed"] == "nvidia_driver"
    assert cs[1].status.startswith("Exited (137)")
    assert cs[0].name == rows[0]["Names"]


def test_docker_ps_without_state_reads_status():
    row = {"ID": "abc", "Names": "n", "Image": "i", "Labels": "", "Status": "Up 3 minutes (Paused)"}
    rows = [row, dict(row, ID="def", Status="Exited (0) 1 second ago"), dict(row, ID="ghi", Status="Created")]
    cs = parse_docker_ps("\n".join(json.dumps(r) for r in rows))
    assert [c.state for c in cs] == ["paused", "exited", "created"]


def test_labels_with_comma_in_value():
    assert parse_labels("a=1,b=x,y,c=3") == {"a": "1", "b": "x,y", "c": "3"}
    assert parse_labels("") == {}


def test_images_full_ids_and_no_dangling():
    ids = parse_image_ids(sample("docker-image-ids.txt"))
    short = parse_docker_images(sample("docker-images.jsonl"))
    assert (
        set(ids)
        == set(short)
        == {"lmsysorg/sglang:latest-cu130", "lmsysorg/sglang:spark", "nvcr.io/nvidia/vllm:26.10-py3"}
    )
    for tag, full in ids.items():
        assert full.startswith("sha256:" + short[tag])


def test_docker_version():
    assert parse_docker_version("28.3.3\n") == "28.3.3"
    assert parse_docker_version("20.10.24+dfsg1\n") == "20.10.24+dfsg1"
    notes: list[str] = []
    assert parse_docker_version("Template parsing error: x\n", notes) is None
    assert notes


# --- garbage never raises ---------------------------------------------------------------------

GARBAGE = [
    "",
    "\x00\xff\ufffd\ufffd",
    "{not json",
    '[1, 2, {"ifname": 3}]',
    "null",
    "a, b, c, d, e, f, g",
    ",,,",
    "Filesystem 1-blocks Used Available Capacity Mounted on\n",
    "==> (Up)\nport port ==>\n",
    "MemTotal: lots kB\n",
    "\n".join(['{"ID": 5}', "[]", '"s"']),
]
PARSERS = [
    parse_nvidia_smi,
    parse_meminfo,
    parse_df,
    parse_ip_addr,
    parse_ibdev2netdev,
    parse_docker_ps,
    parse_docker_images,
    parse_docker_version,
]


@pytest.mark.parametrize("parser", PARSERS, ids=lambda p: p.__name__)
@pytest.mark.parametrize("text", GARBAGE)
def test_parsers_survive_garbage(parser, text):
    parser(text, [])
    parse_speeds(text), parse_ib_sysfs(text), parse_image_ids(text), parse_labels(text)


@pytest.mark.parametrize("text", GARBAGE + ["@@sparktui:out ip@@\n{\n@@sparktui:err ip@@\n\n@@sparktui:rc ip 0@@"])
def test_parse_probe_survives_garbage(text):
    facts = parse_probe("n", "h", text)
    assert facts.reachable
    assert facts.error or facts.notes


# --- the script -------------------------------------------------------------------------------

WEIRD = ["/models/Qwen3.5-122B-A10B-FP8", "/models/it's here", "/m/$(touch pwned)`id`;x", "~/models/a b"]


@pytest.mark.parametrize("path", WEIRD)
def test_script_is_valid_sh(path, tmp_path):
    f = tmp_path / "probe.sh"
    f.write_text(probe_script(path))
    for shell in ("sh", "dash", "bash"):
        if shutil.which(shell):
            done = subprocess.run([shell, "-n", str(f)], capture_output=True, text=True, timeout=30)
            assert done.returncode == 0, (shell, done.stderr)
    assert shlex.quote(path) in f.read_text()


def test_script_runs_here_without_gpu_tools(tmp_path):
    model = tmp_path / "we'ird $(touch pwned) `x`"
    (model / "sub").mkdir(parents=True)
    (model / "a.safetensors").write_bytes(b"x" * 1000)
    (model / "sub" / "b.json").write_bytes(b"{}" * 10)
    out = run_sh(probe_script(str(model)), cwd=tmp_path)
    facts = parse_probe("here", "127.0.0.1", out)
    assert facts.error is None and facts.reachable
    assert "@@sparktui:done@@" in out
    assert not (tmp_path / "pwned").exists()
    assert facts.model.path == str(model)
    assert facts.model.present and facts.model.files == 2
    assert facts.model.bytes >= 1020
    kb = {ln.split(":")[0]: int(ln.split()[1]) for ln in Path("/proc/meminfo").read_text().splitlines()}
    assert facts.memory.total_bytes == kb["MemTotal"] * 1024
    assert facts.disk_free_bytes and facts.disk_free_bytes > 0
    if not shutil.which("nvidia-smi"):
        assert facts.gpu.count == 0
        assert any(n.startswith("nvidia-smi:") for n in facts.notes)
    if shutil.which("ip"):
        local = subprocess.run(["ip", "-j", "addr"], capture_output=True, text=True, timeout=10).stdout
        assert [i.name for i in facts.interfaces] == [i.name for i in parse_ip_addr(local)]
    assert facts.infiniband == Path("/dev/infiniband").is_dir()


def test_command_survives_a_login_shell(tmp_path):
    """Node.run hands the command to the user's login shell: it must arrive as the same script."""
    model = tmp_path / "a 'b' $HOME"
    model.mkdir()
    for shell in ("sh", "bash"):
        done = subprocess.run([shell, "-c", probe_command(str(model))], capture_output=True, text=True, timeout=60)
        facts = parse_probe("n", "h", done.stdout)
        assert facts.model.path == str(model) and facts.model.present, shell


def test_script_reports_an_unverified_copy_as_incomplete_never_present(tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    (model / "model-00001-of-00002.safetensors").write_bytes(b"x" * 700)  # cut short by a dead link
    (model / ".sparktui-incomplete").write_text("copy model-n2-1 from n1 started 2026-01-01 10:00:00 UTC\n")
    facts = parse_probe("here", "127.0.0.1", run_sh(probe_script(str(model)), cwd=tmp_path))
    m = facts.model
    assert not m.present and m.state == "incomplete"
    assert m.incomplete == "copy model-n2-1 from n1 started 2026-01-01 10:00:00 UTC"
    assert m.files == 1 and m.bytes >= 700  # how far it got, the mark itself not counted
    assert facts.to_json()["model"]["state"] == "incomplete"
    (model / ".sparktui-incomplete").unlink()
    again = parse_probe("here", "127.0.0.1", run_sh(probe_script(str(model)), cwd=tmp_path)).model
    assert again.present and again.incomplete is None and again.state == "present"


def test_script_counts_a_link_that_points_nowhere_as_incomplete(tmp_path):
    model = tmp_path / "snap"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").symlink_to("../../blobs/3fa2")  # a snapshot copied without its blobs
    m = parse_probe("here", "127.0.0.1", run_sh(probe_script(str(model)), cwd=tmp_path)).model
    assert not m.present and m.state == "incomplete"
    assert m.incomplete == "links that point nowhere: model.safetensors"


def test_script_missing_model_dir_measures_nearest_parent(tmp_path):
    out = run_sh(probe_script(str(tmp_path / "no" / "such" / "model")))
    facts = parse_probe("here", "127.0.0.1", out)
    assert facts.model is not None and not facts.model.present
    assert facts.model.bytes is None
    sec = split_sections(out)["df"]
    assert sec.rc == 0
    # Others write to this disk meanwhile: agree with statvfs within 256 MiB.
    assert abs(facts.disk_free_bytes - shutil.disk_usage(tmp_path).free) < 256 * MiB


def _fake(bin_dir: Path, name: str, body: str) -> None:
    p = bin_dir / name
    p.write_text("#!/bin/sh\n" + body)
    p.chmod(0o755)


def test_script_with_spark_tools_on_path(tmp_path):
    """The node's tools faked from the samples: what the script prints is what the parsers read."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    q = lambda n: shlex.quote(str(SAMPLES / n))  # noqa: E731
    _fake(bin_dir, "nvidia-smi", f"cat {q('nvidia-smi-gb10.csv')}\n")
    _fake(bin_dir, "ibdev2netdev", f"cat {q('ibdev2netdev-spark.txt')}\n")
    _fake(bin_dir, "ip", f'[ "$1 $2" = "-j addr" ] || exit 1\ncat {q("ip-addr-spark1.json")}\n')
    _fake(
        bin_dir,
        "docker",
        f"""case "$1 $2" in
  "version --format") echo 28.3.3 ;;
  "images --format") cat {q("docker-images.jsonl")} ;;
  "image ls") cat {q("docker-image-ids.txt")} ;;
  "ps -a") [ "$4" = label=sparktui.deployment ] || exit 3; cat {q("docker-ps.jsonl")} ;;
  "info --format") echo '{{"runc":{{"path":"runc"}}}}' ;;
  *) echo "unknown: $*" >&2; exit 1 ;;
esac
""",
    )
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
    facts = parse_probe("spark1", "192.168.1.101", run_sh(probe_script("/models/x"), env=env))
    assert facts.notes == []
    assert facts.gpu.name == "NVIDIA GB10" and facts.gpu.unified and facts.gpu.count == 1
    assert facts.docker.version == "28.3.3"
    assert facts.docker.images == parse_image_ids(sample("docker-image-ids.txt"))
    assert [c.id for c in facts.containers] == [c.id for c in parse_docker_ps(sample("docker-ps.jsonl"))]
    ifs = {i.name: i for i in facts.interfaces}
    assert ifs["enp1s0f1np1"].rdma == "rocep1s0f1"
    assert ifs["enP7s7"].rdma is None
    assert facts.usable_gpu_memory() == facts.memory.total_bytes


def test_stuck_tool_is_cut_off(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # A wedged tool that even ignores SIGTERM.
    _fake(bin_dir, "nvidia-smi", "trap '' TERM\nexec sleep 120\n")
    monkeypatch.setattr(probes, "SECTION_TIMEOUT", 1)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
    if subprocess.run(["sh", "-c", "timeout 1 true"], capture_output=True).returncode != 0:
        pytest.skip("no timeout(1) here")
    out = run_sh(probe_script("/nonexistent"), env=env, timeout=60)
    facts = parse_probe("n", "h", out)
    assert split_sections(out)["nvidia-smi"].rc in (124, 137)
    assert any("no answer" in n for n in facts.notes)
    assert facts.memory.total_bytes  # later sections still ran


# --- whole-probe parsing ----------------------------------------------------------------------


def _section(name: str, out: str, rc: int = 0, err: str = "") -> str:
    return f"@@sparktui:out {name}@@\n{out}\n@@sparktui:err {name}@@\n{err}\n@@sparktui:rc {name} {rc}@@\n"


def test_cut_short_output_keeps_what_arrived():
    text = _section("meminfo", sample("meminfo-spark.txt")) + _section("ip", sample("ip-addr-spark1.json"))[:40]
    facts = parse_probe("n", "h", text)
    assert facts.memory.total_bytes
    assert facts.interfaces == []
    assert any("cut short" in n for n in facts.notes)


def test_pty_line_endings():
    text = (_section("nvidia-smi", sample("nvidia-smi-h200x8.csv")) + "@@sparktui:done@@\n").replace("\n", "\r\n")
    assert parse_probe("n", "h", text).gpu.count == 8


def test_missing_tool_note_and_infiniband_flag():
    text = (
        _section("nvidia-smi", "", 127, "sh: 1: nvidia-smi: not found")
        + _section("infiniband", "", 0)
        + "@@sparktui:done@@\n"
    )
    facts = parse_probe("n", "h", text)
    assert facts.infiniband
    assert facts.notes == ["nvidia-smi: not installed (exit 127)"]


def test_empty_output_is_an_error():
    facts = parse_probe("n", "h", "")
    assert facts.error and facts.gpu.count == 0


def test_without_mktemp_two_probes_with_one_pid_get_their_own_scratch_directories(tmp_path):
    # Simulated nodes have PID namespaces of their own and may share /tmp: the fallback name alone
    # ($$) collided, and one node's sections were read as the other's.
    lines = probes._SCRIPT.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("D=$(mktemp"))
    end = next(i for i in range(start, len(lines)) if lines[i].rstrip().endswith("}"))
    fallback = "\n".join(lines[start : end + 1])
    out = run_sh(
        f'mktemp() {{ return 1; }}\n{fallback}\necho "$D"\n{fallback}\necho "$D"\n',
        env=dict(os.environ, TMPDIR=str(tmp_path)),
    )
    first, second = out.split()
    assert first != second and Path(first).is_dir() and Path(second).is_dir()
    assert Path(first).parent == tmp_path and oct(Path(first).stat().st_mode & 0o777) == "0o700"
