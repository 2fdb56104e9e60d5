"""Three Sparks cabled in a ring, addressed as NVIDIA's ring3 mode does
(dgx-spark-playbooks detect_and_configure_cluster_networking.py, ip_for_3node_ring_link): link k between a
pair of nodes gets 192.168.2k.x/24 on one half and 192.168.2k+1.x/24 on the other; the lower node is .1."""

from __future__ import annotations

from sparktui.core.nodes.facts import Interface, NodeFacts

from .test_plan import make_facts

PORT0 = ("enp1s0f0np0", "rocep1s0f0", "enP2p1s0f0np0", "roceP2p1s0f0")
PORT1 = ("enp1s0f1np1", "rocep1s0f1", "enP2p1s0f1np1", "roceP2p1s0f1")
# node -> (port, link index, this node's host number on the link); links: 0 = 1-2, 1 = 1-3, 2 = 2-3
CABLES = {0: [(PORT0, 0, 1), (PORT1, 1, 1)], 1: [(PORT0, 2, 1), (PORT1, 0, 2)], 2: [(PORT0, 1, 2), (PORT1, 2, 2)]}


def ring_facts(i: int, *, per_half: bool = True) -> NodeFacts:
    """Node i of the ring: the management NIC, then both halves of both ports on their links."""
    f = make_facts(i)
    f.interfaces = f.interfaces[:1]  # enP7s7 on 10.0.0.0/24
    for (a, a_dev, b, b_dev), link, host in CABLES[i]:
        f.interfaces.append(Interface(a, [f"192.168.{2 * link}.{host}/24"], True, a_dev, 200000, mtu=9000))
        twin = [f"192.168.{2 * link + 1}.{host}/24"] if per_half else []
        f.interfaces.append(Interface(b, twin, True, b_dev, 200000, mtu=9000))
    return f


def ring(**kw) -> dict[str, NodeFacts]:
    return {f.name: f for f in (ring_facts(i, **kw) for i in range(3))}
