"""`sparktui check` says what each real node needs (sshd, dockerd, rsync, the prestart hook on real
nodes), and names the fix when one is taken away."""

from __future__ import annotations

import uuid

import pytest

from .test_check import check

pytestmark = pytest.mark.lab
HOOK = "/usr/local/sbin/nvidia-container-runtime-hook"


def needs(out: dict) -> dict[tuple[str, str], dict]:
    return {(r["node"], r["id"]): r for r in out.get("requirements", [])}


def test_check_names_every_need_and_the_fix_for_a_missing_toolkit(lab, tmp_path):
    n1, n2 = lab.nodes[0].name, lab.nodes[1].name
    data = lab.config_data()
    model = f"/models/needs-{uuid.uuid4().hex[:8]}"
    data["model"]["path"] = model
    data["images"] = {"sglang": "sparktui/none:absent", "vllm": "sparktui/none:absent"}
    cfg = lab.write_config(data, tmp_path / "c.yaml")
    lab.sh(n1, ["sh", "-c", 'mkdir -p "$1" && echo w > "$1/a.safetensors"', "sh", model])
    lab.sh(n2, ["mv", HOOK, HOOK + ".off"])
    try:
        rc, out, _, err = check(cfg)
        assert rc == 0, err  # report only; --strict makes unmet needs an error
        got = needs(out)
        for need in ("gpu", "docker", "rsync", "fabric"):
            assert got[n1, need]["status"] == got[n2, need]["status"] == "ok", (need, got[n1, need], got[n2, need])
        assert got[n1, "docker"]["what"] == "docker usable by root without sudo"
        assert got[n1, "gpu-runtime"]["status"] == "ok" and got[n1, "gpu-runtime"]["detail"] == HOOK
        assert (
            got[n2, "gpu-runtime"]["status"] == "fail"
            and "nvidia-ctk runtime configure" in got[n2, "gpu-runtime"]["fix"]
        )
        assert got[n1, "model"]["status"] == "ok" and got[n2, "model"]["status"] == "todo"
        assert (
            got[n1, "image:sglang"]["fix"]
            == f"`docker pull sparktui/none:absent` on {n1}, then `sparktui sync image sglang`"
        )
        assert "runc" in by_node(out)[n1]["docker"]["runtimes"]  # dockerd's own answer, parsed
        rc, strict, _, _ = check(cfg, 60, "--strict")
        assert rc == 1 and needs(strict)[n2, "gpu-runtime"]["status"] == "fail"
    finally:
        lab.sh(n2, ["mv", HOOK + ".off", HOOK], check=False)
        lab.sh(n1, ["rm", "-rf", model], check=False)
    rc, out, _, err = check(cfg)
    assert needs(out)[n2, "gpu-runtime"]["status"] == "ok", err


def test_a_node_without_dockerd_gets_the_systemctl_fix(make_lab):
    lab = make_lab(nodes=1, docker=False)
    rc, out, _, err = check(lab.config_path)
    assert rc == 0, err
    d = needs(out)[lab.nodes[0].name, "docker"]
    assert d["status"] == "fail" and "Cannot connect to the Docker daemon" in d["detail"]
    assert d["fix"] == "start the daemon: `sudo systemctl enable --now docker`"


def by_node(out: dict) -> dict[str, dict]:
    return {n["name"]: n for n in out["nodes"]}
