"""`python3 -m sglang.launch_server`: one node's share of an SGLang deployment.

Order of events, as SGLang prints them: server_args, per rank "Init torch distributed begin.",
the rendezvous at --dist-init-addr, "CustomAllreduce is disabled ..." (multi-node), the cross-node
message queue (where a wrong published address freezes every rank), "Init torch distributed ends.",
weights, KV cache, CUDA graphs, then on node 0 only: uvicorn, warm-up, "fired up and ready to roll".
A watchdog kills a rank that makes no progress for --watchdog-timeout engine seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import os
import random
import socket
import sys
import time

from . import clock, collective, gpu, hostmem, httpapi, mesh, nccl_lines, netinfo, runtime, timing
from .logfmt import SGLangLog, progress_bar
from .model import GIB, ModelInfo, ModelNotFound, load_model
from .sglang_args import VERSION, build_parser, server_args_repr
from .support import refusal
from .store import StoreClient, StoreError, StoreServer, wait_complete

NCCL_VERSION = "2.27.3"
SHARD_S = 2.5  # engine seconds per safetensors shard, per node
SLOW_SHARD_S = 25.0
GRAPH_BS = [1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 128, 136, 144, 152, 160]


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # the real launch_server parses with parse_args: argparse refuses them
        parser.error("unrecognized arguments: " + " ".join(unknown))
    return runtime.run(lambda: SGLangNode(args, unknown).run())


class SGLangNode:
    def __init__(self, args: argparse.Namespace, unknown: list[str]) -> None:
        self.args = args
        self.unknown = unknown
        self.log = SGLangLog()
        self.group: StoreServer | StoreClient | None = None
        self.endpoint: mesh.QueueEndpoint | None = None
        self.watchdog = runtime.Watchdog(args.watchdog_timeout)
        self.api: httpapi.ApiServer | None = None
        self.state: httpapi.EngineState | None = None
        self.model: ModelInfo | None = None
        self.kv_tokens = 0
        self.mem = hostmem.EngineMemory()  # what the ranks take of this node's memory (demo nodes only)
        self.avail_after = 0.0
        self.queue_up = asyncio.Event()
        self.sync = collective.StepSync()  # node 0's per-step all-reduce with the other nodes, once serving
        n = max(1, args.nnodes)
        world = max(1, args.tp_size) * max(1, args.pp_size)
        self.gpus_here = max(1, world // n)
        first = args.node_rank * self.gpus_here
        self.global_ranks = list(range(first, first + self.gpus_here))

    # -- log lines -------------------------------------------------------------------------
    def where(self, g: int) -> tuple[int, int | None]:
        tp = max(1, self.args.tp_size)
        return g % tp, (g // tp if self.args.pp_size > 1 else None)

    def each(self, msg: str) -> None:
        for g in self.global_ranks:
            tp, pp = self.where(g)
            self.log.rank(tp, msg, pp)

    def first_rank(self, msg: str) -> None:
        tp, pp = self.where(self.global_ranks[0])
        self.log.rank(tp, msg, pp)

    def crash(self, exc_line: str, frames: list[tuple[str, int, str, str]] | None = None) -> int:
        """A scheduler raised: it reports, SIGQUITs the launcher, which kills the process tree."""
        frames = frames or [
            (
                f"{runtime.PY}/sglang/srt/managers/scheduler.py",
                2817,
                "run_scheduler_process",
                "scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)",
            )
        ]
        self.first_rank("Scheduler hit an exception: " + runtime.traceback_text(frames, exc_line) + "\n")
        self.log.main("Received sigquit from a child process. It usually means the child failed.")
        return 137

    # -- the run -----------------------------------------------------------------------------
    async def run(self) -> int:
        a = self.args
        await clock.pause(4.0)  # importing torch and friends
        if self.unknown:
            self.log.main(f"WARNING: unrecognized arguments ignored: {' '.join(self.unknown)}")
        self.log.main("server_args=" + server_args_repr(self.args))
        try:
            self.model = load_model(a.model_path)
        except ModelNotFound:
            self.log.raw(
                runtime.traceback_text(
                    [
                        ("<frozen runpy>", 198, "_run_module_as_main", ""),
                        (
                            f"{runtime.PY}/sglang/launch_server.py",
                            29,
                            "<module>",
                            "server_args = prepare_server_args(sys.argv[1:])",
                        ),
                        (
                            f"{runtime.PY}/transformers/configuration_utils.py",
                            721,
                            "_get_config_dict",
                            "raise EnvironmentError(",
                        ),
                    ],
                    f"OSError: Can't load the configuration of '{a.model_path}'. If you were trying to load it from "
                    f"'https://huggingface.co/models', make sure you don't have a local directory with the same name. "
                    f"Otherwise, make sure '{a.model_path}' is the correct path to a directory containing a config.json file",
                )
            )
            return 1
        why = refusal(self.model.config)  # the image's transformers cannot read the model type
        if why:
            self.log.raw(
                runtime.traceback_text(
                    [
                        (
                            f"{runtime.PY}/sglang/launch_server.py",
                            29,
                            "<module>",
                            "server_args = prepare_server_args(sys.argv[1:])",
                        ),
                        (
                            f"{runtime.PY}/transformers/models/auto/configuration_auto.py",
                            1360,
                            "from_pretrained",
                            "raise ValueError(",
                        ),
                    ],
                    why,
                )
            )
            return 1
        problem = self.check_layout()
        if problem:
            self.log.raw(
                runtime.traceback_text(
                    [
                        (
                            f"{runtime.PY}/sglang/launch_server.py",
                            29,
                            "<module>",
                            "server_args = prepare_server_args(sys.argv[1:])",
                        ),
                    ],
                    problem,
                )
            )
            return 1
        self.state = httpapi.EngineState(
            "sglang",
            a.served_model_name or a.model_path,
            a.model_path,
            self.context_len(),
            VERSION,
            {
                "tp_size": a.tp_size,
                "pp_size": a.pp_size,
                "nnodes": a.nnodes,
                "node_rank": a.node_rank,
                "model_path": a.model_path,
                "dist_init_addr": a.dist_init_addr,
            },
            api_key=a.api_key,
            metrics_enabled=a.enable_metrics,
        )
        try:
            return await self.lifecycle()
        except asyncio.CancelledError:
            self.shutdown_lines()
            raise
        finally:
            await self.close()

    async def lifecycle(self) -> int:
        idx, result = await runtime.first(self.initialize(), self.watchdog.expired(), self.peer_gone())
        if idx == 1:
            return self.watchdog_kill()
        if idx == 2:
            return self.peer_lost_during_init()
        if result != 0:
            return int(result)  # type: ignore[arg-type]
        if self.args.node_rank != 0:
            await self.peer_gone()
            return self.peer_lost_after_ready(exit_after=True)
        code = await self.serve_http()
        if code:
            return code
        idx, how = await runtime.first(self.serve_until_stall(), self.peer_gone())
        self.sync.abort()  # the requests in flight end with the scheduler's death
        if idx == 0 and how == "hang":
            return self.collective_timeout()
        if idx == 0:  # a frozen peer: the scheduler's watchdog sees no forward pass complete
            return self.watchdog_kill()
        self.peer_lost_after_ready(exit_after=False)
        await runtime.forever()  # the HTTP server stays up with /health 503, as SGLang's can
        return 0

    async def serve_until_stall(self) -> str:
        """Warm up and serve; returns how a step's collective stalled past SGLang's watchdog: the scheduler
        watchdog (--watchdog-timeout, 300 s) kills a scheduler whose forward count stops moving while a
        batch runs (sglang/srt/managers/scheduler.py watchdog_thread, 0.5.x)."""
        await self.warmup()
        return await self.sync.stalled(float(self.args.watchdog_timeout))

    async def peer_gone(self) -> None:
        """Returns once another node went away after the message queue was up (never on a single node).
        A rank blocked in the queue handshake watches nothing else: only its watchdog ends that wait."""
        if self.args.nnodes <= 1:
            await runtime.forever()
        await self.queue_up.wait()
        assert self.group is not None
        await self.group.lost.wait()

    # -- init ---------------------------------------------------------------------------------
    async def initialize(self) -> int:
        a = self.args
        await clock.pause(3.0)
        self.each("Init torch distributed begin.")
        self.watchdog.feed()
        if a.nnodes > 1:
            code = await self.rendezvous()
            if code:
                return code
        else:
            await clock.pause(1.5)
        self.each(f"sglang is using nccl=={NCCL_VERSION}")
        if a.nnodes > 1:
            for g in self.global_ranks:  # NCCL's own lines, raw on stdout, when NCCL_DEBUG=INFO
                for line in nccl_lines.for_rank(g, a.tp_size * a.pp_size):
                    self.log.raw(line)
            self.each("CustomAllreduce is disabled because this process group spans across nodes.")
            await self.message_queue()
        await clock.pause(0.5)
        self.each(f"Init torch distributed ends. mem usage={gpu.RUNTIME_OVERHEAD_GIB * 0.3:.2f} GB")
        self.watchdog.feed()
        code = await self.load_weights()
        if code:
            return code
        code = await self.allocate_kv()
        if code:
            return code
        if not a.disable_cuda_graph:
            await self.capture_graphs()
        self.first_rank(
            f"max_total_num_tokens={self.kv_tokens}, chunked_prefill_size={a.chunked_prefill_size}, "
            f"max_prefill_tokens={a.max_prefill_tokens}, max_running_requests={self.max_running()}, "
            f"context_len={self.context_len()}, available_gpu_mem={self.avail_after:.2f} GB"
        )
        if self.group is not None:
            await self.group.barrier("ready")
        self.watchdog.feed()
        return 0

    def dist_addr(self) -> tuple[str, int]:
        raw = self.args.dist_init_addr
        if not raw:
            # SGLang falls back to a local address: fine on one node, a silent hang across several
            return "127.0.0.1", self.args.port + 233
        host, _, port = raw.rpartition(":")
        return host.strip("[]") or "127.0.0.1", int(port)

    async def rendezvous(self) -> int:
        a = self.args
        host, port = self.dist_addr()
        deadline = time.monotonic() + clock.scaled(a.dist_timeout) if a.dist_timeout else None
        nnodes = a.nnodes
        if a.node_rank == 0:
            server = StoreServer(nnodes)
            try:
                await server.start(host, port)
            except OSError as e:
                return self.crash(self.bind_error(host, port, e))
            self.group = server
            bind_addr = host
        else:
            client = StoreClient(nnodes, a.node_rank)
            self.group = client
            try:
                await client.connect(host, port, deadline)
            except StoreError:
                return self.crash(
                    f"torch.distributed.DistNetworkError: The client socket has timed out after "
                    f"{a.dist_timeout * 1000}ms while trying to connect to ({host}, {port})."
                )
            bind_addr = client.local_address
        published = self.published_ip(bind_addr)
        self.endpoint = mesh.QueueEndpoint(a.node_rank, set(range(nnodes)) - {a.node_rank})
        try:
            await self.endpoint.start(netinfo.queue_bind_address(published, bind_addr))
        except OSError as e:
            return self.crash(f"OSError: [Errno {e.errno}] {e.strerror}")
        info = {"host_ip": published, "mq_port": self.endpoint.port, "hostname": socket.gethostname()}
        if isinstance(self.group, StoreServer):
            await self.group.publish(info)
        else:
            await self.group.join(info)
        try:
            await wait_complete(self.group, deadline)
        except StoreError:
            if isinstance(self.group, StoreServer):
                return self.crash(
                    f"torch.distributed.DistStoreError: Timed out after {a.dist_timeout + 1} seconds "
                    f"waiting for clients. {self.group.joined()}/{nnodes} clients joined."
                )
            return self.crash("torch.distributed.DistNetworkError: Connection reset by peer")
        return 0

    def bind_error(self, host: str, port: int, e: OSError) -> str:
        if e.errno == errno.EADDRINUSE:
            return (
                f"torch.distributed.DistNetworkError: The server socket has failed to listen on any local "
                f"network address. port: {port}, useIpv6: 0, code: -98, name: EADDRINUSE, message: address "
                "already in use"
            )
        return (
            f"torch.distributed.DistNetworkError: The server socket has failed to bind to {host}:{port} "
            f"(errno: {e.errno} - {e.strerror})."
        )

    def published_ip(self, bind_addr: str) -> str:
        """The address this node announces for its message queue."""
        if clock.active("sglang-host-ip"):
            return netinfo.other_network_ip(bind_addr) or bind_addr
        env = os.environ.get("SGLANG_HOST_IP") or os.environ.get("HOST_IP")
        if env:
            return env
        ip = netinfo.auto_ip()
        if ip:
            return ip
        self.log.raw(
            f"{runtime.PY}/sglang/srt/utils/common.py:1878: UserWarning: Failed to get the IP address, "
            "using 0.0.0.0 by default. The value can be set by the environment variable SGLANG_HOST_IP "
            "or HOST_IP.\n  warnings.warn("
        )
        return "0.0.0.0"

    async def message_queue(self) -> None:
        """Connect to every peer's published address; frozen here while any is unreachable."""
        assert self.group is not None and self.endpoint is not None
        peers = {
            r: (m.get("host_ip", ""), int(m.get("mq_port", 0)))
            for r, m in self.group.members.items()
            if r != self.args.node_rank
        }
        for reader, writer in await mesh.join_mesh(self.endpoint, peers):
            if self.args.node_rank == 0:
                self.sync.add(reader, writer)
        self.queue_up.set()

    # -- weights, KV, graphs ------------------------------------------------------------------
    def check_layout(self) -> str | None:
        a = self.args
        world = a.tp_size * a.pp_size
        if a.nnodes < 1 or not 0 <= a.node_rank < a.nnodes:
            return f"AssertionError: node_rank {a.node_rank} must be in [0, nnodes={a.nnodes})"
        if world % a.nnodes:
            return f"AssertionError: tp_size * pp_size ({world}) must be divisible by nnodes ({a.nnodes})"
        if self.gpus_here > gpu.gpus_per_node():
            return (
                f"RuntimeError: This node needs {self.gpus_here} GPUs for tp_size={a.tp_size}, "
                f"pp_size={a.pp_size}, nnodes={a.nnodes} but only {gpu.gpus_per_node()} are visible."
            )
        if a.nnodes > 1 and a.dist_init_addr and ":" not in a.dist_init_addr:
            return f"ValueError: --dist-init-addr must be HOST:PORT, got {a.dist_init_addr!r}"
        return None

    def context_len(self) -> int:
        assert self.model is not None or self.args.context_length
        return int(self.args.context_length or (self.model.max_position if self.model else 32768))

    def max_running(self) -> int:
        return int(self.args.max_running_requests or max(1, min(4096, self.kv_tokens // 64)))

    async def load_weights(self) -> int:
        a, m = self.args, self.model
        assert m is not None
        total = gpu.total_gib()
        avail = total - gpu.RUNTIME_OVERHEAD_GIB
        where = [None] * self.gpus_here
        self.mem.set("runtime", gpu.RUNTIME_OVERHEAD_GIB, where)  # CUDA context, NCCL buffers
        self.each(f"Load weight begin. avail mem={avail:.2f} GB")
        if not m.shards:
            return self.crash(f"RuntimeError: Cannot find any model weights with `{a.model_path}`")
        weights = gpu.weights_gib(m.total_bytes, a.tp_size, a.pp_size)
        leader = 0 in self.global_ranks
        n = len(m.shards)
        # a handful of fixture shards still take as long as a small real checkpoint would
        per = (SLOW_SHARD_S if clock.active("slow-load") else SHARD_S) * max(1.0, 8.0 / n)
        oom_at = max(1, (n * 6 + 9) // 10) if clock.active("oom") else None
        start = time.monotonic()
        if leader:
            self.log.raw(progress_bar("Loading safetensors checkpoint shards", 0, n, 0.0))
        for k in range(1, n + 1):
            await self.mem.fill(
                "weights", weights * (k - 1) / n, weights * k / n, per * random.uniform(0.85, 1.15), where
            )
            self.watchdog.feed()
            loaded = weights * k / n
            if (oom_at is not None and k == oom_at) or loaded > avail - 0.2:
                free = max(0.05, avail - loaded * 0.98)
                return self.crash(
                    "torch.OutOfMemoryError: " + gpu.torch_oom_message(weights / n * 1.3, free, total - free)
                )
            self.mem.set("weights", loaded, where)
            if leader:
                elapsed = (time.monotonic() - start) * clock.speed()
                self.log.raw(progress_bar("Loading safetensors checkpoint shards", k, n, elapsed))
        self.avail_after = avail - weights
        self.each(
            f"Load weight end. type={m.architecture}, dtype=torch.{m.dtype}, "
            f"avail mem={self.avail_after:.2f} GB, mem usage={weights:.2f} GB."
        )
        return 0

    async def allocate_kv(self) -> int:
        a, m = self.args, self.model
        assert m is not None
        total = gpu.total_gib()
        frac = a.mem_fraction_static if a.mem_fraction_static is not None else 0.835
        rest = self.avail_after - total * (1 - frac)
        await clock.pause(1.0)
        if rest <= 0.05:
            return self.crash(
                "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
                [
                    (
                        f"{runtime.PY}/sglang/srt/model_executor/model_runner.py",
                        1489,
                        "init_memory_pool",
                        "raise RuntimeError(",
                    )
                ],
            )
        self.kv_tokens = int(rest * GIB // m.kv_bytes_per_token(a.tp_size))
        if a.max_total_tokens:
            self.kv_tokens = min(self.kv_tokens, a.max_total_tokens)
        kv_dtype = "torch.bfloat16" if a.kv_cache_dtype == "auto" else f"torch.{a.kv_cache_dtype}"
        self.mem.set("kv", rest, [None] * self.gpus_here)  # the post-load drop: the KV pool, allocated whole
        self.each(f"Using KV cache dtype: {kv_dtype}")
        self.each(
            f"KV Cache is allocated. #tokens: {self.kv_tokens}, K size: {rest / 2:.2f} GB, V size: {rest / 2:.2f} GB"
        )
        self.avail_after -= rest
        self.each(f"Memory pool end. avail mem={self.avail_after:.2f} GB")
        self.watchdog.feed()
        return 0

    async def capture_graphs(self) -> None:
        bs = [b for b in GRAPH_BS if b <= (self.args.cuda_graph_max_bs or 160)]
        self.each(f"Capture cuda graph begin. This can take up to several minutes. avail mem={self.avail_after:.2f} GB")
        self.first_rank(f"Capture cuda graph bs {bs}")
        leader = 0 in self.global_ranks
        steps = 4
        started = time.monotonic()
        for i in range(steps + 1):
            if i:
                await clock.pause(2.4)
                self.watchdog.feed()
            if leader:
                done = len(bs) * i // steps
                label = f"Capturing batches (bs={bs[max(0, len(bs) - 1 - done)]} avail_mem={self.avail_after - 0.2 * i:.2f} GB)"
                self.log.raw(progress_bar(label, done, len(bs), (time.monotonic() - started) * clock.speed(), bar=True))
        took = (time.monotonic() - started) * clock.speed()
        self.avail_after -= 0.86
        self.mem.set("graphs", 0.86, [None] * self.gpus_here)
        self.each(
            f"Capture cuda graph end. Time elapsed: {took:.2f} s. mem usage=0.86 GB. "
            f"avail mem={self.avail_after:.2f} GB."
        )

    # -- serving ------------------------------------------------------------------------------
    async def serve_http(self) -> int:
        a = self.args
        assert self.state is not None
        self.api = httpapi.ApiServer(self.state, lambda client, req: self.log.uvicorn("INFO", f"{client} - {req}"))
        self.state.kv_tokens, self.state.max_running = self.kv_tokens, self.max_running()
        if self.model is not None:
            self.state.timing = timing.timing_for(
                "sglang", self.model.total_bytes, self.model.config, self.model.num_layers, a.tp_size, a.nnodes
            )
        self.state.steps = self.sync if self.sync.peers else None
        self.state.on_prefill = self._prefill_line
        self.state.on_decode = self._decode_line
        pid = os.getpid()
        self.log.uvicorn("INFO", f"Started server process [{pid}]")
        self.log.uvicorn("INFO", "Waiting for application startup.")
        self.log.uvicorn("INFO", "Application startup complete.")
        try:
            netinfo.check_bindable(a.host)
            await self.api.start(a.host, a.port)
        except OSError as e:
            why = e.strerror or str(e)
            if not why.startswith("error while attempting"):  # asyncio words it like uvicorn already
                why = f"error while attempting to bind on address ('{a.host}', {a.port}): {why.lower()}"
            self.log.uvicorn("ERROR", f"[Errno {e.errno}] {why}")
            self.log.uvicorn("INFO", "Waiting for application shutdown.")
            self.log.uvicorn("INFO", "Application shutdown complete.")
            self.api = None
            return 1
        self.log.uvicorn("INFO", f"Uvicorn running on http://{a.host}:{a.port} (Press CTRL+C to quit)")
        return 0

    async def warmup(self) -> None:
        assert self.state is not None
        await clock.pause(1.0)
        client = f"127.0.0.1:{random.randint(32768, 60999)}"
        self.log.uvicorn("INFO", f'{client} - "GET /get_model_info HTTP/1.1" 200 OK')
        if not self.args.skip_server_warmup:
            await httpapi.generate(self.state, 6, "The capital city of France is Paris.", 8)
            self.log.uvicorn("INFO", f'{client} - "POST /generate HTTP/1.1" 200 OK')
        self.state.status = "ready"
        self.log.main("The server is fired up and ready to roll!")

    def _prefill_line(self, new_tokens: int, running: int) -> None:
        usage = new_tokens / max(1, self.kv_tokens)
        self.first_rank(
            f"Prefill batch. #new-seq: 1, #new-token: {new_tokens}, #cached-token: 0, "
            f"token usage: {usage:.2f}, #running-req: {running - 1}, #queue-req: {self.state.waiting}, "
        )

    def _decode_line(self, tokens: int, running: int) -> None:
        graph = "False" if self.args.disable_cuda_graph else "True"
        self.first_rank(
            f"Decode batch. #running-req: {running}, #token: {tokens}, token usage: "
            f"{tokens / max(1, self.kv_tokens):.2f}, cuda graph: {graph}, gen throughput (token/s): "
            f"{self.state.gauges()['gen_throughput'] * random.uniform(0.97, 1.03):.2f}, "
            f"#queue-req: {self.state.waiting}, "
        )

    # -- failures -----------------------------------------------------------------------------
    def watchdog_kill(self) -> int:
        t = self.args.watchdog_timeout
        shown = int(t) if float(t).is_integer() else t
        for g in self.global_ranks:
            tp, pp = self.where(g)
            self.log.rank(tp, f"Scheduler watchdog timeout (self.watchdog_timeout={shown}, self.soft=False)", pp)
        self.log.main("Rank 0 scheduler is dead. Please check if there are relevant logs.")
        self.log.main("Exit code: -9")
        return 137

    def collective_timeout(self) -> int:
        """The scenario's hung all-reduce mid-serving: torch's NCCL watchdog terminates the process group on
        each local rank (the form of tests/corpus/sglang_serving_dot_form_then_allgather_timeout.log)."""
        ms = int(collective.TORCH_NCCL_TIMEOUT_S * 1000)
        seq = self.sync.seq * 2 * max(1, self.model.num_layers if self.model else 1)
        for g in self.global_ranks:
            stamp = f"{time.strftime('%m%d %H:%M:%S')}.{random.randint(0, 999999999):09d}"
            self.log.raw(
                f"[rank{g}]:[E{stamp} ProcessGroupNCCL.cpp:1595] [PG ID 2 PG GUID 3 Rank {g}] Process group "
                f"watchdog thread terminated with exception: [Rank {g}] Watchdog caught collective operation "
                f"timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=4096, NumelOut=4096, "
                f"Timeout(ms)={ms}) ran for {ms + random.randint(3, 120)} milliseconds before timing out."
            )
            self.log.raw(
                f"[rank{g}]:[E{stamp} ProcessGroupNCCL.cpp:1601] [PG ID 2 PG GUID 3 Rank {g}] Terminating "
                "the process after attempting to dump debug info, due to collective timeout or exception."
            )
        if self.state is not None:
            self.state.status = "dead"
        self.log.main("Rank 0 scheduler is dead. Please check if there are relevant logs.")
        self.log.main("Exit code: -6")
        return 134

    def peer_lost_during_init(self) -> int:
        return self.crash(
            "torch.distributed.DistNetworkError: failed to recv, got 0 bytes. "
            "Connection was likely closed. Did the remote server shutdown or crash?"
        )

    def peer_lost_after_ready(self, exit_after: bool) -> int:
        assert self.group is not None
        peer = self.group.lost_rank
        for g in self.global_ranks:
            self.log.raw(
                f"[rank{g}]:[E{time.strftime('%m%d %H:%M:%S')}.{random.randint(0, 999999):06d} "
                f"ProcessGroupNCCL.cpp:1896] [PG ID 2 PG GUID 3 Rank {g}] Process group watchdog thread "
                f"terminated with exception: NCCL error: remote process exited or there was a network "
                f"error, NCCL version {NCCL_VERSION}\nncclRemoteError: A call failed possibly due to a "
                f"network error or a remote process exiting prematurely.\nLast error:\nsocketProgress: "
                f"Connection closed by remote peer (node rank {peer})"
            )
        if self.state is not None:
            self.state.status = "dead"
        self.log.main("Rank 0 scheduler is dead. Please check if there are relevant logs.")
        self.log.main("Exit code: -6")
        return 134 if exit_after else 0

    def shutdown_lines(self) -> None:
        if self.api is not None:
            self.log.uvicorn("INFO", "Shutting down")
            self.log.uvicorn("INFO", "Waiting for application shutdown.")
            self.log.uvicorn("INFO", "Application shutdown complete.")
            self.log.uvicorn("INFO", f"Finished server process [{os.getpid()}]")

    async def close(self) -> None:
        self.mem.release()
        self.sync.close()
        if self.api is not None:
            await self.api.close()
        if self.endpoint is not None:
            await self.endpoint.close()
        if self.group is not None:
            await self.group.close()


if __name__ == "__main__":
    sys.exit(main())
