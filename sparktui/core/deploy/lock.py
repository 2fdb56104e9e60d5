"""A deployment's lock on the head node: one launch, pivot, redeploy or stop of it at a time.

The lock is a file, ~/.local/state/sparktui/locks/NAME.lock on the head, made with `ln` of a
finished temp file: the link is atomic and fails when the lock exists, so its holder line (node
clock, host, user, pid, operation, a random token) is whole the moment it exists. It lives on the
head, not in the client, so it outlives a client that died and every client sees the same one.
Only the token's owner releases it; breaking it removes only the holder that was shown.
"""

from __future__ import annotations

import getpass
import json
import os
import secrets
import socket
from dataclasses import dataclass

from ..remote.ssh import Node, script
from .orchestrator import DeployError

LOCK_DIR = ".local/state/sparktui/locks"  # under the head's $HOME
_HELD = 3  # the take script's exit status for "someone holds it"


class LockError(DeployError):
    """The lock could not be taken or read (not that another holds it): str() says why."""


@dataclass(frozen=True)
class Holder:
    """Who holds a deployment's lock; started is the head's clock, age its clock when read."""

    host: str
    user: str
    pid: int
    op: str
    token: str
    started: int = 0
    age: int = 0

    def words(self) -> str:
        return f"{self.op} by {self.user}@{self.host} (pid {self.pid}), {_age(self.age)} ago"

    def gone(self) -> bool:
        """True only when it ran on this very host and its process no longer exists."""
        if self.host != socket.gethostname() or self.pid <= 0:
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except OSError:  # it exists (another user's) or cannot be asked: not gone
            return False
        return False


class LockHeld(LockError):
    def __init__(self, deployment: str, holder: Holder, where: str):
        self.deployment = deployment
        self.holder = holder
        self.where = where
        super().__init__(
            f"deployment {deployment} is busy: {holder.words()} holds its lock ({where}); "
            f"wait for it to finish, or pass --break-lock if that process is gone"
        )


def _age(s: int) -> str:
    s = max(0, int(s))
    return f"{s} s" if s < 120 else f"{s // 60} min" if s < 7200 else f"{s // 3600} h"


def _token_words(h: Holder) -> str:
    return f'"token": "{h.token}"'  # as json.dumps writes it in the holder line


def lock_where(node: Node, deployment: str) -> str:
    return f"{getattr(node, 'name', 'head')}:~/{LOCK_DIR}/{deployment}.lock"


def me(op: str) -> Holder:
    try:
        user = getpass.getuser()
    except Exception:  # noqa: BLE001 - no name for this uid: the number says who
        user = str(os.getuid())
    return Holder(socket.gethostname(), user, os.getpid(), op, secrets.token_hex(8))


def _parse(text: str) -> Holder | None:
    """'NOW' then 'STARTED JSON' (the take script's answer when held); None when unreadable."""
    lines = text.strip().splitlines()
    try:
        now = int(lines[0])
        started, _, doc = lines[1].partition(" ")
        d = json.loads(doc)
        return Holder(
            str(d["host"]),
            str(d["user"]),
            int(d["pid"]),
            str(d["op"]),
            str(d["token"]),
            int(started),
            now - int(started),
        )
    except (IndexError, ValueError, KeyError, TypeError):
        return None


async def take(node: Node, deployment: str, op: str, *, breaking: Holder | None = None) -> Holder:
    """Take the lock as this process; LockHeld names the holder. breaking: first remove the lock if,
    and only if, that holder still has it (a newer holder is never broken unseen)."""
    mine = me(op)
    doc = json.dumps({"host": mine.host, "user": mine.user, "pid": mine.pid, "op": op, "token": mine.token})
    # breaking: remove the lock only if the shown holder (its token) still has it
    brk = (
        ""
        if breaking is None
        else script('{{ grep -qF {tok} "$f" 2>/dev/null && rm -f "$f"; true; }} && ', tok=_token_words(breaking))
    )
    cmd = script(
        'umask 077 && d="$HOME"/{d} && mkdir -p "$d" && f="$d"/{f} && t="$d"/.{f}.$$ && ',
        d=LOCK_DIR,
        f=f"{deployment}.lock",
    )
    cmd += brk + script(
        'printf "%s %s\\n" "$(date +%s)" {doc} > "$t" && if ln "$t" "$f" 2>/dev/null; '
        'then rm -f "$t"; else rm -f "$t"; date +%s; cat "$f"; exit {held}; fi',
        doc=doc,
        held=_HELD,
    )
    r = await node.run(cmd, timeout=30)
    if r.ok:
        return mine
    where = lock_where(node, deployment)
    if r.exit_status == _HELD:
        holder = _parse(r.stdout)
        if holder is not None:
            raise LockHeld(deployment, holder, where)
        raise LockError(f"{where} is there but unreadable: remove it if no sparktui runs on {deployment}")
    raise LockError(f"cannot take the lock {where}: {r.stderr.strip()[:200] or f'exit {r.exit_status}'}")


async def release(node: Node, deployment: str, holder: Holder) -> None:
    """Remove the lock if this holder still has it (a lock broken and taken by another stays)."""
    await node.run(
        script(
            'f="$HOME"/{d}/{f}; grep -qF {tok} "$f" 2>/dev/null && rm -f "$f"; true',
            d=LOCK_DIR,
            f=f"{deployment}.lock",
            tok=_token_words(holder),
        ),
        timeout=30,
    )
