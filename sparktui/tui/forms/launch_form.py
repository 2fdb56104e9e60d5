"""The guided launch form: pick engine, image, TP×PP, rendezvous subnet, ports and memory fraction,
see every node's commands and the fit estimate change as you type, and launch.

Only valid choices are offered (TP×PP products matching the GPUs, subnets joining all nodes);
what is typed (ports, fraction) is checked inline, and make_plan's own errors block the launch.
"""

from __future__ import annotations

import re

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select, Static

from ...core.config.config import Config
from ...core.nodes.facts import NodeFacts, Subnet
from ...core.nodes.inventory import Inventory
from ...core.engines import DEFAULT_ENGINE, label as engine_label
from ...core.plan.fit import default_fraction
from ...core.memory.free import FreeMemory, shortfalls
from ...core.plan.plan import Plan, PlanOptions
from . import choices as C

Result = tuple[Plan, PlanOptions]


def fit_text(plan: Plan) -> Content:
    """The engine release the plan is written for (found in the image, or not), then the fit estimate."""
    # short enough for one line at 80x24; `sparktui plan` says where the release came from
    word = engine_label(plan.engine)
    engine = Content.assemble(
        ("engine: ", "bold"),
        (f"{word} {plan.engine_version}", "") if plan.engine_version else (f"{word}, version unknown", "$text-muted"),
    )
    f = plan.fit
    if f is None:
        fit = Content.styled("fit: not estimated", "$text-muted")
    else:
        style = "$error" if not f.ok else "$warning" if f.warnings else "$success"
        fit = Content.assemble(("fit: ", "bold"), (f.summary(), style))
    return Content("\n").join([engine, fit]) if plan.engine_note else fit


def support_text(plan: Plan) -> Content:
    """The line under the image: whether it loads the model, as the image answered (core/plan/support.py)."""
    s = plan.support or {}
    if s.get("status") == "supported":
        word = engine_label(plan.engine)
        return Content.styled(
            f"✓ loads {s.get('model_type') or 'the model'} ({word} {s.get('engine_version')})", "$success"
        )
    if s.get("status") == "unsupported":
        return Content.styled(f"✗ cannot load {s.get('model_type') or 'the model'}: see the checks", "$error")
    return Content.styled(
        "⚠ model support: " + ("Transformers backend only" if s.get("status") == "fallback" else "could not check"),
        "$warning",
    )


def issues_text(plan: Plan) -> Content:
    lines = [Content.assemble(("✗ ", "$error bold"), (e, "$error")) for e in plan.errors]
    lines += [Content.assemble(("⚠ ", "$warning bold"), w) for w in plan.warnings]
    lines = lines or [Content.styled("✓ plan checks pass", "$success")]
    # what the plan chose, why; first how TP all-reduces cross nodes, when not NCCL alone
    notes = ([plan.collectives_line] if plan.collectives_line else []) + plan.notes
    lines += [Content.assemble(("ℹ ", "bold"), (n, "$text-muted")) for n in notes]
    return Content("\n").join(lines)


def fold_command(cmd: str) -> list[str]:
    """A long command as one option per line (a narrow preview wraps flags mid-word otherwise)."""
    parts = re.split(r" (?=--?[A-Za-z])", cmd)
    return parts[:1] + ["  " + p for p in parts[1:]]


def commands_text(plan: Plan) -> Content:
    out = []
    for n in plan.nodes:
        where = f"{n.iface or '?'} {n.ip or '?'}" + (f" {n.rdma}" if n.rdma else "")
        out.append(Content.assemble((f"── {n.name}", "bold $accent"), f" rank {n.rank} {n.role}  {where}"))
        for cmd in n.commands or ["(no commands: fix the errors above)"]:
            out += [Content(line) for line in fold_command(cmd)]
    return Content("\n").join(out)


class LaunchForm(ModalScreen[Result | None]):
    DEFAULT_CSS = """
    LaunchForm { align: center middle; }
    LaunchForm > #form-box { width: 100%; max-width: 140; height: 100%; max-height: 44;
        border: round $accent; background: $surface; }
    LaunchForm #form-title { height: 1; text-style: bold; padding: 0 1; }
    LaunchForm #form-body { height: 1fr; }
    LaunchForm #fields { width: 42; padding: 0 1; }
    LaunchForm .row { height: 1; margin-bottom: 1; }
    LaunchForm .row Label { width: 11; }
    LaunchForm .row Select, LaunchForm .row Input { width: 1fr; }
    LaunchForm .error { color: $error; height: auto; display: none; margin-top: -1; margin-bottom: 1; }
    LaunchForm .error.-shown { display: block; }
    LaunchForm .note { color: $text-muted; height: auto; display: none; margin-top: -1; margin-bottom: 1; }
    LaunchForm .note.-shown { display: block; }
    LaunchForm #rdv-detail { height: auto; margin-bottom: 1; }
    LaunchForm #row-ray_port.-hidden, LaunchForm #row-dist_port.-hidden { display: none; }
    LaunchForm #preview-box { width: 1fr; border-left: solid $panel-lighten-2; padding: 0 1; }
    LaunchForm #preview { height: auto; }
    LaunchForm #check-result { height: auto; display: none; }
    LaunchForm #check-result.-shown { display: block; }
    LaunchForm #buttons { height: 1; align-horizontal: right; padding: 0 1; }
    LaunchForm #buttons Button { margin-left: 2; }
    LaunchForm #buttons #drop.-hidden { display: none; }
    LaunchForm #image-support { height: auto; margin-top: -1; margin-bottom: 1; padding-left: 11; }
    LaunchForm #image-support.-hidden { display: none; }
    """
    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="form.cancel"),
        Binding("ctrl+s", "submit", "Launch", id="form.submit"),
        Binding("ctrl+k", "check", "Check", id="form.check"),
    ]

    def __init__(
        self, config: Config, inventory: Inventory, planner, engine: str = DEFAULT_ENGINE, check=None, drop=None
    ) -> None:
        super().__init__()
        self.check = check  # PlanOptions -> None: runs the preflight on these choices (the app's)
        self.drop = drop  # (nodes, what the plan check found) -> None: the app's confirmed drop-caches
        self.droppable: list[FreeMemory] = []  # the plan check's shortfalls a drop of the page cache would fix
        self.config = config
        self.inventory = inventory  # the app's own (never a copy); replaced through update_inventory
        self.planner = planner  # PlanOptions -> Plan (the controller's make_plan)
        self.nodes = C.node_order(config)
        self.values = C.defaults(config, engine)
        self.plan: Plan | None = None
        self.parsed: C.Parsed | None = None
        self._auto_port = self.values.port  # the port the form chose; a typed one is kept
        self._auto_mem = self.values.mem_fraction  # likewise the engine's default memory fraction

    @property
    def facts(self) -> dict[str, NodeFacts]:
        return self.inventory.facts

    @property
    def subnets(self) -> list[Subnet]:
        return self.inventory.subnets

    # -- layout -----------------------------------------------------------------------------
    def _row(self, label: str, widget, key: str):
        row = Horizontal(Label(label), widget, classes="row", id=f"row-{key}")
        return row

    def compose(self) -> ComposeResult:
        v = self.values
        engine = v.engine.partition(":")[0]
        gpus = C.gpu_total(self.facts, self.nodes)
        rdv = C.subnet_options(self.subnets, self.nodes)
        v.rendezvous = rdv[0][1] if rdv else None  # the fabric ("auto"); any other is a choice made here
        par = C.parallel_options(gpus)
        v.parallel = par[0][1]
        imgs = C.image_options(self.facts, self.nodes, v.image or "", engine)
        with Vertical(id="form-box"):
            yield Static(
                f"Launch {self.config.model.name} on {', '.join(self.nodes)}  ({gpus or '?'} GPUs)",
                id="form-title",
                markup=False,
            )
            with Horizontal(id="form-body"):
                with VerticalScroll(id="fields"):
                    yield self._row(
                        "Engine",
                        Select(C.engine_options(), value=v.engine, allow_blank=False, compact=True, id="engine"),
                        "engine",
                    )
                    yield self._row(
                        "Image", Select(imgs, value=v.image, allow_blank=False, compact=True, id="image"), "image"
                    )
                    yield Static(id="image-support", classes="-hidden")
                    yield self._row(
                        "TP × PP",
                        Select(par, value=v.parallel, allow_blank=False, compact=True, id="parallel"),
                        "parallel",
                    )
                    if rdv:
                        rsel = Select(rdv, value=v.rendezvous, allow_blank=False, compact=True, id="rendezvous")
                    else:
                        rsel = Select([], prompt="no subnet joins all nodes", compact=True, id="rendezvous")
                    yield self._row("Rendezvous", rsel, "rendezvous")
                    yield Static(id="rdv-detail")
                    for key, label in (
                        ("port", "HTTP port"),
                        ("dist_port", "Dist port"),
                        ("ray_port", "Ray port"),
                        ("mem_fraction", "Mem frac"),
                    ):
                        yield self._row(label, Input(getattr(v, key), id=key, compact=True), key)
                        yield Static(id=f"{key}-error", classes="error")
                    for key, label, hint in (
                        ("kv_cache", "KV cache", "e.g. 20G; empty: mem frac"),
                        ("context", "Context", "tokens; empty: config"),
                    ):
                        yield self._row(label, Input(getattr(v, key), placeholder=hint, id=key, compact=True), key)
                        yield Static(id=f"{key}-error", classes="error")
                        if key == "kv_cache":  # why it is greyed out, when it is
                            yield Static(id="kv_cache-note", classes="note")
                with VerticalScroll(id="preview-box"):
                    yield Static(id="fit")
                    yield Static(id="issues")
                    yield Static(id="check-result")
                    yield Static(id="preview")
            with Horizontal(id="buttons"):
                yield Button("Cancel (esc)", id="cancel", compact=True)
                yield Button("Drop caches", id="drop", compact=True, classes="-hidden")
                yield Button("Check (ctrl+k)", id="check", compact=True)
                yield Button("Launch (ctrl+s)", id="launch", variant="success", compact=True)

    def on_mount(self) -> None:
        self._show_mode()
        self.refresh_preview()
        self.query_one("#engine", Select).focus()

    # -- live preview ------------------------------------------------------------------------
    def _show_mode(self) -> None:
        ray = C.runs_ray(self.values.engine)
        self.query_one("#row-ray_port").set_class(not ray, "-hidden")
        self.query_one("#ray_port-error").set_class(not ray, "-hidden")
        self.query_one("#row-dist_port").set_class(not C.uses_dist_port(self.values.engine), "-hidden")

    def refresh_preview(self) -> Plan:
        parsed = C.parse_form(self.values, self.nodes)
        plan = self.planner(parsed.options)
        # the release is the image's, not the sizing's: one more plan, without what it lacks, settles it
        refused = C.sizing_refusals(self.values.engine, plan.engine_version)
        if refused != C.Refused():
            again = C.parse_form(self.values, self.nodes, refused)
            if again.options != parsed.options or again.errors != parsed.errors:
                parsed, plan = again, self.planner(again.options)
        self.parsed, self.plan = parsed, plan
        self._show_sizing(refused)
        for key in ("port", "dist_port", "ray_port", "mem_fraction", "kv_cache", "context"):
            err = self.query_one(f"#{key}-error", Static)
            msg = parsed.errors.get(key, "")
            err.update(msg)
            err.set_class(bool(msg), "-shown")
        chosen = plan.subnet if self.values.rendezvous == C.AUTO else self.values.rendezvous
        sub = next((s for s in self.subnets if s.subnet == chosen), None)
        self.query_one("#rdv-detail", Static).update(C.subnet_detail(sub, self.nodes, self.subnets))
        support = self.query_one("#image-support", Static)  # shown once the image has answered
        support.update(support_text(plan))
        support.set_class(not plan.support, "-hidden")
        self.query_one("#fit", Static).update(fit_text(plan))
        self.query_one("#issues", Static).update(issues_text(plan))
        self.query_one("#preview", Static).update(commands_text(plan))
        self.query_one("#launch", Button).disabled = not self.can_submit
        self.query_one("#check", Button).disabled = not self.can_submit or self.check is None
        fraction = plan.mem_fraction if plan.mem_fraction is not None and 0 < plan.mem_fraction <= 1 else None
        found = shortfalls(self.facts, [n.name for n in plan.nodes], fraction) if fraction else []
        self.droppable = [m for m in found if m.droppable]
        self.query_one("#drop", Button).set_class(not (self.droppable and self.drop), "-hidden")
        return plan

    def _show_sizing(self, refused: C.Refused) -> None:
        """Grey out the KV cache size where the release lacks the flag, saying which release has it; a typed
        size stays in the box for an image that can use it."""
        box = self.query_one("#kv_cache", Input)
        box.disabled = refused.kv_cache is not None
        note = self.query_one("#kv_cache-note", Static)
        # the plan's refusal up to its advice: the reason and the release that has the flag
        note.update(Content(refused.kv_cache.partition(": ")[0] if refused.kv_cache else ""))
        note.set_class(refused.kv_cache is not None, "-shown")
        # auto is offered only where the release has it; a length works everywhere, so the field stays
        self.query_one("#context", Input).placeholder = (
            "tokens; empty: config" if refused.auto_len else "tokens or auto; empty: config"
        )

    def update_inventory(self, inventory: Inventory) -> None:
        """The app's fresh inventory (a copy finished, a node came back): the same choices, checked again."""
        self.inventory = inventory
        if self.is_mounted:
            self.refresh_preview()

    @property
    def can_submit(self) -> bool:
        return bool(self.plan and self.plan.ok and self.parsed and not self.parsed.errors)

    @on(Select.Changed)
    def _select(self, event: Select.Changed) -> None:
        if event.select.id is None or event.value is Select.NULL:
            return
        setattr(self.values, event.select.id, str(event.value))
        if event.select.id == "engine":
            self._engine_changed()
        self.refresh_preview()

    def _engine_changed(self) -> None:
        engine = self.values.engine.partition(":")[0]
        default_image = self.config.image_for(engine) or ""
        imgs = C.image_options(self.facts, self.nodes, default_image, engine)
        sel = self.query_one("#image", Select)
        with sel.prevent(Select.Changed):
            sel.set_options(imgs)
            sel.value = C.norm_image(default_image)
        self.values.image = str(sel.value)
        if self.values.port.strip() == self._auto_port:
            port = str(self.config.port_for(engine))
            box = self.query_one("#port", Input)
            with box.prevent(Input.Changed):
                box.value = port
            self.values.port = self._auto_port = port
        if self.values.mem_fraction.strip() == self._auto_mem:
            mem = f"{default_fraction(engine, self.config.engine.mem_fraction):g}"
            box = self.query_one("#mem_fraction", Input)
            with box.prevent(Input.Changed):
                box.value = mem
            self.values.mem_fraction = self._auto_mem = mem
        self._show_mode()

    @on(Input.Changed)
    def _input(self, event: Input.Changed) -> None:
        if event.input.id is None:
            return
        setattr(self.values, event.input.id, event.value)
        self.refresh_preview()

    # -- submit ------------------------------------------------------------------------------
    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "launch":
            self.action_submit()
        elif event.button.id == "check":
            self.action_check()
        elif event.button.id == "drop":
            self.action_drop()
        else:
            self.action_cancel()

    def action_submit(self) -> None:
        plan = self.refresh_preview()
        if not self.can_submit:
            why = (self.parsed.errors if self.parsed else {}) or {}
            first = next(iter(why.values()), None) or (plan.errors[0] if plan.errors else "the plan is not ready")
            self.notify(f"cannot launch yet: {first}", severity="error", markup=False)  # [brackets] in paths
            return
        assert self.parsed is not None
        self.dismiss((plan, self.parsed.options))

    def action_check(self) -> None:
        """The preflight on the form's current choices; its rows show in the launch pane and here."""
        self.refresh_preview()
        if self.check is None or not self.can_submit or self.parsed is None:
            self.notify("fix the plan's errors first", severity="error")
            return
        self.show_check(Content.styled("preflight: checking…", "$accent"))
        self.check(self.parsed.options)

    def action_drop(self) -> None:
        """The plan check's free-memory shortfall: drop the page cache (the app asks first); the new
        facts after it check the plan again."""
        if self.drop is not None and self.droppable:
            self.drop([m.node for m in self.droppable], {m.node: m for m in self.droppable})

    def show_check(self, text: Content) -> None:
        """What the preflight said (the app forwards its rows and verdict here)."""
        if self.is_mounted:
            box = self.query_one("#check-result", Static)
            box.update(text)
            box.add_class("-shown")

    def action_cancel(self) -> None:
        self.dismiss(None)
