"""Two DGX Sparks as their probes saw them: real command output from tests/unit/samples/probes,
parsed by the real probe parser, plus a config that names them."""

from __future__ import annotations

from pathlib import Path

from sparktui.core.config.config import Config, EngineDefaults
from sparktui.core.nodes.facts import NodeFacts
from sparktui.core.nodes.probes import parse_probe

from tests.configs import make_config

PROBES = Path(__file__).resolve().parents[1] / "unit" / "samples" / "probes"
MODEL = "/models/Qwen3.5-122B-A10B-FP8"
CHECKPOINT_BYTES = 126_700_000_000  # ~118 GiB
HOSTS = {"spark1": "192.168.1.101", "spark2": "192.168.1.102"}


def _section(name: str, out: str, rc: int = 0) -> str:
    return f"@@sparktui:out {name}@@\n{out}\n@@sparktui:err {name}@@\n\n@@sparktui:rc {name} {rc}@@\n"


def probe_text(node: str, model_bytes: int | None = CHECKPOINT_BYTES) -> str:
    read = lambda f: (PROBES / f).read_text().rstrip("\n")
    parts = [
        _section("nvidia-smi", read("nvidia-smi-gb10.csv")),
        _section("meminfo", read("meminfo-spark.txt")),
        _section("df", read("df-spark.txt")),
        _section("model", f"path {MODEL}\n" + ("dir" if model_bytes else "missing")),
    ]
    if model_bytes:
        parts += [_section("du", f"{model_bytes}\t{MODEL}"), _section("files", "57")]
    parts += [
        _section("docker-version", "28.3.3"),
        _section("docker-images", read("docker-images.jsonl")),
        _section("docker-ids", read("docker-image-ids.txt")),
        _section("docker-ps", ""),
        _section("ip", read(f"ip-addr-{node}.json")),
        _section("ibdev2netdev", read("ibdev2netdev-spark.txt")),
        _section("ib-sys", read("ib-sys-spark.txt")),
        _section("infiniband", ""),
        _section("speed", read("speed-spark.txt")),
    ]
    return "".join(parts) + "@@sparktui:done@@\n"


def spark_facts(model_on_spark2: bool = True) -> dict[str, NodeFacts]:
    return {
        "spark1": parse_probe("spark1", HOSTS["spark1"], probe_text("spark1")),
        "spark2": parse_probe(
            "spark2", HOSTS["spark2"], probe_text("spark2", CHECKPOINT_BYTES if model_on_spark2 else None)
        ),
    }


def spark_config(keymap: dict[str, str] | None = None, theme: str | None = None) -> Config:
    return make_config(
        2,
        hosts=HOSTS,
        user=None,
        model_name="Qwen3.5-122B-A10B-FP8",
        engine=EngineDefaults(hang_after=90.0),
        keymap=keymap,
        theme=theme,
    )
