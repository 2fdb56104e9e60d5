"""Signatures generalised from the engines' and torch's own message formats (their source wording),
in the shapes they reach a log: other units, hard-wrapped, without a traceback header."""

from __future__ import annotations

import pytest

from sparktui.core.diagnosis.diagnose import Diagnoser
from sparktui.core.diagnosis.logfile import guess_engine


def diag(engine: str, *lines: str) -> Diagnoser:
    d = Diagnoser(engine)
    for line in lines:
        d.feed(line)
    d.finish()
    return d


def first(d: Diagnoser) -> str:
    return d.ordered_problems()[0].kind


@pytest.mark.parametrize(
    "line,kind,state",
    [
        # torch/csrc/distributed/c10d/socket.cpp: "The server socket on {} has timed out, will retry."
        (
            "[W socket.cpp:663] [c10d] The server socket on [::ffff:10.10.10.1]:29500 has timed out, will retry.",
            "rendezvous_hang",
            "hung",
        ),
        (
            "[c10d] The client socket has timed out after 600000ms while trying to connect to (10.0.0.1, 29500).",
            "rendezvous_hang",
            "failed",
        ),
        (
            "[c10d] The client socket has timed out after 1800s while trying to connect to (10.0.0.1, 29500).",
            "rendezvous_hang",
            "failed",
        ),
        (
            "torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for clients. 1/2 clients joined.",
            "rendezvous_hang",
            "failed",
        ),
        ("RuntimeError: Timed out waiting 1800000ms for recv operation to complete", "watchdog_timeout", "failed"),
        (
            "RuntimeError: Not enough GPU memory for hybrid state cache. total_rest_memory=0.41 GB",
            "out_of_memory",
            "failed",
        ),
    ],
)
def test_upstream_wordings_in_any_unit(line, kind, state):
    d = diag("sglang", line)
    assert first(d) == kind and d.state == state


def test_a_watchdog_line_wrapped_by_the_page_it_was_copied_from():
    d = diag(
        "vllm",
        "[rank1]:[E626 06:24:44.903881913 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation",
        "timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE, NumelIn=9801523, NumelOut=9801523, Timeout(ms)=600000) ran for 600",
        "020 milliseconds before timing out.",
    )
    assert first(d) == "watchdog_timeout"


def test_a_traceback_without_its_header_names_the_missing_model():
    d = diag(
        "vllm",
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/transformers_utils/config.py", line 312, in get_config',
        "    config_dict, _ = PretrainedConfig.get_config_dict(",
        "FileNotFoundError: [Errno 2] No such file or directory: '/models/Qwen3-235B/config.json'",
    )
    assert [p.kind for p in d.problems] == ["model_not_found"]


def test_a_warmup_read_timeout_after_init_is_its_own_outcome():
    d = diag(
        "sglang",
        "[2026-03-02 10:14:12 TP0] Init torch distributed begin.",
        "[2026-03-02 10:14:40 TP0] Init torch distributed ends. mem usage=0.42 GB",
        "requests.exceptions.ReadTimeout: HTTPConnectionPool(host='10.0.0.1', port=30000): Read timed out. "
        "(read timeout=600)",
    )
    (p,) = d.problems
    assert p.kind == "warmup_timeout" and "forward pass" in p.message


def test_a_nic_event_that_recovered_is_not_blamed_for_a_later_timeout():
    d = diag(
        "vllm",
        "spark2:88:120 [0] NCCL WARN NET/IB : Got async event : port error",
        "spark2:88:120 [0] NCCL WARN NET/IB : Got async event : port active",
        "(Worker_TP1 pid=88) INFO 03-03 09:12:25 [gpu_model_runner.py:2602] Starting to load model /m...",
        "[rank1]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600061 "
        "milliseconds before timing out.",
    )
    assert [p.kind for p in d.ordered_problems()] == ["watchdog_timeout"]
    assert [c.problem.kind for c in d.cleared] == ["nccl_error", "nccl_error"]  # both withdrawn by the load


def test_sglang_soft_watchdog_is_withdrawn_when_serving_goes_on():
    d = Diagnoser("sglang")
    d.feed("[2026-03-02 11:00:00 TP0] Watchdog timeout (self.watchdog_timeout=300, self.soft=True)")
    assert d.problems[0].provisional
    d.feed('[2026-03-02 11:00:05] INFO:     10.0.0.9:5000 - "POST /v1/chat/completions HTTP/1.1" 200 OK')
    d.finish()
    assert d.problems == [] and d.state == "ready"


def test_kv_size_from_mla_models_and_the_current_prefetch_wordings():
    d = diag("sglang", "[2025-03-09 14:40:47 TP0] KV Cache is allocated. #tokens: 1462784, KV size: 25.11 GB")
    (kv,) = [m for m in d.milestones if m.kind == "kv_cache"]
    assert kv.data == {"tokens": 1462784, "size_gb": 25.11}
    slow = diag(
        "vllm",
        "(Worker_TP0 pid=4) INFO 04-24 10:27:54 [weight_utils.py:934] Auto-prefetch is disabled because "
        "the filesystem (9P) is not a recognized network FS (NFS/Lustre) and the checkpoint size (148.66 GiB) "
        "exceeds 90% of available RAM (0.65 GiB).",
    )
    local = diag(
        "vllm",
        "(Worker_TP0 pid=4) INFO 06-18 05:12:06 [weight_utils.py:872] Auto-prefetch is disabled because "
        "the filesystem (EXT4) is not a recognized network FS (NFS/Lustre). If you want to force prefetching, "
        "start vLLM with --safetensors-load-strategy=prefetch.",
    )
    assert "slow_load" in [m.kind for m in slow.milestones] and "slow_load" not in [m.kind for m in local.milestones]
    assert local.phases.verdict()[0] == "weights"


def test_a_log_of_only_torch_and_nccl_text_is_read_with_the_shared_rules():
    assert guess_engine("[rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught") == "vllm"
    assert guess_engine("hello\nworld\n") is None


def test_phase_tracking_stays_bounded_on_a_hostile_log():
    d = Diagnoser("vllm")
    for i in range(3000):
        d.feed(f"(RayWorkerWrapper pid={i}, ip=10.{i // 65536}.{i // 256 % 256}.{i % 256}) [rank{i}]:[E] NCCL INFO x")
    assert len(d.phases.nodes) <= 257 and all(len(n.ranks) <= 1025 for n in d.phases.nodes.values())  # + the untagged


def test_gloo_failing_to_connect_its_peers_at_init_is_an_address_the_peers_cannot_use():
    # vLLM 0.5.3.post1 over Ray on two nodes (https://github.com/vllm-project/vllm/issues/7074): torch fell back to
    # loopback, so Gloo reached the store but not the peer ranks
    d = diag(
        "vllm",
        "DEBUG 08-02 08:50:03 parallel_state.py:803] world_size=16 rank=0 local_rank=0 "
        "distributed_init_method=tcp://10.41.0.7:34773 backend=nccl",
        "(RayWorkerWrapper pid=1978, ip=10.41.0.8) [rank9]:[W ProcessGroupGloo.cpp:721] Warning: Unable to resolve "
        "hostname to a (local) address. Using the loopback address as fallback. Manually set the network interface "
        "to bind to with GLOO_SOCKET_IFNAME. (function operator())",
        "(RayWorkerWrapper pid=1890, ip=10.41.0.8) [rank8]:[E ProcessGroupGloo.cpp:144] Gloo connectFullMesh failed "
        "with [../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error",
    )
    (p,) = d.ordered_problems()
    assert d.state == "failed" and p.kind == "nccl_error"
    assert p.message == (
        "Gloo could not connect the ranks ([../third_party/gloo/gloo/transport/tcp/pair.cc:144] no "
        "error): the rendezvous handed out an address or interface its peers cannot use (a hostname "
        "resolving to 127.0.1.1 makes Gloo bind loopback)"
    )
    assert "GLOO_SOCKET_IFNAME" in p.hint and "VLLM_HOST_IP" in p.hint  # vLLM's own rendezvous advice
