"""Rows of `docker ps` and `docker images`, shaped like docker's own (`{{json .}}` keys, tables)."""

from __future__ import annotations

import shlex
import time

from . import gotemplate, times
from .store import Container, DockerError, normalize_ref


class PsRow(dict):
    """A `docker ps` row; `.Label "k"` works in templates as it does in docker's."""

    labels: dict[str, str] = {}

    def Label(self, key: str) -> str:  # noqa: N802 - docker's template method name
        return self.labels.get(key, "")


def _size(n: float) -> str:
    """docker's units.HumanSize: 18.3GB, 512MB, 0B (decimal units)."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.3g}{unit}" if unit != "B" else f"{int(n)}B"
        n /= 1000
    return f"{n}B"


def status_text(c: Container) -> str:
    s = c.state
    if s.get("Status") == "running":
        started = times.parse_stamp(s.get("StartedAt", "")) or times.now_ns()
        return "Up " + times.human((times.now_ns() - started) / 1e9) + (" (Paused)" if s.get("Paused") else "")
    if s.get("Status") == "exited":
        ended = times.parse_stamp(s.get("FinishedAt", "")) or times.now_ns()
        return f"Exited ({s.get('ExitCode', 0)}) {times.human((times.now_ns() - ended) / 1e9)} ago"
    return "Created"


def ps_row(c: Container, no_trunc: bool) -> PsRow:
    cmd = shlex.join([c.config["Path"], *c.config["Args"]])
    if not no_trunc and len(cmd) > 20:
        cmd = cmd[:19] + "…"
    labels = c.config["Config"].get("Labels") or {}
    mounts = [m.get("Name") or m.get("Source", "") for m in c.config.get("Mounts", [])]
    row = PsRow(
        {
            "Command": f'"{cmd}"',
            "CreatedAt": times.created_at(c.config.get("CreatedNs", 0)),
            "ID": c.id if no_trunc else c.id[:12],
            "Image": c.config["Config"]["Image"],
            "Labels": ",".join(f"{k}={v}" for k, v in labels.items()),
            "LocalVolumes": str(sum(1 for m in c.config.get("Mounts", []) if m.get("Type") == "volume")),
            "Mounts": ",".join(m if no_trunc else m[:15] + ("…" if len(m) > 15 else "") for m in mounts),
            "Names": c.name,
            "Networks": c.config["HostConfig"].get("NetworkMode", "default"),
            "Ports": "",
            "RunningFor": times.human((times.now_ns() - c.config.get("CreatedNs", 0)) / 1e9) + " ago",
            "Size": "0B",
            "State": c.state.get("Status", "created"),
            "Status": status_text(c),
        }
    )
    row.labels = labels
    return row


def image_row(img: dict, tag: str, no_trunc: bool) -> dict:
    repo, _, t = tag.rpartition(":") if tag else ("<none>", "", "<none>")
    created = img.get("CreatedNs", 0)
    hexid = img["Id"].removeprefix("sha256:")
    return {
        "Containers": "N/A",
        "CreatedAt": times.created_at(created),
        "CreatedSince": times.human((time.time_ns() - created) / 1e9) + " ago",
        "Digest": "<none>",
        "ID": img["Id"] if no_trunc else hexid[:12],
        "Repository": repo or "<none>",
        "SharedSize": "N/A",
        "Size": _size(img.get("Size", 0)),
        "Tag": t or "<none>",
        "UniqueSize": "N/A",
        "VirtualSize": _size(img.get("Size", 0)),
    }


def image_rows(images: list[dict], no_trunc: bool, want: str | None = None) -> list[dict]:
    rows = []
    for img in images:
        for tag in img.get("RepoTags") or [""]:
            if want:
                w = normalize_ref(want) if ":" in want.rsplit("/", 1)[-1] else want
                if tag != w and tag.rsplit(":", 1)[0] != w:
                    continue
            rows.append(image_row(img, tag, no_trunc))
    return rows


PS_HEADERS = {
    "ID": "CONTAINER ID",
    "Image": "IMAGE",
    "Command": "COMMAND",
    "CreatedAt": "CREATED AT",
    "RunningFor": "CREATED",
    "Status": "STATUS",
    "Ports": "PORTS",
    "Names": "NAMES",
    "State": "STATE",
    "Labels": "LABELS",
    "Mounts": "MOUNTS",
    "Networks": "NETWORKS",
    "Size": "SIZE",
    "Repository": "REPOSITORY",
    "Tag": "TAG",
    "CreatedSince": "CREATED",
    "Digest": "DIGEST",
}


def _table(rows: list[dict], cols: list[str], headers: dict[str, str]) -> str:
    heads = [headers.get(c, c.upper()) for c in cols]
    cells = [[str(r.get(c, "")) for c in cols] for r in rows]
    widths = [max([len(h)] + [len(x[i]) for x in cells]) for i, h in enumerate(heads)]
    lines = ["   ".join(v.ljust(widths[i]) for i, v in enumerate(line)).rstrip() for line in [heads] + cells]
    return "\n".join(lines) + "\n"


def render(rows: list[dict], fmt: str | None, default_cols: list[str], images: bool = False) -> str:
    """Rows through --format (a Go template, or `table TEMPLATE`), or docker's default table."""
    headers = {**PS_HEADERS, "ID": "IMAGE ID"} if images else PS_HEADERS
    if not fmt or fmt == "table":
        return _table(rows, default_cols, headers)
    if fmt == "json":
        fmt = "{{json .}}"
    try:
        if fmt.startswith("table "):
            body = fmt[len("table ") :].replace("\\t", "\t")
            header = gotemplate.render(body, {k: headers.get(k, k.upper()) for k in (rows[0] if rows else headers)})
            return header + "\n" + "".join(gotemplate.render(body, r) + "\n" for r in rows)
        return "".join(gotemplate.render(fmt, r) + "\n" for r in rows)
    except gotemplate.TemplateError as e:
        raise DockerError(f"template: {e}") from None
