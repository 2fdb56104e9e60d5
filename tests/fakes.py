"""Stand-ins for the core's SSH cluster, shared by every tier that needs one without a real node.

FakeNode answers each command through a function; FakeCluster holds nodes by name as core.ssh.Cluster
does (cluster[name], .nodes, `async with`, close). `FakeCluster.replacing(...)` is a class to patch in
for Cluster where a CLI builds its own from the config; `fixed_inventory` stands in for take_inventory.
(tests/ssh/test_deploy_fakes.py has nodes of another kind: real SSH servers with a fake docker.)
"""

from __future__ import annotations

from typing import Any, Callable

from sparktui.core.nodes.facts import NodeFacts, Subnet
from sparktui.core.nodes.inventory import Inventory
from sparktui.core.network.network import subnets as find_subnets

Answer = Callable[[str, str], Any]  # (node name, command) -> a Result-like (ok, stdout, stderr, exit_status)


class FakeNode:
    """A connected node; `answer(name, command)` says what each command returns."""

    def __init__(self, name: str, answer: Answer) -> None:
        self.name, self.connected, self.answer = name, True, answer

    async def run(self, command: str, timeout: float | None = None, **_: Any) -> Any:
        return self.answer(self.name, command)


class FakeCluster(dict):
    """Nodes by name."""

    def __init__(self, nodes: list | tuple = ()) -> None:
        super().__init__({n.name: n for n in nodes})

    @property
    def nodes(self) -> dict:
        return self

    async def __aenter__(self) -> "FakeCluster":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        return None

    async def close(self) -> None:
        pass

    @classmethod
    def replacing(cls, answer: Answer | None = None) -> type:
        """A class built like core.ssh.Cluster(config, journal, ...): a FakeNode per configured node
        answering through `answer`, or no node at all (nothing to ask) when there is none."""

        class Replacing(cls):
            def __init__(self, config: Any, journal: Any = None, **_: Any) -> None:
                super().__init__([FakeNode(n.name, answer) for n in config.nodes] if answer else [])

        return Replacing


def fixed_inventory(facts: dict[str, NodeFacts], subnets: list[Subnet] | None = None):
    """take_inventory's stand-in: these facts, and these subnets (else found from the facts when asked)."""

    async def take_inventory(cluster: Any, config: Any, on_facts: Any = None) -> Inventory:
        return Inventory(facts=facts, subnets=subnets if subnets is not None else find_subnets(list(facts.values())))

    return take_inventory
