"""First run: add nodes, test SSH (unknown host keys asked about), probe, choose model and images, write.

Every check and every network step is the core's (core/config/firstrun.py, core/config/configwrite.py); this
screen only gathers what the user types and shows what came back. SSH runs in workers, so the
screen answers keys while nodes are dialled.
"""

from __future__ import annotations

from pathlib import Path

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.suggester import SuggestFromList
from textual.widgets import Button, DataTable, Footer, Input, Label, Select, Static

from ...core.config import firstrun
from ...core.config.config import ConfigError, SshConfig, default_image
from ...core.engines import ENGINES, label as engine_label
from ...core.config.configwrite import ConfigExists, checked_text, default_header, write_config_file
from ...core.nodes.facts import NodeFacts, Subnet
from ...core.state.journal import Journal
from ..present import setup as present
from .hostkey import HostKeyScreen

NODE_FIELDS = ("name", "host", "port", "user", "key")
# What the focused field wants, on the line above the footer (labels are terse at 80 columns).
HINTS = {
    "name": "name: letters, digits, '.', '_', '-'; alone, it is the host too (an ssh alias)",
    "host": "the node's SSH address or hostname, or a Host alias from ~/.ssh/config",
    "port": "SSH port; empty = ~/.ssh/config or 22",
    "user": "SSH user; empty = ~/.ssh/config or your local user",
    "key": "private key file on this machine; empty = the agent or ~/.ssh/config",
    "nodes": "delete removes the selected node; ctrl+t tests SSH to every node",
    "model-path": "model path: the checkpoint folder, the same absolute path on every node",
    "model-name": 'served model name (the OpenAI "model" field); empty = the folder\'s name',
    "cluster": "cluster name, shown in the title and in --json output",
    "fabric": "the subnet joining the nodes: each node's interface on it goes into the config",
}


class SetupScreen(Screen[Path | None]):
    DEFAULT_CSS = """
    SetupScreen { layout: vertical; }
    SetupScreen #setup-title { height: auto; padding: 0 1; background: $panel; }
    SetupScreen VerticalScroll { height: 1fr; padding: 0 1; }
    SetupScreen .section { text-style: bold; color: $accent; margin-top: 1; }
    SetupScreen Horizontal { height: auto; }
    SetupScreen Input { margin-right: 1; }
    SetupScreen #name { width: 10; } SetupScreen #port { width: 7; } SetupScreen #user { width: 10; }
    SetupScreen #host, SetupScreen #key { width: 1fr; }
    SetupScreen Label { width: 14; }
    SetupScreen .field { width: 1fr; }
    SetupScreen #nodes { height: auto; max-height: 8; margin-top: 1; }
    SetupScreen .note { color: $text-muted; }
    SetupScreen #hint { height: 1; padding: 0 1; color: $text-muted; text-overflow: ellipsis; }
    SetupScreen #message { height: auto; max-height: 4; padding: 0 1; }
    SetupScreen #message.error { color: $error; }
    """
    BINDINGS = [
        Binding("ctrl+t", "test", "Test SSH", id="setup.test"),
        Binding("ctrl+r", "probe", "Probe", id="setup.probe"),
        Binding("ctrl+s", "write", "Write config", id="setup.write"),
        Binding("delete", "remove", "Remove node", id="setup.remove"),  # Inputs keep delete for themselves
    ]

    def __init__(self, target: Path, ssh: SshConfig | None = None, journal: Journal | None = None) -> None:
        super().__init__()
        self.target = target
        self.ssh = ssh or SshConfig()
        self.journal = journal if journal is not None else Journal()  # the app passes the file-backed one
        self.drafts: list[firstrun.NodeDraft] = []
        self.tests: dict[str, firstrun.SshTest] = {}
        self.rejected: set[str] = set()
        self.facts: dict[str, NodeFacts] = {}
        self.subnets: list[Subnet] = []
        self.warnings: list[str] = []
        self.busy = ""  # what a worker is doing now, shown in the title

    # -- layout -----------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Static(id="setup-title", markup=False)
        with VerticalScroll():
            yield Static("Nodes (the head first)", classes="section")
            with Horizontal(id="node-form"):
                yield Input(placeholder="name", id="name", compact=True)
                yield Input(placeholder="host or alias", id="host", compact=True)
                yield Input(placeholder="port", id="port", type="integer", compact=True)
                yield Input(placeholder="user", id="user", compact=True)
                yield Input(placeholder="key (or agent)", id="key", compact=True)
                yield Button("Add", id="add", compact=True)
            table = DataTable(id="nodes", cursor_type="row", zebra_stripes=True)
            table.add_columns("node", "host", "user", "key", "SSH", "found")
            yield table
            yield Static("", id="ssh-notes", classes="note", markup=False)
            yield Static("Model and images", classes="section")
            for label, wid, value in (
                ("model path", "model-path", ""),
                ("served name", "model-name", ""),
                ("cluster name", "cluster", "sparks"),
                *((f"{e.label} image", f"image-{e.name}", default_image(e.name) or "") for e in ENGINES.values()),
            ):
                with Horizontal():
                    yield Label(label)
                    placeholder = (
                        "/models/NAME, the same on every node"
                        if wid == "model-path"
                        else "default: the folder's name"
                        if wid == "model-name"
                        else ""
                    )
                    yield Input(
                        value,
                        placeholder=placeholder,
                        id=wid,
                        compact=True,
                        classes="field image" if wid.startswith("image-") else "field",
                    )
            yield Static("", id="found", classes="note", markup=False)
            yield Static("Fabric (the subnet joining the nodes)", classes="section")
            yield Select([], prompt="test SSH first: the probe finds the subnets", id="fabric", compact=True)
            yield Static("", id="net-notes", classes="note", markup=False)
        yield Static("", id="hint", markup=False)
        yield Static("", id="message", markup=False)
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self._title()
        self._say("Add each node (Enter adds it; delete in the list removes one), then ctrl+t tests SSH.")
        self.query_one("#name", Input).focus()

    def on_descendant_focus(self, event) -> None:
        wid = event.widget.id or ""
        hint = HINTS.get(wid, "")
        if wid.startswith("image-"):  # one field per registered engine
            engine = engine_label(wid.removeprefix("image-"))
            hint = f"image that runs {engine}; → takes the suggestion from the nodes' images"
        self.query_one("#hint", Static).update(hint)

    def _title(self) -> None:
        doing = f" · {self.busy}…" if self.busy else ""
        self.query_one("#setup-title", Static).update(
            f"sparktui first run: no config found. This writes {self.target}{doing}"
        )

    def _say(self, text: str, error: bool = False) -> None:
        msg = self.query_one("#message", Static)
        msg.update(text)
        msg.set_class(error, "error")

    # -- nodes ------------------------------------------------------------------------------
    @on(Button.Pressed, "#add")
    @on(Input.Submitted, "#node-form Input")
    def add_node(self) -> None:
        value = {f: self.query_one(f"#{f}", Input).value.strip() for f in NODE_FIELDS}
        # one word is enough for a node reached through a ~/.ssh/config alias of the same name
        draft = firstrun.NodeDraft(
            name=value["name"] or value["host"],
            host=value["host"] or value["name"],
            user=value["user"] or None,
            port=int(value["port"]) if value["port"].lstrip("-").isdigit() else None,
            identity_file=value["key"] or None,
        )
        if value["port"] and draft.port is None:
            self._say(f"port {value['port']!r} is not a number", error=True)
            return
        problems = firstrun.draft_problems(draft, self.drafts)
        if problems:
            self._say("; ".join(problems), error=True)
            return
        self.drafts.append(draft)
        self.query_one("#nodes", DataTable).add_row(*present.row(draft, None, None), key=draft.name)
        for f in ("name", "host", "port"):  # user and key are usually the same for the next node
            self.query_one(f"#{f}", Input).value = ""
        self.query_one("#name", Input).focus()
        self._say(
            f"added {draft.name}"
            + (" (the head)" if len(self.drafts) == 1 else "")
            + ". Add the next node, or ctrl+t to test SSH."
        )

    def action_remove(self) -> None:
        table = self.query_one("#nodes", DataTable)
        if not self.drafts:
            self._say("no node to remove", error=True)
            return
        name = self.drafts[min(table.cursor_row, len(self.drafts) - 1)].name
        self.drafts = [d for d in self.drafts if d.name != name]
        self.tests.pop(name, None)
        self.facts.pop(name, None)
        table.remove_row(name)
        self._say(f"removed {name}")

    def _redraw_nodes(self) -> None:
        table = self.query_one("#nodes", DataTable)
        for d in self.drafts:
            cells = present.row(d, self.tests.get(d.name), self.facts.get(d.name), d.name in self.rejected)
            for col, value in zip(table.columns, cells):
                table.update_cell(d.name, col, value)
        current = {d.name: self.tests[d.name] for d in self.drafts if d.name in self.tests}  # not removed ones
        self.query_one("#ssh-notes", Static).update("\n".join(present.problems(current, self.rejected)))

    # -- SSH --------------------------------------------------------------------------------
    def _set_busy(self, what: str) -> None:
        self.busy = what
        self._title()

    def action_test(self) -> None:
        if not self.drafts:
            self._say("add a node first", error=True)
            return
        self.test_ssh()

    @work(group="ssh", exclusive=True)
    async def test_ssh(self) -> None:
        self._set_busy("testing SSH")
        try:
            self.rejected.clear()
            drafts = list(self.drafts)
            self.journal.cluster = self._value("cluster") or "sparks"
            for t in await firstrun.test_all(drafts, self.ssh, self.journal):
                self.tests[t.node] = t
            self._redraw_nodes()
            for d in drafts:  # one question at a time, in node order
                t = self.tests.get(d.name)
                if t is None or t.unknown_key is None:
                    continue
                if await self.app.push_screen_wait(HostKeyScreen(t.unknown_key)):
                    try:
                        firstrun.trust(t)
                    except OSError as e:
                        self._say(
                            f"cannot add {d.name}'s key to {t.unknown_key.known_hosts}: {e.strerror or e}", error=True
                        )
                        return
                    self.tests[d.name] = await firstrun.test_ssh(d, self.ssh, self.journal)
                else:
                    self.rejected.add(d.name)
                self._redraw_nodes()
        except Exception as e:  # noqa: BLE001 - said on the screen, never a crash of the setup
            self._say(f"testing SSH failed: {e or type(e).__name__}", error=True)
            return
        finally:
            self._set_busy("")
        bad = [d.name for d in self.drafts if not self.tests.get(d.name) or not self.tests[d.name].ok]
        if bad:
            self._say(f"SSH failed on {', '.join(bad)}: fix the node and press ctrl+t again", error=True)
            return
        self._say("every node answers over SSH; probing GPUs, memory and the network…")
        self.probe()

    def action_probe(self) -> None:
        if not self._all_ok():
            self._say("every node must answer over SSH first (ctrl+t)", error=True)
            return
        self.probe()

    def _all_ok(self) -> bool:
        return bool(self.drafts) and all(self.tests.get(d.name) and self.tests[d.name].ok for d in self.drafts)

    def _value(self, wid: str) -> str:
        return self.query_one(f"#{wid}", Input).value.strip()

    def _draft_config(self):
        v = self._value
        config = firstrun.draft_config(
            self.drafts,
            v("model-path") or "/nonexistent-model-path",
            self.ssh,
            v("cluster") or "sparks",
            v("model-name") or None,
        )
        for engine in ENGINES:  # one field per registered engine; an empty one keeps the engine's default
            if ref := v(f"image-{engine}"):
                config.set_image(engine, ref)
        return config

    @work(group="probe", exclusive=True)
    async def probe(self) -> None:
        self._set_busy("probing")
        try:
            config = self._draft_config()
            self.journal.cluster = config.cluster
            inv = await firstrun.discover(config, self.journal)
        except Exception as e:  # noqa: BLE001 - said on the screen, never a crash of the setup
            self._say(f"probing failed: {e or type(e).__name__}", error=True)
            return
        finally:
            self._set_busy("")
        self.facts, self.subnets, self.warnings = inv.facts, inv.subnets, inv.warnings
        self._redraw_nodes()
        names = [n.name for n in config.nodes]
        choices = [(firstrun.subnet_label(s), s.subnet) for s in self.subnets if s.joins(names)]
        select = self.query_one("#fabric", Select)
        select.set_options(choices)
        if choices:
            select.value = choices[0][1]
        self.query_one("#net-notes", Static).update(
            "\n".join(self.warnings) or ("" if choices else "no subnet joins every node")
        )
        self._show_found(config)
        self._say("probed. Check the model path, images and fabric, then ctrl+s writes the config.")

    def _show_found(self, config) -> None:
        """Where the model and the two images are, from the last probe."""
        if not self.facts:
            return
        lines = []
        if self._value("model-path"):
            lines.append("model " + firstrun.model_summary(config, self.facts))
        lines += [f"{engine}: {line}" for engine, line in firstrun.image_summary(config, self.facts).items()]
        refs = list(firstrun.images_found(self.facts))
        for engine in ENGINES:  # → completes an image the nodes already have
            suggest = SuggestFromList(refs, case_sensitive=True) if refs else None
            self.query_one(f"#image-{engine}", Input).suggester = suggest
        self.query_one("#found", Static).update("\n".join(lines))

    @on(Input.Changed, ".image")
    def _image_changed(self) -> None:
        self._show_found(self._draft_config())

    @on(Input.Submitted, "#model-path")
    def _model_path_entered(self) -> None:
        if self._all_ok():
            self.probe()  # where the model is comes from the probe

    # -- writing ----------------------------------------------------------------------------
    def action_write(self) -> None:
        path = self.query_one("#model-path", Input).value.strip()
        if self.busy:
            self._say(f"wait: {self.busy} is not done yet", error=True)
        elif not self.drafts:
            self._say("add the nodes first", error=True)
        elif not self._all_ok():
            self._say(
                "every node must answer over SSH before writing (ctrl+t); "
                "`sparktui init --no-probe` writes a config without connecting",
                error=True,
            )
        elif not path.startswith("/"):
            self._say("the model path must be absolute, the same folder on every node", error=True)
            self.query_one("#model-path", Input).focus()
        else:
            self._write()

    def _write(self) -> None:
        config = self._draft_config()
        chosen = self.query_one("#fabric", Select).value
        subnet = next((s for s in self.subnets if s.subnet == chosen), None)
        notes = firstrun.pin_fabric(config, subnet)
        config.model.source = firstrun.model_holder(config, self.facts)
        try:
            text = checked_text(config, header=default_header("the sparktui setup screen"), iface_notes=notes)
            write_config_file(self.target, text)
        except ConfigError as e:
            self._say(f"not written: {e.what} ({e.expected})", error=True)
            return
        except (ConfigExists, OSError) as e:
            self._say(f"not written: {e}", error=True)
            return
        self.dismiss(self.target)
