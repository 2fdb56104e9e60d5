"""Model and image transfers between nodes: detached on the sending node, followed, verified.

Public API (what the CLI, the TUI and `sparktui status` call):
  sync_model(cluster, config, dests=None, *, emit, opts, addrs, subnet) -> list[Outcome]
  sync_image(cluster, config, image_or_engine, dests=None, *, emit, opts, addrs, subnet) -> list[Outcome]
  transfer_status(cluster, config=None) -> list[dict]
  list_transfers(cluster) -> list[TransferRecord]
  cancel_transfer(cluster, tid) -> str
  reattach(cluster, emit, opts) -> list[Outcome]: on start, show and carry on earlier transfers
  trust_plan / setup_trust: node-to-node SSH trust for the senders

- `model_sync` — copy the model directory from the node holding it to the others, verified
- `image_sync` — copy a container image to the nodes that lack it (`docker save | ssh peer docker load`)
- `schedule` — who sends to whom: the fan-out of one copy to many nodes
- `runner` — drive a fan-out: start pairs as senders free up, follow transfers, collect outcomes
- `streams` — parallel rsync streams for one model copy, and their joint progress
- `remote` — the POSIX sh snippets the nodes run for transfers, every value quoted
- `follow` — follow one detached transfer to its end: its log from a byte offset, progress
- `rsync_progress` — `rsync --info=progress2` output parsed (`ProgressParser`), rsync's exit codes explained
- `eta` — how long a transfer has left, from a measured rate
- `state` — what a transfer is (meta.json) and where it stands
- `status` — find transfers again from their state directories, and cancel them
- `reattach` — on start, find the transfers earlier runs left on the nodes and carry them on
- `addresses` — the address each node is dialled at by its peers: its IP on the fabric subnet
- `cipher` — the ssh cipher a copy uses, chosen from what both ends offer
- `trust` — node-to-node SSH trust over the fabric: check it, set it up
- `trust_setup` — `sparktui setup trust`: which pairs need trust, and setting it up
- `options` — knobs of the transfer machinery
- `errors` — transfer failures, each with a plain sentence for the user
"""

from .errors import TransferBusy, TransferError, TrustMissing
from .image_sync import resolve_image, sync_image
from .model_sync import start_model_transfer, sync_model, verify_model
from .options import TransferOptions
from .rsync_progress import ProgressParser, RsyncUpdate, parse_update, rsync_exit_message
from .reattach import reattach
from .runner import Outcome
from .state import TransferMeta, TransferRecord
from .status import cancel_transfer, list_transfers, transfer_status
from .trust_setup import setup_trust, trust_plan

__all__ = [
    "Outcome",
    "ProgressParser",
    "RsyncUpdate",
    "TransferBusy",
    "TransferError",
    "TransferMeta",
    "TransferOptions",
    "TransferRecord",
    "TrustMissing",
    "cancel_transfer",
    "list_transfers",
    "parse_update",
    "reattach",
    "resolve_image",
    "rsync_exit_message",
    "setup_trust",
    "start_model_transfer",
    "sync_image",
    "sync_model",
    "transfer_status",
    "trust_plan",
    "verify_model",
]
