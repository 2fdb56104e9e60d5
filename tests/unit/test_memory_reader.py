"""The reader's remote loop, run by real local shells (sh, dash, bash) against files of the test's own."""

from __future__ import annotations

import asyncio
import shutil

import pytest

from sparktui.core.memory.reader import SCRIPT, ask, parse_answer

SHELLS = [s for s in ("sh", "dash", "bash") if shutil.which(s)]
MEMINFO = "MemTotal:  1000 kB\nMemAvailable:  400 kB\nSwapTotal: 0 kB\nSwapFree: 0 kB\n"
PSI = "some avg10=1.00 avg60=0 avg300=0 total=1\nfull avg10=0.50 avg60=0 avg300=0 total=1"  # no final newline


class Shell:
    """The loop under a local shell, spoken to as MemReader speaks to its remote one."""

    def __init__(self, proc: asyncio.subprocess.Process):
        self.proc = proc

    def send(self, line: str) -> None:
        self.proc.stdin.write((line + "\n").encode())

    async def readuntil(self, marker: str) -> str:
        try:
            return (await self.proc.stdout.readuntil(marker.encode())).decode()
        except asyncio.IncompleteReadError as e:
            return e.partial.decode()


@pytest.fixture(params=SHELLS)
async def shell(request, tmp_path):
    mem, psi = tmp_path / "meminfo", tmp_path / "pressure"
    mem.write_text(MEMINFO)
    psi.write_text(PSI)
    proc = await asyncio.create_subprocess_exec(
        request.param,
        "-c",
        SCRIPT,
        "sparktui-mem",
        str(mem),
        str(psi),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    yield Shell(proc), mem, psi
    if proc.returncode is None:
        proc.kill()
        await proc.wait()


async def test_each_request_is_answered_with_both_files(shell):
    sh, mem, _ = shell
    for n in ("1", "2"):
        lines = await asyncio.wait_for(ask(sh, n), 10)
        s = parse_answer("n1", 0.0, lines, str(mem))
        assert (s.total, s.available, s.psi_full, s.error) == (1000 * 1024, 400 * 1024, 0.5, None)


async def test_a_changed_file_is_read_anew_each_time(shell):
    sh, mem, _ = shell
    await asyncio.wait_for(ask(sh, "1"), 10)
    mem.write_text(MEMINFO.replace("400 kB", "90 kB"))
    s = parse_answer("n1", 0.0, await asyncio.wait_for(ask(sh, "2"), 10))
    assert s.available == 90 * 1024


async def test_a_missing_pressure_file_gives_no_psi_and_the_memory_still(shell):
    sh, _, psi = shell
    psi.unlink()
    s = parse_answer("n1", 0.0, await asyncio.wait_for(ask(sh, "1"), 10))
    assert s.error is None and s.available == 400 * 1024 and s.psi_full is None and s.psi_some is None


async def test_a_meminfo_that_vanishes_is_an_error_and_the_loop_goes_on(shell):
    sh, mem, _ = shell
    mem.unlink()
    s = parse_answer("n1", 0.0, await asyncio.wait_for(ask(sh, "1"), 10), str(mem))
    assert s.error == f"cannot read {mem} on n1" and s.available is None
    mem.write_text(MEMINFO)
    assert parse_answer("n1", 0.0, await asyncio.wait_for(ask(sh, "2"), 10)).available == 400 * 1024


async def test_eof_on_its_stdin_ends_the_shell(shell):
    sh, _, _ = shell
    await asyncio.wait_for(ask(sh, "1"), 10)
    sh.proc.stdin.close()
    assert await asyncio.wait_for(sh.proc.wait(), 10) == 0


@pytest.mark.parametrize("name", SHELLS)
async def test_the_loop_spawns_no_process_per_reading(name, tmp_path):
    """With no PATH at all no command can be found: only the shell's builtins can answer."""
    mem, psi = tmp_path / "meminfo", tmp_path / "pressure"
    mem.write_text(MEMINFO)
    psi.write_text(PSI)
    proc = await asyncio.create_subprocess_exec(
        shutil.which(name),
        "-c",
        "PATH=/nonexistent; " + SCRIPT,
        "sparktui-mem",
        str(mem),
        str(psi),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        for n in ("1", "2"):
            s = parse_answer("n1", 0.0, await asyncio.wait_for(ask(Shell(proc), n), 10))
            assert s.available == 400 * 1024 and s.psi_full == 0.5
    finally:
        proc.kill()
        await proc.wait()


async def test_a_late_answer_to_an_abandoned_request_is_skipped():
    class Canned:
        def __init__(self, text: str):
            self.text = text

        def send(self, line: str) -> None:
            pass

        async def readuntil(self, marker: str) -> str:
            i = self.text.find(marker)
            return self.text if i < 0 else self.text[: i + len(marker)]

    old = "@mem\nMemTotal: 1 kB\nMemAvailable: 1 kB\n@nopsi\n@end 1\n"
    new = "@mem\n" + MEMINFO + "@nopsi\n@end 2\n"
    lines = await ask(Canned(old + new), "2")
    assert parse_answer("n1", 0, lines).available == 400 * 1024
    assert await ask(Canned(old), "2") is None  # the shell ended before answering
