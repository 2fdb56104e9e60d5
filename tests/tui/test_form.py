"""The launch form: choices follow each other, typed values are checked inline, the preview is live."""

from __future__ import annotations

from textual.widgets import Button, Input, Select

from sparktui.tui.app import SparkApp
from sparktui.tui.forms.launch_form import LaunchForm, fold_command

from .conftest import wait_for


async def open_form(pilot, app) -> LaunchForm:
    await wait_for(pilot, lambda: app.inventory_ready, what="inventory")
    await pilot.press("l")
    return await wait_for(pilot, lambda: isinstance(app.screen, LaunchForm) and app.screen, what="form")


async def test_engine_change_moves_image_port_and_rendezvous_fields(config, core):
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(120, 40)) as pilot:
        form = await open_form(pilot, app)
        assert form.query_one("#row-ray_port").has_class("-hidden")
        assert form.query_one("#mem_fraction", Input).value == "0.75"  # NVIDIA's SGLang example
        form.query_one("#engine", Select).value = "vllm:ray"
        await pilot.pause()
        assert form.values.image == config.images.vllm == "nvcr.io/nvidia/vllm:26.10-py3"
        assert form.query_one("#port", Input).value == "8000"
        assert form.query_one("#mem_fraction", Input).value == "0.8" and form.plan.fit.mem_fraction == 0.8
        assert "weights, activations and KV cache" in str(form.query_one("#fit").content)
        assert not form.query_one("#row-ray_port").has_class("-hidden")
        assert form.query_one("#row-dist_port").has_class("-hidden")
        assert form.plan.engine == "vllm" and form.plan.mode == "ray" and form.plan.port == 8000
        # the container's entrypoint is named, so `ray` stands before the image and `start` after it
        assert any("--entrypoint ray" in c and " start --block --head" in c for c in form.plan.nodes[0].commands)
        # a port the user typed survives an engine change
        form.query_one("#port", Input).value = "9001"
        form.query_one("#mem_fraction", Input).value = "0.7"
        await pilot.pause()
        form.query_one("#engine", Select).value = "sglang:native"
        await pilot.pause()
        assert form.query_one("#port", Input).value == "9001" and form.plan.port == 9001
        assert form.query_one("#mem_fraction", Input).value == "0.7" and form.plan.fit.mem_fraction == 0.7
        assert "weights + KV cache, activations outside" in str(form.query_one("#fit").content)


async def test_bad_values_show_inline_and_block_launch(config, core):
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(120, 40)) as pilot:
        form = await open_form(pilot, app)
        assert not form.query_one("#launch", Button).disabled
        form.query_one("#mem_fraction", Input).value = "1.7"
        await pilot.pause()
        err = form.query_one("#mem_fraction-error")
        assert err.has_class("-shown") and "at most 1" in str(err.content)
        assert form.query_one("#launch", Button).disabled
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert isinstance(app.screen, LaunchForm) and core.calls == []  # nothing launched
        form.query_one("#mem_fraction", Input).value = "0.8"
        await pilot.pause()
        assert not err.has_class("-shown") and not form.query_one("#launch", Button).disabled
        assert form.plan.fit is not None and form.plan.fit.mem_fraction == 0.8
        assert "0.8 x" in str(form.query_one("#fit").content)


async def test_management_subnet_bootstraps_with_the_fabric_carrying_the_data(config, core):
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(120, 40)) as pilot:
        form = await open_form(pilot, app)
        form.query_one("#rendezvous", Select).value = "192.168.1.0/24"
        await pilot.pause()
        assert "data goes over RDMA on 192.168.100.0/24" in str(form.query_one("#rdv-detail").content)
        assert "would run over TCP" not in str(form.query_one("#issues").content)
        assert "NCCL_IB_HCA=rocep1s0f1" in str(form.query_one("#preview").content)
        assert "SGLANG_HOST_IP=192.168.1.101" in str(form.query_one("#preview").content)


async def test_plan_errors_block_launch(config):
    from .fake_core import ScriptedCore
    from .samples import spark_facts

    core = ScriptedCore(config, spark_facts(model_on_spark2=False))
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(120, 40)) as pilot:
        form = await open_form(pilot, app)
        assert not form.plan.ok
        assert "model directory" in str(form.query_one("#issues").content)
        assert form.query_one("#launch", Button).disabled


def test_fold_command_puts_each_option_on_its_line():
    lines = fold_command("docker run -d --name x -e A=1 img python3 -m m --tp 2 --port 30000")
    assert lines[0] == "docker run" and "  --tp 2" in lines and "  -e A=1 img python3" in lines


async def test_an_open_form_rechecks_when_new_facts_arrive(config):
    from .fake_core import ScriptedCore
    from .samples import spark_facts

    core = ScriptedCore(config, spark_facts(model_on_spark2=False))
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(120, 40)) as pilot:
        form = await open_form(pilot, app)
        assert not form.plan.ok
        core._facts = spark_facts()  # the copy finished; the next inventory sees the model on spark2
        await core.refresh()
        await wait_for(pilot, lambda: form.plan.ok, what="the plan re-checked")
        assert not form.query_one("#launch", Button).disabled


async def test_a_nodes_fresh_facts_recheck_the_form_before_the_round_ends(config):
    """The card and the form agree: one node's answer reaches the form without waiting for the
    slower rest of the round (the model's config, the other nodes)."""
    from sparktui.core.state.events import NodeUpdated

    from .fake_core import ScriptedCore
    from .samples import spark_facts

    core = ScriptedCore(config, spark_facts(model_on_spark2=False))
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(120, 40)) as pilot:
        form = await open_form(pilot, app)
        assert not form.plan.ok and "spark2: model directory" in str(form.query_one("#issues").content)
        core.bus.emit(NodeUpdated(spark_facts()["spark2"]))  # spark2 answers; no inventory round yet
        await wait_for(pilot, lambda: form.plan.ok, what="the plan re-checked on spark2's facts")
        assert "model directory" not in str(form.query_one("#issues").content)
        assert not form.query_one("#launch", Button).disabled


async def test_the_form_names_the_engine_release_in_the_image_and_refuses_native_on_0_11(config, core):
    from textual.widgets import Static

    from sparktui.core.plan.image import ImageInfo

    app = SparkApp(config, controller=core)
    async with app.run_test(size=(120, 40)) as pilot:
        form = await open_form(pilot, app)
        image = config.images.vllm
        app.inventory.facts[config.head.name].images[image] = ImageInfo(
            ref=image,
            node=config.head.name,
            id="sha256:" + "0" * 64,
            versions={"vllm": "0.11.0", "sglang": None, "ray": "2.49.2"},
        )
        form.query_one("#engine", Select).value = "vllm:native"
        await pilot.pause()
        assert form.plan.engine_version == "0.11.0"
        assert any("vLLM 0.11.0" in e and "--mode ray" in e for e in form.plan.errors)
        assert "engine: vLLM 0.11.0" in str(form.query_one("#fit", Static).render())
        form.query_one("#engine", Select).value = "vllm:ray"
        await pilot.pause()
        assert form.plan.engine_version == "0.11.0" and not form.plan.errors


async def test_the_line_under_the_image_says_whether_it_loads_the_model(config, core):
    from textual.widgets import Static

    from sparktui.core.plan.image import ImageInfo
    from sparktui.core.plan.support import Support

    app = SparkApp(config, controller=core)
    async with app.run_test(size=(120, 40)) as pilot:
        form = await open_form(pilot, app)
        await pilot.pause()
        line = form.query_one("#image-support", Static)
        assert not line.display  # nothing asked yet: no line
        image = config.images.sglang
        lacks = Support(
            engine="sglang",
            image=image,
            model_path=config.model.path,
            node=config.head.name,
            status="unsupported",
            reason="SGLang 0.5.3.post3 has no Qwen3_5MoeForConditionalGeneration",
            fix="an image whose SGLang lists it",
            model_type="qwen3_5_moe",
            engine_version="0.5.3.post3",
        )
        app.inventory.facts[config.head.name].images[image] = ImageInfo(
            ref=image, node=config.head.name, id="sha256:" + "1" * 64, support=lacks.to_json()
        )
        form.refresh_preview()
        await pilot.pause()
        assert line.display and "cannot load qwen3_5_moe" in str(line.render())
        assert any("cannot load qwen3_5_moe" in e and "fix: " in e for e in form.plan.errors)
        assert form.query_one("#launch", Button).disabled
        ok = Support(**{**lacks.to_json(), "status": "supported", "reason": "", "engine_version": "0.5.23"})
        app.inventory.facts[config.head.name].images[image].support = ok.to_json()
        form.refresh_preview()
        await pilot.pause()
        assert "loads qwen3_5_moe (SGLang 0.5.23)" in str(line.render())
        assert not any("cannot load" in e for e in form.plan.errors)


async def test_the_form_holds_the_apps_own_inventory_and_follows_each_replacement(config):
    """Facts live once, in the app's Inventory: the open form holds that very object (no copy of its facts or
    subnets), and each replacement, one node's answer or a whole round, reaches the form and its preview."""
    from dataclasses import replace

    from textual.widgets import Static

    from sparktui.core.state.events import NodeUpdated
    from sparktui.tui.controller import InventoryRound
    from sparktui.tui.messages import CoreEvent

    from .fake_core import ScriptedCore
    from .samples import spark_facts

    core = ScriptedCore(config, spark_facts(model_on_spark2=False))
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(120, 40)) as pilot:
        form = await open_form(pilot, app)
        first = app.inventory
        assert form.inventory is first and form.facts is first.facts and form.subnets is first.subnets
        assert not form.plan.ok
        core.bus.emit(NodeUpdated(spark_facts()["spark2"]))  # the model is on spark2 now
        await wait_for(pilot, lambda: form.plan.ok, what="the plan re-checked on spark2's facts")
        assert app.inventory is not first and form.inventory is app.inventory
        assert not first.facts["spark2"].model.present  # the inventory the form had is replaced, never changed

        # a round in which spark2 has another address on the rendezvous subnet
        inv = app.inventory
        rdv = next(s for s in inv.subnets if s.subnet == form.plan.subnet)
        moved = replace(rdv, nodes={**rdv.nodes, "spark2": replace(rdv.nodes["spark2"], ip="192.168.177.99")})
        new = replace(inv, subnets=[moved if s is rdv else s for s in inv.subnets])
        core._post(CoreEvent(InventoryRound(new)))
        await wait_for(pilot, lambda: form.inventory is new, what="the form on the new round's inventory")
        assert app.inventory is new
        assert "192.168.177.99" in str(form.query_one("#rdv-detail", Static).render())
