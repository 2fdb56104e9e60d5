"""Hostile configs: every bad number, name, host, user, path and structure is a FILE:LINE:COL message, fast."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sparktui.core.config.config import ConfigError, ConfigNotFound, find_config, load_config, load_config_text

ROOT = Path(__file__).resolve().parents[2]
BASE = """cluster: c
nodes:
  - name: a
    host: {host}
    user: {user}
    port: {port}
model: {{name: m, path: {path}}}
engine: {{mem_fraction: {mem}, hang_after: {hang}}}
"""
GOOD = dict(host="spark1.lan", user="ubuntu", port="22", path="/models/m", mem="0.8", hang="90")


def config(**over) -> str:
    return BASE.format(**{**GOOD, **over})


CASES = [
    # (field overrides, line:col, words the message must hold)
    (dict(port="!!int abc"), "6:11", "port 'abc' is not an integer"),
    (dict(port="!!int ''"), "6:11", "port '' is not an integer"),
    (dict(mem="!!float ''"), "8:24", "mem_fraction '' is not a number"),
    (dict(mem="!!float abc"), "8:24", "mem_fraction 'abc' is not a number"),
    (dict(port="9" * 5000), "6:11", "port is 5000 characters long"),
    (dict(port="1" + "0" * 30), "6:11", "is out of range"),
    (dict(hang="1" + "0" * 400), "8:41", "too long for a number"),
    (dict(hang="1e400"), "8:41", "hang_after 1e400 is out of range"),
    (dict(hang=".inf"), "8:41", "out of range"),
    (dict(mem=".nan"), "8:24", "out of range"),
    (dict(path="/" + "a" * 5000), "7:24", "model.path is 5001 characters long"),
    (dict(host="spark1..lan"), "4:11", "empty label"),
    (dict(host=".spark1"), "4:11", "empty label"),
    (dict(host="spark\u202e1"), "4:11", "invisible character U+202E"),
    (dict(host="a" * 64 + ".lan"), "4:11", "label of 64 characters"),
    (dict(host="spärk1"), "4:11", "non-ASCII"),
    (dict(host="-oProxyCommand=x"), "4:11", "is not a host name"),
    (dict(host="999.1.1.1"), "4:11", "is not an IPv4 address"),
    (dict(user='"admin😀"'), "5:11", "is not a login name"),
    (dict(user='"a\\x01b"'), "5:11", "invisible character U+0001"),
    (dict(user="-oops"), "5:11", "is not a login name"),
]


@pytest.mark.parametrize("over,where,words", CASES, ids=[c[2][:30] for c in CASES])
def test_bad_values_are_reported_at_their_place(over, where, words):
    with pytest.raises(ConfigError) as e:
        load_config_text(config(**over), "f.yaml")
    msg = str(e.value)
    assert msg.startswith(f"f.yaml:{where}: ") and words in msg
    assert len(msg) < 400  # long bad values are shortened, never echoed whole


def test_names_that_become_container_names_are_bounded():
    with pytest.raises(ConfigError, match=r"^f.yaml:3:11: nodes\[#1\].name 'aaa"):
        load_config_text(config().replace("name: a\n", "name: " + "a" * 64 + "\n"), "f.yaml")
    with pytest.raises(ConfigError, match=r"^f.yaml:1:10: cluster 'ccc.*at most 63"):
        load_config_text(config().replace("cluster: c", "cluster: " + "c" * 64), "f.yaml")


def test_good_hosts_and_users_pass():
    for host in ("10.0.0.11", "fe80::1", '"[::1]"', "spark-1.example.com", "my_alias", "s1"):
        for user in ("ubuntu", "svc.deploy", "jo-ann", "user@REALM", "machine$"):
            cfg = load_config_text(config(host=host, user=user))
            assert cfg.nodes[0].user == user and "[" not in cfg.nodes[0].host


def test_a_megabyte_value_is_not_echoed():
    with pytest.raises(ConfigError) as e:
        load_config_text(config(host="h" * 1_000_000), "f.yaml")
    assert len(str(e.value)) < 200 and "1000000 characters" in str(e.value)


def test_deep_nesting_stops_early_with_a_place():
    text = config().replace("cluster: c", "cluster: " + "[" * 3000 + "]" * 3000)
    with pytest.raises(ConfigError, match=r"^f.yaml:1:\d+: nesting deeper than 48 levels"):
        load_config_text(text, "f.yaml")


def test_an_alias_bomb_stops_at_once():
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 10)]
    text = config().replace("cluster: c", "cluster: c\nkeymap: {}\n" + "\n".join(lines).replace("a0:", "x0:"))
    t0 = time.monotonic()
    with pytest.raises(ConfigError, match="aliases expand to more than"):
        load_config_text(text, "f.yaml")
    assert time.monotonic() - t0 < 2


def test_file_size_is_bounded(tmp_path):
    p = tmp_path / "big.yaml"
    p.write_text(config() + "#" * (2 << 20) + "\n")
    with pytest.raises(ConfigError, match="larger than 1 MiB"):
        load_config(p)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every directory (test_a_long_path covers the same path)")
def test_an_unreadable_directory_is_a_message(tmp_path):
    d = tmp_path / "locked"
    d.mkdir()
    (d / "c.yaml").write_text(config())
    d.chmod(0)
    try:
        with pytest.raises(ConfigNotFound, match=r"cannot be looked at \(Permission denied\)"):
            find_config(d / "c.yaml")
    finally:
        d.chmod(0o755)


def test_an_unreadable_file_is_a_message(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path)  # a directory


def test_a_long_path_is_a_message():
    with pytest.raises(ConfigNotFound, match="cannot be looked at") as e:  # the OS refuses the name
        find_config("/" + "x" * 5000)
    assert len(str(e.value)) < 600


def test_the_cli_exits_2_without_a_traceback(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text(config(port="!!int abc"))
    env = dict(os.environ, PYTHONPATH=str(ROOT), XDG_STATE_HOME=str(tmp_path))
    r = subprocess.run(
        [sys.executable, "-m", "sparktui", "--config", str(p), "check"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr and f"{p}:6:11:" in r.stderr


@pytest.mark.parametrize(
    "text",
    [
        "cluster: c\nnodes: [{name: a, host: h}]\nmodel: {name: m, path: /m}\ndocker: {gpu_style: "
        + "x" * 4000
        + "}\n",
        "cluster: c\nnodes: [{name: a, host: h}]\nmodel: {name: m, path: /m}\n"
        + "k" * 1000
        + ": 1\n",  # YAML keys: < 1024
    ],
)
def test_every_message_quotes_a_long_value_shortened(text):
    with pytest.raises(ConfigError) as e:
        load_config_text(text, "f.yaml")
    assert len(str(e.value)) < 700 and "characters)" in str(e.value)
