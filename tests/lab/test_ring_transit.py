"""A ring node's transit read from the real kernel and iptables in a namespace this test creates: what
Docker's FORWARD DROP, a missing route and ip_forward=0 look like to the preflight, and that each command it
names clears its problem."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess

import pytest

from sparktui.core.preflight.remote import _sections
from sparktui.core.preflight.transit import SECTION, judge, parse

pytestmark = pytest.mark.lab

# spark1 of NVIDIA's ring3 addressing, one half per cable: a0 faces spark2, a1 faces spark3.
RING = {
    "links": [
        {
            "subnet": "192.168.0.0/24",
            "nodes": {
                "spark1": {"iface": "a0", "ip": "192.168.0.1"},
                "spark2": {"iface": "enp1s0f1np1", "ip": "192.168.0.2"},
            },
        },
        {
            "subnet": "192.168.2.0/24",
            "nodes": {
                "spark1": {"iface": "a1", "ip": "192.168.2.1"},
                "spark3": {"iface": "enp1s0f0np0", "ip": "192.168.2.2"},
            },
        },
        {
            "subnet": "192.168.4.0/24",
            "nodes": {
                "spark2": {"iface": "enp1s0f0np0", "ip": "192.168.4.1"},
                "spark3": {"iface": "enp1s0f1np1", "ip": "192.168.4.2"},
            },
        },
    ]
}
# What installing Docker leaves: a DOCKER-USER chain that returns, and the FORWARD policy at DROP.
SETUP = [
    "ip link set lo up",
    "ip link add a0 type veth peer name b0",
    "ip link add a1 type veth peer name b1",
    "for d in a0 b0 a1 b1; do ip link set $d up; done",
    "ip addr add 192.168.0.1/24 dev a0",
    "ip addr add 192.168.2.1/24 dev a1",
    "sysctl -qw net.ipv4.ip_forward=0",
    "iptables -N DOCKER-USER",
    "iptables -A DOCKER-USER -j RETURN",
    "iptables -A FORWARD -j DOCKER-USER",
    "iptables -P FORWARD DROP",
]


@pytest.fixture
def netns():
    if os.geteuid() != 0 or not all(shutil.which(t) for t in ("ip", "iptables", "sysctl")):
        pytest.skip("needs root, ip, iptables and sysctl")
    name = f"sparktui-ring-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


def _sh(ns: str, cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", "netns", "exec", ns, "sh", "-c", cmd], capture_output=True, text=True, timeout=30)


def _look(ns: str):
    return parse(_sections(_sh(ns, SECTION.format(root="")).stdout))


def test_docker_s_drop_a_missing_route_and_no_forwarding_are_named_and_each_fix_clears_its_problem(netns):
    r = _sh(netns, "; ".join(SETUP))
    assert r.returncode == 0, r.stderr
    look = _look(netns)
    assert look.policy == "DROP" and look.ip_forward is False
    problems, notes = judge("spark1", look, RING)
    assert notes == [] and len(problems) == 3, [p.line() for p in problems]
    for p in problems:
        for cmd in p.fix:
            if "/etc/sysctl.d" in cmd:
                continue  # keeps it across reboots: the machine's own file, not this namespace's
            done = _sh(netns, cmd.replace("sudo ", ""))
            assert done.returncode == 0, (cmd, done.stderr)
    assert judge("spark1", _look(netns), RING) == ([], [])
    # the route it names is a real one through the neighbour on the shared link
    route = _sh(netns, f"ip -4 route get {shlex.quote('192.168.4.1')}").stdout
    assert "via 192.168.0.2 dev a0" in route
