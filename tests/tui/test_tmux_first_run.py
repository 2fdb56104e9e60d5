"""`sparktui` with no config, in a real 80x24 terminal: the setup screen, two host keys judged by
fingerprint, the config written, and the app opening on it."""

from __future__ import annotations

import sys

import asyncssh
import yaml

from sparktui.core.config.config import load_config

from ..tmuxterm import Tmux, app_command
from .test_tmux import REPO, pytestmark, running_nodes  # noqa: F401 - skips without tmux


def test_first_run_in_a_real_terminal(tmp_path):
    with running_nodes(tmp_path / "nodes") as node_config:
        _first_run(tmp_path, yaml.safe_load(node_config.read_text()))


def _first_run(tmp_path, data: dict) -> None:
    fingerprints = {}
    for line in open(data["ssh"]["known_hosts"]).read().splitlines():
        pattern, key = line.split(" ", 1)
        fingerprints[int(pattern.rsplit(":", 1)[1])] = asyncssh.import_public_key(key).get_fingerprint("sha256")
    home, work = tmp_path / "home", tmp_path / "work"
    (home / ".ssh").mkdir(parents=True)
    work.mkdir()
    (home / ".ssh" / "config").write_text(
        "".join(
            f"Host {n['name']}\n  HostName 127.0.0.1\n  Port {n['port']}\n  User root\n  IdentityFile {n['identity_file']}\n"
            for n in data["nodes"]
        )
    )
    env = {
        "PYTHONPATH": str(REPO),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "TERM": "xterm-256color",
    }
    target = tmp_path / "cfg" / "sparktui" / "config.yaml"
    # from a folder of its own, without a config named anywhere
    tmux = Tmux(
        f"cd {work} && " + app_command(env, sys.executable, "-m", "sparktui", unset=("SPARKTUI_CONFIG",)), 80, 24
    )
    try:
        tmux.wait_for("no config found")
        first, second = data["nodes"]
        for n in (first, second):  # one word each: the ssh config below names host, port, user and key
            tmux.keys("-l", n["name"])
            tmux.keys("Enter")
            tmux.wait_for(f"added {n['name']}")
        tmux.keys("C-t")
        for n in (first, second):
            # the dialog names the node and shows the key's fingerprint (waited for whole: it paints in parts)
            tmux.wait_for(
                lambda s, n=n: f"Unknown host key: {n['name']}" in s and fingerprints[n["port"]] in s,
                30,
                f"{n['name']}'s host key and its fingerprint",
            )
            tmux.keys("y")
        tmux.wait_for("probed", 30)
        for _ in range(7):  # name -> host, port, user, key, Add, the node list, the model path
            tmux.keys("Tab")
        tmux.wait_for("model path: the checkpoint folder")  # the focused field's hint: typing goes there
        tmux.keys("-l", data["model"]["path"])
        tmux.keys("C-s")
        tmux.wait_for("2/2 nodes up", 30)  # the app itself, on the config just written
        tmux.keys("q")
        tmux.wait_exit(20)
    finally:
        tmux.close()
    cfg = load_config(target)
    # the aliases as typed: the ssh config keeps address, port, user and key
    assert [(n.name, n.host, n.port, n.user) for n in cfg.nodes] == [
        (n["name"], n["name"], None, None) for n in data["nodes"]
    ]
    assert cfg.model.path == data["model"]["path"]
    assert len((home / ".ssh" / "known_hosts").read_text().splitlines()) == 2
