"""Read a deployment's /metrics through the head node's SSH connection.

The engine's HTTP port is reached as the head sees it (127.0.0.1:PORT, the engines run with the host's
network) over a direct-tcpip channel of the connection sparktui already holds: nothing runs on the
node, no port opens anywhere. `MetricsUnavailable` says why there is nothing to read (an engine
without metrics, a link down); text that arrives but does not parse is the Scrape's `error`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from ..config.config import Config
from ..engines import Engine, find_engine
from ..serving.metrics import Scrape, parse
from ..remote.ssh import Cluster, Node
from .containers import find_all, summarize
from .health import _port_of
from .record import load_record

SCRAPE_TIMEOUT_S = 5.0
MAX_BODY = 8 << 20  # a /metrics page is tens of kB; more is not an exposition we want to hold


class MetricsUnavailable(Exception):
    """No metrics to read, with the reason and what to do."""


@dataclass
class Target:
    deployment: str
    engine: str
    node: str  # the head, which serves HTTP
    port: int
    version: str | None = None


async def http_get(
    node: Node, port: int, path: str, timeout: float = SCRAPE_TIMEOUT_S, headers: dict[str, str] | None = None
) -> tuple[int, bytes]:
    """(status, body) of GET http://127.0.0.1:port/path on the node; OSError/TimeoutError when unreachable."""
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())

    async def go() -> tuple[int, bytes]:
        reader, writer = await node.open_tcp(port)
        try:
            writer.write(f"GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n{extra}Connection: close\r\n\r\n".encode())
            raw = await reader.read(MAX_BODY)
            while len(raw) < MAX_BODY:
                more = await reader.read(MAX_BODY - len(raw))
                if not more:
                    break
                raw += more
        finally:
            writer.close()
        head, _, body = raw.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        parts = lines[0].split()
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
            raise OSError(f"not an HTTP answer from 127.0.0.1:{port}")
        if any(ln.lower().replace(b" ", b"") == b"transfer-encoding:chunked" for ln in lines[1:]):
            body = _unchunk(body)
        return int(parts[1]), body

    return await asyncio.wait_for(go(), timeout)


def _unchunk(body: bytes) -> bytes:
    out, i = [], 0
    while i < len(body):
        j = body.find(b"\r\n", i)
        if j < 0:
            break
        try:
            n = int(body[i:j].split(b";")[0], 16)
        except ValueError:
            break
        if n == 0:
            break
        out.append(body[j + 2 : j + 2 + n])
        i = j + 2 + n + 2
    return b"".join(out)


async def scrape(node: Node, t: Target, timeout: float = SCRAPE_TIMEOUT_S) -> Scrape:
    eng = find_engine(t.engine)
    path = eng.metrics_path if eng else Engine.metrics_path
    try:
        status, body = await http_get(node, t.port, path, timeout)
    except Exception as e:  # noqa: BLE001 - a link or channel failure, a timeout: say so, do not crash
        raise MetricsUnavailable(
            f"no answer from {t.node}:127.0.0.1:{t.port}{path} ({type(e).__name__}: {e})"
        ) from None
    if status == 404:
        why = eng.no_metrics_hint if eng else Engine.no_metrics_hint
        raise MetricsUnavailable(f"{t.engine} on {t.node} has no {path} (HTTP 404): {why}")
    if status != 200:
        raise MetricsUnavailable(f"{t.node}:{t.port}{path} answered HTTP {status}")
    return parse(body.decode("utf-8", "replace"), t.engine, t.version)


async def locate(cluster: Cluster, config: Config, name: str) -> Target:
    """The running head of deployment `name`, its engine and HTTP port."""
    found = summarize(await find_all(cluster, name))
    dep = next((d for d in found if d.get("name") == name), None)
    if dep is None:
        down = [d["summary"] for d in found if "error" in d]
        raise MetricsUnavailable(f"no container of {name}" + (f" ({'; '.join(down)})" if down else ""))
    heads = [c for c in dep["containers"] if c.get("rank") == "0"] or dep["containers"][:1]
    head = heads[0]
    if head.get("state") != "running":
        raise MetricsUnavailable(f"{head['name']} on {head['node']} is {head.get('state')}: nothing serves")
    engine = dep["engine"].split(",")[0]
    try:
        rec = await load_record(cluster[config.head.name], name)
    except Exception:  # noqa: BLE001 - no record: the engine's default port
        rec = None
    return Target(name, engine, head["node"], _port_of(config, engine, rec))
