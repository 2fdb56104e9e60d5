"""Read a node's memory cheaply: one remote shell per node, kept open, that answers each request line.

A sample every couple of seconds through `node.run` would cost a channel, a login shell and a `cat`
each time, on a host that is short of memory by then. Instead one `sh` loop runs for the whole watch
and copies the two files with builtins alone (read, printf, [), so no process is spawned per sample,
and sparktui paces it: no remote sleep. EOF on its stdin ends it, whether sparktui closes the reader,
exits or loses the link. A node whose channel cap leaves no room for the shell beside a launch's own
channels is read with one command per sample instead.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

from ..remote.channels import SESSIONS_NEEDED
from ..remote.ssh import Node, SshError, sh
from .sample import MemSample, parse_sample

MEMINFO = "/proc/meminfo"
PRESSURE = "/proc/pressure/memory"
READ_TIMEOUT_S = 10.0  # a node that answers no reading within this is unwatched for that reading

# $1 meminfo, $2 pressure; each request line is echoed back after "@end " to pair answer and request.
# `[ -r ]` first: dash reports a failed redirection on a compound command but goes on, bash too.
SCRIPT = r"""m=$1; p=$2
copy() { while IFS= read -r l || [ -n "$l" ]; do printf '%s\n' "$l"; l=; done < "$1"; }
while IFS= read -r tok; do
  if [ -r "$m" ] && { printf '@mem\n'; copy "$m"; } 2>/dev/null; then :; else printf '@nomem\n'; fi
  if [ -r "$p" ] && { printf '@psi\n'; copy "$p"; } 2>/dev/null; then :; else printf '@nopsi\n'; fi
  printf '@end %s\n' "$tok"
done
"""


def command(meminfo: str = MEMINFO, pressure: str = PRESSURE) -> str:
    """The remote command line: the loop above under `sh` (dash where sh is dash), the paths as arguments."""
    return sh("sh", "-c", SCRIPT, "sparktui-mem", meminfo, pressure)


class Lines(Protocol):
    def send(self, line: str) -> None: ...
    async def readuntil(self, marker: str) -> str: ...


async def ask(chan: Lines, token: str) -> list[str] | None:
    """Send one request and read its answer's lines (without the end marker); None when the shell ended.
    The answer is read in one go up to its own `@end TOKEN` (line by line cost twice the CPU at 8 nodes);
    what an earlier request that timed out left before it is dropped."""
    chan.send(token)
    marker = f"@end {token}\n"
    text = await chan.readuntil(marker)
    if not text.endswith(marker):
        return None
    body = text[: -len(marker)]
    stale = body.rfind("@end ")
    if stale >= 0:  # the tail of an answer given up on
        body = body[body.find("\n", stale) + 1 :]
    return body.splitlines()


def parse_answer(node: str, at: float, lines: list[str], meminfo: str = MEMINFO, pressure: str = PRESSURE) -> MemSample:
    """A sample from one answer; a missing meminfo is an error, a missing pressure file psi None."""
    parts: dict[str, list[str]] = {}
    cur: list[str] | None = None
    for line in lines:
        if line in ("@mem", "@psi", "@nomem", "@nopsi"):
            cur = parts.setdefault(line, [])
        elif cur is not None:
            cur.append(line)
    if "@mem" not in parts:
        return MemSample(node, at, error=f"cannot read {meminfo} on {node}")
    psi = "\n".join(parts["@psi"]) if "@psi" in parts else None
    return parse_sample(node, at, "\n".join(parts["@mem"]), psi)


class MemReader:
    """A node's memory, one `sample()` at a time; never raises, a failed reading is `MemSample.error`."""

    def __init__(self, node: Node, meminfo: str = MEMINFO, pressure: str = PRESSURE, timeout: float = READ_TIMEOUT_S):
        self.node = node
        self.meminfo = meminfo
        self.pressure = pressure
        self.timeout = timeout
        self._session = None
        self._n = 0

    async def sample(self) -> MemSample:
        at = time.time()
        self._n += 1
        token = str(self._n)
        try:
            lines = await asyncio.wait_for(self._ask(token), self.timeout)
        except asyncio.TimeoutError:
            await self.close()  # the next reading opens a fresh shell
            return MemSample(self.node.name, at, error=f"{self.node.name} gave no reading within {self.timeout:g} s")
        except (SshError, OSError) as e:
            await self.close()
            return MemSample(self.node.name, at, error=str(e) or f"{self.node.name}: cannot read its memory")
        except Exception as e:  # noqa: BLE001 - a reading that fails must never end the watch
            await self.close()
            return MemSample(self.node.name, at, error=f"{self.node.name}: {type(e).__name__}: {e}")
        if lines is None:
            await self.close()  # the link dropped or the shell died: reopen on the next sample
            return MemSample(self.node.name, at, error=f"{self.node.name}: the memory reader ended")
        return parse_answer(self.node.name, at, lines, self.meminfo, self.pressure)

    async def _ask(self, token: str) -> list[str] | None:
        cmd = command(self.meminfo, self.pressure)
        if self.node.channel_limit <= SESSIONS_NEEDED:
            # no room for a channel of its own beside the launch's: one short command per reading
            r = await self.node.run(cmd, timeout=self.timeout, input=token + "\n")
            if r.exit_status not in (0, None) and "@end" not in r.stdout:
                raise SshError(r.stderr.strip() or f"{self.node.name}: exit {r.exit_status}")
            return await ask(_Text(r.stdout), token)
        if self._session is None or self._session.closed:
            self._session = await self.node.session(cmd, slot_timeout=self.timeout)
        return await ask(self._session, token)

    async def close(self) -> None:
        s, self._session = self._session, None
        if s is not None:
            await s.close()


class _Text:
    """A finished command's output read as if it came from a live shell."""

    def __init__(self, text: str):
        self._text = text

    def send(self, line: str) -> None:
        pass

    async def readuntil(self, marker: str) -> str:
        i = self._text.find(marker)
        end = len(self._text) if i < 0 else i + len(marker)
        out, self._text = self._text[:end], self._text[end:]
        return out
