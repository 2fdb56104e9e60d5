"""First-run decisions that need no node: what is typed, where the weights are, which interfaces are pinned."""

from __future__ import annotations

from sparktui.core.config.config import SshConfig
from sparktui.core.nodes.facts import DockerInfo, ModelDir, NodeAddr, NodeFacts, Subnet
from sparktui.core.config.firstrun import (
    NodeDraft,
    draft_config,
    draft_problems,
    image_summary,
    images_found,
    model_holder,
    pin_fabric,
)


def config(path: str = "/models/m"):
    return draft_config([NodeDraft("a", "h1"), NodeDraft("b", "h2"), NodeDraft("c", "h3")], path, SshConfig())


def facts(name: str, path: str, present: bool, files: int = 3) -> NodeFacts:
    return NodeFacts(name=name, host=name, reachable=True, model=ModelDir(path=path, present=present, files=files))


def test_the_first_node_is_the_head_and_the_model_is_named_after_its_folder():
    c = config("/models/Qwen3-8B/")
    assert [n.role for n in c.nodes] == ["head", "worker", "worker"]
    assert c.model.name == "Qwen3-8B"


def test_the_source_is_a_node_holding_the_weights_only_when_the_head_lacks_them():
    c = config()
    found = {
        "a": facts("a", "/models/m", False),
        "b": facts("b", "/models/m", False),
        "c": facts("c", "/models/m", True),
    }
    assert model_holder(c, found) == "c"
    found["a"] = facts("a", "/models/m", True)
    assert model_holder(c, found) is None
    # an empty folder is not the weights; facts of another path say nothing
    assert model_holder(c, {"c": facts("c", "/models/m", True, files=0)}) is None
    assert model_holder(c, {"c": facts("c", "/models/other", True)}) is None


def test_pinning_the_fabric_writes_each_nodes_own_interface_and_names_its_rdma_device():
    c = config()
    s = Subnet(
        "192.168.100.0/24",
        {
            "a": NodeAddr("enp1s0f1np1", "192.168.100.10", "rocep1s0f1"),
            "b": NodeAddr("enP2p1s0f1np1", "192.168.100.11", None),
        },
    )
    notes = pin_fabric(c, s)
    assert [n.interfaces for n in c.nodes] == [
        {"192.168.100.0/24": "enp1s0f1np1"},
        {"192.168.100.0/24": "enP2p1s0f1np1"},
        {},
    ]
    assert "rocep1s0f1" in notes[("a", "192.168.100.0/24")]
    assert "no RDMA device" in notes[("b", "192.168.100.0/24")]


def test_typed_nodes_are_checked_against_each_other(tmp_path):
    key = tmp_path / "id"
    key.write_text("k")
    assert draft_problems(NodeDraft("a", "h", identity_file=str(key))) == []
    assert draft_problems(NodeDraft("a", "h"), [NodeDraft("a", "x")]) == ["name 'a' is taken by another node"]
    assert any("spaces" in p for p in draft_problems(NodeDraft("a", "two words")))
    assert any("1-65535" in p for p in draft_problems(NodeDraft("a", "h", port=70000)))
    assert any("needs a host" in p for p in draft_problems(NodeDraft("a", "")))


def test_images_are_told_by_where_they_are():
    c = config()
    c.images.vllm = "vllm/vllm-openai"
    found = {
        "a": NodeFacts(
            "a",
            "a",
            True,
            docker=DockerInfo(
                images={"lmsysorg/sglang:latest-cu130": "sha256:1", "vllm/vllm-openai:latest": "sha256:2"}
            ),
        ),
        "b": NodeFacts("b", "b", True, docker=DockerInfo(images={"lmsysorg/sglang:latest-cu130": "sha256:1"})),
    }
    assert list(images_found(found)) == ["lmsysorg/sglang:latest-cu130", "vllm/vllm-openai:latest"]  # widest first
    lines = image_summary(c, found)
    assert lines["sglang"] == "lmsysorg/sglang:latest-cu130: on a, b"
    assert lines["vllm"] == "vllm/vllm-openai: on a"  # docker's implied :latest
    c.images.sglang = "other:1"
    assert "on no node" in image_summary(c, found)["sglang"]
