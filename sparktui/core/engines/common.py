"""What every engine's commands share: words that render three ways, docker run, per-node env, steps.

A command is built once as a list of words and rendered three ways:
- "run": the exact shell line sparktui executes (every value shlex-quoted, secrets in clear);
- "show": the same line with secret values masked, for screens, JSON and logs;
- "export": the line for a hand-run script, where secrets are read from the environment at run time.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Union

from ..state import labels as L
from ..config.config import DockerConfig
from ..config.secrets import MASK, add_values, is_secret_name

MODES = ("run", "show", "export")
HOST_ALL = "0.0.0.0"  # only rank 0 serves HTTP, and other machines must reach it


@dataclass(frozen=True)
class Secret:
    """A secret value: real when run, masked when shown, taken from $name in exported scripts."""

    name: str  # environment variable that carries it in exported scripts
    value: str

    def __post_init__(self) -> None:
        add_values([self.value])  # from now on any text carrying it (an engine's log line) is masked


@dataclass(frozen=True)
class Home:
    """A path under the remote user's home: "$HOME" then the quoted rest, so only $HOME expands."""

    rest: str = ""


@dataclass(frozen=True)
class EnvFlag:
    """The value of one `-e`: NAME=value; a secret is masked when shown and inherited (`-e NAME`) in exports."""

    name: str
    value: Union[str, Secret]


@dataclass(frozen=True)
class Joined:
    """Several words glued into one (e.g. `--api-key=` + a secret)."""

    parts: tuple


@dataclass(frozen=True)
class Nested:
    """A whole command line passed as one argument (to `sh -c`), with a raw shell suffix (redirections)."""

    words: tuple
    suffix: str = ""


@dataclass(frozen=True)
class ExportOnly:
    """Words that appear only in exported scripts (e.g. `-e NAME` so a nested secret reaches the container)."""

    words: tuple


@dataclass(frozen=True)
class Break:
    """Nothing on a command line; a new line where scripts show one flag per line (before the image)."""


Word = Union[str, Secret, Home, EnvFlag, Joined, Nested, ExportOnly, Break]


def _secret(s: Secret, mode: str, nested: bool) -> str:
    if mode == "run":
        return shlex.quote(s.value)
    if mode == "show":
        return MASK
    # Inside `sh -c '...'` the inner shell expands it from the container's env (docker exec -e NAME).
    return f'"${s.name}"' if nested else f'"${{{s.name}:?set {s.name}}}"'


def render_word(w: Word, mode: str = "run", nested: bool = False) -> str:
    if isinstance(w, str):
        return shlex.quote(w)
    if isinstance(w, Secret):
        return _secret(w, mode, nested)
    if isinstance(w, Home):
        return '"$HOME"' + (shlex.quote(w.rest) if w.rest else "")
    if isinstance(w, EnvFlag):
        if isinstance(w.value, Secret):
            if mode == "show":
                return shlex.quote(f"{w.name}={MASK}")
            if mode == "export":
                return shlex.quote(w.name)  # docker copies NAME from the script's environment
            return shlex.quote(f"{w.name}={w.value.value}")
        return shlex.quote(f"{w.name}={w.value}")
    if isinstance(w, Joined):
        return "".join(render_word(p, mode, nested) for p in w.parts)
    if isinstance(w, Nested):
        # In exports a nested secret stays "$NAME" for the inner shell (see ExportOnly for its -e).
        return shlex.quote(render(list(w.words), mode, nested=True) + w.suffix)
    if isinstance(w, ExportOnly):
        return render(list(w.words), mode, nested) if mode == "export" else ""
    if isinstance(w, Break):
        return ""
    raise TypeError(f"not a command word: {w!r}")


def render(words: list[Word], mode: str = "run", nested: bool = False) -> str:
    """One shell line; every value quoted."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}")
    return " ".join(s for s in (render_word(w, mode, nested) for w in words) if s)


def render_lines(words: list[Word], mode: str = "export", indent: str = "    ") -> str:
    """Like render, one flag per line (backslash-continued): for scripts people read."""
    out: list[str] = []
    brk = False
    prev = ""
    for w in words:
        if isinstance(w, Break):
            brk = True
            continue
        p = render_word(w, mode)
        if not p:
            continue
        if out:
            new_line = brk or (p.startswith("-") and prev != "sh")  # keep `sh -c '...'` together
            out.append((" \\\n" + indent if new_line else " ") + p)
        else:
            out.append(p)
        brk, prev = False, p
    return "".join(out)


def secrets_in(words) -> list[Secret]:
    """Every secret inside a list of words, in order, without repeats."""
    out: list[Secret] = []

    def walk(w) -> None:
        if isinstance(w, Secret):
            if w not in out:
                out.append(w)
        elif isinstance(w, EnvFlag) and isinstance(w.value, Secret):
            walk(w.value)
        elif isinstance(w, (Joined,)):
            for p in w.parts:
                walk(p)
        elif isinstance(w, (Nested, ExportOnly)):
            for p in w.words:
                walk(p)

    for w in words:
        walk(w)
    return out


def _flag_env_name(flag: str) -> str:
    return re.sub(r"[^A-Z0-9_]", "_", flag.lstrip("-").upper())


def protect_args(args: list[str], taken: dict[str, str] | None = None) -> list[Word]:
    """Extra engine args with the values of secret-looking flags (`--api-key X`, `--hf-token=X`) as Secrets.

    taken: variable -> value of secrets already named (the container env); a flag whose variable
    name is taken by another value gets its own name, so an exported script keeps both.
    """
    taken = dict(taken or {})

    def secret(flag: str, value: str) -> Secret:
        name = base = _flag_env_name(flag)
        i = 1
        while name in taken and taken[name] != value:
            name = f"{base}_ARG" if i == 1 else f"{base}_ARG{i}"
            i += 1
        taken[name] = value
        return Secret(name, value)

    out: list[Word] = []
    pending: str | None = None
    for a in args:
        if pending is not None:
            out.append(secret(pending, a))
            pending = None
            continue
        if a.startswith("--") and "=" in a:
            flag, value = a.split("=", 1)
            if is_secret_name(flag):
                out.append(Joined((flag + "=", secret(flag, value))))
                continue
        elif a.startswith("--") and is_secret_name(a):
            pending = a
        out.append(a)
    return out


def env_value(name: str, value: str) -> Union[str, Secret]:
    return Secret(name, value) if is_secret_name(name) else value


@dataclass
class Step:
    """One launch action on one node, exactly as it runs.

    kind: "run" (docker run -d), "exec" (docker exec -d), "wait" (poll `command` until its stdout
    matches `expect`, giving up after `timeout` seconds).
    """

    node: str
    rank: int
    kind: str
    command: str  # the exact shell line (secrets in clear: give it to the node, never print it)
    description: str
    display: str = ""  # the same line with secrets masked
    script: str = ""  # the line for an exported script (secrets read from the environment)
    container: str = ""
    expect: str | None = None  # wait: Python regex searched in stdout (re.M)
    expect_ere: str | None = None  # wait: the same as a POSIX ERE, for `grep -cE` in exported scripts
    expect_count: int = 1  # wait: how many lines must match
    timeout: float | None = None  # wait: seconds before giving up
    interval: float = 5.0  # wait: seconds between polls
    secrets: list[str] = field(default_factory=list)  # env names an exported script must be given
    words: list = field(default_factory=list, repr=False, compare=False)  # what the lines were rendered from
    stdin: str = field(default="", repr=False)  # the secret env file's lines, given on stdin (never printed)

    @property
    def argv(self) -> list[str]:
        """The docker command the step means, secret variables as `-e NAME=VALUE` (what the container gets;
        `command` hands those to docker in an env file instead)."""
        return shlex.split(render(self.words, "run") if self.words else self.command)

    def matches(self, stdout: str) -> bool:
        """A wait step's condition on one poll's output."""
        return self.expect is not None and len(re.findall(self.expect, stdout, re.M)) >= self.expect_count

    def to_json(self) -> dict:
        d = {
            "node": self.node,
            "rank": self.rank,
            "kind": self.kind,
            "command": self.display,
            "description": self.description,
            "container": self.container,
        }
        if self.kind == "wait":
            d.update(expect=self.expect, expect_count=self.expect_count, timeout=self.timeout)
        return d


ENV_DIR = ".local/state/sparktui/env"  # under the node user's $HOME: secret env files while docker reads them


def make_step(node: str, rank: int, kind: str, words: list[Word], description: str, container: str, **wait) -> Step:
    command, stdin = render(words, "run"), ""
    secret_env = [w for w in words if isinstance(w, EnvFlag) and isinstance(w.value, Secret)]
    if kind == "run" and secret_env:
        command, stdin = env_file_run(words, secret_env, container)
    return Step(
        node=node,
        rank=rank,
        kind=kind,
        command=command,
        description=description,
        display=render(words, "show"),
        script=render(words, "export"),
        container=container,
        secrets=[s.name for s in secrets_in(words)],
        words=list(words),
        stdin=stdin,
        **wait,
    )


def env_file_run(words: list[Word], secret_env: list[EnvFlag], container: str) -> tuple[str, str]:
    """`docker run` with its secret variables in a 0600 env file written from stdin, never on a command
    line (`ps` shows every argv to every user of the node). The file goes once docker run returns: the
    container keeps its env, and no copy of the secret stays at rest in the user's home."""
    kept: list[Word] = []
    for i, w in enumerate(words):
        if w == "-e" and i + 1 < len(words) and words[i + 1] in secret_env:
            continue
        if w in secret_env:
            continue
        kept.append(w)
    at = kept.index("-d") + 1 if "-d" in kept else 2
    f = Home(f"/{ENV_DIR}/{container}.env")
    kept[at:at] = ["--env-file", f]
    path = render_word(f)
    cmd = (
        f'umask 077 && mkdir -p "$HOME"/{shlex.quote(ENV_DIR)} && cat > {path} && '
        f"{{ {render(kept, 'run')}; rc=$?; rm -f {path}; exit $rc; }}"
    )
    return cmd, "".join(f"{e.name}={e.value.value}\n" for e in secret_env)


@dataclass
class Spot:
    """One node's place in a plan."""

    name: str
    rank: int
    role: str  # head | worker
    iface: str | None
    ip: str | None
    rdma: str | None  # RoCE device(s) on the fabric, comma-separated, the one behind iface first
    infiniband: bool  # /dev/infiniband exists: pass it to the container
    env: dict[str, Union[str, Secret]] = field(default_factory=dict)
    ib_env: dict[str, str] = field(default_factory=dict)  # NCCL_IB_GID_INDEX and the topology's settings (fabric.py)


@dataclass
class Context:
    """Everything an engine needs to write its commands; built and checked by plan.py."""

    engine: str
    mode: str
    image: str
    model_path: str
    served_name: str | None
    tp: int
    pp: int
    head_ip: str
    dist_port: int
    port: int
    ray_port: int
    mem_fraction: float | None
    max_model_len: int | None
    trust_remote_code: bool
    extra_args: list[Word]
    deployment: str
    plan_id: str
    docker: DockerConfig
    nodes: list[Spot]
    engine_version: str | None = None  # the release inside the image, when known
    # (file under the remote home, path in the container): files a recipe's mods carry, mounted read-only
    files: list[tuple[str, str]] = field(default_factory=list)

    @property
    def head(self) -> Spot:
        return self.nodes[0]

    @property
    def workers(self) -> list[Spot]:
        return self.nodes[1:]

    def container(self, spot: Spot) -> str:
        return container_name(self.deployment, self.engine, spot.rank)

    def labels(self, spot: Spot) -> dict[str, str]:
        return {
            L.DEPLOYMENT: self.deployment,
            L.ENGINE: self.engine,
            L.ROLE: spot.role,
            L.RANK: str(spot.rank),
            L.PLAN: self.plan_id,
        }


def container_name(deployment: str, engine: str, rank: int) -> str:
    return f"sparktui-{deployment}-{engine}-{rank}"


_DOCKER_NAME_BAD = re.compile(r"[^A-Za-z0-9_.-]+")


def safe_name(name: str) -> str:
    """A deployment name usable in container names: [A-Za-z0-9][A-Za-z0-9_.-]*."""
    out = _DOCKER_NAME_BAD.sub("-", name).strip("-.")
    return out or "default"


def gpu_flags(style: str) -> list[str]:
    return {
        "gpus-all": ["--gpus", "all"],
        "runtime-nvidia": ["--runtime", "nvidia"],
        "cdi": ["--device", "nvidia.com/gpu=all"],
    }.get(style, [])


def volume_word(spec: str) -> Word:
    """`-v` value; a leading ~ is the remote user's home (expanded there, not here)."""
    if spec == "~" or spec.startswith("~/") or spec.startswith("~:"):
        return Joined((Home(), spec[1:])) if len(spec) > 1 else Home()
    return spec


def interface_env(spot: Spot) -> dict[str, str]:
    """Keep every library's sockets on the rendezvous interface of this node (names differ per node)."""
    env: dict[str, str] = {}
    if spot.iface:
        for k in (
            "NCCL_SOCKET_IFNAME",
            "GLOO_SOCKET_IFNAME",
            "TP_SOCKET_IFNAME",
            "UCX_NET_DEVICES",
            "OMPI_MCA_btl_tcp_if_include",
        ):
            env[k] = spot.iface
    if spot.rdma and spot.infiniband:
        env["NCCL_IB_HCA"] = spot.rdma  # every usable half of every port on the fabric, comma-separated
        env["NCCL_IB_DISABLE"] = "0"
        env.update(spot.ib_env)
    elif spot.infiniband:
        # HCAs exist but none is on the rendezvous subnet: keep NCCL off them, it would dial the wrong fabric.
        env["NCCL_IB_DISABLE"] = "1"
    # Without /dev/infiniband NCCL finds no IB device and falls back to sockets by itself: nothing to set.
    return env


def docker_flags(d: DockerConfig, spot: Spot, mounts: list[Word] = ()) -> list[Word]:
    """The flags that shape a node's container (network, GPUs, limits, RDMA device, mounts, extra
    args, env): shared by the engine containers and the rendezvous preflight, so both see one node alike."""
    w: list[Word] = ["--network", "host", "--ipc", "host"]
    w += gpu_flags(d.gpu_style)
    for k, v in d.ulimits.items():
        w += ["--ulimit", f"{k}={v}"]
    w += ["--cap-add", "IPC_LOCK"]
    if spot.infiniband:
        w += ["--device", "/dev/infiniband"]
    for m in mounts:
        w += ["-v", m]
    if d.shm_size:
        w += ["--shm-size", d.shm_size]
    w += protect_args(list(d.extra_args))
    for k, v in spot.env.items():
        w += ["-e", EnvFlag(k, v)]
    return w


def docker_run(ctx: Context, spot: Spot, command: list[Word]) -> list[Word]:
    """`docker run -d` for one node's engine container."""
    d = ctx.docker
    w: list[Word] = ["docker", "run", "-d", "--name", ctx.container(spot)]
    for k, v in ctx.labels(spot).items():
        w += ["--label", f"{k}={v}"]
    mounts = [volume_word(vol) for vol in d.volumes]
    # Same path inside and out, so engine flags and config paths read the same; read-only keeps the checkpoint safe.
    mounts.append(f"{ctx.model_path}:{ctx.model_path}:ro")
    mounts += [Joined((Home(rel), f":{inside}:ro")) for rel, inside in ctx.files]
    # The command's first word is the entrypoint: images differ (vllm/vllm-openai's is `vllm serve`),
    # so naming it makes the plan mean the same in every image.
    return w + docker_flags(d, spot, mounts) + ["--entrypoint", command[0], Break(), ctx.image] + command[1:]


def opt(flag: str, value) -> list[str]:
    """[flag, value] when value is set, else nothing."""
    return [] if value is None else [flag, str(value)]
