"""The deployment record: what was launched, kept on the head node so another process can act on it.

~/.local/state/sparktui/deployments/NAME.json on the head holds the PlanOptions the user chose and
what the plan resolved them to (engine, mode, TP/PP, rendezvous subnet, port, plan id), so `pivot`
and `redeploy` from a new process relaunch the same choices. Container labels say which containers
belong to it; the record says how they were chosen.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field

from .. import statefile
from ..plan import Plan, PlanOptions
from ..secrets import MASK, add_values, mask_data
from ..ssh import Node, script

STATE_DIR = ".local/state/sparktui/deployments"  # under the head's $HOME
VERSION = 1
FIX = "launch the deployment again to rewrite it (or remove the file)"
_ABSENT = 3  # load_record's exit status for "no record"


@dataclass
class Record:
    deployment: str
    engine: str
    mode: str
    options: PlanOptions
    plan_id: str = ""
    tp: int = 0
    pp: int = 0
    subnet: str | None = None
    head_ip: str | None = None
    port: int = 0
    image: str = ""
    served_model_name: str | None = None
    nodes: list[str] = field(default_factory=list)  # rank order, head first
    containers: dict[str, str] = field(default_factory=dict)  # node -> container name
    saved: float = 0.0

    def to_json(self) -> dict:
        d = asdict(self)
        d["options"] = options_to_json(self.options)
        d["version"] = VERSION
        return d

    @classmethod
    def from_plan(cls, plan: Plan, options: PlanOptions) -> "Record":
        return cls(deployment=plan.deployment, engine=plan.engine, mode=plan.mode, options=options,
                   plan_id=plan.plan_id, tp=plan.tp, pp=plan.pp, subnet=plan.subnet, head_ip=plan.head_ip,
                   port=plan.port, image=plan.image, served_model_name=plan.served_model_name,
                   nodes=[n.name for n in plan.nodes], containers={n.name: n.container for n in plan.nodes},
                   saved=time.time())

    @classmethod
    def from_json(cls, d: object, where: str = "deployment record") -> "Record":
        """The record from its parsed JSON; StateFileError when a field has the wrong type."""
        kw = statefile.fields_of(cls, d, where, FIX, skip=("options",))
        opts = statefile.field_object(d, "options", where, FIX)  # type: ignore[arg-type]  (fields_of: a dict)
        kw["options"] = options_from_json(opts, where)
        learn_secrets(kw["options"])
        return cls(**kw)


def learn_secrets(opts: PlanOptions) -> None:
    """Remember the secret values of a launch read back from a node, so this process masks them wherever
    they turn up (an engine echoing its key in `sparktui logs` from a new process)."""
    masked = mask_data({"env": opts.env, "args": opts.extra_args})
    add_values([v for k, v in opts.env.items() if masked["env"].get(k) != v])
    add_values([a for a, m in zip(opts.extra_args, masked["args"]) if a != m and m == MASK])
    add_values([a.split("=", 1)[1] for a, m in zip(opts.extra_args, masked["args"]) if a != m and "=" in a
                and m.endswith("=" + MASK)])


def options_to_json(opts: PlanOptions) -> dict:
    d = asdict(opts)
    d.pop("model_config", None)  # re-read from the node at the next plan; it can be large
    d.pop("support", None)  # asked of the image again at the next plan (cached on the node)
    return d


def options_from_json(d: object, where: str = "deployment record") -> PlanOptions:
    """The options of a record, every field's type checked (model_config is read again, never kept)."""
    return statefile.load(PlanOptions, d, f"{where} (options)", FIX, skip=("model_config", "support"))


def record_path(deployment: str) -> str:
    """The record's path as a shell word ($HOME expands on the node, the rest is quoted)."""
    return script('"$HOME"/{d}/{f}', d=STATE_DIR, f=f"{deployment}.json")


def save_command(record: Record, masked: bool = False) -> str:
    """Write the record atomically: a temp file, then rename (a killed write leaves the old one).

    The record carries the launch's secrets (a pivot from another process relaunches with the same
    API key), so it is written 0600 in a 0700 directory. masked: the same line with the secrets
    hidden, for the journal (masked as data, then serialised, so its JSON stays valid).
    """
    data = record.to_json()
    data = json.dumps(mask_data(data) if masked else data, sort_keys=True)
    return script('umask 077 && d="$HOME"/{d} && mkdir -p "$d" && printf "%s\\n" {data} > "$d"/{tmp} '
                  '&& chmod 600 "$d"/{tmp} && mv -f "$d"/{tmp} "$d"/{f}',
                  d=STATE_DIR, data=data, tmp=f".{record.deployment}.json.tmp", f=f"{record.deployment}.json")


async def save_record(node: Node, record: Record) -> str | None:
    """Store the record on `node` (the head); returns an error sentence or None."""
    r = await node.run(save_command(record), timeout=30, shown=save_command(record, masked=True))
    return None if r.ok else (r.stderr.strip() or f"exit {r.exit_status}")


def record_where(node: Node, deployment: str) -> str:
    """The record's place in messages: NODE:~/.local/state/sparktui/deployments/NAME.json."""
    return f"{getattr(node, 'name', 'head')}:~/{STATE_DIR}/{deployment}.json"


async def load_record(node: Node, deployment: str) -> Record | None:
    """The record from `node`, or None when there is none.

    A record that is there but unusable (empty, not JSON, a field of the wrong type, unreadable) is a
    StateFileError naming it: "no record" would send the user to look for a launch that did happen.
    """
    path = record_path(deployment)
    r = await node.run(f"[ -e {path} ] || exit {_ABSENT}; cat {path}", timeout=30)
    where = record_where(node, deployment)
    if not r.ok:
        if r.exit_status == _ABSENT or "No such file" in r.stderr:  # the test, not cat's words (locale)
            return None
        raise statefile.StateFileError(where, f"cannot be read ({r.stderr.strip()[:200] or f'exit {r.exit_status}'})",
                                       FIX)
    if not r.stdout.strip():
        raise statefile.StateFileError(where, "is empty", FIX)
    return Record.from_json(statefile.parse_json(r.stdout, where, FIX), where)
