"""docker images, image inspect/rm, save, load, pull, tag, version and info on a simulated node."""

from __future__ import annotations

import json
import sys

from .. import hardware
from . import gotemplate, images, listing
from .containers_cmd import _payload, cmd_inspect
from .flags import Spec, flag, last, parse
from .store import DockerError, Store, normalize_ref

VERSION = "28.3.3"
API = "1.51"


def _link_rate() -> float:
    """Bytes/s `docker save` streams at: the demo's link speed, so an image copy shows progress."""
    try:
        with open(hardware.demo_root() / "demo.json", encoding="utf-8") as f:
            return float(json.load(f).get("link_bytes_per_s") or 0)
    except (OSError, ValueError):
        return 0.0


def cmd_images(store: Store, args: list[str]) -> int:
    spec = Spec(
        "images",
        values={"format": ("--format",), "filter": ("-f", "--filter")},
        bools={
            "quiet": ("-q", "--quiet"),
            "no-trunc": ("--no-trunc",),
            "all": ("-a", "--all"),
            "digests": ("--digests",),
        },
    )
    opts, pos = parse(spec, args)
    rows = listing.image_rows(store.images(), flag(opts, "no-trunc"), pos[0] if pos else None)
    if flag(opts, "quiet"):
        sys.stdout.write("".join(dict.fromkeys(r["ID"] + "\n" for r in rows)))
        return 0
    sys.stdout.write(
        listing.render(rows, last(opts, "format"), ["Repository", "Tag", "ID", "CreatedSince", "Size"], images=True)
    )
    return 0


def cmd_rmi(store: Store, args: list[str]) -> int:
    opts, refs = parse(Spec("rmi", bools={"force": ("-f", "--force"), "no-prune": ("--no-prune",)}), args)
    code = 0
    for ref in refs:
        img = store.find_image(ref)
        if img is None:
            sys.stderr.write(f"Error response from daemon: No such image: {ref}\n")
            code = 1
            continue
        users = [c for c in store.containers() if c.config["Image"] == img["Id"]]
        if users and not flag(opts, "force"):
            sys.stderr.write(
                f"Error response from daemon: conflict: unable to remove repository reference "
                f'"{ref}" (must force) - container {users[0].id[:12]} is using its referenced image '
                f"{img['Id'].removeprefix('sha256:')[:12]}\n"
            )
            code = 1
            continue
        store.remove_image(img)
        for tag in img.get("RepoTags", []):
            sys.stdout.write(f"Untagged: {tag}\n")
        sys.stdout.write(f"Deleted: {img['Id']}\n")
    return code


def cmd_save(store: Store, args: list[str]) -> int:
    opts, refs = parse(Spec("save", values={"output": ("-o", "--output")}), args)
    if not refs:
        raise DockerError("docker: 'docker save' requires at least 1 argument.\nSee 'docker save --help'.", 1)
    target = last(opts, "output")
    if target is None and sys.stdout.isatty():
        raise DockerError("cowardly refusing to save to a terminal. Use the -o flag or redirect")
    if target:
        with open(target, "wb") as f:
            images.save(store, refs, f, _link_rate())
    else:
        images.save(store, refs, sys.stdout.buffer, _link_rate())
        sys.stdout.buffer.flush()
    return 0


def cmd_load(store: Store, args: list[str]) -> int:
    opts, _ = parse(Spec("load", values={"input": ("-i", "--input")}, bools={"quiet": ("-q", "--quiet")}), args)
    src = last(opts, "input")
    if src:
        with open(src, "rb") as f:
            loaded = images.load(store, f)
    else:
        if sys.stdin.isatty():
            raise DockerError("requested load from stdin, but stdin is empty")
        loaded = images.load(store, sys.stdin.buffer)
    sys.stdout.write("".join(f"Loaded image: {t}\n" for t in loaded))
    return 0


def cmd_pull(store: Store, args: list[str]) -> int:
    opts, refs = parse(
        Spec(
            "pull",
            values={"platform": ("--platform",)},
            bools={"quiet": ("-q", "--quiet"), "all-tags": ("-a", "--all-tags")},
        ),
        args,
    )
    if len(refs) != 1:
        raise DockerError("docker: 'docker pull' requires 1 argument.\nSee 'docker pull --help'.", 1)
    images.pull(store, refs[0], _payload())
    return 0


def cmd_tag(store: Store, args: list[str]) -> int:
    if len(args) != 2:
        raise DockerError("docker: 'docker tag' requires 2 arguments.\nSee 'docker tag --help'.", 1)
    img = store.find_image(args[0])
    if img is None:
        raise DockerError(f"Error response from daemon: No such image: {args[0]}")
    img = dict(img)
    img["RepoTags"] = list(dict.fromkeys(img.get("RepoTags", []) + [normalize_ref(args[1])]))
    store.add_image(img)
    return 0


def _version_data() -> dict:
    return {
        "Client": {"Version": VERSION, "ApiVersion": API, "Os": "linux", "Arch": "arm64"},
        "Server": {
            "Version": VERSION,
            "ApiVersion": API,
            "MinAPIVersion": "1.24",
            "Os": "linux",
            "Arch": "arm64",
            "KernelVersion": "6.11.0-1016-nvidia",
        },
    }


def _fmt(fmt: str | None, data: dict, plain: str) -> int:
    if not fmt:
        sys.stdout.write(plain)
        return 0
    try:
        sys.stdout.write(gotemplate.render(fmt, data) + "\n")
    except gotemplate.TemplateError as e:
        raise DockerError(f"template: {e}") from None
    return 0


def cmd_version(store: Store, args: list[str]) -> int:
    opts, _ = parse(Spec("version", values={"format": ("-f", "--format")}), args)
    v = _version_data()
    plain = (
        f"Client:\n Version:           {VERSION}\n API version:       {API}\n OS/Arch:           linux/arm64\n\n"
        f"Server: Docker Engine - Community\n Engine:\n  Version:          {VERSION}\n"
        f"  API version:      {API} (minimum version 1.24)\n  OS/Arch:          linux/arm64\n"
    )
    return _fmt(last(opts, "format"), v, plain)


def cmd_info(store: Store, args: list[str]) -> int:
    opts, _ = parse(Spec("info", values={"format": ("-f", "--format")}), args)
    cs = store.containers()
    running = sum(1 for c in cs if c.running)
    data = {
        "ServerVersion": VERSION,
        "Containers": len(cs),
        "ContainersRunning": running,
        "ContainersStopped": len(cs) - running,
        "Images": len(store.images()),
        "Driver": "overlay2",
        "DefaultRuntime": "runc",
        "Runtimes": {"io.containerd.runc.v2": {}, "nvidia": {}, "runc": {}},
        "OperatingSystem": "Ubuntu 24.04.3 LTS",
        "Architecture": "aarch64",
        "NCPU": 20,
        "MemTotal": hardware.MEM_TOTAL_KB * 1024,
        "Name": hardware.load()["hostname"],
        "CgroupDriver": "systemd",
    }
    plain = (
        f"Server:\n Containers: {len(cs)}\n  Running: {running}\n  Stopped: {len(cs) - running}\n"
        f" Images: {data['Images']}\n Server Version: {VERSION}\n Storage Driver: overlay2\n"
        f" Cgroup Driver: systemd\n Runtimes: io.containerd.runc.v2 nvidia runc\n Default Runtime: runc\n"
        f" Operating System: Ubuntu 24.04.3 LTS\n Architecture: aarch64\n Name: {data['Name']}\n"
    )
    return _fmt(last(opts, "format"), data, plain)


def cmd_image(store: Store, args: list[str]) -> int:
    """`docker image ls|inspect|rm|save|load|pull|tag`."""
    sub, rest = (args[0], args[1:]) if args else ("", [])
    table = {
        "ls": cmd_images,
        "list": cmd_images,
        "rm": cmd_rmi,
        "save": cmd_save,
        "load": cmd_load,
        "pull": cmd_pull,
        "tag": cmd_tag,
    }
    if sub == "inspect":
        return cmd_inspect(store, rest, kind="image")
    if sub not in table:
        raise DockerError(
            f"docker: unknown command: docker image {sub}\n\nRun 'docker image --help' for more information", 1
        )
    return table[sub](store, rest)
