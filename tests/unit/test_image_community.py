"""eugr's community images known by name: family, nightly date, Ray, and the variables they read."""

from __future__ import annotations

import pytest

from sparktui.core.plan.image import ImageInfo, engine_release, holds
from sparktui.core.plan.image_community import recognise


@pytest.mark.parametrize(
    "ref, repo, tag, built, pinned",
    [
        ("eugr/spark-vllm-b12x:nightly-20260923", "eugr/spark-vllm-b12x", "nightly-20260923", "2026-09-23", False),
        ("docker.io/eugr/spark-vllm:latest", "eugr/spark-vllm", "latest", None, False),
        ("eugr/spark-vllm", "eugr/spark-vllm", "latest", None, False),
        ("eugr/spark-vllm-b12x@sha256:8e7e0621", "eugr/spark-vllm-b12x", "", None, True),
        ("vllm-node-b12x", "", "latest", None, False),  # build-and-copy.sh --exp-b12x tags the pull so
    ],
)
def test_eugr_references_are_recognised(ref, repo, tag, built, pinned):
    k = recognise(ref)
    assert k is not None and (k.repo, k.tag, k.built, k.pinned) == (repo, tag, built, pinned)
    assert k.family.ray is True  # the runner stage installs ray[default]


@pytest.mark.parametrize(
    "ref",
    [
        "lmsysorg/sglang:spark",
        "nvcr.io/nvidia/vllm:26.10-py3",
        "someone/vllm-node",
        "localhost:5000/eugr/spark-vllm:x",
        "eugr/spark-vllm-docker",
        None,
        "",
    ],
)
def test_other_images_are_not(ref):
    assert recognise(ref) is None


def test_only_the_b12x_family_reads_the_roce_all_reduce_switch():
    b12x, plain = recognise("eugr/spark-vllm-b12x:latest"), recognise("eugr/spark-vllm:latest")
    assert "VLLM_ENABLE_ROCE_ALLREDUCE" in b12x.family.env and b12x.family.tp_all_reduce
    assert "VLLM_ENABLE_ROCE_ALLREDUCE" not in plain.family.env and not plain.family.tp_all_reduce
    assert "moving tag" in b12x.words()
    assert "nightly of 2026-09-09" in recognise("eugr/spark-vllm:nightly-20260909").words()


def test_the_name_tells_the_build_where_the_release_was_not_read():
    r = engine_release("vllm", "native", "eugr/spark-vllm-b12x:nightly-20260923", None, None)
    assert r.version is None and "built 2026-09-23" in r.note and "local-inference-lab" in r.note
    info = ImageInfo(ref="eugr/spark-vllm:nightly-20260909", versions={"vllm": "0.28.1rc1.dev3", "ray": "2.50.0"})
    assert holds(info).endswith("vLLM main, tested nightly, built 2026-09-09")
    r = engine_release("vllm", "native", info.ref, info, None)
    assert r.version == "0.28.1rc1.dev3" and "built" not in r.note  # the inspection wins over the name
