"""One masking function: whole values hidden whatever they contain, wherever they appear."""

from __future__ import annotations

import json
import shlex

import pytest

from sparktui.core.config import secrets
from sparktui.core.config.secrets import MASK, add_names, add_values, is_secret_name, mask, mask_data, shorten


@pytest.fixture(autouse=True)
def _clean():
    secrets.forget()
    yield
    secrets.forget()


@pytest.mark.parametrize(
    "name",
    [
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "--hf-token",
        "--api-key",
        "api_key",
        "VLLM_API_KEY",
        "DB_PASSWORD",
        "MYPASSWORDFILE",
        "AWS_SECRET_ACCESS_KEY",
        "--admin-api-key",
        "CLIENT_SECRET",
        "GH_PAT_TOKEN",
    ],
)
def test_secret_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "TOKENIZERS_PARALLELISM",
        "--tokenizer",
        "--max-num-batched-tokens",
        "--max-total-tokens",
        "--ssl-keyfile",
        "NCCL_IB_PKEY",
        "NCCL_DEBUG",
        "--kv-cache-dtype",
    ],
)
def test_engine_settings_are_not_secret(name):
    assert not is_secret_name(name)


def test_whole_values_are_masked_in_shell_lines():
    value = 'sk a\'b "c" d'
    line = shlex.join(
        [
            "docker",
            "exec",
            "-e",
            f"HF_TOKEN={value}",
            "c",
            "vllm",
            "serve",
            "--api-key",
            value,
            f"--hf-token={value}",
            "--tokenizer",
            "tok/x",
            "--max-num-batched-tokens",
            "8192",
        ]
    )
    out = mask(line)
    for part in ("sk", "a'b", "d", 'c\\"'):
        assert f" {part}" not in out.replace("serve", "")
    assert "sk a" not in out and '"c"' not in out
    assert "--tokenizer tok/x" in out and "--max-num-batched-tokens 8192" in out  # not over-masked
    assert out.count(MASK) == 3
    assert shlex.split(out)[3] == f"HF_TOKEN={MASK}"  # still a readable shell line


def test_env_assignments_and_flags_in_plain_text():
    assert mask("env HF_TOKEN=hf_abc true") == f"env HF_TOKEN={MASK} true"
    assert mask("--api-key=sk-1 --port 8000") == f"--api-key={MASK} --port 8000"
    assert mask("echo $HF_TOKEN=x") == "echo $HF_TOKEN=x"  # a reference is not a value


def test_engine_log_lines_that_echo_a_secret():
    # vLLM prints its non-default args as a dict; SGLang prints server_args=ServerArgs(...)
    vllm = (
        "(APIServer pid=1) INFO 08-19 14:58:40 [utils.py:326] non-default args: {'model': '/m', 'api_key': ['sk one']}"
    )
    sgl = "[2025-01-01 10:00:00] server_args=ServerArgs(model_path='/m', api_key='sk two', port=30000)"
    assert "sk one" not in mask(vllm) and "'/m'" in mask(vllm)
    assert "sk two" not in mask(sgl) and "port=30000" in mask(sgl)


def test_known_values_are_masked_anywhere():
    add_values(["hf_remembered_123", "abc"])
    assert mask("token hf_remembered_123 seen") == f"token {MASK} seen"
    assert mask("abc") == "abc"  # too short to hunt for by value: masked by name only


def test_user_declared_names():
    assert mask("LICENSE_BLOB=xyz") == "LICENSE_BLOB=xyz"
    add_names(["LICENSE_BLOB", "--license"])
    assert mask("LICENSE_BLOB=xyz --license 'a b'") == f"LICENSE_BLOB={MASK} --license '{MASK}'"


def test_structured_data_stays_valid_json():
    data = {
        "options": {
            "env": {"HF_TOKEN": 'hf "quoted" value', "NCCL_DEBUG": "INFO"},
            "extra_args": ["--api-key", "sk with space", "--hf-token=x y", "--port", "1"],
        }
    }
    text = json.dumps(mask_data(data))
    back = json.loads(text)
    assert back["options"]["env"] == {"HF_TOKEN": MASK, "NCCL_DEBUG": "INFO"}
    assert back["options"]["extra_args"] == ["--api-key", MASK, f"--hf-token={MASK}", "--port", "1"]
    assert data["options"]["env"]["HF_TOKEN"].startswith("hf")  # the original is untouched


def test_shorten_long_values():
    s = shorten("x" * 1_000_000)
    assert len(s) < 120 and "1000000 characters" in s
    assert shorten("ok") == "ok"


CONFIG = """cluster: c
nodes: [{name: a, host: 127.0.0.1}]
model: {name: m, path: /models/m}
docker: {env: {LICENSE_BLOB: "lic value 42", NCCL_DEBUG: INFO}}
secrets: [LICENSE_BLOB, --license]
"""


def test_names_listed_in_the_config_are_masked_in_the_plan(tmp_path):
    from sparktui.core.config.config import load_config
    from sparktui.core.plan.plan import PlanOptions, make_plan
    from sparktui.core.plan.export import export_files

    from .test_plan import cluster

    p = tmp_path / "c.yaml"
    p.write_text(CONFIG)
    config = load_config(p)
    assert config.secrets == ["LICENSE_BLOB", "--license"]
    config.nodes = cluster(2)[0].nodes
    config, facts, subnets = cluster(2, config)
    plan = make_plan(config, facts, subnets, PlanOptions(engine="sglang", extra_args=["--license", "L-123456"]))
    shown = json.dumps(plan.to_json()) + "".join(s.display for s in plan.steps)
    shown += "".join(export_files(plan).values())
    assert "lic value 42" not in shown and "L-123456" not in shown
    assert plan.nodes[0].env["LICENSE_BLOB"] == MASK and plan.nodes[0].env["NCCL_DEBUG"] == "INFO"


def test_a_bad_secret_name_is_a_config_error():
    from sparktui.core.config.config import ConfigError, load_config_text

    with pytest.raises(ConfigError, match=r"<config>:5:11: secrets item 'A B' is not allowed"):
        load_config_text(CONFIG.replace("[LICENSE_BLOB, --license]", "[A B]"))


def test_diagnose_output_hides_a_key_the_engine_logged(tmp_path, capsys):
    from sparktui.cli import main

    log = tmp_path / "vllm.log"
    log.write_text(
        "(APIServer pid=1) INFO 08-19 14:58:40 [api_server.py:1] vLLM API server version 0.11.0\n"
        "(APIServer pid=1) INFO 08-19 14:58:40 [utils.py:326] non-default args: "
        "{'model': '/m', 'api_key': ['sk-logged-key-123']}\n"
    )
    for extra in (["--json"], []):
        main(["diagnose", str(log), "--engine", "vllm", *extra])
        out = capsys.readouterr().out
        assert "sk-logged-key-123" not in out and "non-default args" in out
