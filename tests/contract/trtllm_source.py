"""TensorRT-LLM's own command-line declarations for the contract tier, read from a released package's source.

The real `tensorrt_llm` does not import on a CPU (its bindings link CUDA and TensorRT), so the options of
`trtllm-serve` are read from the release's tensorrt_llm/commands/serve.py with `ast` (the Click decorators), and
`trtllm-llmapi-launch` from the release's script. Sources, tried in order within a time budget:

1. the tagged file on GitHub (raw.githubusercontent.com/NVIDIA/TensorRT-LLM/v<release>/...), a few kB;
2. the release's wheel from NVIDIA's index (pip download tensorrt-llm==<release> --no-deps, about 1-2 GB;
   PyPI itself holds only a stub sdist that fetches from there), of which two members are kept.

Cached under $SPARKTUI_CONTRACT_CACHE/tensorrt-llm-<release>/ with a `source` file saying where it came from.

    python3 -m tests.contract.trtllm_source           # fetch the release's files (CI runs it beside venvs)
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from pathlib import Path

from .venvs import cache_root

RELEASE = "1.2.1"  # the newest tensorrt-llm release `pip index versions` lists on PyPI (2026-12)
WHY = "newest TensorRT-LLM release on PyPI"
FILES = {
    "serve.py": "tensorrt_llm/commands/serve.py",
    "trtllm-llmapi-launch": "tensorrt_llm/llmapi/trtllm-llmapi-launch",
}
RAW = "https://raw.githubusercontent.com/NVIDIA/TensorRT-LLM/v{release}/{path}"
NVIDIA_INDEX = "https://pypi.nvidia.com"
BUDGET_S = 1500.0


def release_dir(release: str = RELEASE) -> Path:
    return cache_root() / f"tensorrt-llm-{release}"


def ready(release: str = RELEASE) -> bool:
    d = release_dir(release)
    return all((d / name).is_file() for name in FILES) and (d / "source").is_file()


def _from_github(release: str, d: Path, deadline: float) -> str | None:
    got = {}
    for name, path in FILES.items():
        url = RAW.format(release=release, path=path)
        try:
            with urllib.request.urlopen(url, timeout=max(1.0, min(60.0, deadline - time.monotonic()))) as r:
                got[name] = r.read()
        except OSError:
            return None
    for name, data in got.items():
        (d / name).write_bytes(data)
    return f"GitHub tag v{release}"


def _from_wheel(release: str, d: Path, deadline: float) -> str | None:
    with tempfile.TemporaryDirectory(dir=cache_root()) as tmp:
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--only-binary=:all:",
            "--extra-index-url",
            NVIDIA_INDEX,
            "--python-version",
            "3.12",
            "--implementation",
            "cp",
            "--platform",
            "linux_x86_64",
            "--platform",
            "manylinux_2_28_x86_64",
            "--platform",
            "linux_aarch64",
            "--platform",
            "manylinux_2_28_aarch64",
            "-d",
            tmp,
            f"tensorrt-llm=={release}",
        ]
        try:
            subprocess.run(cmd, capture_output=True, text=True, timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            return None
        wheels = list(Path(tmp).glob("tensorrt_llm-*.whl"))
        if not wheels:
            return None
        with zipfile.ZipFile(wheels[0]) as z:
            for name, path in FILES.items():
                member = next((m for m in z.namelist() if m.endswith(path) or m.endswith("/" + name)), None)
                if member is None:
                    return None
                (d / name).write_bytes(z.read(member))
        return f"wheel {wheels[0].name}"


def fetch(release: str = RELEASE, budget_s: float = BUDGET_S, log=print) -> Path | None:
    """The release's files, fetched once; None when no source answered within the budget."""
    d = release_dir(release)
    if ready(release):
        return d
    d.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + budget_s
    for how in (_from_github, _from_wheel):
        source = how(release, d, deadline)
        if source:
            (d / "source").write_text(source + "\n")
            log(f"tensorrt-llm {release}: {source}")
            return d
    log(f"tensorrt-llm {release}: no source reachable (GitHub tag, {NVIDIA_INDEX})")
    return None


# ---- reading the Click declarations ---------------------------------------------------------------


def _str_args(call: ast.Call) -> list[str]:
    return [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]


def _is_flag(call: ast.Call) -> bool:
    return any(k.arg == "is_flag" and isinstance(k.value, ast.Constant) and k.value.value for k in call.keywords)


def click_options(source: str, command: str = "serve") -> dict[str, dict]:
    """{option name: {"flag": bool}} and {"<arguments>": [...]} of the Click command named `command`."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef):
            continue
        calls = [d for d in node.decorator_list if isinstance(d, ast.Call)]
        names = [d.func.attr for d in calls if isinstance(d.func, ast.Attribute)]
        if "command" not in names:
            continue
        cmd = next(d for d in calls if isinstance(d.func, ast.Attribute) and d.func.attr == "command")
        declared = _str_args(cmd)
        if (declared[0] if declared else node.name) != command:
            continue
        out: dict[str, dict] = {"<arguments>": []}
        for d in calls:
            if not isinstance(d.func, ast.Attribute):
                continue
            if d.func.attr == "option":
                for name in _str_args(d):
                    if name.startswith("-"):
                        out[name] = {"flag": _is_flag(d)}
            elif d.func.attr == "argument":
                out["<arguments>"] += _str_args(d)[:1]
        return out
    raise LookupError(f"no Click command {command!r} in this source")


def collector_series(source: str) -> list[dict]:
    """The Prometheus series tensorrt_llm/metrics/collector.py registers: [{"name", "kind", "buckets"}] in order,
    the name being the metric prefix the constructor sets plus the literal after it."""
    tree = ast.parse(source)
    prefix = ""
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and any(isinstance(t, ast.Attribute) and t.attr == "metric_prefix" for t in node.targets)
        ):
            prefix = node.value.value
    out = []
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("Counter", "Gauge", "Histogram")
        ):
            continue
        kw = {k.arg: k.value for k in node.keywords}
        name = kw.get("name")
        if isinstance(name, ast.BinOp) and isinstance(name.right, ast.Constant):
            text = prefix + name.right.value
        elif isinstance(name, ast.Constant):
            text = name.value
        else:
            continue
        buckets = ast.literal_eval(kw["buckets"]) if "buckets" in kw else None
        out.append({"name": text, "kind": node.func.id.lower(), "buckets": buckets})
    return sorted(out, key=lambda d: d["name"])


def main() -> int:
    return 0 if fetch(log=lambda s: print(s, flush=True)) else 1


if __name__ == "__main__":
    sys.exit(main())
