"""A deployment whose TP all-reduces go over the b12x image's RoCE collectives says so in the form's preview and,
once launched, in the launch pane: decode speed there does not hang on NCCL's bandwidth."""

from __future__ import annotations

from textual.widgets import Select, Static

from sparktui.tui.app import SparkApp

from .conftest import wait_for
from .fake_core import ScriptedCore
from .samples import spark_facts
from .test_form import open_form

B12X = "eugr/spark-vllm-b12x:nightly-20260923"
LINE = "TP all-reduce: b12x one-shot RoCE collectives (RoCEnante) up to 2MB, NCCL above (VLLM_ENABLE_ROCE_ALLREDUCE=1)"


def roce_config(config):
    config.images.vllm = B12X
    config.docker.env.update({"VLLM_ENABLE_ROCE_ALLREDUCE": "1", "VLLM_ROCE_ALLREDUCE_MAX_SIZE": "2MB"})
    return config


async def launch_vllm(pilot, app):
    form = await open_form(pilot, app)
    form.query_one("#engine", Select).value = "vllm:native"
    await pilot.pause()
    return form


async def test_the_roce_all_reduce_shows_in_the_preview_and_the_launch_pane(config):
    config = roce_config(config)
    facts = spark_facts()
    for f in facts.values():  # the image on every node, so the plan can run
        f.docker.images[B12X] = "sha256:" + "b" * 64
    core = ScriptedCore(config, facts)
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(120, 40)) as pilot:
        form = await launch_vllm(pilot, app)
        assert form.plan.collectives_line == LINE
        assert "ℹ " + LINE in str(form.query_one("#issues", Static).content)
        assert not app.launch_pane.has_class("-collectives")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: app.plan is not None, what="the launch confirmed")
        box = app.launch_pane.query_one("#collectives", Static)
        assert app.launch_pane.has_class("-collectives") and str(box.content) == "ℹ " + LINE
        assert box.display


async def test_nccl_alone_adds_no_line(config, core):
    app = SparkApp(config, controller=core)
    async with app.run_test(size=(120, 40)) as pilot:
        form = await launch_vllm(pilot, app)
        assert form.plan.collectives_line is None
        assert "TP all-reduce" not in str(form.query_one("#issues", Static).content)
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: app.plan is not None, what="the launch confirmed")
        assert not app.launch_pane.has_class("-collectives")
        assert not app.launch_pane.query_one("#collectives", Static).display
