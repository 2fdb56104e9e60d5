"""`trtllm-serve MODEL ...` as rank 0 runs it under trtllm-llmapi-launch: its log lines, then real HTTP.

Lines and endpoints follow docs/trtllm.md (tensorrt_llm/commands/serve.py, tensorrt_llm/serve/openai_server.py,
real logs from public issue threads): the version banner, `[TRT-LLM] [I]` Python-logger lines, one
`[TensorRT-LLM][INFO] MPI size: ...` line per rank, then uvicorn's. Endpoints: /health (503 with
"LLM is unavailable..." until ready), /version, /v1/models (the model directory's basename), /metrics (JSON
iteration stats), /prometheus/metrics (Prometheus text, only with return_perf_metrics in the options file: the
release's series from metrics_catalog.py, moving as requests are served), and the OpenAI routes of the
simulator (completions.py). TensorRT-LLM has no API key: no route is guarded.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import time

from . import clock, collective, http1, httpapi, runtime, timing, wire
from .logfmt import emit
from .metrics import CONTENT_TYPE
from .model import GIB, ModelNotFound, load_model
from .trtllm_args import VERSION, UsageError, parse

UNAVAILABLE = b"LLM is unavailable. Please check the server logs for more details."
# tensorrt_llm/_torch/pyexecutor/hang_detector.py: HangDetector(timeout=None) waits 300 s; PyExecutor checkpoints it
# every executor iteration and pauses it while idle, waiting for requests (request_utils.py)
HANG_DETECTION_S = 300.0


def stamp() -> str:
    """The Python logger's time stamp: [07/05/2026-01:22:02]."""
    return time.strftime("[%m/%d/%Y-%H:%M:%S]")


def info(msg: str, tag: str = "", level: str = "I") -> None:
    """The Python logger's line (tensorrt_llm/logger.py: [I] info, [E] error)."""
    emit(f"{stamp()} [TRT-LLM] [{level}] {'[' + tag + '] ' if tag else ''}{msg}")


def cpp(msg: str, level: str = "INFO") -> None:
    emit(f"[TensorRT-LLM][{level}] {msg}")


class Gone:
    """The executor after its hang detector fired: its loop is still held in the collective and serves nothing
    again, so a new request waits unanswered (the HTTP server, not the executor, answers /health)."""

    async def step(self) -> None:
        await asyncio.Event().wait()

    async def settled(self) -> None:
        await asyncio.Event().wait()  # never scheduled: it stays waiting


def uvicorn(msg: str) -> None:
    emit(f"{'INFO:'.ljust(9)} {msg}")


def wants_prometheus(path: str | None) -> bool:
    """return_perf_metrics: true in the extra LLM API options file (a YAML line; stdlib only here)."""
    if not path:
        return False
    try:
        with open(path, encoding="utf-8") as f:
            return any(line.split("#")[0].replace(" ", "").strip().lower() == "return_perf_metrics:true" for line in f)
    except OSError:
        return False


class TrtApi(httpapi.ApiServer):
    """The simulator's HTTP server with TensorRT-LLM's own routes in front of the shared generation ones."""

    def __init__(self, state: httpapi.EngineState, prometheus: bool) -> None:
        super().__init__(state, lambda client, req: uvicorn(f"{client} - {req}"))
        self.prometheus = prometheus

    async def _route(
        self, method: str, path: str, body: bytes, w: asyncio.StreamWriter, keep: bool, auth: str = ""
    ) -> int:
        st = self.state
        if path == "/health" and method == "GET":
            code = 200 if st.status == "ready" else 503
            await http1.respond(w, code, b"" if code == 200 else UNAVAILABLE, keep=keep)
            return code
        if path == "/metrics" and method == "GET":
            stats = (
                [
                    {
                        "iter": st.requests,
                        "numActiveRequests": st.running,
                        "numQueuedRequests": st.waiting,
                        "kvCacheStats": {
                            "usedNumBlocks": st.kv_used // 32,
                            "tokensPerBlock": 32,
                            "maxNumBlocks": st.kv_tokens // 32,
                        },
                    }
                ]
                if st.requests
                else []
            )
            await http1.respond(w, 200, _json(stats), keep=keep)
            return 200
        if path.startswith("/prometheus/metrics") and method == "GET" and self.prometheus:
            await http1.respond(w, 200, st.metrics.render().encode(), keep=keep, ctype=CONTENT_TYPE)
            return 200
        if path == "/v1/models" and method == "GET":
            card = {"id": st.served_name, "object": "model", "created": st.created, "owned_by": "tensorrt_llm"}
            await http1.respond(w, 200, {"object": "list", "data": [card]}, keep=keep)
            return 200
        return await super()._route(method, path, body, w, keep, auth)


def unknown_architecture(config: dict) -> str | None:
    """The image's registry refusing the checkpoint (the simulated tensorrt_llm package's lookup, which the
    support check reads too), as the error line; None when it holds the architecture."""
    try:
        from tensorrt_llm._torch.models import AutoModelForCausalLM
    except ImportError:  # run without the shims on the path: nothing to refuse with
        return None
    try:
        AutoModelForCausalLM.from_config(config)
    except ValueError as e:
        return f"ValueError: {e}"
    return None


def _json(obj) -> bytes:
    import json

    return json.dumps(obj).encode()


class TrtServe:
    def __init__(self, argv: list[str]) -> None:
        self.a = parse(argv)
        self.rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0") or 0)
        self.size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("tllm_mpi_size", "1")) or 1)
        self.state: httpapi.EngineState | None = None
        self.api: TrtApi | None = None
        self.sync = collective.StepSync(scenario_hang=False)  # rank 0's per-step all-reduce with the other ranks

    async def join_ranks(self) -> None:
        """Links to the other ranks for every step's all-reduce (mpirun says where they run); a rank already
        gone leaves its link out (mpirun ends the job for it)."""
        from .trtllm_mpi import STEP_PEERS_ENV

        for peer in filter(None, os.environ.get(STEP_PEERS_ENV, "").split(",")):
            host, _, port = peer.rpartition(":")
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), clock.scaled(30))
                await wire.send(writer, {"op": "steps"})
            except (OSError, ValueError, asyncio.TimeoutError):
                continue
            self.sync.add(reader, writer)

    async def hang_detector(self) -> None:
        """PyExecutor's hang detector: an iteration held past HANG_DETECTION_S (a rank frozen inside the
        all-reduce) is logged, and the requests in flight end with its error (PyExecutor._handle_errors)."""
        await self.sync.stalled(HANG_DETECTION_S)  # StepSync without the scenario: a frozen peer is the one cause
        info(f"Hang detected after {HANG_DETECTION_S:.0f} seconds.", level="E")
        info(f"Hang detected on rank {self.rank} in PyExecutor.", level="E")
        self.sync.abort()
        if self.state is not None:
            self.state.steps = Gone()

    async def run(self) -> int:
        a = self.a
        emit(f"[TensorRT-LLM] TensorRT-LLM version: {VERSION}")
        await clock.pause(2.0)
        world = a.tensor_parallel_size * a.pipeline_parallel_size
        if world != self.size:
            emit(
                runtime.traceback_text(
                    [(f"{runtime.PY}/tensorrt_llm/llmapi/llm.py", 1100, "__init__", "self._build_model()")],
                    f"RuntimeError: tp_size * pp_size ({world}) does not match the MPI world size ({self.size})",
                )
            )
            return 1
        # bind first, as launch_server does, so a taken port fails before anything loads
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        host = "0.0.0.0" if a.host in ("0.0.0.0", "") else ("127.0.0.1" if a.host == "localhost" else a.host)
        try:
            sock.bind((host, a.port))
        except OSError as e:
            emit(f"RuntimeError: Failed to bind socket to {a.host}:{a.port}: {e}")
            return 1
        info("Using LLM with PyTorch backend", "llmapi")
        try:
            model = load_model(a.model)
        except ModelNotFound:
            emit(f"OSError: {a.model} is not a local folder and is not a valid model identifier")
            return 1
        unknown = unknown_architecture({**model.config, "architectures": [model.architecture]})
        if unknown:
            emit(
                runtime.traceback_text(
                    [
                        (
                            f"{runtime.PY}/tensorrt_llm/_torch/models/modeling_auto.py",
                            56,
                            "from_config",
                            "raise ValueError(",
                        )
                    ],
                    unknown,
                )
            )
            return 1
        for r in range(self.size):
            cpp(f"MPI size: {self.size}, MPI local size: 1, rank: {r}")
            cpp(f"Rank {r} is using GPU 0")
        if self.size > 1:
            from .trtllm_mpi import nccl_iface_problem

            problem = nccl_iface_problem()
            if problem:
                for line in problem:
                    emit(line)
                return 1
        per_rank = model.total_bytes / max(1, world) / GIB
        await clock.pause(2.0 + per_rank / 4)
        info(f"Loading weights: {per_rank:.2f} GiB per rank", "llmapi")
        free = max(0.0, 119.7 - per_rank - 2.0)
        kv_gib = free * a.free_gpu_memory_fraction
        per_token = max(1, model.kv_bytes_per_token(a.tensor_parallel_size))
        kv_tokens = int(kv_gib * GIB // per_token)
        max_len = a.max_seq_len or model.max_position or 4096
        # cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp TLLM_LOG_INFO lines, then the Python summary
        cpp("Number of tokens per block: 32.")
        cpp(f"[MemUsageChange] Allocated {kv_gib:.2f} GiB for max tokens in paged KV cache ({kv_tokens}).")
        info(
            f"max_seq_len={max_len}, max_num_requests={a.max_batch_size}, max_num_tokens={a.max_num_tokens}, "
            f"max_batch_size={a.max_batch_size}"
        )
        self.state = httpapi.EngineState(
            "vllm", os.path.basename(a.model.rstrip("/")) or a.model, a.model, max_len, VERSION, metrics_kind="trtllm"
        )
        self.state.kv_tokens = kv_tokens
        self.state.max_running = a.max_batch_size
        self.state.timing = timing.timing_for(
            "vllm", model.total_bytes, model.config, model.num_layers, world, self.size
        )
        if self.size > 1:
            await self.join_ranks()
            self.state.steps = self.sync if self.sync.peers else None
        sock.listen(128)
        sock.setblocking(False)
        self.api = TrtApi(self.state, wants_prometheus(a.extra_llm_api_options))
        await self.api.start(sock=sock)
        uvicorn(f"Started server process [{os.getpid()}]")
        uvicorn("Waiting for application startup.")
        self.state.status = "ready"
        uvicorn("Application startup complete.")
        uvicorn(f"Uvicorn running on http://{a.host}:{a.port} (Press CTRL+C to quit)")
        detector = asyncio.ensure_future(self.hang_detector()) if self.sync.peers else None
        try:
            await runtime.forever()
        except asyncio.CancelledError:
            if detector is not None:
                detector.cancel()
            self.sync.close()
            uvicorn("Shutting down")
            uvicorn("Waiting for application shutdown.")
            uvicorn("Application shutdown complete.")
            uvicorn(f"Finished server process [{os.getpid()}]")
            await self.api.close()
            raise
        return 0


def main(argv: list[str] | None = None) -> int:
    try:
        serve = TrtServe(sys.argv[1:] if argv is None else argv)
    except UsageError as e:
        print(e.text, file=sys.stderr, flush=True)
        return 2
    return runtime.run(serve.run)


if __name__ == "__main__":
    sys.exit(main())
