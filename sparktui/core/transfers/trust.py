"""Node-to-node SSH trust over the fabric: check it, and set it up through sparktui's own logins.

Setting it up, for a sender S and a peer P reached at address A:
  1. S gets a key pair where it has none (ssh-keygen -t ed25519, no passphrase: the transfer
     runs unattended);
  2. S's public key goes into P's ~/.ssh/authorized_keys (written through sparktui's connection
     to P, so no password is ever typed);
  3. P's host key, as `ssh-keyscan A` run on S sees it, goes into S's ~/.ssh/known_hosts, but
     only when it is a key P is known to hold: the one P presented to sparktui's own (verified)
     connection, or one in P's /etc/ssh. Whatever answers at A must be P.
"""

from __future__ import annotations

import asyncio
import base64
import shlex
import struct
from dataclasses import dataclass, field

from . import remote
from .errors import TransferError
from .options import TransferOptions

KEY_NAMES = ("id_ed25519", "id_ecdsa", "id_rsa")


def classify_ssh_failure(stderr: str, rc: int) -> str:
    """ssh's complaint, in a few words."""
    s = stderr
    if "REMOTE HOST IDENTIFICATION HAS CHANGED" in s:
        return "the peer's host key differs from the one recorded in known_hosts"
    if "Host key verification failed" in s or "No ED25519 host key is known" in s or "host key is not known" in s:
        return "the peer's host key is not in known_hosts"
    if "Permission denied" in s:
        return "the peer does not accept this node's key (Permission denied)"
    if "Connection timed out" in s or "timed out" in s:
        return "no answer from the peer (connection timed out)"
    if "No route to host" in s or "Network is unreachable" in s:
        return "no route to the peer's address"
    if "Connection refused" in s:
        return "nothing listens for ssh at the peer's address (connection refused)"
    if rc == 127 or "not found" in s:
        return "no ssh client on this node"
    last = [ln.strip() for ln in s.splitlines() if ln.strip()]
    return last[-1] if last else f"ssh exit {rc}"


async def login_of(node) -> str:
    """The account sparktui uses on a node: transfers log in to the same one."""
    r = await node.run(remote.whoami(), timeout=30)
    if r.exit_status == 255:
        raise TransferError(f"{node.name} is unreachable: {r.stderr.strip() or 'no answer'}")
    if not r.ok or not r.stdout.strip():
        raise TransferError(f"{node.name}: cannot tell the login name ({r.stderr.strip() or r.exit_status})")
    return r.stdout.strip().splitlines()[0]


async def check(node, user: str, addr: str, opts: TransferOptions) -> str | None:
    """None when `node` reaches user@addr with no prompt, else why not."""
    r = await node.run(
        remote.trust_check(opts.ssh, user, addr, opts.connect_timeout), timeout=opts.connect_timeout + 20
    )
    if r.ok:
        return None
    if r.exit_status == 255 and not r.stderr.strip():
        return "ssh failed without a message"
    return classify_ssh_failure(r.stderr, r.exit_status)


_ENSURE_KEY = """umask 077
mkdir -p "$HOME/.ssh"
for k in {names}; do
  if [ -f "$HOME/.ssh/$k" ] && [ -f "$HOME/.ssh/$k.pub" ]; then echo existing; cat "$HOME/.ssh/$k.pub"; exit 0; fi
done
ssh-keygen -q -t ed25519 -N '' -C {comment} -f "$HOME/.ssh/id_ed25519" </dev/null >/dev/null || exit 4
echo created
cat "$HOME/.ssh/id_ed25519.pub"
"""

_AUTHORIZE = """umask 077
mkdir -p "$HOME/.ssh"
f="$HOME/.ssh/authorized_keys"
touch "$f"
if grep -qF {blob} "$f"; then echo present; else printf '%s\\n' {line} >> "$f" && echo added; fi
"""

_HOST_KEYS = "cat /etc/ssh/ssh_host_*_key.pub 2>/dev/null\n"

_KNOWN = """kh="$HOME/.ssh/known_hosts"
ssh-keygen -F {addr} -f "$kh" 2>/dev/null | grep -v '^#' || true
"""

_RECORD = """umask 077
mkdir -p "$HOME/.ssh"
kh="$HOME/.ssh/known_hosts"
{remove}printf '%s\\n' {lines} >> "$kh"
"""


def presented_host_key(node) -> str | None:
    """The host key (base64) the node showed sparktui's connection, which known_hosts verified."""
    try:
        key = node.server_host_key()
        return key.export_public_key("openssh").decode().split()[1] if key is not None else None
    except (AttributeError, IndexError, ValueError):
        return None


def _blob(line: str) -> str | None:
    """The base64 key of an authorized_keys / known_hosts / .pub line."""
    for word in line.split():
        if word.startswith("AAAA") and len(word) > 40:
            return word
    return None


@dataclass
class TrustStep:
    node: str
    what: str  # one line, past tense: what was done or found
    ok: bool = True


@dataclass
class TrustPlan:
    """What `setup trust` will do: senders, peers and the address each sender dials."""

    pairs: list[tuple[str, str]]  # (sender, peer)
    addrs: dict[str, str]  # node -> address senders dial
    steps: list[TrustStep] = field(default_factory=list)

    def describe(self) -> list[str]:
        senders = sorted({s for s, _ in self.pairs})
        out = [f"on {s}: create an ed25519 key in ~/.ssh if none exists" for s in senders]
        for s, p in self.pairs:
            out.append(
                f"add {s}'s public key to {p}'s ~/.ssh/authorized_keys; "
                f"record {p}'s host key at {self.addrs[p]} in {s}'s ~/.ssh/known_hosts"
            )
        return out


async def setup(cluster, plan: TrustPlan, users: dict[str, str], opts: TransferOptions) -> list[TrustStep]:
    """Carry out a TrustPlan; returns what happened, step by step (failures have ok=False)."""
    steps = plan.steps
    senders = sorted({s for s, _ in plan.pairs})
    keys: dict[str, str] = {}

    async def ensure_key(s: str) -> None:
        node = cluster[s]
        r = await node.run(
            _ENSURE_KEY.format(names=" ".join(KEY_NAMES), comment=shlex.quote(f"sparktui@{s}")), timeout=60
        )
        lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
        if not r.ok or len(lines) < 2 or _blob(lines[1]) is None:
            steps.append(TrustStep(s, f"could not find or create a key: {r.stderr.strip() or r.exit_status}", False))
            return
        keys[s] = lines[1].strip()
        steps.append(TrustStep(s, "created a new ed25519 key" if lines[0] == "created" else "has a key already"))

    await asyncio.gather(*(ensure_key(s) for s in senders))
    host_keys: dict[str, set[str]] = {}

    async def read_host_keys(p: str) -> None:
        r = await cluster[p].run(_HOST_KEYS, timeout=30)
        host_keys[p] = {b for b in (_blob(ln) for ln in r.stdout.splitlines()) if b}
        presented = presented_host_key(cluster[p])
        if presented:
            host_keys[p].add(presented)

    await asyncio.gather(*(read_host_keys(p) for p in sorted({p for _, p in plan.pairs})))

    async def pair(s: str, p: str) -> None:
        if s not in keys:
            return
        addr = plan.addrs[p]
        key = keys[s]
        r = await cluster[p].run(
            _AUTHORIZE.format(blob=shlex.quote(_blob(key) or key), line=shlex.quote(key)), timeout=30
        )
        if not r.ok:
            steps.append(TrustStep(p, f"could not add {s}'s key to authorized_keys: {r.stderr.strip()}", False))
            return
        steps.append(
            TrustStep(p, f"{s}'s key {'was already' if 'present' in r.stdout else 'is now'} in authorized_keys")
        )
        await _record_host_key(cluster[s], p, addr, host_keys.get(p, set()), steps, opts)

    # one peer at a time per sender keeps the appends to a sender's known_hosts from interleaving
    async def per_sender(s: str) -> None:
        for s2, p in plan.pairs:
            if s2 == s:
                await pair(s, p)

    await asyncio.gather(*(per_sender(s) for s in senders))
    return steps


async def _record_host_key(
    snode, peer: str, addr: str, own: set[str], steps: list[TrustStep], opts: TransferOptions
) -> None:
    s = snode.name
    r = await snode.run(
        f"ssh-keyscan -T {int(opts.connect_timeout)} {shlex.quote(addr)} 2>/dev/null\n",
        timeout=opts.connect_timeout + 30,
    )
    scanned = [ln.strip() for ln in r.stdout.splitlines() if ln.strip() and not ln.startswith("#")]
    if not scanned and own:
        # no ssh-keyscan (or it could not connect): the keys P holds are the ones it presents
        scanned = [f"{addr} {t} {b}" for t, b in _typed(own)]
    if not scanned:
        steps.append(
            TrustStep(
                s, f"could not read {peer}'s host key at {addr} (ssh-keyscan: {r.stderr.strip() or 'no answer'})", False
            )
        )
        return
    if own:
        good = [ln for ln in scanned if _blob(ln) in own]
        strangers = [ln for ln in scanned if _blob(ln) not in own]
        if strangers and not good:
            steps.append(
                TrustStep(
                    s,
                    f"the host key answering at {addr} is not one of {peer}'s keys: "
                    f"left known_hosts alone (is {addr} really {peer}?)",
                    False,
                )
            )
            return
        scanned = good
    k = await snode.run(_KNOWN.format(addr=shlex.quote(addr)), timeout=30)
    known = {b for b in (_blob(ln) for ln in k.stdout.splitlines()) if b}
    wanted = {_blob(ln) for ln in scanned}
    if known & wanted:
        steps.append(TrustStep(s, f"already knows {peer}'s host key at {addr}"))
        return
    # a recorded key for addr that is none of the peer's keys is stale (reinstall, readdressing):
    # the peer's current key was just confirmed through sparktui's own login, so replace it
    remove = f'ssh-keygen -R {shlex.quote(addr)} -f "$kh" >/dev/null 2>&1\n' if known else ""
    w = await snode.run(_RECORD.format(remove=remove, lines=" ".join(shlex.quote(ln) for ln in scanned)), timeout=30)
    if not w.ok:
        steps.append(TrustStep(s, f"could not write known_hosts: {w.stderr.strip()}", False))
        return
    steps.append(TrustStep(s, f"{'replaced a stale' if known else 'recorded'} host key of {peer} at {addr}"))


def _typed(blobs) -> list[tuple[str, str]]:
    """(type, blob) for bare blobs: the type is encoded at the start of the blob itself."""
    out = []
    for b in blobs:
        try:
            raw = base64.b64decode(b)
            n = struct.unpack(">I", raw[:4])[0]
            out.append((raw[4 : 4 + n].decode(), b))
        except (ValueError, struct.error, UnicodeDecodeError):
            continue
    return out
