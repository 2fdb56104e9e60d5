"""The deployment record: a Deployment's JSON form (core/state/deployment.py), kept on the head node so another
process can act on it.

~/.local/state/sparktui/deployments/NAME.json on the head holds what was launched, so `pivot` and
`redeploy` from a new process relaunch the same choices. Container labels say which containers
belong to it; the record says how they were chosen.
"""

from __future__ import annotations

import json

from ..state import statefile
from ..state.deployment import FIX, VERSION, Deployment, learn_secrets, options_from_json, options_to_json
from ..config.secrets import mask_data
from ..remote.ssh import Node, script

__all__ = [
    "FIX",
    "STATE_DIR",
    "VERSION",
    "Deployment",
    "Record",
    "learn_secrets",
    "load_record",
    "options_from_json",
    "options_to_json",
    "record_path",
    "record_where",
    "save_command",
    "save_record",
]

STATE_DIR = ".local/state/sparktui/deployments"  # under the head's $HOME
_ABSENT = 3  # load_record's exit status for "no record"
MAX_BYTES = 1 << 20  # save_command writes it as one printf argument, which Linux caps at 128 KiB


def read_command(path: str) -> str:
    """Print the record at `path` (a shell word), at most MAX_BYTES + 1 bytes: a larger one is damage."""
    return f"head -c {MAX_BYTES + 1} {path}"


# The record is a Deployment's JSON form; the old name stays for callers that use it.
Record = Deployment


def record_path(deployment: str) -> str:
    """The record's path as a shell word ($HOME expands on the node, the rest is quoted)."""
    return script('"$HOME"/{d}/{f}', d=STATE_DIR, f=f"{deployment}.json")


def save_command(record: Deployment, masked: bool = False) -> str:
    """Write the record atomically: a temp file, then rename (a killed write leaves the old one).

    The record carries the launch's secrets (a pivot from another process relaunches with the same
    API key), so it is written 0600 in a 0700 directory. masked: the same line with the secrets
    hidden, for the journal (masked as data, then serialised, so its JSON stays valid).
    """
    data = record.to_json()
    data = json.dumps(mask_data(data) if masked else data, sort_keys=True)
    return script(
        'umask 077 && d="$HOME"/{d} && mkdir -p "$d" && printf "%s\\n" {data} > "$d"/{tmp} '
        '&& chmod 600 "$d"/{tmp} && mv -f "$d"/{tmp} "$d"/{f}',
        d=STATE_DIR,
        data=data,
        tmp=f".{record.deployment}.json.tmp",
        f=f"{record.deployment}.json",
    )


async def save_record(node: Node, record: Deployment) -> str | None:
    """Store the record on `node` (the head); returns an error sentence or None."""
    r = await node.run(save_command(record), timeout=30, shown=save_command(record, masked=True))
    return None if r.ok else (r.stderr.strip() or f"exit {r.exit_status}")


def record_where(node: Node, deployment: str) -> str:
    """The record's place in messages: NODE:~/.local/state/sparktui/deployments/NAME.json."""
    return f"{getattr(node, 'name', 'head')}:~/{STATE_DIR}/{deployment}.json"


async def load_record(node: Node, deployment: str) -> Deployment | None:
    """The record from `node`, or None when there is none.

    A record that is there but unusable (empty, not JSON, a field of the wrong type, unreadable) is a
    StateFileError naming it: "no record" would send the user to look for a launch that did happen.
    """
    path = record_path(deployment)
    r = await node.run(f"[ -e {path} ] || exit {_ABSENT}; {read_command(path)}", timeout=30)
    where = record_where(node, deployment)
    if not r.ok:
        if r.exit_status == _ABSENT or "No such file" in r.stderr:  # the test, not cat's words (locale)
            return None
        raise statefile.StateFileError(
            where, f"cannot be read ({r.stderr.strip()[:200] or f'exit {r.exit_status}'})", FIX
        )
    if not r.stdout.strip():
        raise statefile.StateFileError(where, "is empty", FIX)
    if len(r.stdout) > MAX_BYTES:
        raise statefile.StateFileError(where, f"is larger than {MAX_BYTES >> 10} KiB, not a record", FIX)
    return Deployment.from_json(statefile.parse_json(r.stdout, where, FIX), where)
