"""`sparktui setup trust`: which pairs need node-to-node SSH trust, and setting it up.

Every node may become a sender (a node that got its copy passes it on), so by default each node
trusts every other: its key on the others, their fabric host keys in its known_hosts.
"""

from __future__ import annotations

import asyncio

from . import remote, trust
from .addresses import fabric_addresses
from .errors import TransferError
from .options import TransferOptions
from .trust import TrustPlan, TrustStep


async def trust_plan(
    cluster,
    config,
    senders: list[str] | None = None,
    peers: list[str] | None = None,
    subnet: str | None = None,
    addrs: dict[str, str] | None = None,
) -> TrustPlan:
    names = [n.name for n in config.nodes]
    senders = senders or names
    peers = peers or names
    bad = [n for n in (*senders, *peers) if n not in names]
    if bad:
        raise TransferError(f"unknown node(s): {', '.join(dict.fromkeys(bad))} (nodes: {', '.join(names)})")
    if addrs is None:
        addrs, _ = await fabric_addresses(cluster, config, names, subnet)
    pairs = [(s, p) for s in dict.fromkeys(senders) for p in dict.fromkeys(peers) if p != s]
    return TrustPlan(pairs=pairs, addrs=addrs)


async def setup_trust(cluster, plan: TrustPlan, opts: TransferOptions | None = None) -> list[TrustStep]:
    """Carry out the plan, then check every pair the way a transfer will (ssh -o BatchMode=yes)."""
    opts = opts or TransferOptions()
    peers = sorted({p for _, p in plan.pairs})
    logins = await asyncio.gather(*(trust.login_of(cluster[p]) for p in peers), return_exceptions=True)
    users: dict[str, str] = {}
    steps: list[TrustStep] = []
    for p, u in zip(peers, logins):
        if isinstance(u, BaseException):
            steps.append(TrustStep(p, str(u), False))
        else:
            users[p] = u
    plan = TrustPlan([(s, p) for s, p in plan.pairs if p in users], plan.addrs, steps)
    await trust.setup(cluster, plan, users, opts)

    async def recheck(s: str, p: str) -> TrustStep:
        target = remote.peer(users[p], plan.addrs[p])
        reason = await trust.check(cluster[s], users[p], plan.addrs[p], opts)
        if reason:
            return TrustStep(s, f"still cannot reach {p} as {target}: {reason}", False)
        return TrustStep(s, f"reaches {p} as {target} without a prompt")

    steps.extend(await asyncio.gather(*(recheck(s, p) for s, p in plan.pairs)))
    return steps
