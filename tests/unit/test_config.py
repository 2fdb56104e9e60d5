"""Config loading: the example loads, every mistake is reported at its FILE:LINE:COL, discovery order."""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
from pathlib import Path

import pytest
import yaml

from sparktui.core.config import config as cfgmod
from sparktui.core.config.config import (
    GPU_STYLES,
    ConfigError,
    ConfigNotFound,
    find_config,
    load_config,
    load_config_text,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "config.example.yaml"
SAMPLES = Path(__file__).parent / "samples" / "config"

BASE = """\
cluster: lab
nodes:
  - name: alpha
    host: 127.0.0.1
    port: 2201
    role: head
    interfaces:
      10.9.0.0/24: veth-a
  - name: beta
    host: 127.0.0.1
    port: 2202
model:
  name: tiny
  path: /models/tiny
engine:
  mem_fraction: 0.8
"""


def position(text: str, token: str, nth: int = 0) -> tuple[int, int]:
    """1-based line and column of the nth occurrence of token in text."""
    idx = -1
    for _ in range(nth + 1):
        idx = text.index(token, idx + 1)
    return text.count("\n", 0, idx) + 1, idx - (text.rfind("\n", 0, idx) + 1) + 1


def error_of(text: str, filename: str = "c.yaml") -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load_config_text(text, filename)
    return caught.value


def assert_error_at(text: str, token: str, *fragments: str, nth: int = 0) -> ConfigError:
    e = error_of(text)
    line, col = position(text, token, nth)
    assert (e.file, e.line, e.col) == ("c.yaml", line, col), str(e)
    assert str(e).startswith(f"c.yaml:{line}:{col}: "), str(e)
    for fragment in fragments:  # a callable fragment is worked out from the text (a second position)
        fragment = fragment(text) if callable(fragment) else fragment
        assert fragment in str(e), str(e)
    return e


def mutate(old: str, new: str, text: str = BASE) -> str:
    assert text.count(old) == 1, f"{old!r} must occur once in the base text"
    return text.replace(old, new)


# --- the example and the dataclasses ---------------------------------------------------------


def test_example_loads_with_one_head_and_its_path():
    cfg = load_config(EXAMPLE)
    assert cfg.path == EXAMPLE
    assert [n.name for n in cfg.nodes] == ["spark1", "spark2"]
    assert [n.role for n in cfg.nodes].count("head") == 1
    assert cfg.head is cfg.node(cfg.nodes[0].name)
    assert cfg.model.source in [n.name for n in cfg.nodes]
    assert cfg.docker.gpu_style in GPU_STYLES
    fabric = "192.168.100.0/24"
    assert all(n.interfaces.get(fabric) for n in cfg.nodes)


def _dataclass_sections():
    # section key in the YAML -> dataclass, derived from Config's own fields
    return {
        f.name: f.default_factory
        for f in dataclasses.fields(cfgmod.Config)
        if dataclasses.is_dataclass(f.default_factory)
    }


def test_example_sets_every_field_so_users_see_them_all():
    root = yaml.safe_load(EXAMPLE.read_text())
    top = {f.name for f in dataclasses.fields(cfgmod.Config)} - {"path", "keymap"}
    assert top <= set(root)
    text = EXAMPLE.read_text()
    assert re.search(r"^#\s*keymap:", text, re.M), "keymap is shown, commented out"
    for key, cls in _dataclass_sections().items():
        assert {f.name for f in dataclasses.fields(cls)} == set(root[key]), key
    for cls, data in ((cfgmod.NodeConfig, root["nodes"][0]), (cfgmod.ModelConfig, root["model"])):
        assert {f.name for f in dataclasses.fields(cls)} == set(data), cls.__name__


def test_example_documents_every_field_on_its_line():
    lines = EXAMPLE.read_text().splitlines()
    names = {
        f.name
        for cls in (cfgmod.Config, cfgmod.NodeConfig, cfgmod.ModelConfig, *_dataclass_sections().values())
        for f in dataclasses.fields(cls)
    } - {"path"}
    for name in names:
        documented = [ln for ln in lines if re.match(rf"\s*#?\s*(- )?{name}:", ln) and "#" in ln.split(":", 1)[1]]
        assert documented, f"{name} has no comment in the example"


@pytest.mark.parametrize(
    "cls",
    [
        cfgmod.NodeConfig,
        cfgmod.ModelConfig,
        cfgmod.ImagesConfig,
        cfgmod.DockerConfig,
        cfgmod.SshConfig,
        cfgmod.EngineDefaults,
        cfgmod.Config,
    ],
)
def test_every_dataclass_field_has_a_comment(cls):
    src = inspect.getsource(cls).splitlines()
    for f in dataclasses.fields(cls):
        i = next(i for i, ln in enumerate(src) if re.match(rf"\s+{f.name}:", ln))
        assert "#" in src[i] or src[i - 1].strip().startswith("#"), f"{cls.__name__}.{f.name}"


# --- what a good file gives ------------------------------------------------------------------


def test_minimal_file_gets_defaults_and_the_first_node_leads():
    text = mutate("    role: head\n", "")
    cfg = load_config_text(text, "c.yaml")
    assert cfg.path is None
    assert [n.role for n in cfg.nodes] == ["head", "worker"]
    assert cfg.head.name == "alpha"
    assert cfg.docker == cfgmod.DockerConfig() and cfg.ssh == cfgmod.SshConfig()
    assert cfg.engine.mem_fraction == 0.8 and cfg.engine.sglang_port == cfgmod.EngineDefaults().sglang_port
    assert cfg.nodes[0].port == 2201 and cfg.nodes[1].interfaces == {}


def test_an_explicit_head_later_in_the_list_is_kept():
    text = mutate("    role: head\n", "").replace("    port: 2202\n", "    port: 2202\n    role: head\n")
    cfg = load_config_text(text, "c.yaml")
    assert cfg.head.name == "beta" and cfg.nodes[0].role == "worker"


def test_text_is_kept_as_written_shell_metacharacters_included():
    odd = "a; rm -rf / $(id) `x` 'q' \"d\" | & > < *"
    text = (
        mutate("cluster: lab", f"cluster: {json.dumps(odd)}")
        .replace("name: tiny", "name: 1.10")
        .replace("  mem_fraction: 0.8\n", "  mem_fraction: 1\ntheme: yes\n")
    )
    text += "docker:\n  env:\n    NCCL_IB_DISABLE: 0\n    EMPTY: ''\n    ODD: '$HOME; ls'\n  shm_size: 16g\n"
    cfg = load_config_text(text, "c.yaml")
    assert cfg.cluster == odd
    assert cfg.model.name == "1.10" and cfg.theme == "yes"
    assert cfg.docker.env == {"NCCL_IB_DISABLE": "0", "EMPTY": "", "ODD": "$HOME; ls"}
    assert cfg.engine.mem_fraction == 1.0 and cfg.docker.shm_size == "16g"


def test_local_paths_expand_tilde(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    text = mutate("    port: 2201\n", "    port: 2201\n    identity_file: ~/.ssh/k\n")
    text += "ssh:\n  known_hosts: ~/kh\n  ssh_config: [~/sc]\n"
    cfg = load_config_text(text, "c.yaml")
    assert cfg.nodes[0].identity_file == str(tmp_path / ".ssh/k")
    assert cfg.ssh.known_hosts == str(tmp_path / "kh") and cfg.ssh.ssh_config == [str(tmp_path / "sc")]


def test_keymap_and_merge_keys():
    text = BASE.replace(
        "nodes:\n  - name: alpha\n    host: 127.0.0.1\n", "nodes:\n  - &common\n    name: alpha\n    host: 127.0.0.1\n"
    )
    text = text.replace(
        "  - name: beta\n    host: 127.0.0.1\n    port: 2202\n",
        "  - <<: *common\n    name: beta\n    port: 2202\n    role: worker\n",
    )
    text += "keymap:\n  app.quit: ctrl+q\n  launch: f5, ctrl+l\n"
    cfg = load_config_text(text, "c.yaml")
    beta = cfg.node("beta")
    assert (beta.host, beta.port, beta.role) == ("127.0.0.1", 2202, "worker")
    assert beta.interfaces == {"10.9.0.0/24": "veth-a"}
    assert cfg.keymap == {"app.quit": "ctrl+q", "launch": "f5, ctrl+l"}


# --- every kind of mistake, at its place -----------------------------------------------------

CASES = [
    # id, old, new, token whose start is the expected position, fragments of the message
    ("port-text", "port: 2202", "port: abc", "abc", ["'abc' is not an integer", "expected an integer 1-65535"]),
    ("port-range", "port: 2202", "port: 70000", "70000", ["out of range", "expected an integer 1-65535"]),
    ("port-zero", "port: 2202", "port: 0", "0\n", ["out of range"]),
    ("port-bool", "port: 2202", "port: true", "true", ["not an integer"]),
    ("port-list", "port: 2202", "port: [1]", "[1]", ["is a list", "expected an integer"]),
    ("unknown-top", "engine:", "engnie:", "engnie", ["unknown key 'engnie'", "did you mean 'engine'?"]),
    ("unknown-node", "port: 2202", "prot: 2202", "prot", ["unknown key 'prot' in nodes[beta]", "did you mean 'port'?"]),
    ("unknown-model", "path: /models/tiny", "pth: /models/tiny", "pth", ["did you mean 'path'?"]),
    ("unknown-engine", "mem_fraction: 0.8", "mem_fracton: 0.8", "mem_fracton", ["did you mean 'mem_fraction'?"]),
    (
        "unknown-far",
        "mem_fraction: 0.8",
        "zzz: 1",
        "zzz",
        ["unknown key 'zzz' in engine", "expected one of:", "dist_port"],
    ),
    ("missing-cluster", "cluster: lab\n", "", "nodes:", ["lacks 'cluster'"]),
    ("missing-model", "model:\n  name: tiny\n  path: /models/tiny\n", "", "cluster", ["lacks 'model'"]),
    ("missing-host", "    host: 127.0.0.1\n    port: 2202\n", "", "name: beta", ["nodes[beta] lacks 'host'", "host: "]),
    (
        "missing-name",
        "  - name: beta\n    host",
        "  - host",
        "host: 127.0.0.1\n    port: 2202",
        ["nodes[#2] lacks 'name'"],
    ),
    ("missing-path", "  path: /models/tiny\n", "", "name: tiny", ["model lacks 'path'"]),
    ("null-model-name", "name: tiny", "name:", "name:\n  path", ["model lacks 'name'"]),
    (
        "dup-node",
        "name: beta",
        "name: alpha",
        "alpha\n    host: 127.0.0.1\n    port: 2202",
        ["duplicate node name 'alpha'", lambda t: "first used at %d:%d" % position(t, "alpha")],
    ),
    (
        "dup-key",
        "    port: 2202\n",
        "    port: 2202\n    port: 2203\n",
        "port: 2203",
        ["duplicate key 'port'", lambda t: "first at %d:%d" % position(t, "port: 2202")],
    ),
    (
        "two-heads",
        "    port: 2202\n",
        "    port: 2202\n    role: head\n",
        "head\nmodel",
        ["second head 'beta'", lambda t: "'alpha' at %d:%d is the head" % position(t, "head")],
    ),
    ("bad-role", "role: head", "role: boss", "boss", ["'boss' is not known", "head, worker"]),
    ("name-space", "name: beta", "name: 'be ta'", "'be ta'", ["not allowed", "letters, digits"]),
    ("name-slash", "name: beta", "name: ../beta", "../beta", ["not allowed"]),
    ("name-dash", "name: beta", "name: -beta", "-beta", ["not allowed"]),
    ("host-empty", "host: 127.0.0.1\n    port: 2202", "host: ''\n    port: 2202", "''", ["host is empty"]),
    ("cluster-empty", "cluster: lab", "cluster: '  '", "'  '", ["cluster is empty"]),
    ("cidr", "10.9.0.0/24: veth-a", "veth-a: 10.9.0.0/24", "veth-a", ["not a CIDR", "192.168.100.0/24"]),
    ("cidr-v6", "10.9.0.0/24: veth-a", "'fd00::/64': veth-a", "'fd00", ["not a CIDR", "IPv4"]),
    ("cidr-no-prefix", "10.9.0.0/24: veth-a", "10.9.0.0: veth-a", "10.9.0.0", ["not a CIDR"]),
    ("cidr-host-bits", "10.9.0.0/24: veth-a", "10.9.0.7/24: veth-a", "10.9.0.7", ["host bits", "'10.9.0.0/24'"]),
    (
        "ifname-long",
        "10.9.0.0/24: veth-a",
        "10.9.0.0/24: a-very-long-interface",
        "a-very",
        ["not allowed", "interface name"],
    ),
    ("ifname-slash", "10.9.0.0/24: veth-a", "10.9.0.0/24: eth/0", "eth/0", ["not allowed"]),
    (
        "interfaces-list",
        "      10.9.0.0/24: veth-a\n",
        "      - veth-a\n",
        "- veth-a",
        ["is a list", "mapping of subnet CIDR: interface name"],
    ),
    ("gpu-style", "engine:", "docker:\n  gpu_style: gpus_all\nengine:", "gpus_all", ["did you mean 'gpus-all'?"]),
    (
        "host-key",
        "engine:",
        "ssh:\n  host_key_policy: accept_new\nengine:",
        "accept_new",
        ["did you mean 'accept-new'?"],
    ),
    ("frac-big", "mem_fraction: 0.8", "mem_fraction: 1.5", "1.5", ["out of range", "> 0 and <= 1"]),
    ("frac-zero", "mem_fraction: 0.8", "mem_fraction: 0", "0\n", ["out of range"]),
    ("frac-text", "mem_fraction: 0.8", "mem_fraction: most", "most", ["'most' is not a number"]),
    ("frac-nan", "mem_fraction: 0.8", "mem_fraction: .nan", ".nan", ["out of range"]),
    ("source", "path: /models/tiny", "path: /models/tiny\n  source: bta", "bta", ["'bta' is not a node", "'beta'"]),
    ("relative-path", "path: /models/tiny", "path: models/tiny", "models/tiny", ["absolute path"]),
    ("nodes-empty", BASE[BASE.index("nodes:") : BASE.index("model:")], "nodes: []\n", "[]", ["nodes is an empty list"]),
    ("node-text", "  - name: beta\n    host: 127.0.0.1\n    port: 2202\n", "  - beta\n", "beta", ["nodes[#2] is text"]),
    ("model-list", "model:\n  name: tiny\n  path: /models/tiny\n", "model:\n  - tiny\n", "- tiny", ["model is a list"]),
    (
        "port-clash",
        "mem_fraction: 0.8",
        "mem_fraction: 0.8\n  ray_port: 29500",
        "29500",
        ["engine.ray_port 29500 is also engine.dist_port"],
    ),
    ("keepalive", "engine:", "ssh:\n  keepalive_interval: soon\nengine:", "soon", ["not a number"]),
    ("channels", "engine:", "ssh:\n  max_channels: 0\nengine:", "0\nengine", ["out of range"]),
    ("env-name", "engine:", "docker:\n  env:\n    NCCL-DEBUG: INFO\nengine:", "NCCL-DEBUG", ["variable name"]),
    ("env-null", "engine:", "docker:\n  env:\n    NCCL_DEBUG:\nengine:", "NCCL_DEBUG:", ["write ''"]),
    ("ulimit", "engine:", "docker:\n  ulimits:\n    memlok: -1\nengine:", "memlok", ["did you mean 'memlock'?"]),
    ("ulimit-value", "engine:", "docker:\n  ulimits:\n    nofile: lots\nengine:", "lots", ["soft:hard"]),
    ("extra-args", "engine:", "docker:\n  extra_args: --privileged\nengine:", "--privileged", ["is text", "a list"]),
    ("shm", "engine:", "docker:\n  shm_size: huge\nengine:", "huge", ["16g"]),
    ("keymap", "engine:", "keymap:\n  quit: ctrl q\nengine:", "ctrl q", ["not a key list"]),
    ("keymap-list", "engine:", "keymap: [q]\nengine:", "[q]", ["keymap is a list"]),
    ("tag", "cluster: lab", "cluster: !secret lab", "!secret", ["unknown YAML tag"]),
    ("yaml-tab", "nodes:\n", "nodes:\n\t", "\t", ["YAML syntax error", "'\\t'"]),
    (
        "yaml-colon",
        "host: 127.0.0.1\n    port: 2202",
        "host: a: b\n    port: 2202",
        ": b\n",
        ["YAML syntax error: mapping values are not allowed here"],
    ),
    ("yaml-docs", "engine:", "---\nengine:", "---", ["another document"]),
    ("bad-merge", "  - name: beta\n", "  - <<: 3\n    name: beta\n", "3\n", ["merge"]),
]


@pytest.mark.parametrize("old,new,token,fragments", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_mistake_is_reported_at_its_place(old, new, token, fragments):
    assert_error_at(mutate(old, new), token, *fragments)


def test_error_inside_an_anchor_points_at_the_anchor():
    text = mutate(
        "  - name: alpha\n    host: 127.0.0.1\n", "  - &base\n    name: alpha\n    host: 127.0.0.1\n    prot: 1\n"
    )
    text = text.replace("  - name: beta\n", "  - <<: *base\n    name: beta\n")
    assert_error_at(text, "prot", "did you mean 'port'?")


def test_empty_file_and_top_level_list():
    assert_error_at("", "", "the file is empty")
    assert_error_at("# nothing here\n", "#", "the file is empty")
    assert_error_at("- a\n- b\n", "- a", "the config is a list")


def test_control_character_is_located():
    text = mutate("cluster: lab", "cluster: l\x07ab")
    assert_error_at(text, "\x07", "YAML error")


def test_load_config_reports_file_problems(tmp_path):
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as caught:
        load_config(missing)
    assert caught.value.line == 0 and str(caught.value).startswith(f"{missing}: cannot read")
    bad = tmp_path / "latin1.yaml"
    text = mutate("cluster: lab", "cluster: caf\xe9")
    bad.write_bytes(text.encode("latin-1"))
    with pytest.raises(ConfigError) as caught:
        load_config(bad)
    assert (caught.value.line, caught.value.col) == position(text, "\xe9")
    assert "UTF-8" in str(caught.value)


def test_file_errors_name_the_file(tmp_path):
    f = tmp_path / "my cluster.yaml"
    text = mutate("port: 2202", "port: abc")
    f.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_config(f)
    line, col = position(text, "abc")
    assert str(caught.value).startswith(f"{f}:{line}:{col}: ")


@pytest.mark.parametrize("sample", sorted(SAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_samples_fail_where_they_say(sample):
    # Each sample's first line: "# error: TOKEN | FRAGMENT" - the error sits at TOKEN's last occurrence.
    text = sample.read_text()
    token, fragment = re.match(r"# error: (.*?) \| (.*)", text).groups()
    with pytest.raises(ConfigError) as caught:
        load_config(sample)
    idx = text.rindex(token)
    assert (caught.value.line, caught.value.col) == position(text, token, text.count(token, 0, idx))
    assert fragment in str(caught.value)


# --- discovery ---------------------------------------------------------------------------------


@pytest.fixture
def places(tmp_path, monkeypatch):
    """A fresh cwd, HOME and XDG dir with no config anywhere."""
    cwd, home, xdg = tmp_path / "cwd", tmp_path / "home", tmp_path / "xdg"
    for d in (cwd, home, xdg):
        d.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    monkeypatch.delenv("SPARKTUI_CONFIG", raising=False)
    return cwd, home, xdg


def put(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(BASE)
    return path


def test_discovery_order(places, monkeypatch):
    cwd, home, xdg = places
    in_xdg = put(xdg / "sparktui" / "config.yaml")
    assert find_config() == in_xdg
    in_cwd = put(cwd / "sparktui.yaml")
    assert find_config().resolve() == in_cwd.resolve()
    in_env = put(home / "env.yaml")
    monkeypatch.setenv("SPARKTUI_CONFIG", str(in_env))
    assert find_config() == in_env
    explicit = put(home / "explicit.yaml")
    assert find_config(str(explicit)) == explicit
    assert load_config(find_config(explicit)).cluster == "lab"


def test_default_xdg_dir_is_under_home(places, monkeypatch):
    _, home, _ = places
    monkeypatch.delenv("XDG_CONFIG_HOME")
    f = put(home / ".config" / "sparktui" / "config.yaml")
    assert find_config() == f


def test_relative_xdg_is_ignored(places, monkeypatch):
    cwd, home, _ = places
    monkeypatch.setenv("XDG_CONFIG_HOME", "rel")
    put(cwd / "rel" / "sparktui" / "config.yaml")
    with pytest.raises(ConfigNotFound) as caught:
        find_config()
    assert str(home / ".config" / "sparktui" / "config.yaml") in caught.value.looked


def test_nothing_found_lists_every_place(places):
    _, _, xdg = places
    with pytest.raises(ConfigNotFound) as caught:
        find_config()
    e = caught.value
    assert isinstance(e, ConfigError)
    assert e.looked == ["$SPARKTUI_CONFIG (unset)", "./sparktui.yaml", str(xdg / "sparktui" / "config.yaml")]
    assert all(p in str(e) for p in e.looked) and "--config" in str(e)


@pytest.mark.parametrize("via", ["explicit", "env"])
def test_a_named_file_that_is_missing_never_falls_back(places, monkeypatch, via):
    cwd, home, _ = places
    put(cwd / "sparktui.yaml")
    missing = home / "gone.yaml"
    if via == "env":
        monkeypatch.setenv("SPARKTUI_CONFIG", str(missing))
    with pytest.raises(ConfigNotFound) as caught:
        find_config(str(missing) if via == "explicit" else None)
    assert str(missing) in str(caught.value) and "does not exist" in str(caught.value)


def test_explicit_tilde_and_directory(places):
    _, home, _ = places
    f = put(home / "c.yaml")
    assert find_config("~/c.yaml") == f
    with pytest.raises(ConfigNotFound, match="is not a file"):
        find_config(str(home))


def test_model_path_with_a_newline_is_refused_at_its_place():
    text = 'cluster: x\nnodes: [{name: a, host: h}]\nmodel: {name: m, path: "/models/a\\nb"}\n'
    with pytest.raises(ConfigError) as e:
        load_config_text(text, "c.yaml")
    assert (e.value.line, e.value.col) == (3, text.splitlines()[2].index('"/models') + 1)
    assert "control characters" in str(e.value)
