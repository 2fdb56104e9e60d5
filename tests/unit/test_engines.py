"""The engine protocol: every registered engine provides it, a new one plugs in through the registry alone,
pivot goes between any two through the shared vocabulary, and the config's engines: map sets image and port."""

import re
import subprocess
from pathlib import Path

import pytest

from sparktui.core import engines as registry
from sparktui.core.config.config import ConfigError, load_config_text
from sparktui.core.config.configwrite import checked_text
from sparktui.core.deploy.options import api_key_of, other_engine, pivot_notes, pivot_options
from sparktui.core.engines.base import SHAPES, TERMS, Engine
from sparktui.core.plan.plan import PlanOptions

ROOT = Path(__file__).resolve().parents[2]
BASE = "cluster: c\nnodes:\n  - {name: a, host: 127.0.0.1}\nmodel: {name: m, path: /m}\n"


@pytest.mark.parametrize("name", list(registry.ENGINES))
def test_every_registered_engine_fills_in_the_protocol(name):
    e = registry.get_engine(name)
    assert isinstance(e, Engine) and e.name == name and e.label
    assert e.modes and set(e.shapes) == set(e.modes) and set(e.shapes.values()) <= set(SHAPES)
    assert 0 < e.default_port < 65536 and e.health_paths and e.ready_line
    # an address variable, never an interface one (an MPI engine pins its sockets by interface alone)
    assert e.host_ip_env is None or (e.host_ip_env.isupper() and "IFNAME" not in e.host_ip_env)
    assert set(e.vocabulary) <= set(TERMS), set(e.vocabulary) - set(TERMS)
    assert len(set(e.vocabulary.values())) == len(e.vocabulary), "one flag per term, so a flag reads back to one term"
    assert 0 < e.fit_fraction <= 1 and e.fit_covers
    assert set(e.metric_names(None)) == set(e.metric_candidates(None))
    assert e.hang_hint() and e.pick_mode(None, None) == (e.modes[0], "")


def test_the_pivot_key_goes_to_the_other_engine_of_two_and_round_the_registry_of_more(monkeypatch):
    names = [n for n, e in registry.ENGINES.items() if e.in_pivot_cycle]
    assert [other_engine(n) for n in names] == names[1:] + names[:1]
    assert all(other_engine(n) == names[0] for n, e in registry.ENGINES.items() if not e.in_pivot_cycle)
    if len(names) == 2:
        assert other_engine(names[0]) == names[1] and other_engine(names[1]) == names[0]
    monkeypatch.setitem(registry.ENGINES, "toy", Toy())
    assert other_engine(names[-1]) == "toy" and other_engine("toy") == names[0]


class Toy(Engine):
    """A third engine as a new module would write it: its vocabulary covers only part of the shared one."""

    name, label, modes, shapes = "toy", "Toy", ("mpi",), {"mpi": "mpi"}
    default_port, default_image, package = 9100, "toy/serve:1", "toy"
    health_paths, ready_line, host_ip_env = ("/health",), "ready", "TOY_HOST_IP"
    vocabulary = {"context_length": "--max-seq-len", "api_key": "--api-key", "served_name": "--served-model-name"}
    not_carried = {"tool_call_parser": "Toy parses tool calls itself"}

    def node_env(self, ctx, spot):
        return {self.host_ip_env: spot.ip or ""}

    def steps(self, ctx):
        return []


def test_pivot_to_a_third_engine_carries_the_shared_terms_and_names_the_rest(monkeypatch):
    monkeypatch.setitem(registry.ENGINES, "toy", Toy())
    opts = PlanOptions(
        engine="vllm",
        env={"VLLM_API_KEY": "sk-env"},
        extra_args=[
            "--max-model-len",
            "4096",
            "--enforce-eager",
            "--served-model-name=q",
            "--tool-call-parser",
            "hermes",
            "--enable-auto-tool-choice",
        ],
    )
    new = pivot_options(opts, "toy")
    assert (new.engine, new.mode, new.image) == ("toy", None, None)
    assert new.extra_args == ["--max-seq-len", "4096", "--served-model-name=q", "--api-key", "sk-env"]
    notes = pivot_notes(opts, "toy")
    assert notes == [
        "not carried over to Toy (no equivalent): --enforce-eager, --tool-call-parser",
        "carried over to Toy: --max-model-len as --max-seq-len, --served-model-name, VLLM_API_KEY as --api-key",
        "--tool-call-parser: Toy parses tool calls itself",
    ]
    assert api_key_of(new) == "sk-env"
    back = pivot_options(new, "sglang")  # and on from the third engine to another
    assert back.extra_args == ["--context-length", "4096", "--served-model-name=q", "--api-key", "sk-env"]


def test_a_third_engine_gets_its_own_port_and_image_from_the_config_or_its_defaults(monkeypatch):
    monkeypatch.setitem(registry.ENGINES, "toy", Toy())
    c = load_config_text(BASE)
    assert (c.port_for("toy"), c.image_for("toy")) == (9100, "toy/serve:1")
    assert c.engine_images()["toy"] == "toy/serve:1"
    c = load_config_text(BASE + "engines:\n  toy: {image: toy/serve:2, port: 9200}\n")
    assert (c.port_for("toy"), c.image_for("toy")) == (9200, "toy/serve:2")


def test_the_engines_map_sets_image_and_port_and_the_older_keys_read_the_same():
    c = load_config_text(BASE + "engines:\n  vllm: {image: x/vllm:1, port: 9000}\n")
    assert (c.image_for("vllm"), c.port_for("vllm"), c.images.vllm, c.engine.vllm_port) == (
        "x/vllm:1",
        9000,
        "x/vllm:1",
        9000,
    )
    assert c.port_for("sglang") == 30000  # the others keep their defaults
    again = load_config_text(checked_text(c))
    assert again.engines == c.engines and again.image_for("vllm") == "x/vllm:1"


@pytest.mark.parametrize(
    "extra, where, what",
    [
        ("engines:\n  vlm: {port: 9000}\n", "vlm", "unknown engine 'vlm' (did you mean 'vllm'?)"),
        ("engines:\n  vllm: {prt: 9000}\n", "prt", "unknown key 'prt' in engines.vllm"),
        ("engines:\n  vllm: {port: 29500}\n", "29500", "engines.vllm.port 29500 is also engine.dist_port"),
        (
            "engine: {vllm_port: 9000}\nengines:\n  vllm: {port: 9001}\n",
            "9001",
            "engines.vllm.port 9001 differs from engine.vllm_port 9000",
        ),
        ("images: {sglang: a/b}\nengines:\n  sglang: {image: c/d}\n", "c/d", "engines.sglang.image c/d differs"),
        ("engines: [vllm]\n", "[vllm]", "engines is a list"),
    ],
)
def test_a_bad_engines_map_says_where_and_why(extra, where, what):
    text = BASE + extra
    with pytest.raises(ConfigError) as e:
        load_config_text(text, "c.yaml")
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if where in ln)
    assert str(e.value).startswith(f"c.yaml:{line}:") and what in str(e.value), str(e.value)


# Where an engine may be named outside its module: the registry and the engines' package, the simulator and the
# demo, and the config module (its `images:` keys and engine.<engine>_port fields are the file format).
NAMING_ALLOWED = r"sparktui/(core/engines/|sim/|demo/|core/config/config\.py$)"


def naming_pattern(names, host_ip_vars) -> str:
    """An engine named in code: a quoted name, an attribute (`.images.vllm`), a per-engine field or flag
    (`vllm_port`, `image-vllm`, `image_vllm`), or its host-IP variable."""
    n = "|".join(map(re.escape, names))
    return (
        rf"[\"']({n})[\"']|\.({n})\b|\b({n})_port\b|\bimage[-_]({n})\b|"
        rf"\b({'|'.join(map(re.escape, host_ip_vars))})\b"
    )


def test_no_file_outside_the_engines_branches_on_an_engine_name():
    """Every registered engine's name appears in code only in the allowed places (NAMING_ALLOWED)."""
    pattern = naming_pattern(registry.ENGINES, registry.host_ip_vars())
    out = subprocess.run(
        ["grep", "-rnE", pattern, "sparktui", "--include=*.py"], cwd=ROOT, capture_output=True, text=True
    ).stdout.splitlines()
    outside = [line for line in out if not re.match(NAMING_ALLOWED, line.split(":", 1)[0])]
    assert not outside, "\n".join(outside)


@pytest.mark.parametrize(
    "line",
    [
        'if engine == "vllm":',
        "ref = config.images.vllm",
        "port = cfg.engine.sglang_port",
        'p.add_argument("--image-sglang")',
        "args.image_vllm",
        'os.environ.get("VLLM_HOST_IP")',
    ],
)
def test_the_naming_guard_catches_each_form(line):
    def hits(text: str) -> bool:  # read by grep -E, as the guard reads the tree
        return (
            subprocess.run(
                ["grep", "-qE", naming_pattern(registry.ENGINES, registry.host_ip_vars())], input=text + "\n", text=True
            ).returncode
            == 0
        )

    assert hits(line) and not hits("port = config.port_for(engine)")


class MpiToy(Toy):
    """A third engine with an MPI launcher: one command on the head, its own interface variables and a refusal."""

    def interface_env(self, spot):
        return {k: v for k, v in super().interface_env(spot).items() if k != "GLOO_SOCKET_IFNAME"}

    def plan_refusals(self, ctx):
        return ["Toy reads no context length cap"] if ctx.max_model_len else []

    def steps(self, ctx):
        from sparktui.core.engines.common import docker_run, make_step

        head = ctx.head
        return [
            make_step(
                head.name,
                0,
                "run",
                docker_run(ctx, head, ["mpirun", "-np", str(len(ctx.nodes)), "toy"]),
                "start mpirun on the head",
                ctx.container(head),
            )
        ]


def test_a_third_engine_is_planned_through_its_own_hooks(monkeypatch):
    from sparktui.core.plan.plan import make_plan
    from tests.unit.test_plan import IMAGE_ID, cluster

    monkeypatch.setitem(registry.ENGINES, "toy", MpiToy())
    config, facts, subnets = cluster(2, images={"toy/serve:1": IMAGE_ID})
    plan = make_plan(config, facts, subnets, PlanOptions(engine="toy", tp=2))
    assert plan.ok, plan.errors
    assert (plan.mode, plan.image, plan.port) == ("mpi", "toy/serve:1", 9100)
    assert [s.description for s in plan.steps] == ["start mpirun on the head"]
    env = plan.nodes[1].env
    assert env["TOY_HOST_IP"] and env["NCCL_SOCKET_IFNAME"] and "GLOO_SOCKET_IFNAME" not in env
    refused = make_plan(config, facts, subnets, PlanOptions(engine="toy", tp=2, max_model_len=4096))
    assert refused.errors == ["Toy reads no context length cap"]
