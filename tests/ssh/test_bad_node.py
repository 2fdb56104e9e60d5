"""A node that cannot even be dialled (a name idna refuses, a user saslprep refuses) is that node's error:
the others are connected and probed as usual."""

from __future__ import annotations

import pytest

from sparktui.core.nodes.inventory import take_inventory
from sparktui.core.remote.ssh import Cluster


@pytest.mark.parametrize(
    "field,value", [("host", "a" * 64 + ".lan"), ("host", "spark1..lan"), ("user", "admin\U0001f600")]
)
async def test_one_bad_node_never_hides_the_others(ssh_env, field, value):
    cfg, _ = await ssh_env(2)
    setattr(cfg.nodes[1], field, value)  # past the config's own checks, as an ssh alias might resolve
    async with Cluster(cfg) as cluster:
        errors = {n.name: n.error for n in cluster}
        assert errors[cfg.nodes[0].name] is None
        bad = errors[cfg.nodes[1].name]
        assert bad and "Traceback" not in bad and len(bad) < 300
        inv = await take_inventory(cluster, cfg)
    good, other = inv.facts[cfg.nodes[0].name], inv.facts[cfg.nodes[1].name]
    assert good.reachable and good.error is None and good.user
    assert not other.reachable and other.error == bad
