#!/usr/bin/env python3
"""Build the engine-simulator image as a tarball that `docker load` accepts (no dockerd needed).

    python3 tools/build_sim_image.py                      # -> dist/sparktui-engine-sim.tar
    python3 tools/build_sim_image.py -o sim.tar.gz        # gzip-compressed, also loadable
    python3 tools/build_sim_image.py --rootfs /tmp/rootfs # only lay out the root filesystem
    docker load -i dist/sparktui-engine-sim.tar           # -> sparktui/engine-sim:latest
    python3 tools/build_sim_image.py --entrypoint 'vllm serve' -t sim:serve   # ENTRYPOINT as vllm/vllm-openai's
    python3 tools/build_sim_image.py --vllm-version 0.11.0 -t sim:old         # plays vLLM 0.11.0 (no --nnodes)

The image holds this machine's Debian python3 (the binary plus the shared libraries ldd lists), a
lean standard library, dash as /bin/sh, bash, grep and a few coreutils, the simulator (sparktui/sim) and the shim
packages `sglang`, `vllm` and `ray` in dist-packages, /usr/local/bin/vllm, /usr/local/bin/ray and
/usr/local/bin/sglang.
One layer, sorted entries, fixed timestamps: the same inputs give the same image ID on every node.
The image is for this machine's architecture.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import platform
import shlex
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SIM = REPO / "sparktui" / "sim"
DEFAULT_TAG = "sparktui/engine-sim:latest"
DEFAULT_OUTPUT = REPO / "dist" / "sparktui-engine-sim.tar"
EPOCH = 1704067200  # 2024-01-01T00:00:00Z: every entry's mtime, for reproducible digests
PATH_ENV = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# Standard library parts an engine simulator never imports (GUI, tests, build configuration, ...)
SKIP_STDLIB = {
    "test",
    "idlelib",
    "tkinter",
    "turtledemo",
    "ensurepip",
    "lib2to3",
    "pydoc_data",
    "distutils",
    "__pycache__",
    "sqlite3",
    "curses",
    "site-packages",
    "dist-packages",
}
SKIP_STDLIB_PREFIX = ("config-",)
# Extension modules left out with the libraries they would drag in (OpenSSL, Berkeley DB, ncurses, ...)
SKIP_DYNLOAD = (
    "_test",
    "xx",
    "_ctypes_test",
    "_tkinter",
    "_ssl",
    "_hashlib",
    "_sqlite3",
    "_curses",
    "readline",
    "_dbm",
    "_gdbm",
    "nis",
    "ossaudiodev",
    "_crypt",
)
# A shell and the few tools scripts around engines use (bash -c, grep, ls); a couple of MB in all
TOOLS = (
    "/usr/bin/dash",
    "/usr/bin/bash",
    "/usr/bin/sleep",
    "/usr/bin/cat",
    "/usr/bin/env",
    "/usr/bin/grep",
    "/usr/bin/ls",
    "/usr/bin/head",
    "/usr/bin/tail",
    "/usr/bin/mkdir",
    "/usr/bin/rm",
    "/usr/bin/timeout",
    "/usr/bin/cp",
    "/usr/bin/chmod",
)  # cp, chmod: the TensorRT-LLM containers' entrypoint


@dataclass
class Entry:
    kind: str  # dir | file | symlink
    mode: int = 0o755
    src: str | None = None  # host file to copy
    data: bytes | None = None  # or literal content
    target: str | None = None  # symlink target


class Rootfs:
    """Paths inside the image (absolute, "/usr/bin/python3") and what each one is."""

    def __init__(self) -> None:
        self.entries: dict[str, Entry] = {}

    def _parents(self, path: str) -> None:
        parent = os.path.dirname(path)
        if parent not in ("/", "") and parent not in self.entries:
            self._parents(parent)
            self.entries[parent] = Entry("dir", 0o755)

    def resolve(self, path: str) -> str:
        """Follow this image's own directory symlinks (merged /usr: /lib -> usr/lib)."""
        parts = Path(path).parts[1:]
        current = "/"
        for i, part in enumerate(parts):
            candidate = os.path.join(current, part)
            e = self.entries.get(candidate)
            if e is not None and e.kind == "symlink" and i < len(parts) - 1:
                assert e.target is not None
                current = self.resolve(os.path.normpath(os.path.join(os.path.dirname(candidate), e.target)))
            else:
                current = candidate
        return current

    def add_dir(self, path: str, mode: int = 0o755) -> None:
        path = self.resolve(path)
        self._parents(path)
        if path not in self.entries:
            self.entries[path] = Entry("dir", mode)
        else:
            self.entries[path].mode = mode

    def add_file(self, path: str, src: str | None = None, data: bytes | None = None, mode: int | None = None) -> None:
        path = self.resolve(path)
        self._parents(path)
        if mode is None:
            mode = stat.S_IMODE(os.stat(src).st_mode) if src else 0o644
        self.entries[path] = Entry("file", mode, src=src, data=data)

    def add_symlink(self, path: str, target: str) -> None:
        path = self.resolve(path)
        self._parents(path)
        self.entries.setdefault(path, Entry("symlink", 0o777, target=target))

    def copy_host_path(self, path: str, hops: int = 0) -> None:
        """Copy a host path as the host has it: every symlink met on the way, then the real file."""
        if hops > 40:
            raise RuntimeError(f"too many symlinks resolving {path}")
        parts = Path(os.path.normpath(path)).parts[1:]
        current = "/"
        for i, part in enumerate(parts):
            candidate = os.path.join(current, part)
            if os.path.islink(candidate):
                target = os.readlink(candidate)
                self.add_symlink(candidate, target)
                resolved = os.path.normpath(os.path.join(os.path.dirname(candidate), target))
                rest = os.path.join(resolved, *parts[i + 1 :]) if i + 1 < len(parts) else resolved
                self.copy_host_path(rest, hops + 1)
                return
            current = candidate
        if os.path.isdir(current):
            self.add_dir(current)
        else:
            self.add_file(current, src=current)


def ldd(path: str) -> list[str]:
    """Shared libraries (and the loader) a binary needs, as absolute host paths."""
    try:
        out = subprocess.run(["ldd", path], capture_output=True, text=True, check=False).stdout
    except FileNotFoundError:
        sys.exit("build_sim_image: `ldd` is needed to find the interpreter's shared libraries")
    libs = []
    for line in out.splitlines():
        line = line.strip()
        if "=>" in line:
            target = line.split("=>", 1)[1].strip().split(" ")[0]
            if target.startswith("/"):
                libs.append(target)
        elif line.startswith("/"):
            libs.append(line.split(" ")[0])
    return libs


def host_python_paths(python: str) -> tuple[str, str, str]:
    code = (
        "import sys, sysconfig; print(sysconfig.get_paths()['stdlib']); "
        "print(sysconfig.get_config_var('DESTSHARED') or ''); print('%d.%d' % sys.version_info[:2])"
    )
    out = subprocess.run([python, "-I", "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    return out[0], out[1], out[2]


def base_rootfs(
    python: str,
    os_name: str = "sparktui engine simulator",
    skip_dynload: tuple[str, ...] = SKIP_DYNLOAD,
    skip_stdlib: frozenset[str] | set[str] = SKIP_STDLIB,
) -> tuple[Rootfs, str]:
    """This machine's python3 with its libraries, a shell and a few tools; returns it and "3.x"."""
    fs = Rootfs()
    # Debian's merged /usr, so paths printed by ldd (/lib/...) land where the loader looks
    for name in ("bin", "lib", "lib64", "sbin"):
        fs.add_dir(f"/usr/{name}")
        fs.add_symlink(f"/{name}", f"usr/{name}")
    for d, mode in (
        ("/tmp", 0o1777),
        ("/var/tmp", 0o1777),
        ("/root", 0o700),
        ("/etc", 0o755),
        ("/proc", 0o755),
        ("/sys", 0o755),
        ("/dev", 0o755),
        ("/run", 0o755),
        ("/models", 0o755),
    ):
        fs.add_dir(d, mode)
    fs.add_file(
        "/etc/passwd",
        data=b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
    )
    fs.add_file("/etc/group", data=b"root:x:0:\nnogroup:x:65534:\n")
    fs.add_file("/etc/os-release", data=f'PRETTY_NAME="{os_name}"\nID=sparktui-sim\n'.encode())

    stdlib, dynload, version = host_python_paths(python)
    binaries = [python]
    fs.copy_host_path(python)
    fs.add_symlink("/usr/bin/python3", os.path.basename(python))
    fs.add_symlink("/usr/bin/python", "python3")
    for tool in TOOLS:
        if os.path.exists(tool):
            fs.copy_host_path(tool)
            binaries.append(tool)
    if os.path.exists("/usr/bin/dash"):
        fs.add_symlink("/usr/bin/sh", "dash")

    for root, dirs, files in os.walk(stdlib):
        rel = os.path.relpath(root, stdlib)
        dirs[:] = sorted(
            d
            for d in dirs
            if d not in skip_stdlib and not d.startswith(SKIP_STDLIB_PREFIX) and os.path.join(root, d) != dynload
        )
        for f in sorted(files):
            src = os.path.join(root, f)
            if os.path.islink(src):
                fs.copy_host_path(src)  # sitecustomize.py -> /etc/python3.x/sitecustomize.py on Debian
            elif not f.endswith((".pyc", ".exe")):
                fs.add_file(os.path.normpath(os.path.join(stdlib, rel, f)), src=src)
    if dynload and os.path.isdir(dynload):
        for f in sorted(os.listdir(dynload)):
            if f.endswith(".so") and not f.startswith(skip_dynload):
                fs.copy_host_path(os.path.join(dynload, f))
                binaries.append(os.path.join(dynload, f))
    for binary in binaries:
        for lib in ldd(binary):
            fs.copy_host_path(lib)
    return fs, version


def collect(python: str) -> Rootfs:
    fs, version = base_rootfs(python)
    site = f"/usr/local/lib/python{version}/dist-packages"
    fs.add_file(
        f"{site}/sparktui/__init__.py", data=b'"""sparktui: only the engine simulator ships in this image."""\n'
    )
    for path in sorted(SIM.rglob("*")):
        rel = path.relative_to(SIM)
        if "__pycache__" in rel.parts or path.is_dir() or path.suffix == ".pyc":
            continue
        if rel.parts[0] == "shims":
            # bin/: launchers are written below; torch/: the lab's image has no torch, so its preflight takes
            # the TCP path over the lab's real kernel networking (the demo's containers get the stand-in)
            if len(rel.parts) > 1 and rel.parts[1] in ("bin", "torch"):
                continue
            fs.add_file(f"{site}/{Path(*rel.parts[1:])}", src=str(path), mode=0o644)
        else:
            fs.add_file(f"{site}/sparktui/sim/{rel}", src=str(path), mode=0o644)
    launcher = "#!/usr/bin/python3\nimport sys\n\nfrom {mod} import main\n\nsys.exit(main(sys.argv[1:]))\n"
    fs.add_file("/usr/local/bin/vllm", data=launcher.format(mod="vllm.entrypoints.cli.main").encode(), mode=0o755)
    fs.add_file("/usr/local/bin/ray", data=launcher.format(mod="ray.scripts.scripts").encode(), mode=0o755)
    fs.add_file("/usr/local/bin/sglang", data=launcher.format(mod="sglang.cli.main").encode(), mode=0o755)
    # TensorRT-LLM's MPI launch: mpirun, the launcher, trtllm-serve, and the containers' sshd where images have it
    named = "#!/usr/bin/python3\nimport sys\n\nfrom {mod} import {fn}\n\nsys.exit({fn}(sys.argv[1:]))\n"
    for path, mod, fn in (
        ("/usr/local/bin/mpirun", "sparktui.sim.trtllm_mpi", "mpirun_main"),
        ("/usr/local/bin/trtllm-llmapi-launch", "sparktui.sim.trtllm_mpi", "launch_main"),
        ("/usr/local/bin/trtllm-serve", "sparktui.sim.trtllm_server", "main"),
        ("/usr/sbin/sshd", "sparktui.sim.trtllm_mpi", "sshd_main"),
    ):
        fs.add_file(path, data=named.format(mod=mod, fn=fn).encode(), mode=0o755)
    return fs


def write_layer(fs: Rootfs, out) -> None:
    """The root filesystem as one tar layer (root-owned, fixed mtime, sorted)."""
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(fs.entries):
            e = fs.entries[path]
            info = tarfile.TarInfo(path.lstrip("/"))
            info.mtime, info.uid, info.gid, info.uname, info.gname = EPOCH, 0, 0, "root", "root"
            info.mode = e.mode
            if e.kind == "dir":
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif e.kind == "symlink":
                info.type, info.linkname = tarfile.SYMTYPE, e.target or ""
                tar.addfile(info)
            else:
                data = e.data if e.data is not None else Path(e.src or "").read_bytes()
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))


def lay_out(fs: Rootfs, dest: Path) -> None:
    """Write the root filesystem into a directory (for chroot tests)."""
    dest.mkdir(parents=True, exist_ok=True)
    if any(dest.iterdir()):
        sys.exit(f"build_sim_image: {dest} is not empty")
    for path in sorted(fs.entries):
        e = fs.entries[path]
        target = dest / path.lstrip("/")
        if e.kind == "dir":
            target.mkdir(exist_ok=True)
        elif e.kind == "symlink":
            os.symlink(e.target or "", target)
        else:
            if e.data is not None:
                target.write_bytes(e.data)
            else:
                shutil.copyfile(e.src or "", target)
        if e.kind != "symlink":
            os.chmod(target, e.mode)


def docker_arch() -> str:
    machine = platform.machine().lower()
    return {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(machine, machine)


def build_image(
    fs: Rootfs,
    output: Path,
    tag: str,
    entrypoint: list[str] | None = None,
    env: list[str] | None = None,
    title: str = "sparktui engine simulator",
    description: str = "SGLang, vLLM and Ray as seen from outside, without GPUs",
) -> dict:
    """Write the docker-archive tarball; returns {'id', 'layer', 'size'}.

    entrypoint: the image's ENTRYPOINT (vllm/vllm-openai has ["vllm", "serve"]); env: extra ENV
    entries, e.g. SPARKTUI_SIM_VLLM_VERSION=0.11.0 for the release the simulated engine plays."""
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile(dir=output.parent) as layer:
        write_layer(fs, layer)
        layer.seek(0)
        digest = hashlib.sha256()
        for block in iter(lambda: layer.read(1 << 20), b""):
            digest.update(block)
        layer_hex = digest.hexdigest()
        size = layer.tell()
        created = "2024-01-01T00:00:00Z"
        config = {
            "architecture": docker_arch(),
            "os": "linux",
            "created": created,
            "config": {
                "Env": [f"PATH={PATH_ENV}", "LANG=C.UTF-8", "PYTHONUNBUFFERED=1", *(env or [])],
                "Cmd": None if entrypoint else ["/bin/sh"],
                "WorkingDir": "/",
                "Labels": {
                    "org.opencontainers.image.title": title,
                    "org.opencontainers.image.description": description,
                },
            },
            "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer_hex}"]},
            "history": [{"created": created, "created_by": "tools/build_sim_image.py"}],
        }
        if entrypoint:
            config["config"]["Entrypoint"] = entrypoint
        config_bytes = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
        config_hex = hashlib.sha256(config_bytes).hexdigest()
        repo, _, ver = tag.rpartition(":") if ":" in tag.rsplit("/", 1)[-1] else (tag, "", "latest")
        manifest = [
            {"Config": f"{config_hex}.json", "RepoTags": [f"{repo}:{ver}"], "Layers": [f"{layer_hex}/layer.tar"]}
        ]
        repositories = {repo: {ver: layer_hex}}
        opener = gzip.open if output.suffix == ".gz" else open
        with opener(output, "wb") as raw:
            with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:

                def add_bytes(name: str, data: bytes) -> None:
                    info = tarfile.TarInfo(name)
                    info.size, info.mtime, info.mode = len(data), EPOCH, 0o644
                    tar.addfile(info, io.BytesIO(data))

                dir_info = tarfile.TarInfo(layer_hex)
                dir_info.type, dir_info.mode, dir_info.mtime = tarfile.DIRTYPE, 0o755, EPOCH
                tar.addfile(dir_info)
                add_bytes(f"{layer_hex}/VERSION", b"1.0")
                layer.seek(0)
                info = tarfile.TarInfo(f"{layer_hex}/layer.tar")
                info.size, info.mtime, info.mode = size, EPOCH, 0o644
                tar.addfile(info, layer)
                add_bytes(f"{config_hex}.json", config_bytes)
                add_bytes("manifest.json", json.dumps(manifest, separators=(",", ":")).encode())
                add_bytes("repositories", json.dumps(repositories, separators=(",", ":")).encode())
    return {"id": f"sha256:{config_hex}", "layer": f"sha256:{layer_hex}", "size": size}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        default=DEFAULT_OUTPUT,
        help=f"image tarball to write; .gz compresses it (default {DEFAULT_OUTPUT.relative_to(REPO)})",
    )
    p.add_argument("-t", "--tag", default=DEFAULT_TAG, help=f"repository:tag recorded in the tarball ({DEFAULT_TAG})")
    p.add_argument(
        "--entrypoint",
        help="the image's ENTRYPOINT, words split as a shell would "
        "(vllm/vllm-openai's is 'vllm serve'); default none, CMD /bin/sh",
    )
    p.add_argument("--vllm-version", help="the vLLM release the simulated vLLM plays (default: the newest it knows)")
    p.add_argument("--sglang-version", help="the SGLang release the simulated SGLang plays")
    p.add_argument("--rootfs", type=Path, help="only lay out the root filesystem in this (empty) directory")
    p.add_argument(
        "--python",
        default=os.path.realpath("/usr/bin/python3"),
        help="interpreter to ship, a distribution build with its stdlib under /usr/lib (default %(default)s)",
    )
    args = p.parse_args(argv)
    if not os.path.isfile(args.python):
        p.error(f"{args.python} not found: pass --python /usr/bin/python3.X (a distribution build)")
    fs = collect(args.python)
    if args.rootfs:
        lay_out(fs, args.rootfs)
        print(f"root filesystem laid out in {args.rootfs} ({len(fs.entries)} entries)")
        return 0
    env = [f"SPARKTUI_SIM_VLLM_VERSION={args.vllm_version}"] if args.vllm_version else []
    env += [f"SPARKTUI_SIM_SGLANG_VERSION={args.sglang_version}"] if args.sglang_version else []
    result = build_image(fs, args.output, args.tag, shlex.split(args.entrypoint) if args.entrypoint else None, env)
    print(
        f"wrote {args.output} ({args.output.stat().st_size / 1e6:.1f} MB, layer {result['size'] / 1e6:.1f} MB "
        f"uncompressed): {args.tag} {result['id']}"
    )
    print(f"load it with: docker load -i {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
