"""Will this image serve this model? Asked of the image itself, on the head, before any copy or launch.

One round trip to the head: the model's config.json is hashed there, the image's ID read, and a cached
answer for that (image ID, config hash, engine) returned from ~/.cache/sparktui/support/ (written to a
temporary file and renamed, as core/plan/image.py caches the engine release). Without one, a one-shot
container (`--entrypoint python3`, no network, the model directory mounted read-only at its own path,
bounded by `timeout`) runs PROBE: it reads config.json (model_type, architectures,
quantization_config.quant_method), asks the image's transformers (AutoConfig.from_pretrained on the
directory, offline) and the engine's own registries (how, per engine: its Engine's support_probe in core/engines/).
The probe only reports; classify() here turns the report into supported / fallback / unsupported /
unknown, with the versions involved and the fix. Anything that cannot be asked or read is "unknown"
with the reason, never "supported".
"""

from __future__ import annotations

import shlex
from dataclasses import asdict, dataclass, field

from ..state import statefile
from ..engines import ENGINES, label as _label

RUN_TIMEOUT_S = 180  # importing vLLM's registry takes ~20 s on a CPU; a cold image start some more
CACHE_DIR = "$HOME/.cache/sparktui/support"
CACHE_FIX = "remove it: the next check asks the image again"
_MARK = "@@sparktui-support "
_JSON = "@@sparktui-support-json "
# How a model type got past transformers before the image had it: Qwen3.5 (qwen3_5_moe) needed transformers
# 5.x, which the stock SGLang image for the Spark (lmsysorg/sglang:spark, transformers 4.57.1) lacked.
TRANSFORMERS_FIX = (
    "build an image from {image} with a newer transformers (`pip install -U transformers` in a "
    "Dockerfile FROM it), as images for Qwen3.5 needed transformers 5"
)

# Run inside the image after the engine's support_probe (registry_archs, quant_methods, config_types, and
# optionally lookup_archs(cfg): the names the engine looks up for this config, where it looks up fewer or
# other names than config.json's architectures): argv = model directory, the engine's Python package.
# Prints one marked JSON line; never asks the network.
_PROBE_MAIN = r"""
import json, os, sys
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
path, package = sys.argv[1], sys.argv[2]
out = {}

def emit():
    print("@@sparktui-support-json " + json.dumps(out, sort_keys=True), flush=True)
    sys.exit(0)

def short(e):
    return " ".join((type(e).__name__ + ": " + str(e)).split())[:300]

try:
    with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
except FileNotFoundError:
    out["config_error"] = "the model directory has no config.json"
    emit()
except Exception as e:
    out["config_error"] = "config.json does not parse (" + short(e) + ")"
    emit()
if not isinstance(cfg, dict):
    out["config_error"] = "config.json holds no JSON object"
    emit()
mt, archs, q = cfg.get("model_type"), cfg.get("architectures"), cfg.get("quantization_config")
out["model_type"] = mt if isinstance(mt, str) else None
out["architectures"] = [a for a in archs if isinstance(a, str)] if isinstance(archs, list) else []
qm = q.get("quant_method") if isinstance(q, dict) else None
out["quant_method"] = qm if isinstance(qm, str) else None

def version(p):
    import importlib, importlib.metadata as m
    try:
        return m.version(p)
    except Exception:
        try:
            return str(getattr(importlib.import_module(p), "__version__", None) or "unknown")
        except Exception:
            return None

out["engine_version"] = version(package)
out["transformers"] = version("transformers")
try:
    from transformers import AutoConfig
    AutoConfig.from_pretrained(path, trust_remote_code="auto_map" in cfg)
    out["autoconfig_error"] = None
except Exception as e:
    out["autoconfig_error"] = short(e)
try:
    have = registry_archs()
    asked = lookup_archs(cfg) if "lookup_archs" in globals() else out["architectures"]
    out["archs_known"] = {a: a in have for a in asked}
except Exception as e:
    out["registry_error"] = short(e)
try:  # vLLM's Transformers fallback needs the class in transformers, or the checkpoint's own code (auto_map)
    import transformers
    amap = cfg.get("auto_map")
    out["archs_in_transformers"] = {a: hasattr(transformers, a) for a in out["architectures"]}
    out["auto_map_model"] = isinstance(amap, dict) and any(str(k).startswith("AutoModel") for k in amap)
except Exception as e:
    out["transformers_error"] = short(e)
if out["quant_method"]:
    try:
        out["quant_known"] = out["quant_method"] in quant_methods()
    except Exception as e:
        out["quant_error"] = short(e)
if out["autoconfig_error"] is not None and out["model_type"]:
    try:
        out["config_type_known"] = out["model_type"] in config_types()
    except Exception as e:
        out["config_type_error"] = short(e)
emit()
"""


def probe_program(engine: str) -> str:
    """The program the image's python3 runs for this engine: its registry questions, then the common part."""
    return ENGINES[engine].support_probe + _PROBE_MAIN


@dataclass
class Support:
    """Whether `image` loads the model at `model_path` for `engine`, as the image answered on `node`."""

    engine: str
    image: str
    model_path: str
    node: str = ""
    status: str = "unknown"  # supported | fallback (Transformers backend only) | unsupported | unknown
    reason: str = ""  # why not supported, or why it could not be checked
    fix: str | None = None
    model_type: str | None = None
    architectures: list[str] = field(default_factory=list)
    quant_method: str | None = None
    engine_version: str | None = None
    transformers: str | None = None
    image_id: str | None = None
    config_hash: str | None = None
    cached: bool = False  # the answer came from the node's cache (no container ran)
    no_model: bool = False  # the node lacks the model directory or its config.json (another node may hold it)

    @property
    def refuses(self) -> bool:
        return self.status == "unsupported"

    def what(self) -> str:
        """The model in words: 'qwen3_moe (Qwen3MoeForCausalLM, fp8)'."""
        inner = ", ".join([*self.architectures[:2], *([self.quant_method] if self.quant_method else [])])
        return f"{self.model_type or 'model'}" + (f" ({inner})" if inner else "")

    def versions(self) -> str:
        word = _label(self.engine)
        return f"{word} {self.engine_version or '?'}, transformers {self.transformers or 'absent'}"

    def line(self) -> str:
        """One line for every front: the verdict, the model, the image release and (when not supported) why."""
        if self.status == "supported":
            return f"{self.image} loads {self.what()} ({self.versions()})"
        if self.status == "fallback":
            return f"{self.image} may load {self.what()} only through the Transformers backend: {self.reason}"
        if self.status == "unsupported":
            return f"{self.image} cannot load {self.what()}: {self.reason}"
        return f"could not check whether {self.image} loads the model: {self.reason}"

    def to_json(self) -> dict:
        return asdict(self)


def support_script(engine: str, image: str, model_path: str, timeout: int = RUN_TIMEOUT_S) -> str:
    """The shell the head runs: hash config.json, read the image ID, then the cached answer or the probe."""
    q, m = shlex.quote(image), shlex.quote(model_path.rstrip("/") or "/")
    prog = shlex.quote(probe_program(engine))
    run = (
        f"timeout {int(timeout)} docker run --rm --network none -v {m}:{m}:ro --entrypoint python3 {q} "
        f"-c {prog} {m} {shlex.quote(ENGINES[engine].package)}"
    )
    return "\n".join(
        [
            f"[ -d {m} ] || {{ echo '{_MARK}nodir'; exit 0; }}",
            f"[ -f {m}/config.json ] || {{ echo '{_MARK}noconfig'; exit 0; }}",
            f"id=$(docker image inspect --format '{{{{.Id}}}}' {q} 2>&1) || {{ echo '{_MARK}absent'; "
            f"printf '%s\\n' \"$id\" | head -n 3; exit 0; }}",
            f"h=$(sha256sum < {m}/config.json | cut -c1-16)",
            f'echo "{_MARK}key $id $h"',
            f'd={CACHE_DIR}; f="$d/$(printf %s "$id" | tr -c \'A-Za-z0-9\' _)-$h-{engine}.json"',
            'if [ -s "$f" ]; then echo \'' + _MARK + 'cached\'; cat "$f"; exit 0; fi',
            f"out=$({run} 2>&1); rc=$?",
            f"line=$(printf '%s\\n' \"$out\" | grep '^{_JSON}' | tail -n 1)",
            'if [ $rc -eq 0 ] && [ -n "$line" ]; then',
            '  mkdir -p "$d" && printf \'%s\\n\' "$line" > "$f.tmp.$$" && mv -f "$f.tmp.$$" "$f"',
            f"  echo '{_MARK}ran'; printf '%s\\n' \"$line\"",
            "else",
            f"  echo \"{_MARK}failed $rc\"; printf '%s\\n' \"$out\" | grep -v '^{_JSON}' | tail -n 3",
            "fi",
        ]
    )


def _sections(out: str) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in out.splitlines():
        if line.startswith(_MARK):
            key, _, rest = line[len(_MARK) :].strip().partition(" ")
            current = sections.setdefault(key, [rest] if rest else [])
        elif current is not None:
            current.append(line)
    return sections


def parse_support(
    engine: str, image: str, model_path: str, node: str, out: str, timeout: int = RUN_TIMEOUT_S
) -> Support:
    """Read what support_script printed; anything unreadable is 'unknown' with the reason, never an exception."""
    s = Support(engine=engine, image=image, model_path=model_path, node=node)
    sec = _sections(out)
    if "nodir" in sec:
        s.reason, s.no_model = f"{model_path} is not a directory on {node}", True
        return s
    if "noconfig" in sec:
        s.reason, s.no_model = f"{model_path} on {node} has no config.json", True
        return s
    if "absent" in sec or not sec:
        detail = " ".join(x.strip() for x in sec.get("absent", []) if x.strip())[:200]
        s.reason = (
            f"no answer from {node}: {out.strip()[:200] or 'empty output'}"
            if not sec
            else f"image {image} is not on {node}"
            if "no such" in detail.lower() or not detail
            else f"docker image inspect {image} on {node}: {detail}"
        )
        return s
    key = (sec.get("key") or [""])[0].split()
    s.image_id, s.config_hash = (key + [None, None])[:2]
    for kind in ("cached", "ran"):
        if kind in sec:
            s.cached = kind == "cached"
            body = next((x.strip() for x in sec[kind] if x.strip().startswith(_JSON)), "")
            where = (
                f"{node}:~/.cache/sparktui/support/ (image {s.image_id}, config {s.config_hash})"
                if s.cached
                else f"what python3 in {image} answered on {node}"
            )
            try:
                raw = statefile.parse_json(body[len(_JSON) :], where, CACHE_FIX if s.cached else "")
                if not isinstance(raw, dict):
                    raise statefile.StateFileError(where, "holds no JSON object", CACHE_FIX if s.cached else "")
            except statefile.StateFileError as e:
                s.reason = e.line()
                return s
            return classify(s, raw)
    failed = sec.get("failed", [])
    rc = failed[0].strip() if failed else "?"
    detail = " ".join(x.strip() for x in failed[1:] if x.strip())[:300]
    if rc == "124":
        s.reason = f"asking {image} took over {timeout} s on {node}"
    elif rc in ("126", "127") or "executable file not found" in detail:
        s.reason = f"{image} has no python3 to ask (docker run exited {rc}" + (f": {detail}" if detail else "") + ")"
    else:
        s.reason = f"python3 in {image} exited {rc} on {node}" + (f": {detail}" if detail else "")
    return s


def _strs(v: object) -> list[str]:
    return [x for x in v if isinstance(x, str)] if isinstance(v, list) else []


def _str(v: object) -> str | None:
    return v if isinstance(v, str) else None


def classify(s: Support, raw: dict) -> Support:
    """The verdict from the probe's report (raw), with the versions involved and the way out."""
    word = _label(s.engine)
    if _str(raw.get("config_error")):
        s.reason = f"{raw['config_error']} ({s.model_path} on {s.node})"
        return s
    s.model_type, s.architectures = _str(raw.get("model_type")), _strs(raw.get("architectures"))
    s.quant_method, s.engine_version = _str(raw.get("quant_method")), _str(raw.get("engine_version"))
    s.transformers = _str(raw.get("transformers"))
    release = f"{word} {s.engine_version or '(version unknown)'} in {s.image}"
    newer = getattr(ENGINES.get(s.engine), "support_newer_image", None)
    if not s.engine_version:
        s.reason = f"{s.image} has no {s.engine} Python package that python3 in it finds"
        return s
    if not s.architectures:
        s.reason = "config.json names no architectures"
        return s
    ac_err = raw.get("autoconfig_error") if "autoconfig_error" in raw else "not asked"
    known_type = raw.get("config_type_known")
    config_ok = (
        True
        if ac_err is None
        else True
        if known_type is True
        else False
        if known_type is False and s.transformers
        else None
    )
    archs = raw.get("archs_known")
    if not isinstance(archs, dict) or not archs:
        why = raw.get("registry_error") or "no answer"
        s.reason = f"{word}'s model registry in {s.image} could not be read ({why})"
        return s
    arch_list = " / ".join(s.architectures)
    newer_fix = f"an image whose {word} lists {s.architectures[0]}" + (f", e.g. {newer}" if newer else "")
    if not any(v is True for v in archs.values()):
        in_tf = raw.get("archs_in_transformers")
        # answered: no class of that name in transformers and no code of its own (an older answer did not say)
        no_class = (
            isinstance(in_tf, dict) and not any(v is True for v in in_tf.values()) and not raw.get("auto_map_model")
        )
        falls_back = getattr(ENGINES.get(s.engine), "transformers_fallback", True)
        if config_ok and not no_class and falls_back:
            s.status = "fallback"
            s.reason = (
                f"{arch_list} is not in the model registry of {release} ({word} would fall back to its "
                f"Transformers backend, slower, and only if the model supports it)"
            )
            s.fix = newer_fix
            return s
        s.status = "unsupported"
        s.reason = f"{release} has no {arch_list} in its model registry"
        if no_class and config_ok and falls_back:
            s.reason += f", nor has transformers {s.transformers} such a class for its Transformers backend"
            s.fix = f"{newer_fix}, or correct `architectures` in config.json if it is misspelt"
            return s
        if config_ok is False:
            s.reason += f", and transformers {s.transformers} there does not know model type {s.model_type!r}"
        s.fix = newer_fix
        return s
    if config_ok is False:
        s.status = "unsupported"
        s.reason = (
            f"transformers {s.transformers} in {s.image} does not know model type {s.model_type!r} "
            f"(nor does {word} {s.engine_version}'s own config registry): {ac_err}"
        )
        s.fix = TRANSFORMERS_FIX.format(image=s.image) + (f", or {newer}" if newer else "")
        return s
    if config_ok is None:
        why = raw.get("config_type_error") or ("transformers is absent" if not s.transformers else "")
        s.reason = (
            f"transformers {s.transformers or '(absent)'} in {s.image} could not read config.json "
            f"({ac_err}) and {word}'s own config registry could not be asked ({why or 'no answer'})"
        )
        return s
    if s.quant_method:
        if raw.get("quant_known") is False:
            s.status = "unsupported"
            s.reason = f"{release} has no quantization method {s.quant_method!r}"
            s.fix = f"an image whose {word} knows {s.quant_method}" + (f", e.g. {newer}" if newer else "")
            return s
        if raw.get("quant_known") is not True:
            s.reason = (
                f"{word}'s quantization methods in {s.image} could not be read "
                f"({raw.get('quant_error') or 'no answer'})"
            )
            return s
    s.status, s.reason = "supported", ""
    return s


async def check_support(node, engine: str, image: str, model_path: str, timeout: int = RUN_TIMEOUT_S) -> Support:
    """Ask `image` on `node` (an ssh.Node) whether it loads the model; one bounded command, never raises."""
    name = getattr(node, "name", "")
    if engine not in ENGINES or not ENGINES[engine].support_probe:
        return Support(
            engine=engine,
            image=image,
            model_path=model_path,
            node=name,
            reason=f"sparktui does not know how to ask {engine}'s model registry",
        )
    try:
        r = await node.run(support_script(engine, image, model_path, timeout), timeout=timeout + 30)
    except Exception as e:  # noqa: BLE001 - a lost link: "could not check", and the caller goes on
        return Support(
            engine=engine, image=image, model_path=model_path, node=name, reason=f"could not ask {name}: {e}"
        )
    return parse_support(engine, image, model_path, name, r.stdout or "", timeout)


async def support_for(
    cluster, config, engine: str, image: str | None = None, model_path: str | None = None, head: str | None = None
) -> Support | None:
    """The check for this engine's image (default: the config's) and model, on the head, or on the model's
    source node when the head does not hold the model yet (before a sync); None without such a node."""
    ref = image or config.image_for(engine)
    names = list(dict.fromkeys(n for n in (head or config.head.name, config.model.source) if n))
    nodes = [cluster.nodes[n] for n in names if n in getattr(cluster, "nodes", {})]
    if not ref or not nodes:
        return None
    s = None
    for node in nodes:
        s = await check_support(node, engine, ref, model_path or config.model.path)
        if not s.no_model:
            break
    return s


async def support_of_config(cluster, config) -> dict[str, Support]:
    """The check for each engine's configured image, at once (what `check` and `sync model` show)."""
    import asyncio

    engines = list(config.used_images())  # the engines the config names, each with its image
    got = await asyncio.gather(*(support_for(cluster, config, e) for e in engines))
    return {e: s for e, s in zip(engines, got) if s is not None}


def before_copy(found: dict[str, Support]) -> tuple[list[str], list[str]]:
    """(refusals, warnings) to tell before the model is copied, from support_of_config: each configured image
    that cannot load it (the copy is for nothing with that engine), then each that may not."""
    refusals, warnings = [], []
    for engine, s in found.items():
        if s.status == "supported":
            continue
        words = s.line() + (f"; fix: {s.fix}" if s.fix else "")
        if s.refuses:
            refusals.append(f"{words}. Copying the model is for nothing with {engine} until then")
        else:
            warnings.append(words)
    return refusals, warnings


def from_json(d: dict) -> Support:
    """A Support kept as JSON (in the facts, in check --json); unknown keys are left out."""
    return Support(**{k: v for k, v in d.items() if k in Support.__dataclass_fields__})


def support_of_info(info) -> Support | None:
    """The answer kept with an image's inspection (ImageInfo.support), if any."""
    d = getattr(info, "support", None)
    if not isinstance(d, dict):
        return None
    try:
        return from_json(d)
    except TypeError:  # a required field missing: as if never asked
        return None


async def support_configured(cluster, config, facts: dict) -> bool:
    """Keep, with each configured image's inspection in the head's facts (core/plan/image.inspect_configured), whether
    it loads the config's model: what the launch form shows under the image. An inspection that already holds
    an answer is not asked again (a new image ID brings a new inspection). True when something was learnt."""
    f = facts.get(config.head.name)
    if f is None or not f.reachable:
        return False
    new = False
    for engine, ref in config.used_images().items():
        info = f.images.get(ref)
        if info is None or info.support is not None:
            continue
        s = await support_for(cluster, config, engine)
        if s is not None:
            info.support, new = s.to_json(), True
    return new


def line_of(d: dict) -> str:
    """The line of a Support kept as JSON (check --json's), with its fix."""
    s = from_json(d)
    return s.line() + (f"; fix: {s.fix}" if s.fix and s.status != "supported" else "")


def plan_checks(s: Support | None, engine: str, image: str) -> tuple[list[str], list[str]]:
    """(errors, warnings) a plan takes from the check, when it was made for this engine and image."""
    if s is None or s.engine != engine or s.image != image:
        return [], []
    if s.refuses:
        return [s.line() + (f"; fix: {s.fix}" if s.fix else "")], []
    if s.status == "supported":
        return [], []
    return [], [s.line() + (f"; fix: {s.fix}" if s.fix else "")]
