"""Which address a simulated engine publishes, binds and calls local."""

from __future__ import annotations

import errno

import pytest

from sparktui.sim import netinfo
from sparktui.sim.netinfo import Iface

SPARK = [
    Iface("lo", "127.0.0.1", 8),
    Iface("enP7s7", "10.0.0.11", 24),
    Iface("enp1s0f1np1", "192.168.100.11", 24),
    Iface("wlP9s9", "172.20.5.9", 16),
]


def test_parse_interfaces_reads_names_addresses_and_prefixes():
    got = netinfo.parse_interfaces("lo=127.0.0.1/8, fab0=127.0.0.2/24,mgmt0=127.1.0.2")
    assert got == [Iface("lo", "127.0.0.1", 8), Iface("fab0", "127.0.0.2", 24), Iface("mgmt0", "127.1.0.2", 32)]


@pytest.mark.parametrize("bad", ["eth0", "=1.2.3.4/24", "eth0=300.1.1.1/24"])
def test_parse_interfaces_rejects_malformed_entries(bad):
    with pytest.raises(ValueError):
        netinfo.parse_interfaces(bad)


def test_other_network_ip_skips_loopback_and_the_rendezvous_subnet():
    # rendezvous on the CX7 link, no default route: the first other interface by name (management NIC)
    assert netinfo.other_network_ip("192.168.100.11", SPARK, route_iface="") == "10.0.0.11"
    # rendezvous on the management NIC: the CX7 address sorts before the Wi-Fi one
    assert netinfo.other_network_ip("10.0.0.11", SPARK, route_iface="") == "192.168.100.11"


def test_other_network_ip_prefers_the_default_route_interface():
    assert netinfo.other_network_ip("192.168.100.11", SPARK, route_iface="wlP9s9") == "172.20.5.9"
    # a default route over the fabric itself is no "other network": fall back to name order
    assert netinfo.other_network_ip("192.168.100.11", SPARK, route_iface="enp1s0f1np1") == "10.0.0.11"


def test_other_network_ip_is_none_when_the_node_has_one_network():
    one = [Iface("lo", "127.0.0.1", 8), Iface("enp1s0f1np1", "192.168.100.11", 24)]
    assert netinfo.other_network_ip("192.168.100.11", one, route_iface="") is None


def test_auto_ip_follows_the_default_route_interface():
    assert netinfo.auto_ip(SPARK, route_iface="wlP9s9") == "172.20.5.9"
    assert netinfo.auto_ip(SPARK, route_iface="") is None


def test_queue_binds_the_published_address_only_on_the_rendezvous_network():
    # published fabric address = the rendezvous address: bind it
    assert netinfo.queue_bind_address("192.168.100.11", "192.168.100.11", SPARK) == "192.168.100.11"
    # published management address: bind the fabric one, so peers dialing the published one are refused
    assert netinfo.queue_bind_address("10.0.0.11", "192.168.100.11", SPARK) == "192.168.100.11"
    # not an address of this machine at all
    assert netinfo.queue_bind_address("192.168.100.99", "192.168.100.11", SPARK) == "192.168.100.11"
    # loopback "nodes": any 127.x is on lo's network
    assert netinfo.queue_bind_address("127.0.0.3", "127.0.0.1", SPARK) == "127.0.0.3"


def test_a_neighbour_s_address_on_a_shared_subnet_is_not_local():
    node1 = [Iface("lo", "127.0.0.1", 8), Iface("enP7s7", "127.0.0.11", 24), Iface("enp1s0f1np1", "127.0.1.11", 24)]
    assert netinfo.is_local("127.0.1.11", node1) and netinfo.is_local("127.0.0.1", node1)
    assert not netinfo.is_local("127.0.1.12", node1)  # node 2's fabric address
    assert netinfo.is_local("127.9.9.9", node1)  # the rest of lo's network, as on Linux


def test_simulated_default_route(monkeypatch):
    monkeypatch.setenv("SPARKTUI_SIM_INTERFACES", "lo=127.0.0.1/8,eth0=127.0.0.11/24,wlan0=127.0.2.11/24")
    monkeypatch.delenv("SPARKTUI_SIM_DEFAULT_ROUTE", raising=False)
    assert netinfo.default_route_iface() is None and netinfo.auto_ip() is None
    monkeypatch.setenv("SPARKTUI_SIM_DEFAULT_ROUTE", "wlan0")
    assert netinfo.auto_ip() == "127.0.2.11"


def test_simulated_interfaces_decide_what_is_local_and_bindable(monkeypatch):
    monkeypatch.setenv("SPARKTUI_SIM_INTERFACES", "mgmt0=127.1.0.2/16,fab0=127.0.0.2/24")
    assert netinfo.is_local("127.0.0.2") and netinfo.is_local("127.1.0.2") and netinfo.is_local("0.0.0.0")
    assert not netinfo.is_local("127.0.0.3")  # another simulated node's address
    with pytest.raises(OSError) as e:
        netinfo.check_bindable("127.0.0.3")
    assert e.value.errno == errno.EADDRNOTAVAIL
    netinfo.check_bindable("127.0.0.2")
    assert netinfo.source_for("127.0.0.9") == "127.0.0.2"
    assert netinfo.source_for("127.1.44.1") == "127.1.0.2"


def test_without_simulated_interfaces_the_kernel_decides(monkeypatch):
    monkeypatch.delenv("SPARKTUI_SIM_INTERFACES", raising=False)
    assert netinfo.source_for("127.0.0.9") is None
    netinfo.check_bindable("127.0.0.9")  # any 127.x is ours on Linux
    assert any(i.name == "lo" for i in netinfo.interfaces())
