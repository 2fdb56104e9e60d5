"""The real benchmark client for tests: `vllm bench serve` from a vLLM contract environment, put on a PATH as
`vllm` (as a node with vLLM installed has it), and a simulated engine with a tokenizer in its model directory.

    python3 -m tests.benchclient OUTDIR   # re-capture tests/unit/data/bench/ from a real run
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.simhelpers import SimProcess, free_port, launcher_argv, make_model, module_argv

HERE = Path(__file__).resolve().parent
CONTRACT = HERE / "contract"
CLIENT_RELEASE = ("vllm", "0.31.0")  # the release inside config.example.yaml's vLLM image
SPEED = 20  # engine seconds per wall second (as tests/contract/test_clients.py)


def client_python() -> Path | None:
    from .contract.venvs import Release, python_of

    return python_of(Release(*CLIENT_RELEASE, "client"))


def client_bin(tmp: Path, d: Path | None = None) -> Path | None:
    """A directory (`d`, default TMP/clientbin) holding `vllm`, the real client; None when the environment is
    not built."""
    py = client_python()
    if py is None:
        return None
    d = d or tmp / "clientbin"
    d.mkdir(parents=True, exist_ok=True)
    w = d / "vllm"
    # the client's own environment: no simulator shims, nothing from the hub
    w.write_text(
        f"#!/bin/sh\nunset PYTHONPATH SPARKTUI_SIM_SPEED\nexport HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "
        f"HF_HOME={tmp}/hf NO_PROXY=127.0.0.1 OPENAI_API_KEY=sk-none PYTHONUNBUFFERED=1\n"
        # vllm_bench.py is `vllm bench`: the word itself is dropped here
        f'[ "$1" = bench ] && shift\nexec {py} {CONTRACT / "vllm_bench.py"} "$@"\n'
    )
    w.chmod(0o755)
    return d


def model_with_tokenizer(tmp: Path) -> Path:
    """A simulator checkpoint that also holds a tokenizer trained here (make_tokenizer.py)."""
    model = make_model(tmp / "model", shards=2)
    if not (model / "tokenizer.json").exists():
        subprocess.run(
            [str(client_python()), str(CONTRACT / "make_tokenizer.py"), str(model)],
            check=True,
            capture_output=True,
            timeout=300,
            env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        )
    return model


@contextlib.contextmanager
def sim_engine(
    engine: str, model: Path, served: str = "sim-model", port: int | None = None, version: str | None = None
):
    """A simulated engine on 127.0.0.1; yields its port."""
    port = port or free_port("127.0.0.1")
    common = ["--served-model-name", served, "--host", "127.0.0.1", "--port", str(port)]
    if engine == "vllm":
        argv = launcher_argv("vllm", "serve", str(model), *common)
        env, ready = {"SPARKTUI_SIM_VLLM_VERSION": version or "0.31.0"}, "Application startup complete."
    else:
        argv = module_argv("sglang.launch_server", "--model-path", str(model), *common, "--enable-metrics")
        env, ready = (
            {"SPARKTUI_SIM_SGLANG_VERSION": version or "0.5.3.post3"},
            "The server is fired up and ready to roll!",
        )
    with SimProcess(argv, speed=SPEED, extra_env=env) as sim:
        sim.wait_for(ready, timeout=120)
        yield port


def capture(out: Path) -> None:
    """Run the node's job (client.job, `vllm` on PATH) against each simulated engine; keep its result files."""
    from sparktui.core.bench import client

    tmp = out / "_work"
    tmp.mkdir(parents=True, exist_ok=True)
    bindir = client_bin(tmp)
    if bindir is None:
        sys.exit("the vLLM contract environment is not built: python3 -m tests.contract.venvs")
    model = model_with_tokenizer(tmp)
    w = client.Workload([1, 8], input_len=64, output_len=16)
    for engine in ("vllm", "sglang"):
        with sim_engine(engine, model) as port:
            job = client.job("path", "capture", "unused", port, "sim-model", str(model), w)
            d = tmp / engine
            d.mkdir(exist_ok=True)
            env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}")
            # one stream, as the node's log has it (2>&1)
            p = subprocess.run(
                ["sh", "-c", job],
                cwd=d,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=600,
            )
            (out / f"{engine}.log").write_text(p.stdout)
            if p.returncode:
                sys.exit(f"{engine}: exit {p.returncode}\n{p.stdout[-3000:]}")
            for c in w.concurrency:
                shutil.copy(d / f"c{c}.json", out / f"{engine}-c{c}.json")
    shutil.rmtree(tmp)


if __name__ == "__main__":
    capture(Path(sys.argv[1]))
