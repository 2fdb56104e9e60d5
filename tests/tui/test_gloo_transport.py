"""A CPU build of vLLM runs its collectives over gloo: the app says gloo, in the launch pane and in its
notice, and does not warn as it does for NCCL fallen back to TCP."""

from __future__ import annotations

from sparktui.core.diagnosis.diagnose import Diagnoser
from sparktui.tui.app import SparkApp

from .conftest import wait_for

# what the real engine printed (tests/corpus/vllm_cpu_native_headless_ready.log)
GLOO = (
    "(Worker pid=20394) INFO 12-06 04:27:10 [parallel_state.py:1906] world_size=2 rank=1 local_rank=0 "
    "distributed_init_method=tcp://192.168.100.10:29500 backend=gloo"
)
SHM = (
    "(Worker pid=20394) INFO 12-06 04:27:11 [cpu_communicator.py:47] CPU SHM communicator disabled for group "
    "tp:0: ranks do not share the same SHM group name, falling back to torch.distributed."
)


async def test_gloo_is_shown_as_gloo_without_a_warning(config, core):
    d = Diagnoser("vllm")
    milestones = [e for line in (GLOO, SHM) for e in d.feed(line, node="spark2")]
    assert [m.data.get("transport") for m in milestones if m.kind == "transport"] == ["gloo"]
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(100, 32)) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready, what="first inventory")
        for m in milestones:
            core.bus.emit(m)
        note = await wait_for(
            pilot,
            lambda: next((n for n in app._notifications if "gloo" in n.message), None),
            what="the transport notice",
        )
        assert note.severity == "information" and "NCCL over" not in note.message
        assert not [n for n in app._notifications if n.severity == "warning"]
        await wait_for(pilot, lambda: "gloo" in str(app.launch_pane.query_one("#timeline").content), what="timeline")
        assert "NCCL TCP" not in str(app.launch_pane.query_one("#timeline").content)
