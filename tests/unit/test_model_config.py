"""The model's config.json is data from the node: sizes out of range, deep nesting, wrong types and a huge
file end as one line naming the file and the field, and the plan goes on without it."""

from __future__ import annotations

import contextlib
import signal
from types import SimpleNamespace

import pytest

from sparktui.core.plan import modelconfig
from sparktui.core.deploy.operations import model_config_of
from sparktui.core.deploy.options import read_model_config
from sparktui.core.plan.fit import replicated_params
from sparktui.core.plan.plan import PlanOptions, make_plan

from tests.fakes import FakeCluster, FakeNode

from .test_plan import cluster

MOE = {"hidden_size": 64, "num_hidden_layers": 12, "num_experts": 8, "vocab_size": 1000}


@contextlib.contextmanager
def _within(seconds: int):
    """Fail instead of running on: the bug here is work proportional to a number in the file."""

    def stop(*_):
        raise TimeoutError(f"still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _plan(model_config: dict):
    config, facts, subnets = cluster(2)
    return make_plan(config, facts, subnets, PlanOptions(engine="sglang", model_config=model_config))


def test_a_huge_layer_count_is_refused_in_the_plan_and_counted_in_closed_form():
    with _within(10):
        plan = _plan({**MOE, "num_hidden_layers": 10_000_000_000})
        size, what = replicated_params({**MOE, "num_hidden_layers": 10**12}, "vllm")
    assert any("num_hidden_layers 10000000000 is out of range" in w for w in plan.warnings)
    assert "allowance" in plan.fit.replicated_what
    assert size == 2 * ((2 * 10**12 + 1) * 64 + 10**12 * 8 * 64) and what == "norms + router"


@pytest.mark.parametrize(
    "layers,first,step,dense",
    [(12, 0, 1, []), (12, 3, 2, [5, 7, 8, 99, -1]), (7, 9, 1, [0]), (30, 1, 4, [3, 3, 11, True])],
)
def test_moe_layers_counted_in_closed_form_match_one_by_one(layers, first, step, dense):
    cfg = {
        **MOE,
        "num_hidden_layers": layers,
        "first_k_dense_replace": first,
        "decoder_sparse_step": step,
        "mlp_only_layers": dense,
    }
    ints = {d for d in dense if type(d) is int}
    moe = sum(1 for i in range(layers) if i not in ints and i >= first and (i + 1) % step == 0)
    norms = (2 * layers + 1) * 64
    assert replicated_params(cfg, "vllm")[0] == 2 * (norms + moe * 8 * 64)


def test_a_list_inside_mlp_only_layers_names_the_field():
    plan = _plan({**MOE, "mlp_only_layers": [[1]]})
    assert any("config.json: mlp_only_layers holds a list" in w for w in plan.warnings)
    assert replicated_params({**MOE, "mlp_only_layers": [[1]]}, "vllm")[0] > 0  # and fit alone survives it


def test_wrong_types_in_a_text_config_name_the_field():
    plan = _plan({"text_config": {**MOE, "num_attention_heads": "32"}})
    assert any("num_attention_heads is '32', not an integer" in w for w in plan.warnings)
    assert not plan.errors or all("attention heads" not in e for e in plan.errors)


def _node(text: str, ok: bool = True) -> tuple[FakeCluster, SimpleNamespace, list[str]]:
    asked: list[str] = []

    def answer(name, command):
        asked.append(command)
        return SimpleNamespace(ok=ok, stdout=text, stderr="", exit_status=0 if ok else 1)

    config, *_ = cluster(1)
    return FakeCluster([FakeNode(config.head.name, answer)]), config, asked


@pytest.mark.parametrize("read", [model_config_of, read_model_config])
async def test_deep_nesting_is_one_line_naming_the_file(read):
    nodes, config, _ = _node("[" * 100_000 + "]" * 100_000)
    with pytest.raises(modelconfig.ModelConfigError) as e:
        await read(nodes, config, "/m/x")
    assert str(e.value).startswith(f"could not read {config.head.name}:/m/x/config.json: ")
    assert "nested" in str(e.value) and "\n" not in str(e.value)
    deep = '{"a": ' * 40 + "1" + "}" * 40  # within what json parses, beyond what a config holds
    with pytest.raises(modelconfig.ModelConfigError, match="nested deeper than 32"):
        modelconfig.parse(deep)


@pytest.mark.parametrize("read", [model_config_of, read_model_config])
async def test_a_huge_file_is_read_only_up_to_the_cap(read):
    nodes, config, asked = _node('{"a": "' + "x" * modelconfig.MAX_BYTES + '"}')
    with pytest.raises(modelconfig.ModelConfigError, match="larger than 4 MiB"):
        await read(nodes, config, "/m/x")
    assert f"head -c {modelconfig.MAX_BYTES + 1} " in asked[0] and " cat " not in f" {asked[0]} "


async def test_absent_is_none_and_a_good_one_reads_back():
    nodes, config, _ = _node("")
    assert await model_config_of(nodes, config, "/m/x") is None
    nodes, config, _ = _node('{"num_attention_heads": 8, "torch_dtype": "bfloat16"}')
    assert await read_model_config(nodes, config, "/m/x") == {"num_attention_heads": 8, "torch_dtype": "bfloat16"}


async def test_the_plan_of_operations_carries_the_reason():
    from sparktui.core.deploy.operations import Operations

    nodes, config, _ = _node('{"num_hidden_layers": 1e300}')
    ops = Operations(nodes, config, bus=SimpleNamespace())
    opts = PlanOptions()
    assert await ops._read_model_config(opts) is None
    assert opts.model_config_problem.startswith("could not read ") and "num_hidden_layers" in opts.model_config_problem
