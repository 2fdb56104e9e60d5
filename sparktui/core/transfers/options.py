"""Knobs of the transfer machinery (defaults fit real clusters; tests turn some of them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class TransferOptions:
    ssh: str = "ssh"  # ssh client the SOURCE node runs towards its peers (split like a shell word list)
    connect_timeout: int = 5  # seconds the source's ssh waits for a peer
    poll: float = 1.0  # seconds between progress reads (rsync updates about once a second)
    # Concurrent outgoing transfers per sending node. A node's streams share its one link, so two
    # streams each run at half speed and nobody holds a copy sooner: one stream per sender doubles
    # the senders every round and ends in ceil(log2 N) rounds (see schedule.py).
    streams_per_source: int = 1
    checksum: bool = False  # after a model sync, also compare contents by checksum (reads everything)
    lost_contact: float = 300.0  # seconds without reaching a source node before giving up following
    bwlimit: str | None = None  # rsync --bwlimit, e.g. "200m": leave room on the fabric for a running job
    io_timeout: int = 300  # rsync --timeout: seconds without any data before rsync gives up
    # Parallel rsync streams within one copy (not more copies per sender, above): one rsync over
    # one ssh is bound by a core or two, far below a fabric link. The copy runs as many as the
    # sender's cores allow (2 each) and it has large files, at most this many (see streams.py).
    max_streams: int = 8
    stream_file_bytes: int = 16 << 20  # a file this large is worth a stream of its own
    rsync_streams: int | None = None  # exactly this many (bench, tests); None: chosen as above
    cipher: bool = True  # pick the cheapest ssh cipher both ends offer (cipher.py); False: ssh's default
