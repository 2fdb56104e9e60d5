"""The ssh cipher a copy encrypts with, chosen from what both ends offer, and the sender's cores.

OpenSSH's default order puts chacha20-poly1305 first (openssh-portable 9.6p1 myproposal.h,
KEX_SERVER_ENCRYPT = KEX_CLIENT_ENCRYPT: "chacha20-poly1305@openssh.com, aes128-ctr, aes192-ctr,
aes256-ctr, aes128-gcm@openssh.com, aes256-gcm@openssh.com"). On a CPU with AES instructions
(x86 AES-NI, the Arm crypto extension of a DGX Spark's Grace cores: `aes` in /proc/cpuinfo)
AES-GCM costs a fraction of ChaCha20's cycles per byte; without them ChaCha20 is the cheap one.
SSH takes the first cipher of the CLIENT's list that the server also offers (RFC 4253 7.1), so
the sender lists its preference filtered by `ssh -Q cipher`, and the cipher ssh reports after key
exchange (`ssh -v`: "kex: client->server cipher: ...") is what the peer accepted.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from . import remote
from .options import TransferOptions

AES_FIRST = (
    "aes128-gcm@openssh.com",
    "aes256-gcm@openssh.com",
    "chacha20-poly1305@openssh.com",
    "aes128-ctr",
    "aes256-ctr",
)
CHACHA_FIRST = (
    "chacha20-poly1305@openssh.com",
    "aes128-gcm@openssh.com",
    "aes256-gcm@openssh.com",
    "aes128-ctr",
    "aes256-ctr",
)


@dataclass
class Choice:
    cipher: str | None  # negotiated cipher; None when ssh's own choice stands (unknown)
    ciphers: str | None  # the Ciphers list to pass to ssh; None: leave ssh's defaults
    note: str | None  # why not the preferred one (a fallback the user should hear about)
    cores: int | None  # the sender's online CPUs


def host_facts(ssh: str) -> str:
    """On the sender: its cores, whether its CPU has AES instructions, its ssh's ciphers."""
    client = shlex.quote(shlex.split(ssh)[0] if ssh.strip() else "ssh")
    return (
        'printf "cores=%s\\n" "$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null)"\n'
        'a=0; grep -qiw aes /proc/cpuinfo 2>/dev/null && a=1; printf "aes=%s\\n" "$a"\n'
        f"printf \"offer=%s\\n\" \"$({client} -Q cipher 2>/dev/null | tr '\\n' ' ')\"\n"
    )


def negotiate(ssh: str, user: str, addr: str, ciphers: str, connect_timeout: int) -> str:
    """Connect once with `ciphers` and print the cipher the peer agreed to (`cipher=`), or ssh's
    last complaint (`error=`)."""
    argv = [*remote.ssh_command(ssh, connect_timeout, ciphers), "-v", f"{user}@{addr}", "true"]
    return (
        f"o=$({shlex.join(argv)} 2>&1 </dev/null); r=$?\n"
        'c=$(printf "%s\\n" "$o" | sed -n "s/.*kex: client->server cipher: \\([^ ]*\\).*/\\1/p" | head -n 1)\n'
        'printf "rc=%s\\ncipher=%s\\n" "$r" "$c"\n'
        'printf "error=%s\\n" "$(printf "%s\\n" "$o" | grep -v "^debug" | tail -n 1)"\n'
    )


def _kv(text: str) -> dict[str, str]:
    return dict(ln.split("=", 1) for ln in text.splitlines() if "=" in ln)


def preference(aes: bool, offer: set[str]) -> list[str]:
    """The sender's order: AES-GCM first with AES instructions, ChaCha20 first without; only
    what its ssh client knows (all of them when it could not say)."""
    order = AES_FIRST if aes else CHACHA_FIRST
    return [c for c in order if not offer or c in offer]


def user_set(ssh: str) -> bool:
    """The configured ssh command names its own cipher: it wins."""
    words = shlex.split(ssh)
    return "-c" in words or any(w.lower().startswith("ciphers=") for w in words)


async def choose(node, user: str, addr: str, opts: TransferOptions) -> Choice:
    """The cipher `node` should use towards user@addr, tried over a real connection."""
    f = await node.run(host_facts(opts.ssh), timeout=30)
    facts = _kv(f.stdout) if f.ok else {}
    cores = int(facts["cores"]) if facts.get("cores", "").isdigit() else None
    if not opts.cipher or user_set(opts.ssh):
        return Choice(None, None, None, cores)
    aes = facts.get("aes") == "1"
    offer = set(facts.get("offer", "").split())
    prefs = preference(aes, offer)
    best = (AES_FIRST if aes else CHACHA_FIRST)[0]
    if not prefs:
        return Choice(
            None, None, f"{node.name}'s ssh offers none of {', '.join(AES_FIRST)}; ssh's default cipher", cores
        )
    r = await node.run(
        negotiate(opts.ssh, user, addr, ",".join(prefs), opts.connect_timeout), timeout=opts.connect_timeout + 20
    )
    kv = _kv(r.stdout)
    got = kv.get("cipher") or None
    if not got:
        why = kv.get("error") or r.stderr.strip() or "no answer"
        return Choice(None, None, f"could not agree on a cipher with {addr} ({why}); ssh's default cipher", cores)
    note = None
    if got != best:
        who = f"{node.name}'s ssh" if best not in offer and offer else addr
        note = f"{who} does not offer {best}; using {got}"
    return Choice(got, ",".join(prefs), note, cores)
