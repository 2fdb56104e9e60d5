"""A deployment as one snapshot: what the orchestrator watches, what the fronts show, and the record.

Its record fields say what was launched: the PlanOptions the user chose and what the plan resolved them
to (engine, mode, TP/PP, rendezvous subnet, port, plan id). Their JSON form is the record kept on the
head (deploy/record.py), so `pivot` and `redeploy` from a new process relaunch the same choices. Its
live fields (head, state, detail, endpoints) say where it stands now and are never written there.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import asdict, dataclass, field

from . import statefile
from ..plan.plan import Plan, PlanOptions
from ..config.secrets import MASK, add_values, mask_data
from .states import State

VERSION = 1
FIX = "launch the deployment again to rewrite it (or remove the file)"
LIVE = ("head", "state", "detail", "endpoint", "local")  # fields the record never holds


@dataclass
class Deployment:
    deployment: str  # its name (container label sparktui.deployment)
    engine: str
    mode: str
    options: PlanOptions | None  # None: rebuilt from container labels without a record
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
    # live
    head: str = ""  # the node serving HTTP (rank 0)
    state: State = State.IDLE
    detail: str = ""  # plain words: the step running, the problem, ...
    endpoint: str | None = None  # http://HEAD:PORT/v1 as the nodes reach it
    local: str | None = None  # the same through this machine's SSH forward

    def to_json(self) -> dict:
        """The record: every field but the live ones."""
        d = asdict(self)
        for k in LIVE:
            d.pop(k)
        d["options"] = options_to_json(self.options) if self.options is not None else None
        d["version"] = VERSION
        return d

    @classmethod
    def empty(cls, name: str = "", state: State = State.IDLE) -> "Deployment":
        """Nothing launched or found yet: no engine and no record fields (`known` is False)."""
        return cls(name, "", "", None, state=state)

    @property
    def known(self) -> bool:
        """Whether a launch, a record or the containers told what runs (an `empty` snapshot did not)."""
        return bool(self.engine)

    def but(self, **changes: object) -> "Deployment":
        """A new snapshot with some fields changed (a front's reactive is replaced, never mutated)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_plan(cls, plan: Plan, options: PlanOptions) -> "Deployment":
        return cls(
            deployment=plan.deployment,
            engine=plan.engine,
            mode=plan.mode,
            options=options,
            plan_id=plan.plan_id,
            tp=plan.tp,
            pp=plan.pp,
            subnet=plan.subnet,
            head_ip=plan.head_ip,
            port=plan.port,
            image=plan.image,
            served_model_name=plan.served_model_name,
            nodes=[n.name for n in plan.nodes],
            containers={n.name: n.container for n in plan.nodes},
            saved=time.time(),
            head=plan.nodes[0].name if plan.nodes else "",
        )

    @classmethod
    def from_json(cls, d: object, where: str = "deployment record") -> "Deployment":
        """The deployment its record describes; StateFileError when a field has the wrong type. Any record
        written so far loads: it holds the record fields, none of the live ones."""
        kw = statefile.fields_of(cls, d, where, FIX, skip=("options",) + LIVE)
        opts = statefile.field_object(d, "options", where, FIX)  # type: ignore[arg-type]  (fields_of: a dict)
        kw["options"] = options_from_json(opts, where)
        learn_secrets(kw["options"])
        nodes = kw.get("nodes") or []
        return cls(**kw, head=nodes[0] if nodes else "")


def learn_secrets(opts: PlanOptions) -> None:
    """Remember the secret values of a launch read back from a node, so this process masks them wherever
    they turn up (an engine echoing its key in `sparktui logs` from a new process)."""
    masked = mask_data({"env": opts.env, "args": opts.extra_args})
    add_values([v for k, v in opts.env.items() if masked["env"].get(k) != v])
    add_values([a for a, m in zip(opts.extra_args, masked["args"]) if a != m and m == MASK])
    add_values(
        [
            a.split("=", 1)[1]
            for a, m in zip(opts.extra_args, masked["args"])
            if a != m and "=" in a and m.endswith("=" + MASK)
        ]
    )


def options_to_json(opts: PlanOptions) -> dict:
    d = asdict(opts)
    d.pop("model_config", None)  # re-read from the node at the next plan; it can be large
    d.pop("model_config_problem", None)  # and so is what was wrong with it
    d.pop("support", None)  # asked of the image again at the next plan (cached on the node)
    return d


def options_from_json(d: object, where: str = "deployment record") -> PlanOptions:
    """The options of a record, every field's type checked (model_config is read again, never kept)."""
    return statefile.load(
        PlanOptions, d, f"{where} (options)", FIX, skip=("model_config", "model_config_problem", "support")
    )
