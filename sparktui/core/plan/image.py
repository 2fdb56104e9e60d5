"""What an engine image holds: its entrypoint, command, labels, ID and the engine release inside it.

One round trip to the head: `docker image inspect`, then the engine versions, read once per image ID
by a one-shot container (`--entrypoint python3`, no network, bounded by `timeout`) and cached on the
node under ~/.cache/sparktui/images/<id>.json (written to a temporary file and renamed, so a reader
never sees half of it). The versions come from the installed distributions' metadata (no engine
import, so it takes about a second), falling back to the module's __version__. Nothing here is fatal:
an image that cannot be read gives an ImageInfo with `problem` set and the plan goes on, for the
newest release, saying so.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict, dataclass, field

from ..state import statefile
from ..engines import ENGINES, get_engine, label
from .image_community import recognise

RUN_TIMEOUT_S = 60  # the one-shot version run; a cold image start on a slow disk takes some seconds
CACHE_DIR = "$HOME/.cache/sparktui/images"
# torch's version names its CUDA (2.9.1+cu130); NCCL shows as a package only where pip installed it
# (NGC images build theirs: the preflight reads the one torch loads).
PACKAGES = tuple(e.package for e in ENGINES.values()) + ("ray", "torch", "nvidia-nccl-cu13", "nvidia-nccl-cu12")
_MARK = "@@sparktui-image "

# Run inside the image: one JSON line {package: version or null}. Metadata first: importing vLLM
# pulls torch in, which takes tens of seconds on a real image.
_VERSIONS_PY = (
    "import json,importlib,importlib.metadata as m\n"
    "out={}\n"
    f"for p in {PACKAGES!r}:\n"
    "    try:\n"
    "        out[p]=m.version(p)\n"
    "    except Exception:\n"
    "        try:\n"
    "            out[p]=str(getattr(importlib.import_module(p),'__version__',None) or 'unknown')\n"
    "        except Exception:\n"
    "            out[p]=None\n"
    "print(json.dumps(out))\n"
)


@dataclass
class ImageInfo:
    """One image on one node, as `docker image inspect` and the one-shot version run saw it."""

    ref: str
    node: str = ""
    id: str | None = None  # sha256:...; None when the node lacks the image
    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    versions: dict[str, str | None] = field(default_factory=dict)  # vllm / sglang / ray -> release, None = absent
    cached: bool = False  # the versions came from the node's cache (no container ran)
    unread: bool = False  # the image is there, its versions are not cached and no container was to run
    problem: str | None = None  # why the image or its versions could not be read
    support: dict | None = None  # whether it loads the config's model (core/plan/support.py Support.to_json), if asked

    def version(self, package: str) -> str | None:
        v = self.versions.get(package)
        return v if v and v != "unknown" else None

    def has(self, package: str) -> bool | None:
        """Whether the package is in the image; None when the versions could not be read."""
        if package not in self.versions:
            return None
        return self.versions[package] is not None

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: object, where: str = "image facts") -> "ImageInfo":
        """An inspection kept as JSON (facts saved earlier); StateFileError when a field has the wrong type."""
        return statefile.load(cls, d, where, "take the facts again (sparktui check --json)")


CACHE_FIX = "remove it: the next plan reads the release from the image again"


def read_versions(body: str, where: str) -> dict[str, str | None]:
    """The engine releases from the cache's JSON line ({package: version or null}); StateFileError when it
    is not that. A package missing from it was not asked about (an older cache entry): unknown, not absent."""
    data = statefile.parse_json(body, where, CACHE_FIX)
    if not isinstance(data, dict):
        raise statefile.StateFileError(where, "holds no object of engine versions", CACHE_FIX)
    for p in PACKAGES:
        if not isinstance(data.get(p), (str, type(None))):
            raise statefile.StateFileError(where, f"{p!r} is not a version string", CACHE_FIX)
    if not any(p in data for p in PACKAGES):
        raise statefile.StateFileError(where, "names none of the engine packages", CACHE_FIX)
    return {p: data.get(p) for p in PACKAGES if p in data}


def _strings(value: object) -> list[str]:
    """A docker config list (Entrypoint, Cmd): a list of words; a plain string is one word."""
    if isinstance(value, str):
        return [value]
    return [str(x) for x in value] if isinstance(value, list) else []


def inspect_script(ref: str, timeout: int = RUN_TIMEOUT_S, run_image: bool = True) -> str:
    """The shell the head runs: inspect, then the cached versions or a one-shot run that fills the cache
    (run_image False: the cache only, so `check` stays as quick as a probe)."""
    q = shlex.quote(ref)
    run = (
        f"timeout {int(timeout)} docker run --rm --network none --entrypoint python3 {q} -c {shlex.quote(_VERSIONS_PY)}"
    )
    return "\n".join(
        [
            f"id=$(docker image inspect --format '{{{{.Id}}}}' {q} 2>&1) || {{ echo '{_MARK}absent'; "
            f"printf '%s\\n' \"$id\" | head -n 3; exit 0; }}",
            f"echo '{_MARK}inspect'",
            f"docker image inspect --format '{{{{json .Config}}}}' {q}",
            "printf '%s\\n' \"$id\"",
            f'd={CACHE_DIR}; f="$d/$(printf %s "$id" | tr -c \'A-Za-z0-9\' _).json"',
            'if [ -s "$f" ]; then echo \'' + _MARK + 'cached\'; cat "$f"; exit 0; fi',
            "" if run_image else f"echo '{_MARK}uncached'; exit 0",
            f"out=$({run} 2>&1); rc=$?",
            "line=$(printf '%s\\n' \"$out\" | grep '^{' | tail -n 1)",
            'if [ $rc -eq 0 ] && [ -n "$line" ]; then',
            '  mkdir -p "$d" && printf \'%s\\n\' "$line" > "$f.tmp.$$" && mv -f "$f.tmp.$$" "$f"',
            f"  echo '{_MARK}ran'; printf '%s\\n' \"$line\"",
            "else",
            f"  echo \"{_MARK}failed $rc\"; printf '%s\\n' \"$out\" | grep -v '^{{' | tail -n 3",
            "fi",
        ]
    )


def parse_inspection(ref: str, node: str, out: str, timeout: int = RUN_TIMEOUT_S) -> ImageInfo:
    """Read what inspect_script printed; anything unreadable becomes `problem`, never an exception."""
    info = ImageInfo(ref=ref, node=node)
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in out.splitlines():
        if line.startswith(_MARK):
            word = line[len(_MARK) :].strip()
            key, _, rest = word.partition(" ")
            current = sections.setdefault(key, [rest] if rest else [])
        elif current is not None:
            current.append(line)
    if "absent" in sections or not sections:
        detail = " ".join(s.strip() for s in sections.get("absent", []) if s.strip())[:200]
        if not sections:
            info.problem = f"could not inspect {ref} on {node}: {out.strip()[:200] or 'no answer'}"
        elif "no such" in detail.lower() or not detail:
            info.problem = f"image {ref} is not on {node}"
        else:  # docker itself answered something else: permission, daemon down
            info.problem = f"could not inspect {ref} on {node}: {detail}"
        return info
    lines = sections.get("inspect", [])
    try:
        config = json.loads(lines[0]) if lines else None
    except ValueError:
        config = None
    if not isinstance(config, dict):
        info.problem = f"docker image inspect {ref} on {node} gave no readable config"
        return info
    info.entrypoint = _strings(config.get("Entrypoint"))
    info.cmd = _strings(config.get("Cmd"))
    labels = config.get("Labels")
    info.labels = {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {}
    id_line = next((ln for ln in lines[1:] if ln.startswith("sha256:")), None)
    info.id = id_line.strip() if id_line else None
    for key in ("cached", "ran"):
        if key in sections:
            info.cached = key == "cached"
            body = next((ln for ln in sections[key] if ln.strip().startswith("{")), "")
            where = (
                f"{node}:~/.cache/sparktui/images/{(info.id or '?').replace(':', '_')}.json"
                if key == "cached"
                else f"the engine versions python3 printed in {ref} on {node}"
            )
            try:
                info.versions = read_versions(body, where)
            except statefile.StateFileError as e:
                info.problem = e.line()
            return info
    if "uncached" in sections:
        info.problem = f"what {ref} holds is not read yet on {node} (`sparktui plan` reads it once per image)"
        info.unread = True
        return info
    failed = sections.get("failed", [])
    rc = failed[0].strip() if failed else "?"
    detail = " ".join(s.strip() for s in failed[1:] if s.strip())[:300]
    if rc == "124":
        info.problem = f"reading the engine version in {ref} took over {timeout} s on {node}"
    else:
        info.problem = (
            f"the engine version in {ref} could not be read on {node} (python3 -c in the image "
            f"exited {rc}" + (f": {detail}" if detail else "") + ")"
        )
    return info


async def inspect_image(node, ref: str, timeout: int = RUN_TIMEOUT_S, run_image: bool = True) -> ImageInfo:
    """Inspect `ref` on `node` (an ssh.Node): one command, bounded; failures come back as `problem`."""
    name = getattr(node, "name", "")
    try:
        r = await node.run(inspect_script(ref, timeout, run_image), timeout=timeout + 30)
    except Exception as e:  # noqa: BLE001 - a lost link: the plan goes on without the image's facts
        return ImageInfo(ref=ref, node=name, problem=f"could not inspect {ref} on {name}: {e}")
    return parse_inspection(ref, name, r.stdout or "", timeout)


def holds(info: ImageInfo) -> str:
    """What an image holds, in words: engine releases, Ray, torch and its CUDA, a pip NCCL."""
    if info.problem:
        return info.problem
    if not info.versions:
        return "versions not read"
    words = [f"{e.label} {info.version(e.package)}" for e in ENGINES.values() if info.version(e.package)]
    words.append(
        f"Ray {info.version('ray')}" if info.version("ray") else "no Ray" if info.has("ray") is False else "Ray ?"
    )
    torch = info.version("torch")
    if torch:
        cuda = torch.split("+cu", 1)[1] if "+cu" in torch else ""
        words.append(
            f"torch {torch.split('+')[0]}"
            + (f" (CUDA {cuda[:-1]}.{cuda[-1]})" if cuda.isdigit() and len(cuda) > 1 else "")
        )
    elif info.has("torch") is False:
        words.append("no torch")
    nccl = info.version("nvidia-nccl-cu13") or info.version("nvidia-nccl-cu12")
    if nccl:
        words.append(f"NCCL {nccl} (pip)")
    known = recognise(info.ref)
    if known is not None:  # what the name adds: the build it comes from, and its date
        words.append(f"{known.family.what}" + (f", built {known.built}" if known.built else ""))
    return ", ".join(words)


def info_for(facts: dict, node: str | None, ref: str) -> ImageInfo | None:
    """The inspection of `ref` on `node` kept in its facts, if one was made."""
    f = facts.get(node) if node else None
    return f.images.get(ref) if f is not None else None


async def inspect_for_plan(cluster, config, facts: dict, opts) -> ImageInfo | None:
    """Inspect the image a plan with these options would run, on its head, and keep it in the head's facts.

    Runs before planning (make_plan reads the facts and never a node); None when there is nothing to ask.
    """
    head = (opts.nodes or [config.head.name])[0]
    ref = opts.image or config.image_for(opts.engine)
    node = cluster.nodes.get(head)
    f = facts.get(head)
    if not ref or node is None or f is None or not f.reachable:
        return None
    info = await inspect_image(node, ref)
    f.images[ref] = info
    return info


async def inspect_configured(cluster, config, facts: dict, known: dict[str, ImageInfo]) -> bool:
    """Keep the inspection of each engine's configured image in the head's facts (what the launch form
    shows); `known` carries them between inventories, so an image is asked about again only when its
    ID on the head changed. True when something new was learnt."""
    head = config.head.name
    f, node = facts.get(head), cluster.nodes.get(head)
    if f is None or node is None or not f.reachable:
        return False
    new = False
    for ref in config.used_images().values():
        have = known.get(ref)
        now = f.docker.images.get(ref)
        if have is None or (now and have.id != now) or (not now and have.id):
            have = known[ref] = await inspect_image(node, ref)
            new = True
        f.images[ref] = have
    return new


@dataclass
class Release:
    """The engine release a plan is written for, where it came from, and what that release refuses."""

    version: str | None
    note: str
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def default_mode(engine: str, modes: tuple[str, ...], info: ImageInfo | None, given: str | None) -> tuple[str, str]:
    """(mode, why) when none was asked for: the engine's first, unless the image says otherwise (Engine.pick_mode)."""
    if engine not in ENGINES:
        return modes[0], ""
    return get_engine(engine).pick_mode(info, given)


_NO_PYTHON = ("exited 127", "executable file not found")  # docker run's words when the image has no python3


def _engine_absent(info: ImageInfo, package: str) -> str | None:
    """Why the image plainly lacks the engine (python3 ran and found no package, or there is no python3);
    None when the image may hold it and only the reading failed (a timeout, a busy daemon)."""
    if info.has(package) is False:
        return f"python3 in it finds no {package} package"
    if info.problem and info.id and any(w in info.problem for w in _NO_PYTHON):
        return "no python3 in it"
    return None


def engine_release(engine: str, mode: str, image: str, info: ImageInfo | None, given: str | None) -> Release:
    """Given (PlanOptions.engine_version) wins; else what the head's inspection found; unknown is planned
    as the newest release, and said so."""
    word = label(engine)
    eng = ENGINES.get(engine)
    package = eng.package if eng else engine
    r = Release(given, "")
    if given:
        r.note = f"{word} {given} (given)"
    elif info is not None and info.version(package):
        r.version = info.version(package)
        # the same words whether read now or from the node's cache: the plan must not depend on which
        r.note = f"{word} {r.version} in {image} on {info.node}"
    elif info is not None and (absent := _engine_absent(info, package)):
        r.note = f"{word} not found in {image}"
        r.errors.append(
            f"{image} has no {word} ({absent}): its release could not be read and the engine cannot start; "
            f"set images.{engine} to an image of {word} (or pass --image)"
        )
    elif info is not None and info.problem:
        r.note = f"{word} version unknown ({info.problem}): planned for the newest release"
    else:
        r.note = f"{word} version not read: planned for the newest release"
    known = recognise(image)
    if not r.version and known is not None and known.engine == engine:  # the name still says which build
        r.note += f" ({known.repo or image}: {known.family.what}" + (f", built {known.built})" if known.built else ")")
    if eng is not None:
        r.errors += eng.refusals(mode, image, info, r.version)
    return r
