"""The real engine packages, installed on a CPU into cached virtualenvs outside the repository.

Each environment holds one release of vLLM, SGLang or Ray: the newest, and the one inside each
default image of config.example.yaml. Engines are installed without their GPU stack: torch's CPU
build, the engine itself with --no-deps, its pure-Python requirements, then whatever module the
argument parser still misses (bounded), so one recipe keeps working as releases move.

    python3 -m tests.contract.venvs            # build every missing environment (CI runs this)
    python3 -m tests.contract.venvs --list     # what is cached where

Cache: $SPARKTUI_CONTRACT_CACHE, default ~/.cache/sparktui/contract (about 2 GB per engine release).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROBE = HERE / "probe.py"
TORCH = "torch==2.13.0"  # a CPU build of it lies on these machines' wheel directory ($PIP_FIND_LINKS)
RECIPE = "3"  # bump to rebuild every cached environment


@dataclass(frozen=True)
class Release:
    engine: str  # vllm | sglang | ray
    version: str
    why: str  # newest release, or the image that ships it

    @property
    def key(self) -> str:
        return f"{self.engine}-{self.version}"


# Ray first: it is the quickest, and the lab's real-Ray test needs it too.
MATRIX = [
    Release("ray", "2.60.0", "newest Ray release"),
    Release("vllm", "0.33.0", "newest vLLM release"),
    Release("vllm", "0.11.0", "nvcr.io/nvidia/vllm:25.11-py3, the previous default (no native multi-node)"),
    Release("sglang", "0.5.23", "newest SGLang release"),
    Release("sglang", "0.5.3.post3", "lmsysorg/sglang:spark (config.example.yaml)"),
    Release("vllm", "0.31.0", "nvcr.io/nvidia/vllm:26.10-py3 (config.example.yaml)"),
]

# Requirements left out: the GPU stack and compiled kernels the argument parsers never import.
SKIP = re.compile(
    r"^(torch|torchaudio|torchvision|torchcodec|xformers|flashinfer|nvidia|nvtx|tilelang|"
    r"quack|tokenspeed|humming|instanttensor|fastsafetensors|pynvvideocodec|numba|opencv|cupy|"
    r"triton|ray|sgl-kernel|sgl_kernel|flash|deep|cuda|vllm|decord|torchao|mooncake|"
    r"apache-tvm|xgrammar|llguidance|outlines|lm-format|compressed-tensors|depyf|mistral|"
    r"gguf|scipy|importlib|sgl-|sglang-kernel|nvshmem|kernels\b)",
    re.I,
)
# Installed with --no-deps when the parser needs them (their own requirements pull torch or CUDA).
MODULE_TO_PACKAGE = {
    "PIL": "pillow",
    "yaml": "pyyaml",
    "zmq": "pyzmq",
    "google": "protobuf",
    "cv2": "opencv-python-headless",
    "attr": "attrs",
    "dateutil": "python-dateutil",
    "jwt": "pyjwt",
    "dotenv": "python-dotenv",
    "multipart": "python-multipart",
    "cpuinfo": "py-cpuinfo",
    "IPython": "ipython",
    "tvm_ffi": "apache-tvm-ffi",
    "pydantic_core": "pydantic-core",
    "annotated_types": "annotated-types",
    "typing_inspection": "typing-inspection",
    "charset_normalizer": "charset-normalizer",
    "hf_xet": "hf-xet",
    "pkg_resources": "setuptools",
    "sklearn": "scikit-learn",
    "websockets": "websockets",
    "lm_format_enforcer": "lm-format-enforcer",
    "mistral_common": "mistral_common",
    "outlines_core": "outlines_core",
    "compressed_tensors": "compressed-tensors",
    "opentelemetry": "opentelemetry-api",
    "grpc": "grpcio",
    "sgl_kernel": "sgl-kernel",
    "pynvml": "nvidia-ml-py",
    "blobfile": "blobfile",
    "jsonschema_specifications": "jsonschema-specifications",
    "rpds": "rpds-py",
    "_cffi_backend": "cffi",
    "huggingface_hub": "huggingface-hub",
}
# Requirements the parsers import whose own requirements pull torch or CUDA: installed with --no-deps.
NO_DEPS = re.compile(
    r"^(xgrammar|llguidance|outlines[_-]core|lm-format-enforcer|compressed-tensors|depyf|"
    r"mistral[_-]common|apache-tvm-ffi|gguf|triton)\b",
    re.I,
)  # SGLang 0.5.23 imports triton
MISSING = re.compile(r"No module named '([^'.]+)")
NOT_FOUND = re.compile(
    r"The '([^']+)' distribution was not found|"
    r"PackageNotFoundError: No package metadata was found for ([\w.-]+)\s*$",
    re.M,
)
MAX_FILLS = 60


def cache_root() -> Path:
    return Path(os.environ.get("SPARKTUI_CONTRACT_CACHE") or Path.home() / ".cache" / "sparktui" / "contract")


def venv_dir(r: Release) -> Path:
    return cache_root() / r.key


def python_of(r: Release) -> Path | None:
    """The environment's interpreter once it is complete, else None."""
    d = venv_dir(r)
    ok = d / "ready"
    return d / "bin" / "python" if ok.exists() and ok.read_text().strip() == RECIPE else None


def _pip(d: Path, *args: str, timeout: float = 1200) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(d / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _share_torch(d: Path, log) -> None:
    """One CPU torch for every engine environment: installed once beside them, put on each one's path."""
    shared = cache_root() / "torch-cpu"
    ok = shared / "ready"
    if not ok.exists() or ok.read_text().strip() != TORCH:
        p = subprocess.run(
            [
                str(d / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                "--upgrade",
                "--target",
                str(shared / "site"),
                TORCH,
            ],
            capture_output=True,
            text=True,
            timeout=1800,
        )
        if p.returncode != 0:
            raise RuntimeError(f"installing {TORCH} (CPU) failed:\n{p.stderr[-2000:]}")
        ok.write_text(TORCH + "\n")
        log(f"{TORCH} (CPU) installed once in {shared}")
    site = next((d / "lib").glob("python3*/site-packages"))
    (site / "sparktui_shared_torch.pth").write_text(str(shared / "site") + "\n")


def _requirements(d: Path, r: Release, only: re.Pattern | None = None) -> list[str]:
    """The release's unconditional requirements minus the GPU stack (or only those `only` matches)."""
    site = next((d / "lib").glob("python3*/site-packages"))
    meta = next(site.glob(f"{r.engine}-{r.version}.dist-info/METADATA"), None)
    if meta is None:
        return []
    out = []
    for line in meta.read_text().splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        req = line.split(":", 1)[1].strip()
        if "extra ==" in req or ";" in req and "platform_machine" in req and "x86_64" not in req:
            continue
        if only is not None:
            if only.match(req):
                out.append(req.split(";")[0].strip())
            continue
        if SKIP.match(req):
            continue
        out.append(req)
    return out


def _probe(python: Path, engine: str) -> str:
    p = subprocess.run(
        [str(python), str(PROBE), engine],
        input=json.dumps({"argvs": [], "env": []}),
        capture_output=True,
        text=True,
        timeout=600,
    )
    return "" if p.returncode == 0 else (p.stderr or p.stdout)  # whole: a chained error names the cause first


def build(r: Release, log=print) -> Path:
    d = venv_dir(r)
    if python_of(r):
        return d / "bin" / "python"
    t0 = time.monotonic()
    d.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(d)], check=True)
    if r.engine == "ray":
        steps = [("ray", [f"ray[default]=={r.version}"])]
    else:
        _share_torch(d, log)
        steps = [(r.engine, ["--no-deps", f"{r.engine}=={r.version}"])]
    for what, args in steps:
        p = _pip(d, *args)
        if p.returncode != 0:
            raise RuntimeError(f"{r.key}: installing {what} failed:\n{p.stderr[-2000:]}")
    if r.engine != "ray":
        light = _requirements(d, r, NO_DEPS)
        if light:  # known to be needed by the parser; their own requirements would pull CUDA
            _pip(d, "--no-deps", *light)
        reqs = _requirements(d, r)
        if r.engine == "vllm" and r.version.startswith("0.11."):
            reqs.append("transformers<4.58")  # what that release was built against
        pin = d / "torch-pin.txt"
        pin.write_text(TORCH + "\n")  # a requirement that wants another torch must not pull a CUDA build
        p = _pip(d, "-c", str(pin), *reqs)
        if p.returncode != 0:
            log(f"{r.key}: its requirements do not resolve beside the CPU torch; installing them without theirs")
            _pip(d, "--no-deps", *reqs)
    python = d / "bin" / "python"
    # torchvision/torchaudio built for another torch break transformers' imports; the parsers need neither
    subprocess.run(
        [str(python), "-m", "pip", "uninstall", "-q", "-y", "torchvision", "torchaudio"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    _fill_missing(python, r, lambda: _probe(python, r.engine), "the argument parser", log)
    if err := _probe(python, r.engine):  # a parser that does not import is no contract: not marked ready
        raise RuntimeError(f"{r.key}: the argument parser does not import:\n{err[-3000:]}")
    (d / "ready").write_text(RECIPE + "\n")
    log(f"{r.key}: ready in {time.monotonic() - t0:.0f} s")
    return python


def _fill_missing(python: Path, r: Release, check, what: str, log) -> None:
    """Install, one by one and without their own requirements, the modules `check()` reports missing."""
    for _ in range(MAX_FILLS):
        err = check()
        if not err:
            return
        m = MISSING.search(err)
        dist = NOT_FOUND.search(err)  # transformers checks its requirements' versions when imported
        if dist:
            pkg = dist.group(1) or dist.group(2)
        elif not m:
            raise RuntimeError(f"{r.key}: {what} does not import:\n{err[-3000:]}")
        elif m.group(1) == r.engine:
            raise RuntimeError(f"{r.key}: {what} looks for a module this release does not have:\n{err[-3000:]}")
        else:
            pkg = MODULE_TO_PACKAGE.get(m.group(1), m.group(1))
        if SKIP.match(pkg) and not NO_DEPS.match(pkg):
            # the GPU stack (a torchvision for another torch breaks the CPU torch's imports): left out
            log(f"{r.key}: {what} need {pkg}, left out with the GPU stack; what needs it skips, saying so")
            return
        log(f"{r.key}: adding {pkg}")
        p = _pip(python.parent.parent, "--no-deps", pkg)
        if p.returncode != 0:
            raise RuntimeError(f"{r.key}: {what} needs {pkg!r}, which did not install:\n{p.stderr[-1000:]}")
    raise RuntimeError(f"{r.key}: still missing modules after {MAX_FILLS} additions")


# What tests/contract/test_clients.py runs in each engine's environment: the engine's own benchmark
# client, the openai client, prometheus_client's parser and tokenizers. Filled in after the parser's
# modules, also in environments already built (a marker per CLIENTS_RECIPE), so none is rebuilt for them.
# The engine's benchmark client comes last: one left without a module of the GPU stack stops the filling there.
_COMMON = [
    "openai",
    "httpcore",
    "h11",
    "anyio",
    "jiter",
    "distro",
    "prometheus_client.parser",
    "tokenizers",
    "transformers",
]  # openai imports its transport (httpcore, h11) only when a client first sends
CLIENTS = {"vllm": [*_COMMON, "vllm.benchmarks.serve"], "sglang": [*_COMMON, "sglang.bench_serving"]}
CLIENTS_RECIPE = "3"


def ensure_clients(r: Release, log=print) -> None:
    python = python_of(r)
    modules = CLIENTS.get(r.engine)
    if python is None or not modules:
        return
    marker = venv_dir(r) / "clients-ready"
    if marker.exists() and marker.read_text().strip() == CLIENTS_RECIPE:
        return
    code = "import importlib, sys\nfor m in sys.argv[1:]:\n    importlib.import_module(m)\n"

    def check() -> str:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        p = subprocess.run(
            [str(python), "-c", code, *modules],
            capture_output=True,
            text=True,
            timeout=600,
            env=dict(env, HF_HUB_OFFLINE="1"),
        )
        return "" if p.returncode == 0 else (p.stderr or p.stdout)

    _fill_missing(python, r, check, "the contract clients", log)
    marker.write_text(CLIENTS_RECIPE + "\n")
    log(f"{r.key}: clients ready")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m tests.contract.venvs", description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="show the matrix and what is cached")
    args = ap.parse_args(argv)
    failed = 0
    for r in MATRIX:
        if args.list:
            print(f"{r.key:22} {'ready' if python_of(r) else 'missing':8} {venv_dir(r)}  ({r.why})")
            continue
        try:
            build(r, log=lambda s: print(s, flush=True))
            ensure_clients(r, log=lambda s: print(s, flush=True))
        except (RuntimeError, subprocess.SubprocessError, OSError) as e:
            failed += 1
            print(f"contract env {r.key}: {e}", file=sys.stderr, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
