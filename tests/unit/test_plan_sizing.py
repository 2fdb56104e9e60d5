"""KV cache in bytes and `--max-model-len auto`: written where the image's release has them, refused where not."""

from __future__ import annotations

import pytest

from sparktui.cli.common import CliExit
from sparktui.cli.plan import options_from_args
from sparktui.core.plan.fit import kv_bytes_arg
from sparktui.core.plan.plan import PlanOptions, make_plan

from .test_plan import cluster, flags, make_config, parse_run, plan_for
from .test_plan_cli import _args

GB20 = 20 << 30


def _serve_flags(plan) -> dict:
    return flags(parse_run(next(s for s in plan.steps if s.argv[:2] == ["docker", "run"]).argv)["cmd"][3:])


def test_the_cli_reads_auto_a_length_and_sizes_with_units():
    opts, _ = options_from_args(_args("--max-model-len", "auto", "--kv-cache-bytes", "20G"), make_config(2))
    assert (opts.max_model_len, opts.max_model_len_auto, opts.kv_cache_bytes) == (None, True, GB20)
    opts, _ = options_from_args(_args("--max-model-len", "4096", "--kv-cache-bytes", "1073741824"), make_config(2))
    assert (opts.max_model_len, opts.max_model_len_auto, opts.kv_cache_bytes) == (4096, False, 1 << 30)
    for argv in (["--max-model-len", "lots"], ["--kv-cache-bytes", "20 parsecs"]):
        with pytest.raises(SystemExit):
            _args(*argv)
    for argv in (["--max-model-len", "0"], ["--kv-cache-bytes", "0"]):
        with pytest.raises(CliExit):
            options_from_args(_args(*argv), make_config(2))


@pytest.mark.parametrize("version", ["0.14.0", "0.33.0", None])
def test_vllm_gets_both_flags_on_every_rank_where_its_release_has_them(version):
    plan, _ = plan_for(
        2, engine="vllm", mode="native", engine_version=version, max_model_len_auto=True, kv_cache_bytes=GB20
    )
    assert plan.ok, plan.errors
    for step in plan.steps:
        if step.kind == "run":
            fl = flags(parse_run(step.argv)["cmd"][3:])
            assert fl["--max-model-len"] == "auto" and fl["--kv-cache-memory-bytes"] == str(GB20)
    # the fit reads the KV size from the engine's arguments, as it does from --arg
    assert kv_bytes_arg(plan.steps[-1].argv, "--kv-cache-memory-bytes") == GB20


def test_older_vllm_releases_are_refused_naming_the_release_that_has_the_flag():
    plan, _ = plan_for(2, engine="vllm", mode="ray", engine_version="0.13.0", max_model_len_auto=True)
    assert not plan.ok and any("0.13.0" in e and "--max-model-len auto" in e and "0.14.0" in e for e in plan.errors)
    plan, _ = plan_for(2, engine="vllm", mode="ray", engine_version="0.10.1", kv_cache_bytes=GB20)
    assert not plan.ok and any("--kv-cache-memory-bytes" in e and "0.10.2" in e for e in plan.errors)
    plan, _ = plan_for(2, engine="vllm", mode="ray", engine_version="0.11.0", kv_cache_bytes=GB20)
    assert plan.ok, plan.errors


def test_auto_replaces_the_configured_length_and_conflicts_with_a_given_one():
    config, facts, subnets = cluster(2)
    config.engine.max_model_len = 8192
    plan = make_plan(config, facts, subnets, PlanOptions(engine="vllm", mode="native", max_model_len_auto=True))
    cmd = parse_run(plan.steps[-1].argv)["cmd"]
    assert cmd.count("--max-model-len") == 1 and _serve_flags(plan)["--max-model-len"] == "auto"
    plan, _ = plan_for(2, engine="vllm", mode="native", max_model_len_auto=True, max_model_len=4096)
    assert not plan.ok and any("4096" in e and "auto" in e for e in plan.errors)


def test_an_engine_without_them_refuses_rather_than_passing_a_foreign_flag():
    plan, _ = plan_for(2, engine="sglang", max_model_len_auto=True, kv_cache_bytes=GB20)
    assert not plan.ok
    assert any("SGLang" in e and "bytes" in e for e in plan.errors)
    assert any("SGLang" in e and "length" in e for e in plan.errors)


def test_refusals_name_the_release_that_has_each_flag_as_the_plan_does():
    from sparktui.core.engines import ENGINES
    from sparktui.core.plan.sizing import parse_bytes, refusals

    vllm, sglang = ENGINES["vllm"], ENGINES["sglang"]
    assert refusals(vllm, "0.14.0") == (None, None) and refusals(vllm, None) == (None, None)
    kv, auto = refusals(vllm, "0.10.1")
    assert "(it came with vLLM 0.10.2)" in kv and "(it came with vLLM 0.14.0)" in auto
    assert refusals(vllm, "0.13.9")[0] is None and "0.14.0" in refusals(vllm, "0.13.9")[1]
    assert "no flag that sizes the KV cache in bytes" in refusals(sglang, "0.5.4")[0]
    assert refusals(None, "1.0") == (None, None)
    assert parse_bytes("20GiB") == parse_bytes(" 20g ") == GB20 and parse_bytes("512M") == 512 << 20
    with pytest.raises(ValueError):
        parse_bytes("twenty")
