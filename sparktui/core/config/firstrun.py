"""First run: nodes as the user describes them, tested over SSH, probed, and turned into a Config.

`sparktui init` and the TUI's setup screen both go through here: the same checks of what was typed,
the same SSH test (an unknown host key is handed back with its fingerprint, never trusted here
unless the caller says the user accepted it), the same probe and fabric choice.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..network import network
from .config import NO_SPACE, NODE_NAME, Config, ImagesConfig, ModelConfig, NodeConfig, SshConfig
from ..nodes.facts import NodeFacts, Subnet
from ..nodes.inventory import Inventory, analyse, probe_node
from ..state.journal import Journal
from ..remote.ssh import Node, SshError, append_known_host, known_hosts_line, known_hosts_path

NAME_RULE = "letters, digits, '.', '_' or '-', starting with a letter or digit"


@dataclass
class NodeDraft:
    """A node as typed: host may be an address, a hostname or a ~/.ssh/config alias."""

    name: str
    host: str
    user: str | None = None
    port: int | None = None
    identity_file: str | None = None

    def node_config(self, role: str = "worker") -> NodeConfig:
        key = os.path.expanduser(self.identity_file) if self.identity_file else None
        return NodeConfig(
            name=self.name, host=self.host, user=self.user or None, port=self.port, identity_file=key, role=role
        )


def draft_problems(draft: NodeDraft, others: list[NodeDraft] = ()) -> list[str]:
    """What is wrong with one node as typed (empty when it is fine); others are the nodes already added."""
    out = []
    if not draft.name:
        out.append("a node needs a name")
    elif not NODE_NAME.match(draft.name):
        out.append(f"name {draft.name!r}: {NAME_RULE}")
    elif any(o.name == draft.name for o in others):
        out.append(f"name {draft.name!r} is taken by another node")
    if not draft.host:
        out.append("a node needs a host (an address, a hostname or a ~/.ssh/config alias)")
    elif not NO_SPACE.match(draft.host):
        out.append(f"host {draft.host!r} has spaces")
    if draft.user is not None and draft.user and not NO_SPACE.match(draft.user):
        out.append(f"user {draft.user!r} has spaces")
    if draft.port is not None and not 1 <= draft.port <= 65535:
        out.append(f"port {draft.port} is not 1-65535")
    if draft.identity_file:
        key = Path(os.path.expanduser(draft.identity_file))
        if not key.is_file():
            out.append(f"key file {draft.identity_file} does not exist on this machine")
    return out


@dataclass
class HostKey:
    """A host key that no known_hosts line vouches for: what the user must compare before trusting it."""

    node: str
    host: str  # as written into known_hosts
    port: int | None
    algorithm: str  # e.g. ssh-ed25519
    fingerprint: str  # SHA256:...
    known_hosts: Path
    line: str  # the known_hosts line trusting it appends

    def describe(self) -> str:
        where = self.host if not self.port or self.port == 22 else f"{self.host} port {self.port}"
        return f"{self.node} ({where}) presents an unknown host key: {self.algorithm} {self.fingerprint}"

    def to_json(self) -> dict:
        return {
            "node": self.node,
            "host": self.host,
            "port": self.port,
            "algorithm": self.algorithm,
            "fingerprint": self.fingerprint,
            "known_hosts": str(self.known_hosts),
        }


@dataclass
class SshTest:
    node: str
    ok: bool
    error: str | None = None
    unknown_key: HostKey | None = None  # set when the node's key is unknown (and nothing else failed yet)
    _key: object = field(default=None, repr=False)  # the asyncssh key, kept for trust()

    def to_json(self) -> dict:
        return {
            "node": self.node,
            "ok": self.ok,
            "error": self.error,
            "unknown_host_key": self.unknown_key.to_json() if self.unknown_key else None,
        }


def strict(ssh: SshConfig) -> SshConfig:
    """The same settings with strict host keys: a first run asks the user instead of trusting."""
    return replace(ssh, host_key_policy="strict")


async def test_ssh(draft: NodeDraft, ssh: SshConfig, journal: Journal | None = None) -> SshTest:
    """Connect and run `true`; an unknown host key comes back in .unknown_key for the user to judge."""
    node = Node(draft.node_config(), strict(ssh), journal or Journal())
    try:
        await node.connect()
        r = await node.run("true", timeout=ssh.connect_timeout + 5)
        if not r.ok:
            return SshTest(
                draft.name,
                False,
                f"{draft.name}: logged in, but a command failed: {r.stderr.strip() or f'exit {r.exit_status}'}",
            )
        return SshTest(draft.name, True)
    except SshError as e:
        test = SshTest(draft.name, False, str(e))
        if node.unknown_key is not None:
            host, port, key = node.unknown_key
            test.unknown_key = HostKey(
                draft.name,
                host,
                port,
                key.get_algorithm(),
                key.get_fingerprint("sha256"),
                known_hosts_path(ssh),
                known_hosts_line(host, port, key),
            )
            test._key = key
        return test
    finally:
        with contextlib.suppress(Exception):
            await node.close()


def trust(test: SshTest) -> Path:
    """Append the key the user accepted to known_hosts; returns the file written."""
    if test.unknown_key is None or test._key is None:
        raise ValueError(f"{test.node}: no unknown host key to trust")
    k = test.unknown_key
    append_known_host(k.known_hosts, k.host, k.port, test._key)  # type: ignore[arg-type]
    return k.known_hosts


async def test_all(drafts: list[NodeDraft], ssh: SshConfig, journal: Journal | None = None) -> list[SshTest]:
    return list(await asyncio.gather(*(test_ssh(d, ssh, journal) for d in drafts)))


def draft_config(
    drafts: list[NodeDraft],
    model_path: str,
    ssh: SshConfig,
    cluster: str = "sparks",
    model_name: str | None = None,
    images: ImagesConfig | None = None,
    source: str | None = None,
) -> Config:
    """A Config of the nodes as typed (the first is the head), without any interface pinned yet."""
    nodes = [d.node_config("head" if i == 0 else "worker") for i, d in enumerate(drafts)]
    name = model_name or os.path.basename(model_path.rstrip("/")) or "model"
    return Config(
        cluster=cluster,
        nodes=nodes,
        model=ModelConfig(name=name, path=model_path, source=source),
        images=images or ImagesConfig(),
        ssh=ssh,
    )


async def discover(config: Config, journal: Journal | None = None) -> Inventory:
    """Probe every node of a drafted config (one connection each, closed after) and rank the subnets."""
    nodes = [Node(n, strict(config.ssh), journal or Journal()) for n in config.nodes]
    try:
        facts = await asyncio.gather(*(probe_node(n, config.model.path) for n in nodes))
    finally:
        await asyncio.gather(*(n.close() for n in nodes), return_exceptions=True)
    return analyse(config, {f.name: f for f in facts})


def subnet_label(s: Subnet) -> str:
    """One line for a choice list: the subnet, its kind and each node's interface and RoCE device."""
    kind = "RoCE" if s.rdma else "TCP"
    if s.management:
        kind += ", management"
    where = ", ".join(f"{n} {a.iface}" + (f" ({a.rdma})" if a.rdma else "") for n, a in s.nodes.items())
    return f"{s.subnet} [{kind}] {where}"


def pin_fabric(config: Config, subnet: Subnet | None) -> dict[tuple[str, str], str]:
    """Write each node's interface on the chosen subnet into config; returns the line comments."""
    notes: dict[tuple[str, str], str] = {}
    if subnet is None:
        return notes
    for i, n in enumerate(config.nodes):
        addr = subnet.nodes.get(n.name)
        if addr is None:
            continue
        n.interfaces = {subnet.subnet: addr.iface}
        what = f"RoCE device {addr.rdma}" if addr.rdma else "no RDMA device (TCP)"
        lead = "the fabric, found by probing: " if i == 0 else ""
        notes[(n.name, subnet.subnet)] = f"{lead}{addr.ip}, {what}"
    return notes


def model_holder(config: Config, facts: dict[str, NodeFacts]) -> str | None:
    """The node to copy the weights from when the head lacks them but another node has them."""

    def has(name: str) -> bool:
        f = facts.get(name)
        # facts from a probe of another path (the user edited it since) say nothing about this one
        return bool(
            f and f.model and f.model.path == config.model.path and f.model.present and (f.model.files or 0) > 0
        )

    if has(config.head.name):
        return None
    return next((n.name for n in config.nodes if has(n.name)), None)


def model_summary(config: Config, facts: dict[str, NodeFacts]) -> str:
    """Where the model directory is, in one line: `on spark1 (118 GiB, 41 files); not on spark2`."""
    on, off = [], []
    for n in config.nodes:
        f = facts.get(n.name)
        if f is None or not f.reachable:
            off.append(f"{n.name} (not probed)")
        elif f.model and f.model.present:
            size = f"{(f.model.bytes or 0) / 2**30:.1f} GiB, {f.model.files or 0} files"
            on.append(f"{n.name} ({size})")
        else:
            off.append(n.name)
    parts = ([f"on {', '.join(on)}"] if on else []) + ([f"not on {', '.join(off)}"] if off else [])
    return f"{config.model.path}: " + "; ".join(parts)


def images_found(facts: dict[str, NodeFacts]) -> dict[str, list[str]]:
    """Image reference -> the nodes that have it, from the probe, most widespread first."""
    where: dict[str, list[str]] = {}
    for f in facts.values():
        for ref in f.docker.images:
            if not ref.endswith(":<none>") and not ref.startswith("<none>"):
                where.setdefault(ref, []).append(f.name)
    return dict(sorted(where.items(), key=lambda kv: (-len(kv[1]), kv[0])))


def image_summary(config: Config, facts: dict[str, NodeFacts]) -> dict[str, str]:
    """engine -> `IMAGE: on spark1, spark2` / `IMAGE: on no node (pull it on one, then sync it)`."""
    found = images_found(facts)
    out = {}
    for engine, ref in config.used_images().items():
        where = found.get(ref) or found.get(f"{ref}:latest") or []
        out[engine] = f"{ref}: " + (
            f"on {', '.join(where)}" if where else "on no node (pull it on one node, then `sparktui sync image`)"
        )
    return out


def choose_subnet(inv: Inventory, spec: str | None, names: list[str]) -> Subnet | None:
    """The subnet the user named (CIDR, IP or interface; ValueError listing the choices), else the best."""
    if spec:
        return network.resolve(inv.subnets, spec, names)
    return next((s for s in inv.subnets if s.joins(names)), None)
