"""Model and image transfers between nodes: detached on the sending node, followed, verified.

Public API (what the CLI, the TUI and `sparktui status` call):
  sync_model(cluster, config, dests=None, *, emit, opts, addrs, subnet) -> list[Outcome]
  sync_image(cluster, config, image_or_engine, dests=None, *, emit, opts, addrs, subnet) -> list[Outcome]
  transfer_status(cluster, config=None) -> list[dict]
  list_transfers(cluster) -> list[TransferRecord]
  cancel_transfer(cluster, tid) -> str
  reattach(cluster, emit, opts) -> list[Outcome]: on start, show and carry on earlier transfers
  trust_plan / setup_trust: node-to-node SSH trust for the senders
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
