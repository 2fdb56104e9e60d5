"""The first-run setup screen over SSH to in-process nodes: add nodes, judge host keys, probe, write."""

from __future__ import annotations

import argparse
from pathlib import Path

import asyncssh
import pytest
from textual.widgets import DataTable, Input, Select

from sparktui.cli.tui import first_run_target
from sparktui.core.config.config import SshConfig, load_config
from sparktui.tui.screens.hostkey import HostKeyScreen
from sparktui.tui.screens.setup import SetupScreen
from sparktui.tui.setup_app import SetupApp

from .conftest import screen_text, wait_for
from .sshnodes import start_nodes, stop_nodes


@pytest.fixture
async def nodes(tmp_path):
    cfg, servers = await start_nodes(tmp_path / "nodes")
    yield cfg
    stop_nodes(servers)


def host_keys(cfg) -> dict[int, tuple[str, str]]:
    """port -> (known_hosts line, SHA256 fingerprint) of each node, from the file the fixture wrote."""
    out = {}
    for line in Path(cfg.ssh.known_hosts).read_text().splitlines():
        pattern, key = line.split(" ", 1)
        out[int(pattern.rsplit(":", 1)[1])] = (line, asyncssh.import_public_key(key).get_fingerprint("sha256"))
    return out


async def type_into(pilot, wid: str, text: str) -> None:
    field = pilot.app.screen.query_one(f"#{wid}", Input)
    field.focus()
    await pilot.pause()
    field.value = ""
    if len(text) > 16:  # a long path is pasted, as people do
        field.insert_text_at_cursor(text)
    else:
        await pilot.press(*text)


async def add_node(pilot, name: str, host: str, port: int | None = None, user: str = "", key: str = "") -> None:
    await type_into(pilot, "name", name)
    await type_into(pilot, "host", host)
    if port is not None:
        await type_into(pilot, "port", str(port))
    await type_into(pilot, "user", user)  # the form keeps user and key for the next node: type them anew
    await type_into(pilot, "key", key)
    await pilot.press("enter")


def setup_screen(app) -> SetupScreen:
    return next(s for s in app.screen_stack if isinstance(s, SetupScreen))


def message(app) -> str:
    return str(setup_screen(app).query_one("#message").content)


async def test_first_run_writes_a_config_after_the_user_judges_each_host_key(tmp_path, nodes):
    kh = tmp_path / "known_hosts"
    target = tmp_path / "conf" / "config.yaml"
    keys = host_keys(nodes)
    app = SetupApp(target, ssh=SshConfig(known_hosts=str(kh), ssh_config=[], connect_timeout=5))
    async with app.run_test(size=(80, 24)) as pilot:
        for n in nodes.nodes:
            await add_node(pilot, n.name, "127.0.0.1", n.port, "root", n.identity_file)
        table = setup_screen(app).query_one("#nodes", DataTable)
        assert [str(table.get_row_at(i)[4]) for i in range(table.row_count)] == ["untested", "untested"]
        # an unknown key is shown with its fingerprint; rejecting it trusts nothing
        await pilot.press("ctrl+t")
        modal = await wait_for(pilot, lambda: isinstance(app.screen, HostKeyScreen) and app.screen, 20, "key prompt")
        text = screen_text(app)
        assert modal.key.node == "spark1" and keys[nodes.nodes[0].port][1] in text
        assert app.screen.focused.id == "reject"  # Enter alone never trusts
        await pilot.press("enter")
        modal = await wait_for(
            pilot,
            lambda: isinstance(app.screen, HostKeyScreen) and app.screen.key.node == "spark2" and app.screen,
            20,
            "second key prompt",
        )
        await pilot.press("n")
        await wait_for(pilot, lambda: "SSH failed on spark1, spark2" in message(app), 20, "the failure message")
        assert not kh.exists() or kh.read_text() == ""
        assert [str(table.get_row_at(i)[4]) for i in range(2)] == ["✗ key rejected"] * 2
        await pilot.press("ctrl+s")
        assert "must answer over SSH" in message(app) and not target.exists()
        # asked again, trusted explicitly: the nodes' own keys land in known_hosts
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: isinstance(app.screen, HostKeyScreen), 20, "key prompt again")
        await pilot.press("y")
        await wait_for(
            pilot,
            lambda: isinstance(app.screen, HostKeyScreen) and app.screen.key.node == "spark2",
            20,
            "second key prompt again",
        )
        await pilot.press("y")
        await wait_for(pilot, lambda: "probed" in message(app), 30, "the probe")
        assert sorted(kh.read_text().splitlines()) == sorted(line for line, _ in keys.values())
        fabric = setup_screen(app).query_one("#fabric", Select)
        assert fabric.value == "192.168.100.0/24"
        assert table.get_row_at(1)[5].startswith("1× NVIDIA GB10 · ")  # memory: this machine's meminfo
        found = lambda: str(setup_screen(app).query_one("#found").content)
        assert "sglang: lmsysorg/sglang:latest-cu130: on spark1, spark2" in found()
        await type_into(pilot, "image-vllm", "nope:1")  # another image: told at once that no node has it
        assert "vllm: nope:1: on no node" in found()
        await type_into(pilot, "image-vllm", "nvcr.io/nvidia/vllm:25.11-py3")
        # the model path, then write: the app ends with the file it wrote
        await type_into(pilot, "model-path", nodes.model.path)
        await pilot.press("enter")
        await wait_for(
            pilot,
            lambda: "model " + nodes.model.path in str(setup_screen(app).query_one("#found").content),
            30,
            "the model found",
        )
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: app.return_value is not None, 10, "the app to end")
    assert app.return_value == target
    cfg = load_config(target)
    assert [(n.name, n.port, n.user, n.role) for n in cfg.nodes] == [
        (n.name, n.port, "root", n.role) for n in nodes.nodes
    ]
    assert all("192.168.100.0/24" in n.interfaces for n in cfg.nodes)
    assert cfg.model.path == nodes.model.path and cfg.ssh.known_hosts == str(kh)
    assert "# the fabric, found by probing: 192.168.100." in target.read_text()


async def test_what_is_typed_wrong_is_named_and_nothing_is_added(tmp_path):
    app = SetupApp(tmp_path / "c.yaml", ssh=SshConfig(ssh_config=[]))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("ctrl+s")
        assert "add the nodes first" in message(app)
        await add_node(pilot, "bad/name", "h")
        assert "name 'bad/name'" in message(app)
        await add_node(pilot, "a", "h", key="/no/such/key")
        assert "does not exist" in message(app)
        await add_node(pilot, "a", "h1")
        await add_node(pilot, "a", "h2")
        assert "taken by another node" in message(app)
        assert setup_screen(app).query_one("#nodes", DataTable).row_count == 1
        setup_screen(app).query_one("#nodes", DataTable).focus()
        await pilot.press("delete")
        assert setup_screen(app).query_one("#nodes", DataTable).row_count == 0
    assert not (tmp_path / "c.yaml").exists()


async def test_the_setup_screen_keeps_its_keys_and_fields_at_80x24(tmp_path):
    app = SetupApp(tmp_path / "c.yaml", ssh=SshConfig(ssh_config=[]))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        text = screen_text(app)
        for words in (
            "no config found",
            "Add",
            "host or alias",
            "key (or agent)",
            "^t Test SSH",
            "^s Write config",
            "^q Quit",
        ):
            assert words in text, words


def test_no_config_anywhere_opens_the_setup_on_the_users_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SPARKTUI_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert first_run_target(argparse.Namespace()) == tmp_path / "xdg" / "sparktui" / "config.yaml"
    assert first_run_target(argparse.Namespace(config=str(tmp_path / "new.yaml"))) == tmp_path / "new.yaml"
    (tmp_path / "sparktui.yaml").write_text("cluster: x\n")
    assert first_run_target(argparse.Namespace()) is None  # a config exists: no setup, the loader judges it


async def test_a_changed_host_key_is_refused_without_a_question(tmp_path, nodes):
    kh = tmp_path / "known_hosts"
    lines = Path(nodes.ssh.known_hosts).read_text().splitlines()
    kh.write_text(lines[0].split(" ", 1)[0] + " " + lines[1].split(" ", 1)[1] + "\n")  # node 2's key for node 1
    before = kh.read_text()
    app = SetupApp(tmp_path / "c.yaml", ssh=SshConfig(known_hosts=str(kh), ssh_config=[], connect_timeout=5))
    n = nodes.nodes[0]
    async with app.run_test(size=(80, 24)) as pilot:
        await add_node(pilot, n.name, "127.0.0.1", n.port, "root", n.identity_file)
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: "SSH failed on spark1" in message(app), 20, "the failure")
        assert not isinstance(app.screen, HostKeyScreen)  # nothing to accept: the key on file differs
        assert "CHANGED" in str(setup_screen(app).query_one("#ssh-notes").content)
    assert kh.read_text() == before


async def test_the_screen_takes_keys_while_a_silent_node_is_dialled(tmp_path):
    """A node that accepts TCP and never speaks SSH: typing goes on, and the failure names the timeout."""
    import asyncio

    held: list[asyncio.StreamWriter] = []

    async def silent(reader, writer):
        held.append(writer)  # keep the socket open, say nothing

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    app = SetupApp(
        tmp_path / "c.yaml", ssh=SshConfig(known_hosts=str(tmp_path / "kh"), ssh_config=[], connect_timeout=3)
    )
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await add_node(pilot, "mute", "127.0.0.1", port)
            await pilot.press("ctrl+t")
            screen = setup_screen(app)
            await wait_for(pilot, lambda: screen.busy == "testing SSH", 5, "the test to start")
            await type_into(pilot, "name", "next")
            assert screen.query_one("#name", Input).value == "next" and screen.busy == "testing SSH"
            await wait_for(pilot, lambda: "SSH failed on mute" in message(app), 20, "the failure")
            assert "no answer within 3 s" in str(screen.query_one("#ssh-notes").content)
    finally:
        for w in held:
            w.close()
        server.close()


async def test_a_known_hosts_file_that_cannot_be_written_is_said_not_crashed(tmp_path, nodes):
    blocker = tmp_path / "ssh"
    blocker.write_text("a file where the folder should be: writing fails even as root\n")
    kh = blocker / "known_hosts"
    app = SetupApp(tmp_path / "c.yaml", ssh=SshConfig(known_hosts=str(kh), ssh_config=[], connect_timeout=5))
    n = nodes.nodes[0]
    async with app.run_test(size=(80, 24)) as pilot:
        await add_node(pilot, n.name, "127.0.0.1", n.port, "root", n.identity_file)
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: isinstance(app.screen, HostKeyScreen), 20, "key prompt")
        await pilot.press("y")
        await wait_for(pilot, lambda: "cannot add spark1's key" in message(app), 20, "the refusal")
        assert setup_screen(app).busy == "" and app.is_running
    assert not (tmp_path / "c.yaml").exists()


async def test_every_registered_engine_gets_an_image_field(tmp_path, monkeypatch):
    """A new engine in the registry has its own image field; what is typed there is the image its config names."""
    from sparktui.core import engines as registry
    from sparktui.core.config.config import default_image
    from tests.unit.test_engines import Toy

    monkeypatch.setitem(registry.ENGINES, "toy", Toy())
    app = SetupApp(tmp_path / "c.yaml", ssh=SshConfig(ssh_config=[]))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = setup_screen(app)
        assert all(screen.query_one(f"#image-{e}", Input) for e in registry.ENGINES)
        await add_node(pilot, "a", "h1")
        await type_into(pilot, "image-toy", "toy/serve:2")
        assert "image that runs Toy" in str(app.screen.query_one("#hint").content)
        config = screen._draft_config()
    assert config.image_for("toy") == "toy/serve:2"
    assert all(config.image_for(e) == default_image(e) for e in registry.ENGINES if e != "toy")  # left as given
