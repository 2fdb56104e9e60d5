"""Reading an image's inspection (entrypoint, labels, ID, engine versions) and what a plan makes of it."""

from __future__ import annotations

import json

from sparktui.core.plan.image import ImageInfo, engine_release, inspect_script, parse_inspection

M = "@@sparktui-image "
CONFIG = {"Entrypoint": ["vllm", "serve"], "Cmd": None, "Labels": {"org.opencontainers.image.source": "x"}}
ID = "sha256:" + "ab" * 32


def out(tail: str) -> str:
    return f"{M}inspect\n{json.dumps(CONFIG)}\n{ID}\n{tail}"


def test_a_fresh_run_gives_entrypoint_labels_id_and_versions():
    info = parse_inspection(
        "vllm/vllm-openai:v0.33.0", "spark1", out(f'{M}ran\n{{"vllm": "0.33.0", "sglang": null, "ray": "2.60.0"}}\n')
    )
    assert info.entrypoint == ["vllm", "serve"] and info.cmd == [] and info.id == ID
    assert info.labels == {"org.opencontainers.image.source": "x"}
    assert info.version("vllm") == "0.33.0" and info.has("ray") and info.has("sglang") is False
    assert not info.cached and info.problem is None


def test_cached_versions_are_marked_cached():
    info = parse_inspection(
        "i", "spark1", out(f'{M}cached\n{{"vllm": "0.11.0+nv25.11", "sglang": null, "ray": null}}\n')
    )
    assert info.cached and info.version("vllm") == "0.11.0+nv25.11" and info.has("ray") is False


def test_a_missing_image_is_a_problem_not_an_exception():
    info = parse_inspection("nope:1", "spark2", f"{M}absent\nError: No such image: nope:1\n")
    assert info.id is None and info.problem == "image nope:1 is not on spark2"
    denied = parse_inspection(
        "i", "spark2", f"{M}absent\npermission denied while trying to connect to the docker API\n"
    )
    assert (
        denied.problem == "could not inspect i on spark2: permission denied while trying to connect to the docker API"
    )


def test_a_slow_version_run_names_its_bound_and_a_failed_one_its_error():
    slow = parse_inspection("i", "spark1", out(f"{M}failed 124\n"), timeout=60)
    assert slow.problem == "reading the engine version in i took over 60 s on spark1"
    assert slow.entrypoint == ["vllm", "serve"] and slow.versions == {}
    broken = parse_inspection(
        "i", "spark1", out(f'{M}failed 127\ndocker: exec: "python3": executable file not found\n')
    )
    assert "exited 127" in broken.problem and "python3" in broken.problem
    assert broken.has("vllm") is None  # unknown, not absent


def test_garbage_is_a_problem():
    assert parse_inspection("i", "n", "").problem.startswith("could not inspect i on n")
    assert "no readable config" in parse_inspection("i", "n", f"{M}inspect\nnot json\n").problem
    assert "unreadable" in parse_inspection("i", "n", out(f"{M}cached\n{{broken\n")).problem


def test_the_script_quotes_the_image_and_bounds_the_run():
    s = inspect_script("evil; rm -rf /:tag", timeout=42)
    assert "'evil; rm -rf /:tag'" in s and "timeout 42 docker run --rm --network none --entrypoint python3" in s
    assert 'mv -f "$f.tmp.$$" "$f"' in s  # the cache file appears whole or not at all


def info(**versions) -> ImageInfo:
    return ImageInfo(ref="img", node="spark1", id=ID, versions=versions)


def test_native_vllm_on_0_11_is_refused_naming_the_version():
    r = engine_release("vllm", "native", "img", info(vllm="0.11.0", sglang=None, ray="2.49.0"), None)
    assert r.version == "0.11.0" and r.note == "vLLM 0.11.0 in img on spark1"
    assert len(r.errors) == 1 and "vLLM 0.11.0" in r.errors[0] and "--mode ray" in r.errors[0]
    assert not engine_release("vllm", "native", "img", info(vllm="0.11.1", sglang=None, ray=None), None).errors


def test_ray_mode_needs_ray_in_the_image():
    r = engine_release("vllm", "ray", "img", info(vllm="0.33.0", sglang=None, ray=None), None)
    assert len(r.errors) == 1 and "pip install 'ray[default]'" in r.errors[0]
    assert not engine_release("vllm", "ray", "img", info(vllm="0.33.0", sglang=None, ray="2.60.0"), None).errors


def test_an_unknown_version_is_planned_as_the_newest_and_said_so():
    bad = ImageInfo(ref="img", node="spark1", problem="reading the engine version in img took over 60 s on spark1")
    r = engine_release("vllm", "native", "img", bad, None)
    assert r.version is None and not r.errors and "planned for the newest release" in r.note and "60 s" in r.note
    assert "not read" in engine_release("sglang", "native", "img", None, None).note


def test_a_given_version_wins_over_the_image():
    r = engine_release("vllm", "native", "img", info(vllm="0.33.0", sglang=None, ray=None), "0.10.2")
    assert r.version == "0.10.2" and r.errors and r.note == "vLLM 0.10.2 (given)"


async def test_configured_images_are_asked_about_again_only_when_their_id_changes():
    from types import SimpleNamespace

    from sparktui.core.nodes.facts import DockerInfo, NodeFacts
    from sparktui.core.plan.image import inspect_configured

    asked: list[str] = []

    class Head:
        name = "spark1"

        async def run(self, cmd, timeout=None):
            asked.append(cmd)
            return SimpleNamespace(stdout=out(f'{M}cached\n{{"vllm": "0.31.0", "sglang": null, "ray": "2.49.2"}}\n'))

    config = SimpleNamespace(head=SimpleNamespace(name="spark1"), used_images=lambda: {"sglang": "s:1", "vllm": "v:1"})
    facts = {"spark1": NodeFacts("spark1", "h", True, docker=DockerInfo(images={"s:1": ID, "v:1": ID}))}
    cluster = SimpleNamespace(nodes={"spark1": Head()})
    known: dict = {}
    assert await inspect_configured(cluster, config, facts, known) and len(asked) == 2
    assert facts["spark1"].images["v:1"].version("vllm") == "0.31.0"
    fresh = {"spark1": NodeFacts("spark1", "h", True, docker=DockerInfo(images={"s:1": ID, "v:1": ID}))}
    assert not await inspect_configured(cluster, config, fresh, known) and len(asked) == 2  # same IDs: no ask
    assert fresh["spark1"].images["v:1"].version("vllm") == "0.31.0"  # the known answer lands in new facts
    fresh["spark1"].docker.images["v:1"] = "sha256:" + "cd" * 32  # pulled again: another image
    assert await inspect_configured(cluster, config, fresh, known) and len(asked) == 3
