"""The semaphore trap: will systemd-logind remove the engine's IPC objects when the SSH session ends?

logind's RemoveIPC= (logind.conf(5), default yes) removes the System V and POSIX IPC objects a user
owns once the user's last session ends; root and system users (uid <= SYSTEM_UID_MAX, 999 unless
systemd was built otherwise; logind never reads login.defs for it) are excluded, and lingering keeps
the user "logged in". logind cleans its own namespaces only: /dev/shm and SysV IPC of the host.

An engine container sees the host's /dev/shm and SysV IPC with `--ipc host` (the plans pass it), so
objects it creates there carry the container user's uid, unmapped. As root (the images' default)
they are safe; with `--user` (or an image USER) equal to the SSH user's uid they go when sparktui's
SSH session closes: vLLM's workers then fail in SemLock._rebuild (FileNotFoundError) while the head
loops on shm_broadcast's "No available shared memory broadcast block found".

The look reads, in its one round trip: the SSH user's uid and name, whether systemd runs, logind's
live RemoveIPC (`loginctl show-session -p RemoveIPC`: the manager's property), the logind.conf files
(for when loginctl cannot answer), and the user's linger flag file.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

SYSTEM_UID_MAX = 999  # systemd's compile-time default; RemoveIPC never touches uids up to it
DIRS = (
    "/usr/lib/systemd/logind.conf.d",
    "/usr/local/lib/systemd/logind.conf.d",
    "/run/systemd/logind.conf.d",
    "/etc/systemd/logind.conf.d",
)  # lowest precedence first (for files of the same name)
MAIN = ("/etc/systemd/logind.conf", "/usr/lib/systemd/logind.conf")  # the first that exists is the main file
FILE_MARK = "::file "

# A section of the look (`@@ipc`); {root} is "" on a node (a test points it at fake files).
SECTION = """echo @@ipc
echo "uid $(id -u 2>/dev/null)"; echo "user $(id -un 2>/dev/null)"
if [ -d {root}/run/systemd/system ]; then echo "systemd yes"; else echo "systemd no"; fi
echo "live $(loginctl show-session -p RemoveIPC --value 2>/dev/null)"
if [ -e {root}/var/lib/systemd/linger/"$(id -un 2>/dev/null)" ]; then echo "linger yes"; else echo "linger no"; fi
for f in {root}/etc/systemd/logind.conf {root}/usr/lib/systemd/logind.conf {root}/usr/lib/systemd/logind.conf.d/*.conf \
{root}/usr/local/lib/systemd/logind.conf.d/*.conf {root}/run/systemd/logind.conf.d/*.conf \
{root}/etc/systemd/logind.conf.d/*.conf; do if [ -f "$f" ]; then echo "::file $f"; cat "$f"; echo; fi; done
"""


def _bool(text: str) -> bool | None:
    t = text.strip().lower()
    if t in ("1", "yes", "y", "true", "t", "on"):
        return True
    if t in ("0", "no", "n", "false", "f", "off"):
        return False
    return None


@dataclass
class IpcLook:
    """What a node said about logind and the SSH user."""

    uid: int | None = None
    user: str | None = None
    systemd: bool = False  # systemd is the init (logind may run)
    live: bool | None = None  # logind's RemoveIPC as it runs now
    configured: bool | None = None  # RemoveIPC from logind.conf and its drop-ins (None: not set)
    linger: bool = False

    @property
    def remove_ipc(self) -> bool:
        """The effective RemoveIPC: logind's own answer, else the files, else the default (yes)."""
        if self.live is not None:
            return self.live
        return True if self.configured is None else self.configured


def configured_remove_ipc(files: dict[str, str], root: str = "") -> bool | None:
    """RemoveIPC= from logind.conf's files (path -> text) in systemd's order: the main file, then the
    drop-ins sorted by file name (for one name, /etc over /run over /usr/local/lib over /usr/lib); the
    last assignment in a [Login] section wins."""
    main = next((root + m for m in MAIN if root + m in files), None)
    drop: dict[str, str] = {}
    for d in DIRS:  # a later directory replaces a file of the same name
        for path in files:
            if path.startswith(root + d + "/"):
                drop[path.rsplit("/", 1)[1]] = path
    order = ([main] if main else []) + [drop[k] for k in sorted(drop)]
    value = None
    for path in order:
        section = None
        for line in files[path].splitlines():
            s = line.strip()
            if not s or s[0] in "#;":
                continue
            if s.startswith("[") and s.endswith("]"):
                section = s[1:-1].strip()
                continue
            key, eq, v = s.partition("=")
            if eq and section == "Login" and key.strip() == "RemoveIPC":
                b = _bool(v)
                if b is not None:
                    value = b
    return value


def parse_ipc(lines: list[str], root: str = "") -> IpcLook:
    look = IpcLook()
    files: dict[str, list[str]] = {}
    cur: list[str] | None = None
    for line in lines:
        if line.startswith(FILE_MARK):
            cur = files.setdefault(line[len(FILE_MARK) :].strip(), [])
            continue
        if cur is not None:
            cur.append(line)
            continue
        key, _, value = line.partition(" ")
        value = value.strip()
        if key == "uid" and value.isdigit():
            look.uid = int(value)
        elif key == "user" and value:
            look.user = value
        elif key == "systemd":
            look.systemd = value == "yes"
        elif key == "live":
            look.live = _bool(value) if value else None
        elif key == "linger":
            look.linger = value == "yes"
    look.configured = configured_remove_ipc({k: "\n".join(v) for k, v in files.items()}, root)
    return look


def engine_identity(words: list) -> tuple[str | None, str]:
    """(--user, --ipc) of a container from its docker flags (the last one given wins, as docker reads them)."""
    user, ipc = None, "private"
    it = iter(range(len(words)))
    for i in it:
        w = words[i]
        if not isinstance(w, str):
            continue
        nxt = words[i + 1] if i + 1 < len(words) and isinstance(words[i + 1], str) else None
        if w in ("--user", "-u") and nxt is not None:
            user = nxt
            next(it, None)
        elif w.startswith("--user="):
            user = w.split("=", 1)[1]
        elif w.startswith("-u") and len(w) > 2 and not w.startswith("--"):
            user = w[2:]
        elif w == "--ipc" and nxt is not None:
            ipc = nxt
            next(it, None)
        elif w.startswith("--ipc="):
            ipc = w.split("=", 1)[1]
    return user, ipc


@dataclass
class IpcRisk:
    """One node's judgement: whether the engine's IPC objects outlive the SSH session, and why."""

    node: str
    at_risk: bool
    why: str
    fix: str = ""
    user: str | None = None  # the SSH user
    uid: int | None = None
    container_user: str = "root"  # as the container runs (--user, else the image's USER, else root)
    ipc: str = "private"
    remove_ipc: bool = True
    linger: bool = False

    def to_json(self) -> dict:
        from dataclasses import asdict

        return asdict(self)


def _uid_of(spec: str, look: IpcLook) -> int | None:
    """The uid a --user value runs as, where the host can tell: a number, root, or the SSH user's name."""
    name = spec.split(":", 1)[0].strip()
    if name.isdigit():
        return int(name)
    if name in ("", "root"):
        return 0
    return look.uid if look.user is not None and name == look.user else None


def fix_for(user: str | None, node: str) -> str:
    who = shlex.quote(user) if user else "USER"
    return (
        f"on {node}: `sudo loginctl enable-linger {who}` (keeps the user's IPC objects while no session is "
        f"open), or set RemoveIPC=no under [Login] in /etc/systemd/logind.conf and "
        f"`sudo systemctl restart systemd-logind`; or run the engine container as root (no --user)"
    )


def judge_ipc(node: str, look: IpcLook, user_flag: str | None, image_user: str | None, ipc: str) -> IpcRisk:
    """Can logind remove the engine's semaphores and shared memory when sparktui's SSH session ends?"""
    spec = user_flag if user_flag is not None else (image_user or "root")
    r = IpcRisk(
        node,
        False,
        "",
        user=look.user,
        uid=look.uid,
        container_user=spec,
        ipc=ipc,
        remove_ipc=look.remove_ipc,
        linger=look.linger,
    )
    uid = _uid_of(spec, look)
    if ipc != "host":
        r.why = f"the container has its own IPC namespace (--ipc {ipc}): logind does not see its objects"
    elif not look.systemd:
        r.why = "no systemd on the node: no logind to remove IPC objects"
    elif not look.remove_ipc:
        r.why = "logind keeps IPC objects (RemoveIPC=no)"
    elif look.linger:
        r.why = f"lingering is on for {look.user}: logind never ends the user, so it removes nothing"
    elif uid is not None and uid <= SYSTEM_UID_MAX:
        r.why = f"the engine runs as {'root' if uid == 0 else f'system uid {uid}'}, which RemoveIPC never touches"
    elif uid is None:
        r.why = (
            f"the engine runs as {spec!r}, a name the node's SSH user does not have: its IPC objects go only "
            f"if that uid's own last session ends"
        )
    elif look.uid is not None and uid != look.uid:
        r.why = f"the engine runs as uid {uid}, not the SSH user's ({look.uid}): sparktui's sessions do not end it"
    else:
        r.at_risk = True
        r.why = (
            f"the engine runs as the SSH user {look.user or uid} (uid {uid}) with --ipc host, RemoveIPC is on and "
            f"lingering is off: when sparktui's SSH session ends, logind removes the engine's semaphores and "
            f"shared memory; workers then fail in SemLock._rebuild (FileNotFoundError) and the head waits for "
            f"them for ever (shm_broadcast: No available shared memory broadcast block found)"
        )
        r.fix = fix_for(look.user, node)
    return r
