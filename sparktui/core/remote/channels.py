"""SSH channels per node: the cap sparktui keeps (lowered when a node refuses one), how many
sessions a node accepts at once, and what to tell the user when that is too few.

OpenSSH's MaxSessions limits session channels per connection (default 10). sparktui keeps one
connection per node, so a node with MaxSessions 1 can run one command at a time: commands queue for
a slot within their own timeout, and a launch, which holds one channel for the engine's log while
it runs commands, is refused there with the fix.
"""

from __future__ import annotations

import asyncio
import contextlib

from .sshlib import asyncssh

# Channels a launch holds at once on a node: one follows the engine's log while another runs commands.
SESSIONS_NEEDED = 2
SESSION_ASKS = 5  # refusals before count_sessions() believes the node's limit
OPEN_RETRIES = 40  # a refused channel open is retried this many times (sshd frees slots late)


class Slots:
    """Caps open channels per node. When the node refuses a channel (sshd's MaxSessions is lower
    than ours), the cap drops to what the node accepted and the caller retries."""

    def __init__(self, limit: int):
        self.limit = max(1, limit)
        self.configured = self.limit
        self.used = 0
        self.refusals = 0
        self._cond = asyncio.Condition()

    async def acquire(self, timeout: float | None = None) -> None:
        """Take a slot; asyncio.TimeoutError when none frees up within `timeout` seconds."""
        async with self._cond:
            await asyncio.wait_for(self._cond.wait_for(lambda: self.used < self.limit), timeout)
            self.used += 1

    async def release(self) -> None:
        async with self._cond:
            self.used -= 1
            self._cond.notify_all()

    def refused(self) -> None:
        # self.used counts the refused open too: the node accepted used - 1 channels
        self.refusals += 1
        self.limit = max(1, min(self.limit, self.used - 1))

    def lower_to(self, accepted: int) -> None:
        self.refusals += 1
        self.limit = max(1, min(self.limit, accepted))


async def count_sessions(conn: asyncssh.SSHClientConnection, slots: Slots, want: int, timeout: float) -> int:
    """Open idle session channels side by side until `want` are open (those in use counted), then
    close them; returns how many the node accepted. A refusal lowers `slots`' cap."""
    procs: list = []
    accepted = slots.used

    async def open_all() -> None:
        nonlocal accepted
        refused = 0
        while accepted < want:
            try:
                procs.append(await conn.create_process("cat >/dev/null"))
            except asyncssh.ChannelOpenError:
                # a channel that just closed may still count on the node for a moment: ask again
                refused += 1
                if refused < SESSION_ASKS:
                    await asyncio.sleep(0.1 * refused)
                    continue
                slots.lower_to(accepted)
                return
            accepted += 1
            slots.used += 1  # held like any channel, so a refusal elsewhere meanwhile counts it

    try:
        await asyncio.wait_for(open_all(), timeout)
    except (asyncio.TimeoutError, asyncssh.Error, OSError):
        pass
    finally:
        for p in procs:
            with contextlib.suppress(Exception):
                p.stdin.write_eof()
                p.close()
        # wait until the node has let them go, so the next open does not meet their slots
        for p in procs:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(p.wait_closed(), 5)
            await slots.release()
    return accepted


def shortfall(
    name: str, accepted: int, want: int, slots: Slots, max_channels: int, connected: bool, error: str | None
) -> str | None:
    """Why a node that accepted `accepted` sessions cannot hold `want` (None when it can), with the fix."""
    k = min(accepted, slots.limit)  # sparktui's own cap counts as much as the node's
    if k >= want:
        return None
    if k == 0 and not connected:
        return f"{name} is unreachable ({error or 'no answer'})"
    lim = slots.limit
    if slots.refusals and lim < max_channels:
        return (
            f"{name}'s sshd accepts only {lim} session(s) per connection (MaxSessions {lim}); set "
            f"MaxSessions 10 (OpenSSH's default) in /etc/ssh/sshd_config on {name} and reload sshd"
        )
    if max_channels < want:
        return f"ssh.max_channels is {max_channels}; set it to at least {want}"
    return f"{name} opened only {k} SSH channel(s) at once"


def busy_note(name: str, slots: Slots) -> str:
    """Why no channel was free on a node, in words (for a command whose wait ran out)."""
    lim = slots.limit
    if slots.refusals and lim < slots.configured:
        return (
            f"{name}'s sshd accepts only {lim} session(s) per connection (MaxSessions) and "
            f"{'it is' if lim == 1 else 'all are'} in use; raise MaxSessions in /etc/ssh/sshd_config "
            f"on {name} (OpenSSH's default is 10)"
        )
    return f"all {lim} channels (ssh.max_channels) to {name} are in use"
