"""The rendezvous check run on every node inside the plan's image, before the big load.

One stdlib-only file, fed to the image's own python3 on stdin:

    docker run --rm -i ... IMAGE python3 - --rank R --world N --addr HEAD_IP --port P [--bind IP] [--iface IF]

Stdin needs no file on the node (nothing to write, nothing to clean up) and no quoting of a program
on a command line. Where torch sees a GPU it does what the engines do first: a NCCL process group on
the plan's address, ranks and interface env, then an all-reduce, reporting the transport NCCL chose
(from NCCL_DEBUG=INFO) and the bus bandwidth. Otherwise a plain TCP rendezvous between all ranks, each
bound to its own address, which still proves that every rank reaches every other on that subnet.

Its first line, before anything else is imported, is `SPARKTUI-STARTED`: the runner waits for it within a
start window of its own (a large image on slow storage can take minutes to start) and only then counts
the check's timeout, which this program also times from that moment. Its last line on stdout is
`SPARKTUI-PREFLIGHT {json}`. The work runs in a forked child with its
output captured, so a hang inside NCCL's C code is bounded too: at the deadline the parent kills the
child and still reports, naming the stage it was stuck in. Keep this file importable by old Pythons
(3.8): it runs on whatever the image has. sparktui.core.preflight imports classify() and transport()
from here to judge output that never reached the result line (docker failed, no python3).
"""

from __future__ import annotations

import sys
import time

STARTED = "SPARKTUI-STARTED"  # the first line: the container runs (the runner's start window ends here)
if __name__ == "__main__":  # run as the check (python3 -), not imported by sparktui to classify
    sys.stdout.write(STARTED + "\n")
    sys.stdout.flush()
T0 = time.monotonic()  # the check's own deadline counts from here, not from `docker run`

# The imports below come after the first line on purpose: the runner is told the program runs first.
import argparse  # noqa: E402
import collections  # noqa: E402
import errno  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import select  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import threading  # noqa: E402
import traceback  # noqa: E402

MARK = "SPARKTUI-PREFLIGHT "  # the result line
STAGE = "SPARKTUI-STAGE "  # progress lines from the child to the parent
GRACE = 2.0  # seconds past the deadline before the child is killed (its own timeouts fire first)
TEARDOWN = 5.0  # seconds a child that has reported may spend tearing NCCL down before it is killed
# The variables that pin an engine's sockets to the node's fabric address: every registered engine's, written in
# when the program is sent (core/preflight/remote.program_text); this file cannot import the registry on a node.
HOST_IP_VARS: tuple = ()
IFNAME_VARS = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")

# Error kinds, root causes first: the first kind whose pattern matches a failed rank's text wins.
PATTERNS = [
    ("image_missing", (r"Unable to find image[^\n]*", r"No such image[^\n]*", r"pull access denied[^\n]*")),
    ("python_missing", (r"python3?\W+(?:command )?not found", r"executable file not found[^\n]*")),
    (
        "docker",
        (
            r"could not select device driver[^\n]*",
            r"docker: Error response from daemon[^\n]*",
            r"Cannot connect to the Docker daemon[^\n]*",
        ),
    ),
    (
        "interface_missing",
        (
            r"no socket interface found[^\n]*",
            r"Socket operation on non-socket[^\n]*",
            r"no interface (?:named|matches) [^\n]*",
        ),
    ),
    ("address_missing", (r"is not an address of this node[^\n]*", r"Cannot assign requested address[^\n]*")),
    ("port_in_use", (r"Address already in use[^\n]*",)),
    (
        "unreachable",
        (
            r"client socket has timed out after[^\n]*",
            r"No route to host[^\n]*",
            r"Network is unreachable[^\n]*",
            r"could not reach [^\n]*",
        ),
    ),
    ("refused", (r"nothing listens at [^\n]*", r"is not yet listening[^\n]*", r"Connection refused[^\n]*")),
    ("rdma", (r"NCCL WARN NET/IB[^\n]*", r"ibv_\w+ failed[^\n]*", r"NET/IB : [^\n]*(?:error|failed)[^\n]*")),
    (
        "gpu",
        (
            r"no CUDA-capable device[^\n]*",
            r"CUDA out of memory[^\n]*",
            r"CUDA error: [^\n]*",
            r"torch sees no CUDA device[^\n]*",
        ),
    ),
    (
        "peer_missing",
        (
            r"Timed out after \d+ seconds waiting for clients[^\n]*",
            r"\d+/\d+ (?:clients|ranks) joined[^\n]*",
            r"never connected[^\n]*",
        ),
    ),
    (
        "peer_failed",
        (
            r"Failed to recv[^\n]*",
            r"Connection reset by peer[^\n]*",
            r"Broken pipe[^\n]*",
            r"remote process exiting[^\n]*",
            r"closed the connection[^\n]*",
            r"rank \d+ failed[^\n]*",
        ),
    ),
    ("nccl", (r"nccl\w*Error[^\n]*", r"NCCL error[^\n]*", r"NCCL WARN [^\n]*", r"all-reduce gave [^\n]*")),
    ("timeout", (r"hung in [^\n]*", r"[Tt]imed out[^\n]*")),
]
_COMPILED = [(k, [re.compile(p) for p in ps]) for k, ps in PATTERNS]
KINDS = [k for k, _ in PATTERNS]


def classify(text):
    """(kind, the line that says so) for a failed rank's text; (None, None) when nothing is recognised."""
    for kind, regexes in _COMPILED:
        for rx in regexes:
            m = rx.search(text or "")
            if m:
                start = text.rfind("\n", 0, m.start()) + 1
                end = text.find("\n", m.end())
                line = text[start : end if end >= 0 else len(text)].strip()
                return kind, line[:400]
    return None, None


_VIA = re.compile(r"\bvia (NET/IB(?:/GDRDMA)?|NET/Socket|NET/[\w-]+|P2P[\w/]*|SHM[\w/]*|CollNet[\w/]*)")
_NET_USING = re.compile(r"NET/(IB|Socket) ?: Using (\[\d+\]\S+)")
_NET_NETWORK = re.compile(r"Using network (\w+)")
_TRANSPORT_RANK = ("socket", "rdma", "shm", "p2p")  # the slowest path present names the transport


def _via_kind(via):
    if via.startswith("NET/IB"):
        return "rdma"
    if via.startswith("NET/"):
        return "socket"
    if via.startswith("P2P"):
        return "p2p"
    if via.startswith("SHM"):
        return "shm"
    return via.lower()


def transport(lines):
    """What NCCL_DEBUG=INFO lines say: {"transport": data path, "net": network plugin, "line": evidence}.

    "via NET/IB ..." or "NET/IB : Using [0]rocep1s0f1:1/RoCE" is RDMA, NET/Socket plain TCP; ranks on
    one host talk "via P2P" (NVLink/PCIe) or "via SHM" and never touch the network.
    """
    net = net_line = None
    seen = {}
    for line in lines:
        m = _NET_USING.search(line)
        if m and net is None:
            net, net_line = ("rdma" if m.group(1) == "IB" else "socket"), line.strip()
        m = _NET_NETWORK.search(line)
        if m and net is None:
            net, net_line = ("rdma" if m.group(1).upper().startswith("IB") else "socket"), line.strip()
        m = _VIA.search(line)
        if m:
            seen.setdefault(_via_kind(m.group(1)), line.strip())
    for kind in _TRANSPORT_RANK:
        if kind in seen:
            return {"transport": kind, "net": net, "line": seen[kind], "net_line": net_line}
    if seen:
        kind = sorted(seen)[0]
        return {"transport": kind, "net": net, "line": seen[kind], "net_line": net_line}
    return {"transport": net, "net": net, "line": net_line, "net_line": net_line}


def iface_matches(spec, names):
    """Interfaces that an NCCL_SOCKET_IFNAME-style spec selects: "a,b" prefixes, "=a" exact, "^a" all but."""
    spec = (spec or "").strip()
    if not spec:
        return list(names)
    exclude = spec.startswith("^")
    spec = spec[1:] if exclude else spec
    exact = spec.startswith("=")
    spec = spec[1:] if exact else spec
    parts = [p.split(":")[0] for p in spec.split(",") if p]

    def hit(n):
        return any(n == p if exact else n.startswith(p) for p in parts)

    return [n for n in names if hit(n) != exclude]


class CheckFailure(Exception):
    """A failure whose kind is known where it happens."""

    def __init__(self, kind, text, target=None):
        super().__init__(text)
        self.kind = kind
        self.target = target


def _now():
    return time.monotonic()


def _stage(name):
    os.write(1, (STAGE + name + "\n").encode())


# -- checks before any traffic ---------------------------------------------------------------------
def local_interfaces():
    try:
        return [n for _, n in socket.if_nameindex()]
    except OSError:
        return []


def bindable(ip):
    """None when ip is an address of this node, else the reason."""
    fam = socket.AF_INET6 if ":" in ip else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    try:
        s.bind((ip, 0))
        return None
    except OSError as e:
        return os.strerror(e.errno) if e.errno else str(e)
    finally:
        s.close()


def pre_checks(a, tcp):
    """The plan's interface and addresses exist here (NCCL checks its own ifname env on the NCCL path)."""
    names = local_interfaces()
    wanted = [("--iface", a.iface)] if a.iface else []
    if tcp:
        wanted += [(v, os.environ[v]) for v in IFNAME_VARS if os.environ.get(v)]
    for what, spec in wanted:
        if names and not iface_matches(spec, names):
            shown = spec if what == "--iface" else "%s=%s" % (what, spec)
            raise CheckFailure(
                "interface_missing", "no interface matches %s on this node (it has %s)" % (shown, ", ".join(names))
            )
    own = [("the rendezvous address", a.addr)] if a.rank == 0 else []
    own += [("--bind", a.bind)] if a.bind else []
    own += [(v, os.environ[v]) for v in HOST_IP_VARS if os.environ.get(v)]
    for what, ip in own:
        why = bindable(ip)
        if why:
            raise CheckFailure("address_missing", "%s %s is not an address of this node (%s)" % (what, ip, why))


# -- the TCP path ----------------------------------------------------------------------------------
def _send(sock, obj):
    sock.sendall((json.dumps(obj) + "\n").encode())


def _recv(sock, deadline, what):
    """One JSON line; CheckFailure when the peer goes away or the deadline passes."""
    buf = b""
    while b"\n" not in buf:
        left = deadline - _now()
        if left <= 0:
            raise socket.timeout("timed out waiting for " + what)
        sock.settimeout(left)
        chunk = sock.recv(4096)
        if not chunk:
            raise CheckFailure("peer_failed", "the peer closed the connection while this rank waited for " + what)
        buf += chunk
        if len(buf) > 1 << 20:
            raise CheckFailure("peer_failed", "garbage from the peer while waiting for " + what)
    return json.loads(buf.split(b"\n", 1)[0].decode())


def _listen(ip, port):
    fam = socket.AF_INET6 if ":" in ip else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind((ip, port))
    except OSError as e:
        s.close()
        if e.errno == errno.EADDRINUSE:
            raise CheckFailure(
                "port_in_use", "%s:%d: Address already in use (another process holds the port)" % (ip, port)
            )
        if e.errno == errno.EADDRNOTAVAIL:
            raise CheckFailure("address_missing", "%s is not an address of this node (cannot listen there)" % ip)
        raise
    s.listen(64)
    return s


def dial(src, ip, port, deadline):
    """Connect to ip:port from the address src (so a wrong interface really fails), retrying to the deadline."""
    last = None
    while True:
        left = deadline - _now()
        if left <= 0:
            break
        fam = socket.AF_INET6 if ":" in ip else socket.AF_INET
        s = socket.socket(fam, socket.SOCK_STREAM)
        try:
            if src:
                try:
                    s.bind((src, 0))
                except OSError as e:
                    raise CheckFailure(
                        "address_missing", "%s is not an address of this node (%s)" % (src, os.strerror(e.errno or 0))
                    )
            s.settimeout(min(5.0, left))
            s.connect((ip, port))
            s.settimeout(None)
            return s
        except CheckFailure:
            s.close()
            raise
        except socket.timeout:
            last = "timeout"
        except OSError as e:
            last = {
                errno.ECONNREFUSED: "refused",
                errno.EHOSTUNREACH: "no route to host",
                errno.ENETUNREACH: "network is unreachable",
            }.get(e.errno, os.strerror(e.errno or 0) or str(e))
        s.close()
        # A refusal comes back at once: wait a little before the next try (bounded by the deadline).
        time.sleep(min(0.2 if last == "refused" else 0.5, max(0.0, deadline - _now())))
    target = "%s:%d" % (ip, port)
    src_txt = " from %s" % src if src else ""
    if last == "refused":
        raise CheckFailure(
            "refused", "nothing listens at %s: connection refused%s until the deadline" % (target, src_txt), target
        )
    why = {"timeout": "connect timed out, no answer", None: "no time left to try"}.get(last, last)
    raise CheckFailure("unreachable", "could not reach %s%s (%s)" % (target, src_txt, why), target)


def _accept_pings(srv, expected, deadline, got, sizes):
    """Serve the mesh listener: each lower rank sends a ping and a payload, gets a pong."""
    while not expected <= set(got) and _now() < deadline:
        srv.settimeout(max(0.05, min(0.5, deadline - _now())))
        try:
            c, _ = srv.accept()
        except socket.timeout:
            continue
        except OSError:
            return
        try:
            c.settimeout(max(0.05, deadline - _now()))
            head = b""
            while b"\n" not in head:
                chunk = c.recv(4096)
                if not chunk:
                    raise OSError("closed")
                head += chunk
            line, rest = head.split(b"\n", 1)
            msg = json.loads(line.decode())
            size, t0 = int(msg.get("bytes", 0)), _now()
            n = len(rest)
            while n < size:
                chunk = c.recv(min(1 << 20, size - n))
                if not chunk:
                    raise OSError("closed")
                n += len(chunk)
            got[int(msg["rank"])] = _now() - t0
            sizes[int(msg["rank"])] = size
            _send(c, {"op": "pong"})
        except (OSError, ValueError, KeyError):
            pass
        finally:
            c.close()


def tcp_rendezvous(a, deadline):
    """Rank 0 listens on addr:port; the others join from their own address; then every pair connects."""
    _stage("rendezvous")
    src = a.bind or (a.addr if a.rank == 0 else "")
    host_ip = next((os.environ[v] for v in HOST_IP_VARS if os.environ.get(v)), None) or src or _route_src(a.addr)
    mesh = _listen(host_ip, 0)
    mesh_port = mesh.getsockname()[1]
    peers = {a.rank: [host_ip, mesh_port]}
    socks = []
    try:
        if a.rank == 0:
            srv = _listen(a.addr, a.port)
            socks.append(srv)
            while len(peers) < a.world:
                left = deadline - _now()
                if left <= 0:
                    missing = sorted(set(range(a.world)) - set(peers))
                    raise CheckFailure(
                        "peer_missing",
                        "waited %g s at %s:%d: %d/%d ranks joined (missing ranks: %s)"
                        % (a.timeout, a.addr, a.port, len(peers), a.world, ",".join(map(str, missing))),
                    )
                srv.settimeout(left)
                try:
                    c, _ = srv.accept()
                except socket.timeout:
                    continue
                try:
                    hello = _recv(c, min(deadline, _now() + 5), "a hello")
                    r = int(hello["rank"])
                except (CheckFailure, OSError, ValueError, KeyError, TypeError):
                    c.close()
                    continue
                if r in peers or not 0 < r < a.world:
                    c.close()
                    continue
                peers[r] = list(hello["mesh"])
                socks.append(c)
            for c in socks[1:]:
                _send(c, {"op": "roster", "peers": peers})
        else:
            c = dial(src, a.addr, a.port, deadline)
            socks.append(c)
            _send(c, {"op": "hello", "rank": a.rank, "mesh": [host_ip, mesh_port]})
            try:
                roster = _recv(c, deadline, "the other ranks")
            except socket.timeout:
                raise CheckFailure(
                    "peer_missing",
                    "joined %s:%d but not all %d ranks joined within %g s" % (a.addr, a.port, a.world, a.timeout),
                )
            peers = {int(k): v for k, v in roster["peers"].items()}
        _stage("mesh")
        got, sizes = {}, {}
        lower = set(range(a.rank))
        acceptor = threading.Thread(target=_accept_pings, args=(mesh, lower, deadline, got, sizes), daemon=True)
        acceptor.start()
        payload = b"\0" * int(a.tcp_mb * (1 << 20))
        rates = []
        for r in range(a.rank + 1, a.world):
            ip, port = peers[r]
            s = dial(host_ip, ip, int(port), deadline)
            t0 = _now()
            try:
                s.settimeout(max(0.05, deadline - t0))
                _send(s, {"op": "ping", "rank": a.rank, "bytes": len(payload)})
                s.sendall(payload)
                _recv(s, deadline, "rank %d's answer" % r)
            except socket.timeout:
                raise CheckFailure(
                    "unreachable",
                    "could not reach %s:%s (rank %d): the transfer stalled" % (ip, port, r),
                    "%s:%s" % (ip, port),
                )
            finally:
                s.close()
            rates.append(len(payload) / max(_now() - t0, 1e-9) / 1e9)
        acceptor.join(max(0.0, deadline - _now()))
        missing = sorted(lower - set(got))
        if missing:
            raise CheckFailure(
                "peer_missing",
                "rank(s) %s never connected to this node's address %s:%d within %g s"
                % (",".join(map(str, missing)), host_ip, mesh_port, a.timeout),
            )
        rates += [sizes[r] / max(t, 1e-9) / 1e9 for r, t in got.items() if sizes.get(r)]
        return {
            "ok": True,
            "path": "tcp",
            "transport": "tcp",
            "net": "tcp",
            "bandwidth_gb_s": round(min(rates), 3) if rates else None,
            "bandwidth_what": "TCP stream",
            "bytes": len(payload),
            "peers": {str(k): v[0] for k, v in sorted(peers.items())},
        }
    finally:
        for s in socks + [mesh]:
            try:
                s.close()
            except OSError:
                pass


def _route_src(addr):
    """The local address the kernel would use towards addr (a UDP connect sends nothing)."""
    s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect((addr, 9))
        return s.getsockname()[0]
    except OSError:
        return "0.0.0.0"
    finally:
        s.close()


# -- the NCCL path ---------------------------------------------------------------------------------
def nccl_rendezvous(a, deadline):
    _stage("import")
    os.environ["NCCL_DEBUG"] = "INFO"  # the transport line is the point; a config's WARN would hide it
    import datetime

    import torch
    import torch.distributed as dist

    info = {"torch": getattr(torch, "__version__", None)}
    if not torch.cuda.is_available() or torch.cuda.device_count() < 1:
        if a.mode == "nccl":
            raise CheckFailure("gpu", "torch sees no CUDA device (torch.cuda.is_available() is False)")
        res = tcp_rendezvous(a, deadline)
        res.update(info, note="torch is there but sees no GPU: checked plain TCP instead of NCCL")
        return res
    dev = torch.device("cuda", a.device)
    torch.cuda.set_device(dev)
    info["gpu"] = torch.cuda.get_device_name(dev)
    try:
        info["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
    except Exception:  # noqa: BLE001 - a version string is a nicety
        pass
    _stage("rendezvous")
    # Leave room after the store's own timeout so its message, not our kill, ends a failed rendezvous.
    left = deadline - _now() - min(6.0, a.timeout * 0.2)
    host = "[%s]" % a.addr if ":" in a.addr else a.addr
    kw = dict(
        backend="nccl",
        init_method="tcp://%s:%d" % (host, a.port),
        world_size=a.world,
        rank=a.rank,
        timeout=datetime.timedelta(seconds=max(1.0, left)),
    )
    try:
        dist.init_process_group(device_id=dev, **kw)  # eager: NCCL's bootstrap runs here, inside the bound
    except TypeError:
        dist.init_process_group(**kw)
    _stage("all-reduce")
    n = max(1, int(a.size_mb * (1 << 20)) // 4)
    x = torch.ones(n, dtype=torch.float32, device=dev)
    dist.all_reduce(x)
    torch.cuda.synchronize(dev)
    got = float(x[0].item())
    if got != float(a.world):
        raise CheckFailure("nccl", "all-reduce gave %g instead of %d: the ranks did not sum" % (got, a.world))
    _stage("bandwidth")
    t0 = time.perf_counter()
    for _ in range(a.iters):
        dist.all_reduce(x)
    torch.cuda.synchronize(dev)
    per = (time.perf_counter() - t0) / max(1, a.iters)
    factor = 2.0 * (a.world - 1) / a.world if a.world > 1 else 1.0  # nccl-tests' bus bandwidth
    dist.barrier()  # every rank is past its all-reduces before any rank leaves
    _TEARDOWN.append(dist.destroy_process_group)  # after the result is out: a slow teardown cannot void it
    info.update(
        ok=True,
        path="nccl",
        bandwidth_gb_s=round(n * 4 * factor / per / 1e9, 3),
        bandwidth_what="all-reduce bus bandwidth",
        bytes=n * 4,
        allreduce_ms=round(per * 1000, 3),
    )
    return info


# -- the supervisor --------------------------------------------------------------------------------
_TEARDOWN = []  # run in the child once its result is written


def work(a, deadline):
    """Runs in the child; returns the result dict (CheckFailure and other errors become a failed one)."""
    try:
        torch_here = a.mode != "tcp" and importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        torch_here = False
    try:
        _stage("checks")
        pre_checks(a, tcp=not torch_here)
        if torch_here:
            return nccl_rendezvous(a, deadline)
        if a.mode == "nccl":
            raise CheckFailure("gpu", "the image has no torch: cannot test NCCL")
        return tcp_rendezvous(a, deadline)
    except CheckFailure as e:
        return {
            "ok": False,
            "kind": e.kind,
            "error": str(e),
            "target": e.target,
            "path": "nccl" if torch_here else "tcp",
        }
    except BaseException as e:  # noqa: BLE001 - any failure is a result, classified by the parent
        sys.stderr.write(traceback.format_exc())
        sys.stderr.flush()
        return {"ok": False, "error": _short("%s: %s" % (type(e).__name__, e)), "path": "nccl" if torch_here else "tcp"}


def _noise(line):
    """C++ stack frames torch appends to its errors: long, and they say nothing about the network."""
    t = line.lstrip()
    return t.startswith("frame #") or t.startswith("Exception raised from")


def _short(text):
    return "\n".join(ln for ln in text.strip().splitlines() if not _noise(ln))[:1500]


def _interesting(line):
    return "NCCL WARN" in line or (
        "NCCL INFO" in line
        and (
            "NET/" in line
            or " via " in line
            or "Bootstrap" in line
            or "Using network" in line
            or "NCCL version" in line
            or "Init COMPLETE" in line
            or "comm 0x" in line
        )
    )


def supervise(a, t0):
    deadline = t0 + a.timeout
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: everything it and NCCL print goes to the pipe
        os.close(r)
        os.dup2(w, 1)
        os.dup2(w, 2)
        os.close(w)
        code = 1
        try:
            res = work(a, deadline)
            sys.stdout.flush()
            sys.stderr.flush()
            os.write(1, (MARK + json.dumps(res) + "\n").encode())
            code = 0
            for fn in _TEARDOWN:
                fn()
        finally:
            os._exit(code)  # skip atexit: NCCL teardown can hang, and the parent has what it needs
    os.close(w)
    result, stage, timings = None, "start", {}
    nccl_all, kept, warns, tail = [], [], [], collections.deque(maxlen=40)
    buf, killed, status = b"", False, None
    hard = deadline + GRACE
    while True:
        if status is None:
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                status = st
        left = hard - _now()
        if left <= 0 and status is None:
            os.kill(pid, signal.SIGKILL)
            killed = True
            status = os.waitpid(pid, 0)[1]
        ready = select.select([r], [], [], 0 if killed else max(0.0, min(0.2, left)))[0]
        chunk = os.read(r, 65536) if ready else b""
        if ready and not chunk:
            break  # EOF: the child and anything it started are gone
        if not ready and status is not None:
            break  # the child exited and nothing is left to read
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for raw in lines:
            line = raw.decode("utf-8", "replace").rstrip("\r")
            if line.startswith(MARK):
                try:
                    result = json.loads(line[len(MARK) :])
                    hard = min(hard, _now() + TEARDOWN)
                except ValueError:
                    tail.append(line)
            elif line.startswith(STAGE):
                stage = line[len(STAGE) :].strip()
                timings[stage] = round(_now() - t0, 3)
            elif "NCCL " in line:
                nccl_all.append(line)
                if _interesting(line) and len(kept) < 60 and line not in kept:
                    kept.append(line.strip())
                if "NCCL WARN" in line and len(warns) < 20:
                    warns.append(line.strip())
            elif line.strip() and not _noise(line):
                tail.append(line)
        if killed and not ready:
            break
    os.close(r)
    if buf:
        tail.append(buf.decode("utf-8", "replace"))
    res = dict(result or {"ok": False, "path": None})
    if result is None:
        if killed:
            res["error"] = "no answer within %g s: hung in %s" % (a.timeout, stage)
            res["hung_in"] = stage
        else:
            res["error"] = "the check exited (status %s) without a result, in %s" % (status, stage)
    tr = transport(nccl_all)
    for k in ("transport", "net"):
        if tr[k] and not res.get(k):
            res[k] = tr[k]
    res["transport_line"] = tr["line"]
    res["net_line"] = tr["net_line"]
    res.update(
        rank=a.rank,
        world=a.world,
        host=socket.gethostname(),
        addr=a.addr,
        port=a.port,
        bind=a.bind,
        iface=a.iface,
        stage=stage,
        timings=timings,
        nccl_lines=kept,
        seconds=round(_now() - t0, 3),
    )
    if not res.get("ok"):
        res["tail"] = [x[:400] for x in warns + list(tail)][-25:]
        if not res.get("kind"):
            text = "\n".join([res.get("error") or ""] + warns + list(tail))
            kind, line = classify(text)
            if killed and kind in (None, "timeout"):
                kind, line = "timeout", res["error"]
            res["kind"], res["line"] = kind or "unknown", line
    return res


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="preflight_check", description="sparktui rendezvous check")
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world", type=int, required=True)
    p.add_argument("--addr", required=True, help="rendezvous address: the head's IP on the rendezvous subnet")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--bind", default="", help="this node's address on that subnet (connect from it)")
    p.add_argument("--iface", default="", help="this node's interface on that subnet")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds for the whole check")
    p.add_argument("--mode", choices=("auto", "nccl", "tcp"), default="auto")
    p.add_argument("--size-mb", type=float, default=64.0, help="all-reduce tensor size")
    p.add_argument("--iters", type=int, default=5, help="timed all-reduces")
    p.add_argument("--tcp-mb", type=float, default=4.0, help="bytes each pair sends on the TCP path")
    p.add_argument("--device", type=int, default=0, help="CUDA device index")
    a = p.parse_args(argv)
    if not 0 <= a.rank < a.world:
        p.error("--rank must be in 0..world-1")
    if a.timeout <= 0:
        p.error("--timeout must be positive")
    return a


def main(argv=None):
    a = parse_args(argv)
    res = supervise(a, T0)
    sys.stdout.write(MARK + json.dumps(res) + "\n")
    sys.stdout.flush()
    return 0 if res.get("ok") else 1


if __name__ == "__main__":
    sys.exit(main())
