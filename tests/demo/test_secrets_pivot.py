"""An API key set at launch: demanded by the endpoint, never on a command line, never shown anywhere."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from pathlib import Path

from sparktui.core.config.config import load_config
from sparktui.core.remote.ssh import Cluster

from .conftest import sparktui

KEY = "sk-demo key 'with quotes' 0042"
TOKEN = "hf_demo_token_0123456789"


def _status(port: int, key: str | None) -> int:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/models", headers={"Authorization": f"Bearer {key}"} if key else {}
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


async def _endpoint_demands_the_key(config_path, engine: str) -> None:
    config = load_config(config_path)
    port = getattr(config.engine, f"{engine}_port")
    async with Cluster(config) as cluster:
        local = await cluster["spark1"].forward(port)
        # the forward lives on this event loop: the blocking requests run beside it
        assert await asyncio.to_thread(_status, local, None) == 401
        assert await asyncio.to_thread(_status, local, "sk-wrong") == 401
        assert await asyncio.to_thread(_status, local, KEY) == 200


def host_command_lines() -> list[str]:
    """Every process's command line on this machine (what `ps -eo args` prints), NULs as spaces."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                out.append((d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"))
            except OSError:
                continue
    return out


async def test_the_api_key_and_token_reach_vllm_by_env_and_no_output_or_argv_shows_them(demo, cli_env, tmp_path):
    conf = ["--config", str(demo.config_path)]
    rc, out, err = await sparktui(cli_env, *conf, "sync", "model", "--wait", "--json")
    assert rc == 0, out + err
    args = ["--arg=--api-key", f"--arg={KEY}", f"--env=HF_TOKEN={TOKEN}"]
    seen = []
    rc, out, err = await sparktui(cli_env, *conf, "plan", "--engine", "vllm", "--mode", "ray", *args, "--json")
    seen.append(out + err)
    assert json.loads(out)["nodes"][0]["env"]["HF_TOKEN"] == "****", out + err
    rc, out, err = await sparktui(
        cli_env, *conf, "plan", "--engine", "vllm", "--mode", "ray", *args, "--export", str(tmp_path / "export")
    )
    seen.append(out + err + "".join(p.read_text() for p in (tmp_path / "export").iterdir()))
    rc, out, err = await sparktui(
        cli_env,
        *conf,
        "launch",
        "--engine",
        "vllm",
        "--mode",
        "ray",
        *args,
        "--no-preflight",
        "--yes",
        "--wait",
        timeout=240,
    )
    seen.append(out + err)
    assert rc == 0 and "ready" in out, out + err  # readiness sent the key the endpoint demands
    await _endpoint_demands_the_key(demo.config_path, "vllm")  # vLLM read it from VLLM_API_KEY
    seen.append("\n".join(host_command_lines()))  # `ps -eo args` of every demo node: they are this host's processes
    # SGLang reads its key only from its command line: the pivot refuses rather than show it to `ps`
    rc, out, err = await sparktui(cli_env, *conf, "pivot", "--to", "sglang", "--yes", timeout=240)
    seen.append(out + err)
    assert rc == 1 and "SGLang reads its API key only from --api-key" in err, out + err
    for cmd in (["logs"], ["journal"], ["journal", "--json"], ["status", "--json"]):
        rc, out, err = await sparktui(cli_env, *conf, *cmd, timeout=60)
        seen.append(out + err)
    journal_files = list((tmp_path / "state").rglob("*.jsonl"))
    assert journal_files
    for p in journal_files:
        for line in p.read_text().splitlines():
            json.loads(line)  # masking keeps every entry valid JSON
        seen.append(p.read_text())
    for i, text in enumerate(seen):
        for leaked in (KEY, TOKEN, "sk-demo", "hf_demo", "with quotes"):
            at = text.find(leaked)
            assert at < 0, (i, text[max(0, at - 300) : at + 100])
    rc, out, err = await sparktui(cli_env, *conf, "stop", "--yes")
    assert rc == 0, out + err
