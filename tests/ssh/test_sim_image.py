"""tools/build_sim_image.py: a docker-archive tarball `docker load` accepts, and a root filesystem."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TOOL = REPO / "tools" / "build_sim_image.py"


def build(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    out = tmp_path_factory.mktemp("img") / "engine-sim.tar"
    done = build("-o", str(out), "-t", "sparktui/engine-sim:test")
    assert done.returncode == 0, done.stderr
    return out


def members(tar: tarfile.TarFile) -> dict[str, bytes]:
    return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def test_manifest_config_and_layer_agree(image):
    with tarfile.open(image) as tar:
        files = members(tar)
    manifest = json.loads(files["manifest.json"])
    assert len(manifest) == 1 and manifest[0]["RepoTags"] == ["sparktui/engine-sim:test"]
    config_name, layers = manifest[0]["Config"], manifest[0]["Layers"]
    config_bytes = files[config_name]
    # the config is named by its digest (the image ID) and lists the layer's digest as its diff_id
    assert config_name == hashlib.sha256(config_bytes).hexdigest() + ".json"
    config = json.loads(config_bytes)
    assert config["rootfs"]["diff_ids"] == ["sha256:" + hashlib.sha256(files[layers[0]]).hexdigest()]
    assert config["os"] == "linux" and config["architecture"] in ("amd64", "arm64")
    assert any(e.startswith("PATH=") and "/usr/local/bin" in e for e in config["config"]["Env"])
    assert json.loads(files["repositories"]) == {"sparktui/engine-sim": {"test": layers[0].split("/")[0]}}


def test_layer_holds_python_its_libraries_and_the_engines(image):
    with tarfile.open(image) as tar:
        manifest = json.loads(tar.extractfile("manifest.json").read())
        layer = tar.extractfile(manifest[0]["Layers"][0]).read()
    with tarfile.open(fileobj=io.BytesIO(layer)) as fs:
        entries = {m.name: m for m in fs.getmembers()}
    py = os.path.basename(os.path.realpath("/usr/bin/python3"))
    version = py.replace("python", "")
    for path in (
        f"usr/bin/{py}",
        "usr/bin/dash",
        f"usr/lib/{py}/asyncio/__init__.py",
        f"usr/lib/{py}/argparse.py",
        f"usr/local/lib/{py}/dist-packages/sglang/launch_server.py",
        f"usr/local/lib/{py}/dist-packages/sglang/cli/main.py",
        "usr/local/bin/sglang",
        f"usr/local/lib/{py}/dist-packages/vllm/entrypoints/cli/main.py",
        f"usr/local/lib/{py}/dist-packages/ray/scripts/scripts.py",
        f"usr/local/lib/{py}/dist-packages/sparktui/sim/sglang_server.py",
        "usr/local/bin/vllm",
        "usr/local/bin/ray",
        "etc/passwd",
    ):
        assert path in entries and entries[path].isfile(), path
    assert entries["usr/bin/python3"].issym() and entries["bin"].issym() and entries["usr/bin/sh"].linkname == "dash"
    assert entries["tmp"].mode == 0o1777
    assert entries["usr/local/bin/vllm"].mode & 0o111 and entries["usr/local/bin/sglang"].mode & 0o111
    assert not any(f"/{py}/test/" in n or "/__pycache__/" in n or "/tkinter/" in n for n in entries), "lean stdlib"
    # every library the interpreter links against is inside
    needed = subprocess.run(["ldd", f"/usr/bin/{py}"], capture_output=True, text=True).stdout
    for line in needed.splitlines():
        if "=>" in line:
            name = os.path.basename(line.split("=>")[1].split()[0])
            assert any(n.endswith("/" + name) for n in entries), name
    assert version and all(m.uid == 0 and m.gid == 0 for m in entries.values())


def test_same_inputs_give_the_same_image_id(image, tmp_path):
    again = tmp_path / "again.tar.gz"
    done = build("-o", str(again), "-t", "sparktui/engine-sim:test")
    assert done.returncode == 0, done.stderr
    with tarfile.open(image) as a, tarfile.open(again) as b:  # gzip is read transparently
        assert json.loads(a.extractfile("manifest.json").read()) == json.loads(b.extractfile("manifest.json").read())
    assert again.stat().st_size < 40e6


def test_rootfs_runs_the_engines_in_a_chroot(tmp_path):
    root = tmp_path / "rootfs"
    done = build("--rootfs", str(root))
    assert done.returncode == 0, done.stderr
    assert (root / "usr/local/bin/ray").is_file()
    chroot = shutil.which("chroot") or "/usr/sbin/chroot"
    if os.geteuid() != 0 or not os.path.exists(chroot):
        pytest.skip("chroot needs root and /usr/sbin/chroot")
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin"}
    probe = subprocess.run([chroot, str(root), "/bin/sh", "-c", "true"], env=env, capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"chroot not permitted here: {probe.stderr.strip()}")
    helped = subprocess.run(
        [chroot, str(root), "python3", "-m", "sglang.launch_server", "--help"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert helped.returncode == 0 and "--dist-init-addr" in helped.stdout, helped.stderr
    served = subprocess.run(
        [chroot, str(root), "sglang", "serve", "--help"],
        env=env,  # what plans of 0.5.5+ run
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert served.returncode == 0 and "--dist-init-addr" in served.stdout, served.stderr
    shells = subprocess.run(
        [chroot, str(root), "/bin/sh", "-c", "vllm serve --help && ray --version"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shells.returncode == 0 and "--tensor-parallel-size" in shells.stdout and "ray, version" in shells.stdout


def test_rootfs_refuses_a_directory_that_is_not_empty(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    done = build("--rootfs", str(tmp_path))
    assert done.returncode != 0 and "not empty" in done.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]
