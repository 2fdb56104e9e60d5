"""A Config back to commented YAML, in the layout and comment style of the shipped example.

render_config() writes every section with its comment at column 38, as config.example.yaml does, so
a written file reads like the reference; rendering the example's own values reproduces it byte for
byte (a test holds this). Odd values are double-quoted only where plain YAML would read them back
differently. write_config_file() refuses to replace a file unless asked, and never leaves half a file.
"""

from __future__ import annotations

import datetime
from dataclasses import fields as dc_fields
import os
import tempfile
from importlib import resources
from pathlib import Path

import yaml

from .config import Config, ConfigError, EngineDefaults, ImagesConfig, MemoryConfig, load_config_text
from ..engines import ENGINES

COMMENT_COLUMN = 37  # 0-based column of '#', as in config.example.yaml

EXAMPLE_HEADER = (
    "# sparktui cluster configuration: two DGX Sparks serving one model with tensor parallelism.\n"
    "# Copy to ./sparktui.yaml or ~/.config/sparktui/config.yaml (or pass --config FILE) and edit,\n"
    "# or let `sparktui init` (or `sparktui` on a first run) write one for your nodes.\n"
    "# Unknown keys are errors, so a typo never silently falls back to a default.\n"
)

# The first time a key is written, its comment follows it (later nodes repeat none of them).
NODE_NOTES = {
    "nodes": "the machines; exactly one is the head",
    "name": "short unique name: letters, digits, '.', '_', '-' (becomes container/file names)",
    "host": "address sparktui dials over SSH (management network), or a ~/.ssh/config alias",
    "user": "SSH user; leave out to use ~/.ssh/config or your local user",
    "port": "SSH port; leave out to use ~/.ssh/config or 22",
    "identity_file": "private key on this machine (~ is expanded here); leave out for the agent",
    "role": "head | worker; without any 'role: head' the first node is the head",
    "interfaces": "subnet CIDR -> interface name; only where auto-detection picks wrong",
}
# Comments of the first and second interface entries when the caller gives none.
IFACE_NOTES = (
    "the ConnectX-7 fabric that joins the nodes (the rendezvous subnet)",
    "names can differ between nodes: each node says its own",
)
NOTES = {
    "cluster": "cluster name, shown in the UI and in --json output",
    "model": "what to serve",
    "model.name": 'served model name (the OpenAI "model" field)',
    "model.path": "checkpoint directory, an absolute path, the same on every node",
    "model.source": "node that holds the weights first (copied to the others); leave out = the head",
    "model.copy_streams": "most parallel rsync streams per copy (fewer on a sender with fewer cores)",
    "images": "container image per engine; the image ID must match on every node",
    **{
        f"images.{e.name}": f"image that runs {e.label}" + (f" ({e.image_note})" if e.image_note else "")
        for e in ENGINES.values()
    },
    "docker": "how engine containers are run on every node",
    "docker.gpu_style": "gpus-all (--gpus all) | runtime-nvidia (--runtime nvidia) | cdi | none",
    "docker.extra_args": 'more `docker run` arguments, one list item each, e.g. ["--privileged"]',
    "docker.env": "-e NAME=VALUE for every container",
    "docker.env.NCCL_DEBUG": "  values are taken as written (INFO shows which NCCL transport is used)",
    "docker.ulimits": '--ulimit NAME=VALUE ("soft" or "soft:hard"; -1 = unlimited)',
    "docker.ulimits.memlock": "  pinned memory for RDMA",
    "docker.ulimits.stack": "  64 MiB stacks, as the engines recommend",
    "docker.volumes": "-v SRC:DST[:OPTS]; a leading ~ means the remote user's home",
    "docker.shm_size": "--shm-size such as 16g; ~ = not passed (ignored with --ipc host)",
    "ssh": "how sparktui reaches the nodes",
    "ssh.host_key_policy": "strict = known hosts only | accept-new = trust and remember a first key",
    "ssh.known_hosts": "known_hosts file on this machine; ~ (null) = ~/.ssh/known_hosts",
    "ssh.keepalive_interval": "seconds between keepalives; a dead link is noticed after 3 misses",
    "ssh.connect_timeout": "seconds to wait for a node to answer",
    "ssh.max_channels": "concurrent SSH channels per node (OpenSSH MaxSessions defaults to 10)",
    "ssh.ssh_config": "list of ssh_config files to read; ~ (null) = ~/.ssh/config",
    "engine": "defaults for the launch form",
    **{f"engine.{e.name}_port": f"{e.label} HTTP port on the head" for e in ENGINES.values()},
    "engine.dist_port": "rendezvous port (--dist-init-addr / --master-port); differs from the others",
    "engine.ray_port": "Ray GCS port on the head (vLLM with Ray)",
    "engine.mem_fraction": "share of GPU memory, in (0, 1]; ~ = NVIDIA's: vLLM 0.8, SGLang 0.75",
    "engine.max_model_len": "context length cap; ~ = the engine's default",
    "engine.hang_after": "seconds of silence in distributed init before a hang is flagged",
    "engine.wedge_after": "seconds of requests pending with no token generated before a ready endpoint is wedged",
    "engine.phase_limits": "seconds of silence allowed in a later phase, e.g. {weights: 3600}",
    "memory": "the unified-memory guard, from container start to serving",
    "memory.guard": "off = watch and warn only; on = stop this deployment before a node runs out",
    "memory.floor": "MemAvailable below this on a node stops the deployment; a size or a share (5%)",
    "memory.warn": "the warning starts this far above the floor (a size or a share of MemTotal)",
    "memory.pressure": '/proc/pressure/memory "full" avg10 in % above which it stops too',
    "memory.interval": "seconds between two readings of each node",
    "engines": "per engine {image, port}; another spelling of images.<engine> and engine.<engine>_port",
    # not written by render_config (an entry has no comment of its own); the reference page lists them
    "engines.<engine>.image": "image that runs this engine; ~ = images.<engine>, else the engine's own",
    "engines.<engine>.port": "its HTTP port on the head; ~ = engine.<engine>_port, else the engine's own",
    "secrets": (
        "more variable or flag names whose values are masked in every output,\n"
        "  e.g. [WANDB_API_KEY, --license]; *_TOKEN, *_KEY, *PASSWORD*, *SECRET*,\n"
        "  --api-key, --hf-token and the like are masked without being listed"
    ),
    "keymap": "binding id -> key(s), comma-separated, to remap the TUI's keys",
    "theme": "dark, light, high-contrast, a name in ~/.config/sparktui/themes/ or a .yaml path; ~ = dark",
}
KEYMAP_HINT = ("#   quit: ctrl+q", "#   launch: f5,ctrl+l")
SECTION_KEYS = {
    "images": tuple(f.name for f in dc_fields(ImagesConfig)),
    "ssh": ("host_key_policy", "known_hosts", "keepalive_interval", "connect_timeout", "max_channels", "ssh_config"),
    "engine": tuple(f.name for f in dc_fields(EngineDefaults)),
    "memory": tuple(f.name for f in dc_fields(MemoryConfig)),
}


def example_text() -> str:
    """The annotated example config shipped inside the package."""
    return resources.files("sparktui").joinpath("config.example.yaml").read_text(encoding="utf-8")


def default_header(tool: str = "sparktui init") -> str:
    today = datetime.date.today().isoformat()
    return (
        f"# sparktui cluster configuration, written by {tool} on {today}.\n"
        "# Every key is explained in the annotated example: `sparktui init --example`.\n"
        "# Unknown keys are errors, so a typo never silently falls back to a default.\n"
    )


# -- scalars ------------------------------------------------------------------------------------
def _reads_back(doc: str, pick, value: str) -> bool:
    try:
        node = pick(yaml.compose(doc, Loader=yaml.SafeLoader))
    except (yaml.YAMLError, AttributeError, IndexError, TypeError):
        return False
    return (
        isinstance(node, yaml.ScalarNode)
        and node.style is None
        and node.value == value
        and node.tag != "tag:yaml.org,2002:null"
    )


def scalar(value: object, place: str = "value") -> str:
    """value as YAML text: plain where the loader reads it back as written, else double-quoted.

    place is where it stands: "value" (after `key: `), "key" (before `:`) or "item" (after `- `).
    A trailing comment is part of every probe, so `a #b` or `x:` never pass as plain.
    """
    if value is None:
        return "~"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
    text = str(value)
    if text and text == text.strip() and "\n" not in text:
        probes = {
            "value": (f"k: {text}  # c\n", lambda d: d.value[0][1]),
            "key": (f"{text}: v  # c\n", lambda d: d.value[0][0]),
            "item": (f"- {text}  # c\n", lambda d: d.value[0]),
        }
        doc, pick = probes[place]
        if _reads_back(doc, pick, text):
            return text
    return yaml.safe_dump(text, default_style='"', width=float("inf"), allow_unicode=True).rstrip("\n")


def _local(path: str | None) -> str | None:
    """A path on this machine as the user would write it: ~ for the home directory."""
    if path is None:
        return None
    home = os.path.expanduser("~")
    if home not in ("", "/", "~") and (path == home or path.startswith(home.rstrip("/") + "/")):
        return "~" + path[len(home.rstrip("/")) :]
    return path


# -- lines --------------------------------------------------------------------------------------
class _Out:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, content: str, note: str | None = None) -> None:
        """content with its note at the comment column; a note's further lines each stand alone there."""
        first, *more = note.split("\n") if note else [None]
        if first:
            pad = content.ljust(COMMENT_COLUMN) if len(content) < COMMENT_COLUMN else content + "  "
            content = f"{pad}# {first}"
        self.lines.append(content)
        self.lines += [" " * COMMENT_COLUMN + f"# {line}" for line in more]

    def mapping(
        self, indent: str, key: str, entries: dict, notes: dict[str, str], empty: str = "{}", note: str | None = None
    ) -> None:
        if not entries:
            self.add(f"{indent}{key}: {empty}", note)
            return
        self.add(f"{indent}{key}:", note)
        for k, v in entries.items():
            self.add(f"{indent}  {scalar(k, 'key')}: {scalar(v)}", notes.get(k))

    def sequence(self, indent: str, key: str, items: list, note: str | None = None) -> None:
        if not items:
            self.add(f"{indent}{key}: []", note)
            return
        self.add(f"{indent}{key}:", note)
        for item in items:
            self.add(f"{indent}  - {scalar(item, 'item')}")


def _nodes(out: _Out, config: Config, iface_notes: dict[tuple[str, str], str]) -> None:
    out.add("nodes:", NODE_NOTES["nodes"])
    said: set[str] = set()
    defaults = iter(IFACE_NOTES)

    def note(key: str) -> str | None:
        if key in said:
            return None
        said.add(key)
        return NODE_NOTES[key]

    for n in config.nodes:
        out.add(f"  - name: {scalar(n.name)}", note("name"))
        fields = [
            ("host", n.host),
            ("user", n.user),
            ("port", n.port),
            ("identity_file", _local(n.identity_file)),
            ("role", n.role),
        ]
        for key, value in fields:
            if value is not None:
                out.add(f"    {key}: {scalar(value)}", note(key))
        if n.interfaces:
            out.add("    interfaces:", note("interfaces"))
            for subnet, ifname in n.interfaces.items():
                text = iface_notes.get((n.name, subnet)) or next(defaults, None)
                out.add(f"      {scalar(subnet, 'key')}: {scalar(ifname)}", text)


def render_config(
    config: Config, header: str | None = None, iface_notes: dict[tuple[str, str], str] | None = None
) -> str:
    """The config as commented YAML. iface_notes: (node, subnet) -> comment for that interface line."""
    out = _Out()
    for line in (header if header is not None else default_header()).splitlines():
        out.add(line)
    out.add("")
    out.add(f"cluster: {scalar(config.cluster)}", NOTES["cluster"])
    out.add("")
    _nodes(out, config, iface_notes or {})
    out.add("")
    m = config.model
    out.add("model:", NOTES["model"])
    out.add(f"  name: {scalar(m.name)}", NOTES["model.name"])
    out.add(f"  path: {scalar(m.path)}", NOTES["model.path"])
    if m.source is not None:
        out.add(f"  source: {scalar(m.source)}", NOTES["model.source"])
    out.add(f"  copy_streams: {m.copy_streams}", NOTES["model.copy_streams"])
    out.add("")
    _section(out, config, "images")
    out.add("")
    d = config.docker
    out.add("docker:", NOTES["docker"])
    out.add(f"  gpu_style: {scalar(d.gpu_style)}", NOTES["docker.gpu_style"])
    out.sequence("  ", "extra_args", d.extra_args, NOTES["docker.extra_args"])
    env_notes = {k[len("docker.env.") :]: v for k, v in NOTES.items() if k.startswith("docker.env.")}
    out.mapping("  ", "env", d.env, env_notes, note=NOTES["docker.env"])
    limit_notes = {k[len("docker.ulimits.") :]: v for k, v in NOTES.items() if k.startswith("docker.ulimits.")}
    out.mapping("  ", "ulimits", d.ulimits, limit_notes, note=NOTES["docker.ulimits"])
    out.sequence("  ", "volumes", d.volumes, NOTES["docker.volumes"])
    out.add(f"  shm_size: {scalar(d.shm_size)}", NOTES["docker.shm_size"])
    out.add("")
    _section(out, config, "ssh")
    out.add("")
    _section(out, config, "engine")
    out.add("")
    _section(out, config, "memory")
    out.add("")
    _engines(out, config)
    out.add("")
    out.sequence("", "secrets", config.secrets, NOTES["secrets"])
    out.add("")
    if config.keymap:
        out.mapping("", "keymap", config.keymap, {}, note=NOTES["keymap"])
    else:
        out.add("# keymap:", NOTES["keymap"])
        for line in KEYMAP_HINT:
            out.add(line)
    out.add("")
    out.add(f"theme: {scalar(config.theme)}", NOTES["theme"])
    return "\n".join(out.lines) + "\n"


def _engines(out: _Out, config: Config) -> None:
    if not config.engines:
        out.add("engines: {}", NOTES["engines"])
        return
    out.add("engines:", NOTES["engines"])
    for name, s in config.engines.items():
        out.add(f"  {scalar(name, 'key')}:")
        for k, v in (("image", s.image), ("port", s.port)):
            out.add(f"    {k}: {scalar(v)}")


def _section(out: _Out, config: Config, name: str) -> None:
    obj = getattr(config, name)
    out.add(f"{name}:", NOTES[name])
    for key in SECTION_KEYS[name]:
        value = getattr(obj, key)
        note = NOTES[f"{name}.{key}"]
        if key in ("known_hosts",):
            value = _local(value)
        if key == "phase_limits":
            out.mapping("  ", key, value, {}, note=note)
            continue
        if key == "ssh_config" and value is not None:
            out.sequence("  ", key, [_local(p) for p in value], note)
            continue
        if isinstance(value, bool):  # the guard's switch reads as the example writes it
            value = "on" if value else "off"
            out.add(f"  {key}: {value}", note)
            continue
        out.add(f"  {key}: {scalar(value)}", note)


# -- files --------------------------------------------------------------------------------------
class ConfigExists(FileExistsError):
    """The target file exists and replacing it was not asked for."""


def checked_text(config: Config, **kw) -> str:
    """render_config(), proven to load back: a ConfigError here is a bug or a value the loader refuses."""
    text = render_config(config, **kw)
    load_config_text(text, "<written config>")
    return text


def write_config_file(path: str | Path, text: str, force: bool = False) -> Path:
    """Write text to path atomically (a temp file in the same folder, then a rename).

    Without force an existing file is left alone (ConfigExists); the check and the rename are one
    step (a hard link), so two writers cannot both win.
    """
    path = Path(os.path.expanduser(str(path)))
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder; name a file such as {path / 'config.yaml'}")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if force:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)
            except FileExistsError:
                raise ConfigExists(f"{path} exists; pass --force to replace it") from None
            except OSError:  # a file system without hard links: an exclusive create is the same check
                try:
                    with open(path, "x", encoding="utf-8") as f:
                        f.write(text)
                except FileExistsError:
                    raise ConfigExists(f"{path} exists; pass --force to replace it") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


__all__ = [
    "render_config",
    "checked_text",
    "write_config_file",
    "example_text",
    "scalar",
    "ConfigExists",
    "ConfigError",
    "EXAMPLE_HEADER",
    "default_header",
]
