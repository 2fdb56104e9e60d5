"""A node card names what the node lacks and the fix, from the same core check as `sparktui check`."""

from __future__ import annotations

from sparktui.core.nodes.probes import parse_probe
from sparktui.tui.app import SparkApp

from .conftest import settled_text, wait_for
from .fake_core import ScriptedCore
from .samples import HOSTS, _section, probe_text, spark_config


async def test_a_card_names_the_missing_toolkit_and_rsync_with_their_fix():
    cfg = spark_config()
    tools = _section("user", "ubuntu") + _section("rsync", "", 127) + _section("gpu-toolkit", "")
    lacking = probe_text("spark2").replace("@@sparktui:done@@", tools + "@@sparktui:done@@")
    facts = {
        "spark1": parse_probe("spark1", HOSTS["spark1"], probe_text("spark1")),
        "spark2": parse_probe("spark2", HOSTS["spark2"], lacking),
    }
    app = SparkApp(cfg, controller=ScriptedCore(cfg, facts))
    app.animation_level = "none"
    async with app.run_test(size=(160, 50)) as pilot:
        await wait_for(pilot, lambda: app.inventory_ready, what="inventory")
        text = await settled_text(pilot, app)
    assert "✗ needs rsync: `sudo apt-get install -y rsync`" in text
    assert "✗ needs NVIDIA container toolkit (gpus-all): install the NVIDIA Container Toolkit" in text
    assert text.count("✗ needs") == 2  # spark1's probe did not reach those sections: unknown is not missing
