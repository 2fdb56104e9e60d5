"""The engine images a demo node knows, and `docker save` / `docker load` of them as real tar streams.

An image's layer is pseudo-random bytes seeded by its name, so every node produces the same bytes
without storing them; its Id is the sha256 of its config, as docker's is, so a saved and loaded
image has the same Id on every node (the launch checks compare Ids).
"""

from __future__ import annotations

import hashlib
import io
import json
import random
import sys
import tarfile
import time
from typing import BinaryIO

from . import times
from .store import DockerError, Store, normalize_ref

BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
CATALOG = {
    # the default: NVIDIA's SGLang playbook image (nvidia/sglang/README.md), the newest SGLang the
    # contract tier pins (tests/contract/venvs.py)
    "lmsysorg/sglang:latest-cu130": {
        "created": "2026-11-28T03:40:17.220914533Z",
        "workdir": "/sgl-workspace",
        "cmd": ["/bin/bash"],
        "env": [
            f"PATH={BASE_PATH}",
            "NVIDIA_VISIBLE_DEVICES=all",
            "NVIDIA_DRIVER_CAPABILITIES=compute,utility",
            "PYTHONUNBUFFERED=1",
            "SPARKTUI_SIM_SGLANG_VERSION=0.5.23",
        ],
        "labels": {"org.opencontainers.image.source": "https://github.com/sgl-project/sglang"},
    },
    "lmsysorg/sglang:spark": {
        "created": "2025-11-18T09:12:44.503218771Z",
        "workdir": "/sgl-workspace",
        "cmd": ["/bin/bash"],
        "env": [
            f"PATH={BASE_PATH}",
            "NVIDIA_VISIBLE_DEVICES=all",
            "NVIDIA_DRIVER_CAPABILITIES=compute,utility",
            "PYTHONUNBUFFERED=1",
            "SPARKTUI_SIM_SGLANG_VERSION=0.5.3.post3",
        ],
        "labels": {"org.opencontainers.image.source": "https://github.com/sgl-project/sglang"},
    },
    "nvcr.io/nvidia/vllm:25.11-py3": {
        "created": "2025-11-21T17:40:02.118220546Z",
        "workdir": "/workspace",
        "cmd": ["/bin/bash"],
        "env": [
            f"PATH={BASE_PATH}",
            "NVIDIA_VISIBLE_DEVICES=all",
            "NVIDIA_DRIVER_CAPABILITIES=compute,utility",
            "NVIDIA_VLLM_VERSION=25.11",
            "SPARKTUI_SIM_VLLM_VERSION=0.11.0",
        ],
        "labels": {"com.nvidia.build.id": "229112401"},
    },
    "nvcr.io/nvidia/vllm:26.10-py3": {
        "created": "2026-10-24T06:12:51.730114902Z",
        "workdir": "/workspace",
        "cmd": ["/bin/bash"],
        "env": [
            f"PATH={BASE_PATH}",
            "NVIDIA_VISIBLE_DEVICES=all",
            "NVIDIA_DRIVER_CAPABILITIES=compute,utility",
            "NVIDIA_VLLM_VERSION=26.10",
            "SPARKTUI_SIM_VLLM_VERSION=0.31.0",
        ],
        "labels": {},
    },
    # vLLM's own image: its entrypoint is the server, as in vllm-project/vllm's docker/Dockerfile
    "vllm/vllm-openai:v0.33.0": {
        "created": "2026-11-20T08:31:12.402318113Z",
        "workdir": "/vllm-workspace",
        "cmd": None,
        "entrypoint": ["vllm", "serve"],
        "env": [
            f"PATH={BASE_PATH}",
            "NVIDIA_VISIBLE_DEVICES=all",
            "NVIDIA_DRIVER_CAPABILITIES=compute,utility",
            "SPARKTUI_SIM_VLLM_VERSION=0.33.0",
        ],
        "labels": {"org.opencontainers.image.source": "https://github.com/vllm-project/vllm"},
    },
    # NVIDIA's two-Spark TensorRT-LLM image (dgx-spark-playbooks nvidia/trt-llm/README.md); the simulator's
    # mpirun, trtllm-llmapi-launch, trtllm-serve and sshd stand in for its tools
    "nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc5": {
        "created": "2026-09-30T11:02:37.514006118Z",
        "workdir": "/app/tensorrt_llm",
        "cmd": ["/bin/bash"],
        "env": [
            f"PATH={BASE_PATH}",
            "NVIDIA_VISIBLE_DEVICES=all",
            "NVIDIA_DRIVER_CAPABILITIES=compute,utility",
            "SPARKTUI_SIM_TRTLLM_VERSION=1.3.0rc5",
        ],
        "labels": {"org.opencontainers.image.source": "https://github.com/NVIDIA/TensorRT-LLM"},
    },
}
DEFAULT_PAYLOAD = 24 << 20  # layer bytes per image: enough for an image copy to show progress


def config_blob(ref: str) -> bytes:
    c = CATALOG[ref]
    config = {"Env": c["env"], "Cmd": c["cmd"], "WorkingDir": c["workdir"], "Labels": c["labels"]}
    if c.get("entrypoint"):
        config["Entrypoint"] = c["entrypoint"]
    return json.dumps(
        {
            "architecture": "arm64",
            "os": "linux",
            "created": c["created"],
            "config": config,
            "rootfs": {"type": "layers", "diff_ids": ["sha256:" + _layer_seed(ref)]},
        },
        sort_keys=True,
        separators=(",", ":"),
    ).encode()


def _layer_seed(ref: str) -> str:
    return hashlib.sha256(b"sparktui-demo-layer:" + ref.encode()).hexdigest()


def _tar_size(members: list[int]) -> int:
    """Bytes of an uncompressed tar with these member sizes (tarfile's format, short names)."""
    size = sum(512 + -(-n // 512) * 512 for n in members) + 1024
    return -(-size // tarfile.RECORDSIZE) * tarfile.RECORDSIZE


def record(ref: str, payload: int = DEFAULT_PAYLOAD) -> dict:
    """The image as `docker image inspect` shows it; Size is what `docker save` of it streams."""
    blob = config_blob(ref)
    cfg = json.loads(blob)
    hexid = hashlib.sha256(blob).hexdigest()
    manifest = json.dumps(
        [{"Config": f"{hexid}.json", "RepoTags": [ref], "Layers": [f"{_layer_seed(ref)}/layer.tar"]}]
    ).encode()
    size = _tar_size([len(manifest), len(blob), payload])
    return {
        "Id": "sha256:" + hexid,
        "RepoTags": [ref],
        "RepoDigests": [],
        "Created": cfg["created"],
        "CreatedNs": times.parse_stamp(cfg["created"]) or 0,
        "Size": size,
        "Architecture": "arm64",
        "Os": "linux",
        "Config": cfg["config"],
        "_payload": payload,
        "_catalog": ref,
    }


class _Layer(io.RawIOBase):
    """The layer's bytes, made on demand and paced to `rate` bytes/s (0 = as fast as possible)."""

    def __init__(self, ref: str, size: int, rate: float):
        self.rng = random.Random(_layer_seed(ref))
        self.left = size
        self.rate = rate
        self.sent = 0
        self.t0 = time.monotonic()

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = min(len(b), self.left, 1 << 20)
        if n <= 0:
            return 0
        if self.rate > 0:
            due = self.t0 + self.sent / self.rate
            wait = due - time.monotonic()
            if wait > 0:
                time.sleep(wait)
        b[:n] = self.rng.randbytes(n)
        self.left -= n
        self.sent += n
        return n


def save(store: Store, refs: list[str], out: BinaryIO, rate: float = 0.0) -> None:
    images = []
    for ref in refs:
        img = store.find_image(ref)
        if img is None or not img.get("_catalog"):
            raise DockerError(f"Error response from daemon: reference does not exist: {ref}")
        images.append(img)
    entries = [
        {
            "Config": img["Id"].removeprefix("sha256:") + ".json",
            "RepoTags": [img["_catalog"]],
            "Layers": [f"{_layer_seed(img['_catalog'])}/layer.tar"],
        }
        for img in images
    ]
    with tarfile.open(fileobj=out, mode="w|", format=tarfile.USTAR_FORMAT) as tar:
        _add(tar, "manifest.json", json.dumps(entries).encode())
        for img in images:
            ref = img["_catalog"]
            _add(tar, img["Id"].removeprefix("sha256:") + ".json", config_blob(ref))
            info = tarfile.TarInfo(f"{_layer_seed(ref)}/layer.tar")
            info.size, info.mtime = img["_payload"], 0
            tar.addfile(info, io.BufferedReader(_Layer(ref, img["_payload"], rate), 1 << 20))


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime = len(data), 0
    tar.addfile(info, io.BytesIO(data))


def load(store: Store, src: BinaryIO) -> list[str]:
    """Read a `docker save` stream; returns the tags loaded."""
    manifest = None
    blobs: dict[str, bytes] = {}
    layer_sizes: dict[str, int] = {}
    try:
        with tarfile.open(fileobj=src, mode="r|") as tar:
            for m in tar:
                f = tar.extractfile(m) if m.isfile() else None
                if f is None:
                    continue
                if m.name == "manifest.json":
                    manifest = json.loads(f.read())
                elif m.name.endswith(".json") and "/" not in m.name:
                    blobs[m.name] = f.read()
                else:
                    n = 0
                    while chunk := f.read(1 << 20):
                        n += len(chunk)
                    layer_sizes[m.name] = n
    except (tarfile.TarError, OSError, ValueError) as e:
        raise DockerError(
            f"Error: unexpected EOF ({e})"
            if "EOF" in str(e) or "truncated" in str(e).lower()
            else f"Error processing tar file: {e}"
        ) from None
    if not manifest:
        raise DockerError("open /var/lib/docker/tmp/docker-import/repositories: no such file or directory")
    loaded = []
    for entry in manifest:
        blob = blobs.get(entry.get("Config", ""))
        tags = entry.get("RepoTags") or []
        if blob is None or not tags:
            raise DockerError("Error: invalid tar: the image config is missing")
        ref = normalize_ref(tags[0])
        if ref not in CATALOG or hashlib.sha256(blob).hexdigest() != entry["Config"][:-5]:
            raise DockerError(f"Error: {ref}: the image does not match its config digest")
        layers = entry.get("Layers") or []
        payload = sum(layer_sizes.get(name, 0) for name in layers)
        rec = record(ref, payload)
        rec["RepoTags"] = [normalize_ref(t) for t in tags]
        store.add_image(rec)
        loaded += rec["RepoTags"]
    return loaded


def pull(store: Store, ref: str, payload: int, out=sys.stdout) -> dict:
    """A registry pull, played from the catalog (the demo has no registry)."""
    want = normalize_ref(ref)
    if want not in CATALOG:
        repo = want.rsplit(":", 1)[0]
        raise DockerError(
            f"Error response from daemon: pull access denied for {repo}, repository does not exist "
            "or may require 'docker login': denied: requested access to the resource is denied"
        )
    tag = want.rsplit(":", 1)[1]
    rec = record(want, payload)
    digest = hashlib.sha256(rec["Id"].encode()).hexdigest()
    out.write(
        f"{tag}: Pulling from {want.rsplit(':', 1)[0]}\n{_layer_seed(want)[:12]}: Pull complete\n"
        f"Digest: sha256:{digest}\nStatus: Downloaded newer image for {want}\n{want}\n"
    )
    store.add_image(rec)
    return rec


def seed(store: Store, refs: list[str], payload: int = DEFAULT_PAYLOAD) -> None:
    for ref in refs:
        store.add_image(record(normalize_ref(ref), payload))
