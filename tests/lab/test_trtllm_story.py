"""TensorRT-LLM in the lab (simulator image, real OpenSSH/Docker): launch over MPI reaches ready and answers a
chat completion through the forward; pivot to vLLM reaches ready."""

from __future__ import annotations

import asyncio
import json
import posixpath
import urllib.request

import pytest

from sparktui.core.remote.ssh import Cluster

from .netlab import SIM_IMAGE
from .test_story import Story, cli_json, story  # noqa: F401 - the module's story fixture

pytestmark = pytest.mark.lab


async def chat(s: Story, port: int, model: str) -> dict:
    async with Cluster(s.config) as cluster:
        local = await cluster[s.config.head.name].forward(port)
        body = json.dumps(
            {"model": model, "max_tokens": 8, "messages": [{"role": "user", "content": "Name a colour."}]}
        ).encode()
        req = urllib.request.Request(
            f"http://127.0.0.1:{local}/v1/chat/completions", data=body, headers={"Content-Type": "application/json"}
        )
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        return await asyncio.to_thread(lambda: json.loads(opener.open(req, timeout=30).read()))


def test_plan_runs_mpi_on_both_nodes_each_on_its_fabric_and_asks_the_image(story: Story):  # noqa: F811
    rc, doc, err = cli_json(story, "plan", "--engine", "trtllm", "--tp", "2", "--image", SIM_IMAGE, timeout=240)
    assert (doc["engine"], doc["mode"], doc["tp"]) == ("trtllm", "mpi", 2), err[-2000:]
    assert [n["name"] for n in doc["nodes"]] == [n.name for n in story.lab.nodes]
    for n in doc["nodes"]:
        node = story.lab.node(n["name"])  # the lab's fabric names differ per node: each keeps its own
        env = n["env"]
        assert (
            env["NCCL_SOCKET_IFNAME"]
            == env["UCX_NET_DEVICES"]
            == env["OMPI_MCA_btl_tcp_if_include"]
            == node.fabric_iface
        ), (n["name"], env)
        # the RoCE device on this node's fabric port; NCCL is pointed at it where /dev/infiniband exists
        # (the lab's nodes have none, so NCCL falls back to sockets there by itself)
        assert n["rdma"] == node.rdma and env.get("NCCL_IB_HCA", node.rdma) == node.rdma, (n["name"], env)
    head = " ".join(str(c) for c in doc["nodes"][0]["commands"])
    assert "mpirun" in head and "-np 2" in head and "trtllm-llmapi-launch trtllm-serve" in head, head[-1500:]
    support = doc["support"] or {}
    # python3 in the image found its tensorrt_llm package, its release and the model's class in its registry
    assert support.get("engine") == "trtllm" and support.get("image") == SIM_IMAGE, (support, err[-2000:])
    assert support.get("status") == "supported" and support.get("engine_version"), support
    assert support.get("architectures"), support


def test_trtllm_launch_serves_a_chat_then_pivot_to_vllm_serves(story: Story):  # noqa: F811
    rc, doc, err = cli_json(
        story,
        "launch",
        "--engine",
        "trtllm",
        "--image",
        SIM_IMAGE,
        "--yes",
        "--wait",
        "--no-preflight",
        "--timeout",
        "120",
        timeout=240,
    )
    assert rc == 0 and doc["state"] == "ready", (doc.get("detail"), err[-3000:])
    model = posixpath.basename(story.config.model.path.rstrip("/"))  # trtllm-serve names the directory
    reply = asyncio.run(chat(story, story.config.port_for("trtllm"), model))
    assert reply["choices"][0]["message"]["content"]
    rc, doc, err = cli_json(story, "pivot", "--to", "vllm", "--yes", "--wait", "--timeout", "120", timeout=240)
    assert rc == 0 and doc["state"] == "ready", (doc.get("detail"), err[-3000:])


def test_a_wrong_interface_stops_the_trtllm_launch_with_the_interface_hint(story: Story):  # noqa: F811
    rc, doc, err = cli_json(
        story,
        "launch",
        "--engine",
        "trtllm",
        "--image",
        SIM_IMAGE,
        "--env",
        "NCCL_SOCKET_IFNAME=nosuch0",
        "--yes",
        "--wait",
        "--no-preflight",
        "--timeout",
        "60",
        timeout=240,
    )
    assert rc != 0 and doc["state"] in ("hung", "failed"), (doc.get("state"), err[-2000:])
    print("state", doc["state"], [(p["kind"], p.get("hint", "")[:90]) for p in doc["problems"]])
    hints = " ".join(p.get("hint") or "" for p in doc["problems"])
    assert "OMPI_MCA_btl_tcp_if_include" in hints and "GLOO" not in hints, json.dumps(doc["problems"], indent=1)[:3000]
