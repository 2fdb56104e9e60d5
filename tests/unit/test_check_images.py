"""`check` on an image whose versions are not cached: what the model check read from the image itself is
said as read, and only the rest as not read yet, never 'not read' beside the release it then shows."""

from __future__ import annotations

import json

from sparktui.cli import check, main
from sparktui.core.plan.image import ImageInfo, holds
from sparktui.core.plan.support import Support

from .test_check_piped import piped  # noqa: F401 (fixture)

IMAGE = "lmsysorg/sglang:latest-cu130"


def unread_image(monkeypatch):
    info = ImageInfo(
        ref=IMAGE,
        node="spark1",
        id="sha256:ab",
        unread=True,
        problem=f"what {IMAGE} holds is not read yet on spark1 (`sparktui plan` reads it once per image)",
    )

    async def images(cluster, config):  # what _images makes of an inspection that found no cached versions
        return {
            "sglang": {
                "image": IMAGE,
                "node": "spark1",
                "holds": holds(info),
                "versions": info.versions,
                "problem": info.problem,
                "unread": info.unread,
            }
        }

    async def support(cluster, config):
        return {
            "sglang": Support(
                "sglang",
                IMAGE,
                "/m",
                node="spark1",
                status="supported",
                model_type="qwen3_moe",
                engine_version="0.5.23",
                transformers="5.19.0",
            )
        }

    monkeypatch.setattr(check, "_images", images)
    monkeypatch.setattr("sparktui.core.plan.support.support_of_config", support)


def test_check_says_what_the_model_check_read_and_only_the_rest_as_not_read(piped, capsys, monkeypatch):
    unread_image(monkeypatch)
    assert main(["--config", str(piped), "check"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith(f"sglang {IMAGE}"))
    assert "SGLang 0.5.23, transformers 5.19.0" in line, line
    assert f"what {IMAGE} holds is not read yet" not in line and "Ray, torch and NCCL not read yet" in line, line


def test_check_json_carries_the_release_read_and_no_contradiction(piped, capsys, monkeypatch):
    unread_image(monkeypatch)
    assert main(["--config", str(piped), "check", "--json"]) == 0
    entry = json.loads(capsys.readouterr().out)["images"]["sglang"]
    assert entry["versions"] == {"sglang": "0.5.23", "transformers": "5.19.0"}, entry
    assert "holds is not read yet" not in entry["problem"] and "unread" not in entry, entry
    assert entry["support"]["engine_version"] == "0.5.23"
