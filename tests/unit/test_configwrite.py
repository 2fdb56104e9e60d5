"""The config writer: the example reproduced, every value round-tripped, odd values quoted, files safe."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sparktui.core.config.config import (
    Config,
    ConfigError,
    DockerConfig,
    EngineDefaults,
    ModelConfig,
    NodeConfig,
    SshConfig,
    load_config,
    load_config_text,
)
from sparktui.core.config.configwrite import (
    COMMENT_COLUMN,
    EXAMPLE_HEADER,
    ConfigExists,
    checked_text,
    example_text,
    render_config,
    scalar,
    write_config_file,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "config.example.yaml"


def as_dict(c: Config) -> dict:
    from dataclasses import asdict

    d = asdict(c)
    d.pop("path")
    return d


def test_rendering_the_examples_values_gives_the_example_byte_for_byte():
    """So the writer's layout and comments are the reference's, and cannot drift from it."""
    assert render_config(load_config(EXAMPLE), header=EXAMPLE_HEADER) == EXAMPLE.read_text()


def test_the_packaged_example_is_the_root_example():
    """The root file is the one to edit (docs/config.md reproduces it); a pip install ships the copy."""
    assert example_text() == EXAMPLE.read_text(), (
        "sparktui/config.example.yaml must equal config.example.yaml: cp config.example.yaml sparktui/"
    )


def test_init_example_prints_the_packaged_file():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run(
        [sys.executable, "-m", "sparktui", "init", "--example"],
        capture_output=True,
        text=True,
        env=env,
        cwd="/",
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == EXAMPLE.read_text()


def sample(**over) -> Config:
    nodes = [
        NodeConfig(
            name="a",
            host="10.1.0.1",
            user="ubuntu",
            port=2222,
            identity_file="/keys/id",
            role="head",
            interfaces={"192.168.100.0/24": "enp1s0f1np1"},
        ),
        NodeConfig(name="b", host="spark-b", role="worker", interfaces={"192.168.100.0/24": "enP2p1s0f1np1"}),
    ]
    base = dict(cluster="lab", nodes=nodes, model=ModelConfig(name="m", path="/models/m", source="b"))
    base.update(over)
    return Config(**base)


def test_a_written_config_loads_back_to_the_same_values():
    cfg = sample(
        docker=DockerConfig(
            gpu_style="cdi",
            extra_args=["--privileged", "--cap-add=SYS_NICE"],
            env={"NCCL_DEBUG": "INFO", "EMPTY": ""},
            ulimits={},
            volumes=[],
            shm_size="16g",
        ),
        ssh=SshConfig(host_key_policy="accept-new", known_hosts="/etc/kh", ssh_config=[]),
        engine=EngineDefaults(mem_fraction=0.7, max_model_len=32768, hang_after=45.5),
        keymap={"quit": "ctrl+q"},
        theme="light",
        secrets=["WANDB_API_KEY", "--license"],
    )
    text = checked_text(cfg)
    assert as_dict(load_config_text(text)) == as_dict(cfg)


def test_every_line_with_a_value_has_its_comment_at_the_examples_column():
    text = render_config(sample())
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        bare = line.split("  #")[0] if "  #" in line else line
        if len(bare.rstrip()) < COMMENT_COLUMN and "#" in line:
            assert line.index("#") == COMMENT_COLUMN, line
    # one comment per key: node keys on their first use only, the sections all commented
    assert text.count("# short unique name") == 1 and text.count("# SSH user") == 1
    for section in ("cluster", "nodes", "model", "images", "docker", "ssh", "engine", "theme"):
        assert re.search(rf"^{section}:.*# \S", text, re.M), section
    assert "# keymap:" in text and "#   quit: ctrl+q" in text  # the remap hint, as in the example


def test_interface_comments_come_from_the_caller():
    notes = {("a", "192.168.100.0/24"): "fabric: RoCE rocep1s0f1", ("b", "192.168.100.0/24"): "RoCE roceP2p1s0f1"}
    text = render_config(sample(), iface_notes=notes)
    assert re.search(r"192\.168\.100\.0/24: enp1s0f1np1 +# fabric: RoCE rocep1s0f1$", text, re.M)
    assert re.search(r"enP2p1s0f1np1 +# RoCE roceP2p1s0f1$", text, re.M)


def test_the_home_folder_is_written_as_a_tilde():
    home = os.path.expanduser("~")
    cfg = sample()
    cfg.nodes[0].identity_file = os.path.join(home, ".ssh", "id_ed25519")
    text = render_config(cfg)
    assert "identity_file: ~/.ssh/id_ed25519" in text
    assert load_config_text(text).nodes[0].identity_file == cfg.nodes[0].identity_file


ODD = [
    "a: b",
    "#x",
    "x #y",
    "~",
    "null",
    "Null",
    "- x",
    "[a]",
    "{a}",
    "*a",
    "&a",
    "!t",
    "%x",
    "@x",
    "`x",
    "'x",
    '"x',
    " lead",
    "trail ",
    "a,b",
    "yes",
    "no",
    "1.10",
    "0755",
    "-1",
    "é ü 中",
    "a\tb",
    "back\\slash",
    "x: ",
    "? x",
    "|",
    ">",
    "a#b",
    "it's",
    '"',
    "\\n",
]


@pytest.mark.parametrize("value", ODD)
def test_odd_text_survives_as_written(value):
    cfg = sample(cluster=value)
    cfg.model.name = value
    cfg.docker.env = {"ODD": value}
    cfg.docker.extra_args = [value]
    cfg.images.sglang = "img" if " " in value or "\t" in value else value
    back = load_config_text(render_config(cfg))
    assert (back.cluster, back.model.name, back.docker.env["ODD"], back.docker.extra_args) == (
        value,
        value,
        value,
        [value],
    )


@pytest.mark.parametrize(
    "value,written",
    [("plain", "plain"), ("~", '"~"'), ("a: b", '"a: b"'), ("x #y", '"x #y"'), ("", '""'), ("yes", "yes")],
)
def test_quoting_only_where_plain_would_change_the_value(value, written):
    assert scalar(value) == written


def test_a_value_the_loader_refuses_is_caught_before_writing():
    cfg = sample()
    cfg.model.path = "relative/path"
    with pytest.raises(ConfigError, match="model.path"):
        checked_text(cfg)


def test_an_existing_file_is_kept_unless_forced(tmp_path):
    target = tmp_path / "deep" / "config.yaml"
    write_config_file(target, "cluster: one\n")
    with pytest.raises(ConfigExists, match="--force"):
        write_config_file(target, "cluster: two\n")
    assert target.read_text() == "cluster: one\n"
    write_config_file(target, "cluster: two\n", force=True)
    assert target.read_text() == "cluster: two\n"
    assert [p.name for p in target.parent.iterdir()] == ["config.yaml"]  # no temp file left behind


def test_a_folder_as_target_is_refused_with_a_hint(tmp_path):
    with pytest.raises(IsADirectoryError, match="config.yaml"):
        write_config_file(tmp_path, "x: 1\n")
