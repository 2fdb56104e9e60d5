"""Python in a demo container sees its node's network, as a process in a real container would.

All demo nodes share this machine's kernel, so Python would otherwise list this machine's NICs and
bind any 127.x address. This directory is put first on PYTHONPATH for container processes only
(docker/runtime.py); at start-up Python imports this file, which makes
  socket.if_nameindex / if_nametoindex / if_indextoname  list the node's NICs (node.json), and
  socket.socket.bind  refuse an IPv4 address the node does not hold (EADDRNOTAVAIL, as the kernel),
the way the engine simulator already reads SPARKTUI_SIM_INTERFACES. Then it runs the
sitecustomize it shadows, if any.
"""

from __future__ import annotations


def _install() -> None:
    import errno
    import ipaddress
    import json
    import os
    import socket

    node_dir = os.environ.get("SPARKTUI_DEMO_NODE")
    if not node_dir:
        return
    try:
        with open(os.path.join(node_dir, "node.json"), encoding="utf-8") as f:
            names = [i["name"] for i in json.load(f)["interfaces"]]
    except (OSError, ValueError, KeyError, TypeError):
        return
    try:
        from sparktui.sim import netinfo
    except ImportError:
        netinfo = None

    def if_nameindex():
        return list(enumerate(names, 1))

    def if_nametoindex(name):
        if name not in names:
            raise OSError(errno.ENODEV, "no interface with this name")
        return names.index(name) + 1

    def if_indextoname(index):
        if not 1 <= index <= len(names):
            raise OSError(errno.ENXIO, "no interface with this index")
        return names[index - 1]

    socket.if_nameindex, socket.if_nametoindex, socket.if_indextoname = if_nameindex, if_nametoindex, if_indextoname

    if netinfo is None or not netinfo.overridden():
        return
    plain_bind = socket.socket.bind

    def bind(self, address):
        if self.family == socket.AF_INET and isinstance(address, tuple) and address and isinstance(address[0], str):
            try:
                ipaddress.IPv4Address(address[0])
            except ValueError:
                pass  # a host name: the kernel resolves it, as it would
            else:
                if not netinfo.is_local(address[0]):
                    raise OSError(errno.EADDRNOTAVAIL, os.strerror(errno.EADDRNOTAVAIL))
        return plain_bind(self, address)

    socket.socket.bind = bind


def _chain() -> None:
    """Run the sitecustomize this one shadows (a distribution's, a virtualenv's)."""
    import importlib.machinery
    import importlib.util
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


try:
    _install()
finally:
    _chain()
