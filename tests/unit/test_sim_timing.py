"""The simulated token timing: plausible for the model, TP, transport and load."""

from __future__ import annotations

import json

import pytest

from sparktui.demo.checkpoint import CONFIG as DEMO_CONFIG, FULL_SIZE as DEMO_SIZE
from sparktui.sim import timing

GB = 1e9
MOE_122B = {"num_experts": 256, "num_experts_per_tok": 8}  # a 122B-A10B MoE, weights in FP8


def tok_s(t: timing.TokenTiming, running: int = 1) -> float:
    return 1.0 / t.step(running)


def test_a_122b_moe_on_two_sparks_over_roce_decodes_near_twenty_tokens_a_second():
    t = timing.timing_for("vllm", int(122 * GB), MOE_122B, 48, tp=2, nnodes=2, env={})
    assert 15 <= tok_s(t) <= 25


def test_tp_transport_and_sparsity_move_decode_speed_the_right_way():
    def speed(tp=2, nnodes=2, env=None, config=MOE_122B, size=int(122 * GB), kind="vllm"):
        return tok_s(timing.timing_for(kind, size, config, 48, tp=tp, nnodes=nnodes, env=env or {}))

    assert speed(tp=4, nnodes=4) > speed(tp=2, nnodes=2) > speed(tp=1, nnodes=1) * 1.5
    assert speed(env={"NCCL_IB_DISABLE": "1"}) < speed(env={"NCCL_IB_DISABLE": "0"})
    assert speed(config={}) < speed() / 3  # a dense model of that size reads every weight each token
    assert speed(kind="sglang") != speed(kind="vllm")


def test_load_lengthens_a_step_but_batching_still_pays():
    t = timing.timing_for("sglang", DEMO_SIZE, DEMO_CONFIG, 48, tp=2, nnodes=2, env={})
    assert t.step(16) > t.step(1)
    assert 16 * tok_s(t, 16) > 8 * tok_s(t, 1)  # aggregate throughput grows with the batch
    assert t.prefill(4000) > t.prefill(100) > 0


@pytest.mark.parametrize(
    "nnodes,env,expected",
    [(1, {}, "local"), (2, {}, "roce"), (2, {"NCCL_IB_DISABLE": "0"}, "roce"), (2, {"NCCL_IB_DISABLE": "1"}, "socket")],
)
def test_transport_follows_nccl_settings(nnodes, env, expected):
    assert timing.transport(nnodes, env) == expected


async def test_the_server_paces_tokens_with_its_timing(monkeypatch):
    """Served ITL follows state.timing (engine seconds divided by the speed)."""
    from .test_sim_http import request, serve

    monkeypatch.setenv("SPARKTUI_SIM_SPEED", "100")
    api, state, port, _ = await serve("vllm")
    try:
        state.timing = timing.TokenTiming(decode_s=0.5, prefill_tok_s=1e6)  # 5 ms of wall time a token
        await request(port, "POST", "/v1/completions", {"prompt": "x", "max_tokens": 9, "ignore_eos": True})
        h = state.metrics.hists[("itl", ())]
        assert sum(h.counts) == 8 and h.sum / 8 >= 0.5 * 0.9  # engine seconds, as the real engine reports
        assert json.loads(json.dumps(state.gauges()))["running"] == 0
    finally:
        await api.close()


def _node(tmp_path, twin_up: bool, mtu: int) -> dict:
    """A demo node's stand-in sysfs (as hardware.save writes it), twin half up or not, every fabric MTU set."""
    from sparktui.demo import hardware

    ifaces = hardware.interfaces(1)
    for i in ifaces:
        if i.get("rdma"):
            i["mtu"] = mtu
            if i["name"] == "enP2p1s0f1np1" and twin_up:
                i.update(up=True, ipv4=["127.0.3.11", 24])
    hardware.write_sysfs_net(tmp_path / "sys-class-net", 1, ifaces)
    hardware.write_sysfs_ib(tmp_path / "sys-class" / "infiniband", ifaces)
    return {"SPARKTUI_DEMO_NODE": str(tmp_path)}


def test_the_engine_learns_halves_and_mtu_from_nccl_ib_hca_and_the_nodes_sysfs(tmp_path):
    env = _node(tmp_path, twin_up=False, mtu=1500)
    assert timing.fabric_path(2, dict(env, NCCL_IB_HCA="rocep1s0f1")) == timing.FabricPath("roce", 1, 1500)
    both = dict(env, NCCL_IB_HCA="=rocep1s0f1:1,roceP2p1s0f1")
    assert timing.fabric_path(2, both) == timing.FabricPath("roce", 2, 1500)
    assert timing.fabric_path(2, env).halves == 1  # unset: the active devices, and the twin is down
    assert timing.fabric_path(2, dict(env, NCCL_IB_DISABLE="1")).transport == "socket"
    env = _node(tmp_path, twin_up=True, mtu=9000)
    assert timing.fabric_path(2, env) == timing.FabricPath("roce", 2, 9000)
    assert timing.fabric_path(2, dict(env, NCCL_IB_HCA="^roceP2p1s0f1")).halves == 2  # exclusion: not read as a list


def test_an_unreadable_sysfs_leaves_the_mtu_unknown(tmp_path):
    env = _node(tmp_path, twin_up=False, mtu=1500)
    (tmp_path / "sys-class-net" / "enp1s0f1np1" / "mtu").write_text("garbage\n")
    assert timing.fabric_path(2, dict(env, NCCL_IB_HCA="rocep1s0f1")) == timing.FabricPath("roce", 1, None)


def test_both_halves_and_jumbo_frames_lift_prefill_as_measured_and_leave_decode_be():
    """MiaAI-Lab/DeepSeek-v4-Flash-DSpark-2x-DGX-Spark#104: 1311 -> 1343 -> 1410 tok/s prefill, decode unchanged."""

    def t(halves, mtu):
        return timing.timing_for(
            "sglang", DEMO_SIZE, DEMO_CONFIG, 48, tp=2, nnodes=2, path=timing.FabricPath("roce", halves, mtu)
        )

    fresh, jumbo, fixed = t(1, 1500), t(1, 9000), t(2, 9000)
    assert fresh.prefill_tok_s < jumbo.prefill_tok_s < fixed.prefill_tok_s
    assert fixed.prefill_tok_s / fresh.prefill_tok_s == pytest.approx(1410 / 1311, rel=0.01)
    assert jumbo.prefill_tok_s / fresh.prefill_tok_s == pytest.approx(1343 / 1311, rel=0.01)
    assert fresh.decode_s == fixed.decode_s
    sock = timing.timing_for(
        "sglang", DEMO_SIZE, DEMO_CONFIG, 48, tp=2, nnodes=2, path=timing.FabricPath("socket", 0, None)
    )
    assert sock.prefill_tok_s < fresh.prefill_tok_s


def test_bus_bandwidth_by_halves_and_mtu():
    bw = lambda h, m: timing.busbw_gbps(timing.FabricPath("roce", h, m))
    assert bw(1, 9000) == 98.0 and bw(2, 9000) == 161.0  # the public figures
    assert bw(1, 1500) < bw(1, 9000) and bw(1, None) == bw(1, 9000)  # unknown MTU: no penalty invented
    assert timing.busbw_gbps(timing.FabricPath("local", 0, None)) is None
