"""A model copy in parallel streams between lab nodes: real sshd and rsync over the fabric veth,
the cipher negotiated with the peer's real sshd, and the fallback when the peer lacks it."""

from __future__ import annotations

import asyncio
import re
import uuid

import pytest

from sparktui.core.config.config import load_config
from sparktui.core.state.events import TransferProgress
from sparktui.core.remote.ssh import Cluster
from sparktui.core.transfers import TransferOptions, list_transfers, sync_model
from sparktui.core.transfers.cipher import preference

from .labtools import make_model, sums
from .test_transfers import config_for, forget

pytestmark = pytest.mark.lab


def preferred() -> tuple[str, str]:
    """(first, second) cipher this machine's CPU calls for; the lab nodes share its CPU."""
    with open("/proc/cpuinfo") as f:
        aes = re.search(r"\baes\b", f.read()) is not None
    first, second, *_ = preference(aes, set())
    return first, second


@pytest.fixture
def model_path(lab):
    path = f"/models/streams-{uuid.uuid4().hex[:8]}"
    yield path
    forget(lab, path)


async def test_three_streams_over_the_fabric_with_the_preferred_cipher(lab, model_path):
    lab.trust("node1", "node2")
    make_model(lab, "node1", model_path, shards="shards", sizes_mb=[24, 20, 20, 8])
    cfg = load_config(config_for(lab, model_path))
    events: list[TransferProgress] = []
    async with Cluster(cfg) as c:
        [out] = await asyncio.wait_for(
            sync_model(c, cfg, emit=events.append, opts=TransferOptions(poll=0.3, rsync_streams=3)), 120
        )
        [rec] = [r for r in await list_transfers(c) if r.meta.path == model_path]
    assert out.ok, out.message
    assert rec.meta.streams == 3 and rec.meta.cipher == preferred()[0] and rec.meta.cipher_note is None
    assert sums(lab, "node1", model_path) == sums(lab, "node2", model_path)
    assert events[-1].state == "done" and events[-1].cipher == preferred()[0]


async def test_a_peer_without_the_preferred_cipher_gets_the_next_and_the_copy_says_so(lab, model_path):
    first, second = preferred()
    lab.trust("node1", "node2")
    make_model(lab, "node1", model_path, sizes_mb=[20, 20])
    cfg = load_config(config_for(lab, model_path))
    conf = lab["node2"].path / "lab/sshd_config"
    conf.write_text(conf.read_text() + f"Ciphers {second}\n")
    lab.sh("node2", 'kill -HUP "$(cat /run/lab/sshd.pid)"')  # sshd re-reads its config for new connections
    events: list[TransferProgress] = []
    try:
        async with Cluster(cfg) as c:
            [out] = await asyncio.wait_for(sync_model(c, cfg, emit=events.append, opts=TransferOptions(poll=0.3)), 120)
            [rec] = [r for r in await list_transfers(c) if r.meta.path == model_path]
    finally:
        lab.start_sshd("node2")  # the lab's own config again
    assert out.ok, out.message
    assert rec.meta.cipher == second
    notes = [e.message for e in events if e.dest == "-" and e.message]
    assert any(f"does not offer {first}; using {second}" in n for n in notes), notes
    assert sums(lab, "node1", model_path) == sums(lab, "node2", model_path)
