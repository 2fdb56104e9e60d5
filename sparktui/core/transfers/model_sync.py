"""Copy the model directory from the node that holds it to the others, verified.

The source node runs rsync itself, detached (so the copy survives sparktui exiting), towards
each peer's fabric address; nodes that finished become senders for the rest (see schedule.py).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any, Callable

import humanize

from ..state.events import TransferProgress
from . import cipher, remote, streams, trust
from .addresses import fabric_addresses
from .errors import TransferBusy, TransferError, TrustMissing
from .follow import follow
from .options import TransferOptions
from .runner import Outcome, run_fanout
from .schedule import FanOut
from .state import DONE, FAILED, RUNNING, UNVERIFIED, TransferMeta, new_id
from .status import list_transfers, running_to

Emit = Callable[[Any], None]


def _kv(text: str) -> dict[str, str]:
    return dict(w.split("=", 1) for w in text.split() if "=" in w)


def parse_file_list(text: str) -> dict:
    """remote.file_list() output -> {'files', 'links', 'bytes', 'sizes': {name: size}, 'incomplete'}."""
    links_line, _, rest = text.partition("\n")
    mark_line, _, records = rest.partition("\n")
    sizes: dict[str, int] = {}
    for rec in records.split("\0"):
        size, sep, name = rec.partition(" ")
        if sep and size.isdigit():
            sizes[name] = int(size)
    links = links_line.partition("=")[2].strip()
    return {
        "files": len(sizes),
        "links": int(links) if links.isdigit() else 0,
        "bytes": sum(sizes.values()),
        "sizes": sizes,
        "incomplete": mark_line.partition("=")[2].strip() or None,
    }


async def inventory(node, path: str) -> dict | None:
    """{'files', 'links', 'bytes', 'sizes', 'incomplete'} of path on node; None when the directory is
    not there. 'incomplete' is the note of an unverified copy into it (remote.MARKER), else None."""
    r = await node.run(remote.file_list(path), timeout=600)
    if r.exit_status == 3:
        return None
    if not r.ok:
        raise TransferError(f"{node.name}: cannot measure {path}: {r.stderr.strip() or f'exit {r.exit_status}'}")
    return parse_file_list(r.stdout)


def compare_sizes(src: dict[str, int], dst: dict[str, int], limit: int = 3) -> list[str]:
    """What differs file by file between two size maps, in words (empty when every size matches)."""
    missing = sorted(set(src) - set(dst))
    extra = sorted(set(dst) - set(src))
    short = sorted(n for n in set(src) & set(dst) if src[n] != dst[n])
    out = []

    def some(names: list[str]) -> str:
        return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")

    if short:
        out.append(
            f"{len(short)} file(s) differ in size ({', '.join(f'{n}: {_size(dst[n])} of {_size(src[n])}' for n in short[:limit])}"
            + (f" and {len(short) - limit} more" if len(short) > limit else "")
            + ")"
        )
    if missing:
        out.append(f"{len(missing)} file(s) missing ({some(missing)})")
    if extra:
        out.append(
            f"{len(extra)} file(s) the source does not have ({some(extra)}; remove them or an engine may load them)"
        )
    return out


def _size(n: int | None) -> str:
    return humanize.naturalsize(n or 0, binary=True)


async def require_rsync(node, who: str) -> None:
    """Raise TransferError unless rsync runs on node, saying why in the node's own words.

    Only a lookup that ran and found nothing means "not installed"; any other failure (a shell that
    cannot redirect, a full disk) is reported with the stderr the node gave.
    """
    r = await node.run(remote.has_command("rsync"), timeout=30)
    if r.ok:
        return
    err = " ".join(r.stderr.split())[:300]
    if r.exit_status == 255:
        raise TransferError(f"{who} is unreachable: {err}")
    if not err:  # `command -v` found nothing: exit 1 in bash, 127 in dash and busybox
        raise TransferError(f"rsync is not installed on {node.name}; install it there (apt install rsync)")
    raise TransferError(f"cannot check for rsync on {node.name}: {err}")


async def _preflight_dest(node, path: str, need_bytes: int) -> None:
    """Raise TransferError when dest cannot take the copy: unreachable, no rsync, no room."""
    await require_rsync(node, node.name)
    have = await inventory(node, path)
    f = await node.run(remote.free_space(path), timeout=30)
    kv = _kv(f.stdout)
    if f.ok and kv.get("avail", "").isdigit():
        avail, missing = int(kv["avail"]), need_bytes - (have or {}).get("bytes", 0)
        if missing > avail:
            raise TransferError(
                f"not enough space on {node.name}: {_size(avail)} free at {kv.get('at', path)}, "
                f"the model needs {_size(missing)} more ({_size(need_bytes)} in all)"
            )
    m = await node.run(remote.make_dir(path), timeout=30)
    if not m.ok:
        raise TransferError(f"cannot create {path} on {node.name}: {m.stderr.strip() or m.exit_status}")


async def start_model_transfer(
    cluster,
    source: str,
    dest: str,
    path: str,
    addr: str,
    user: str,
    opts: TransferOptions,
    total: dict | None = None,
    records: list | None = None,
) -> TransferMeta:
    """Start rsync source -> user@addr:path detached on `source`; refuses a second one to `dest`."""
    records = records if records is not None else await list_transfers(cluster)
    busy = running_to(records, dest, "model")
    if busy is not None:
        raise TransferBusy(
            f"a model transfer to {dest} is already running ({busy.id} from {busy.meta.source}); "
            f"follow it with `sparktui sync status` or stop it with `sparktui sync cancel {busy.id}`",
            busy.id,
        )
    total = total if total is not None else await inventory(cluster[source], path)
    have = await inventory(cluster[dest], path)
    choice = await cipher.choose(cluster[source], user, addr, opts)
    sizes = (total or {}).get("sizes", {})
    k = opts.rsync_streams or streams.stream_count(
        choice.cores, sum(1 for s in sizes.values() if s >= opts.stream_file_bytes), opts.max_streams
    )
    plan = streams.plan(sizes, (have or {}).get("sizes"), k, opts.stream_file_bytes)
    meta = TransferMeta(
        id=new_id("model", dest),
        kind="model",
        source=source,
        dest=dest,
        addr=addr,
        user=user,
        path=path,
        total_bytes=(total or {}).get("bytes"),
        total_files=(total or {}).get("files"),
        streams=plan.count,
        cipher=choice.cipher,
        cipher_note=choice.note,
    )
    # the directory counts as incomplete from before the first byte until verification passes
    note = f"copy {meta.id} from {source} started {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(meta.started))}"
    m = await cluster[dest].run(remote.mark_incomplete(path, note), timeout=60)
    if not m.ok:
        raise TransferError(f"cannot prepare {path} on {dest}: {m.stderr.strip() or f'exit {m.exit_status}'}")
    job = streams.job(
        plan,
        path,
        user,
        addr,
        path,
        remote.ssh_command(opts.ssh, opts.connect_timeout, choice.ciphers),
        opts.io_timeout,
        opts.bwlimit,
    )
    r = await cluster[source].run(
        remote.start_detached(meta.id, meta.to_json(), job, streams.state_files(plan)), timeout=60
    )
    if not r.ok:
        raise TransferError(f"could not start rsync on {source}: {r.stderr.strip() or f'exit {r.exit_status}'}")
    return meta


async def verify_model(cluster, meta: TransferMeta, opts: TransferOptions) -> dict:
    """Compare every file's size on both sides (and contents by checksum when asked); on success the
    destination's incomplete-copy mark goes. The result is stored in the transfer's state directory."""
    src, dst = cluster[meta.source], cluster[meta.dest]
    a, b = await asyncio.gather(inventory(src, meta.path), inventory(dst, meta.path))
    result: dict = {"ok": False, "at": time.time(), "checksum": False, "source": _totals(a), "dest": _totals(b)}
    diffs = compare_sizes(a["sizes"], b["sizes"]) if a is not None and b is not None else []
    if a is None or b is None:
        result["message"] = f"{meta.path} is missing on {meta.source if a is None else meta.dest} after the copy"
    elif a["incomplete"]:
        result["message"] = f"{meta.source}'s own copy is incomplete ({a['incomplete']}); sync it first"
    elif diffs:
        result["message"] = (
            f"{meta.dest} does not match {meta.source}: "
            + "; ".join(diffs)
            + " (did the source change during the copy?); run the sync again"
        )
    else:
        result["ok"] = True
        result["message"] = f"verified: {a['files']} files, {_size(a['bytes'])}, every size equal on both nodes"
    if result["ok"] and opts.checksum:
        r = await src.run(
            remote.checksum_dry_run(meta.path, meta.user, meta.addr, meta.path, opts.ssh, opts.connect_timeout)
        )
        diffs = [ln for ln in r.stdout.splitlines() if ln[:1] in "<>ch*"]
        result["checksum"] = True
        if not r.ok:
            result["ok"] = False
            result["message"] = f"checksum pass failed (rsync exit {r.exit_status}): {r.stderr.strip()[-300:]}"
        elif diffs:
            result["ok"] = False
            result["message"] = (
                f"{len(diffs)} files differ by checksum, e.g. "
                + ", ".join(d.split(" ", 1)[-1] for d in diffs[:3])
                + "; run the sync again"
            )
        else:
            result["message"] += ", contents equal by checksum"
    if result["ok"]:
        m = await dst.run(remote.mark_complete(meta.path), timeout=30)
        if not m.ok:
            result["ok"] = False
            result["message"] = (
                f"verified, but the incomplete-copy mark on {meta.dest} could not be removed: "
                f"{m.stderr.strip() or f'exit {m.exit_status}'}"
            )
    await src.run(remote.write_verified(meta.id, result), timeout=30)
    return result


def _how(meta: TransferMeta) -> dict:
    """The streams and cipher of an ended copy, for the events that close it."""
    rows = [{"n": i, "done": True} for i in range(meta.streams)] if meta.streams > 1 else None
    return {"streams": rows, "cipher": meta.cipher}


def _tell_cipher(meta: TransferMeta, emit: Emit) -> None:
    """A copy that could not use the preferred cipher says so (and which one it uses)."""
    if meta.cipher_note:
        emit(
            TransferProgress(
                "-", "model", meta.source, "-", "preparing", message=f"{meta.source} → {meta.dest}: {meta.cipher_note}"
            )
        )


def _totals(inv: dict | None) -> dict | None:
    return None if inv is None else {k: inv[k] for k in ("files", "links", "bytes")}


async def carry_on_model(
    cluster, meta: TransferMeta, emit: Emit, opts: TransferOptions, already_ended: bool = False
) -> Outcome:
    """Follow a started rsync to its end (unless already_ended), then verify it."""
    if not already_ended:
        ended = await follow(cluster[meta.source], meta, emit, opts)
        if ended.rc != 0:
            emit(
                TransferProgress(
                    meta.id,
                    meta.kind,
                    meta.source,
                    meta.dest,
                    ended.state,
                    message=ended.message,
                    total_bytes=meta.total_bytes,
                    **_how(meta),
                )
            )
            return Outcome(meta.dest, False, ended.message or ended.state, meta.source, meta.id)
    emit(
        TransferProgress(
            meta.id,
            meta.kind,
            meta.source,
            meta.dest,
            "verifying",
            total_bytes=meta.total_bytes,
            bytes=meta.total_bytes or 0,
            percent=100.0,
            message="comparing both sides",
            **_how(meta),
        )
    )
    v = await verify_model(cluster, meta, opts)
    state = DONE if v["ok"] else FAILED
    emit(
        TransferProgress(
            meta.id,
            meta.kind,
            meta.source,
            meta.dest,
            state,
            total_bytes=meta.total_bytes,
            bytes=meta.total_bytes or 0,
            percent=100.0 if v["ok"] else None,
            files_total=meta.total_files,
            message=v["message"],
            **_how(meta),
        )
    )
    return Outcome(meta.dest, v["ok"], v["message"], meta.source, meta.id)


async def sync_model(
    cluster,
    config,
    dests: list[str] | None = None,
    *,
    emit: Emit | None = None,
    opts: TransferOptions | None = None,
    addrs: dict[str, str] | None = None,
    subnet: str | None = None,
    wait: bool = True,
) -> list[Outcome]:
    """Bring config.model.path to `dests` (default: every other node), verified.

    wait=False starts every copy from the source and returns at once (ok = started; no fan-out,
    nobody stays to chain it); a later sync_model (or `sync status`) finds them again.

    Transfers already running towards a destination (started by an earlier sparktui) are followed,
    not started twice; a finished but unverified one is verified. Raises TransferError when nothing
    can start (missing source directory, unreachable source); per-destination problems (no trust,
    no room, rsync failure) come back as failed Outcomes with the reason.
    """
    opts = opts or TransferOptions()
    if opts.max_streams == TransferOptions.max_streams:  # not set by the caller: the config's bound
        opts = replace(opts, max_streams=getattr(config.model, "copy_streams", opts.max_streams))
    emit = emit or (lambda e: None)
    path = config.model.path
    source = config.model.source or config.head.name
    names = [n.name for n in config.nodes]
    if source not in names:
        raise TransferError(f"model.source names {source}, which is not a node")
    targets = list(dict.fromkeys(dests or [n for n in names if n != source]))
    unknown = [d for d in targets if d not in names]
    if unknown:
        raise TransferError(f"unknown node(s): {', '.join(unknown)} (nodes: {', '.join(names)})")
    targets = [d for d in targets if d != source]
    if not targets:
        return []
    src_node = cluster[source]
    await require_rsync(src_node, f"{source} (the model's source)")
    total = await inventory(src_node, path)
    if total is None:
        raise TransferError(
            f"model directory {path} not found on {source} (model.source); "
            f"put the checkpoint there or set model.source to the node that holds it"
        )
    if total["incomplete"]:
        raise TransferError(
            f"the copy of {path} on {source} (model.source) is incomplete ({total['incomplete']}); "
            f"complete it first, or set model.source to the node that holds the whole checkpoint"
        )
    if addrs is None:
        addrs, notes = await fabric_addresses(cluster, config, [source, *targets], subnet)
        for note in notes:
            emit(TransferProgress("-", "model", source, "-", "preparing", message=note))

    records = await list_transfers(cluster)
    outcomes: dict[str, Outcome] = {}
    adopted: dict[str, Any] = {}
    latest: dict[str, Any] = {}
    for rec in records:
        if rec.meta.kind == "model" and rec.meta.path == path:
            latest[rec.meta.dest] = rec  # records are oldest first
    todo: list[str] = []
    for d in targets:
        rec = latest.get(d)
        if rec is not None and rec.state == RUNNING and not wait:
            outcomes[d] = Outcome(d, True, f"already running from {rec.meta.source}", rec.meta.source, rec.id)
        elif rec is not None and rec.state == RUNNING:
            emit(
                TransferProgress(
                    rec.id,
                    "model",
                    rec.meta.source,
                    d,
                    RUNNING,
                    total_bytes=rec.meta.total_bytes,
                    message=f"following the transfer already running from {rec.meta.source}",
                )
            )
            adopted[d] = carry_on_model(cluster, rec.meta, emit, opts)
        elif rec is not None and rec.state == UNVERIFIED:
            adopted[d] = carry_on_model(cluster, rec.meta, emit, opts, already_ended=True)
        else:
            todo.append(d)

    users: dict[str, str] = {}

    async def prepare(d: str) -> None:
        try:
            users[d] = await trust.login_of(cluster[d])
            await _preflight_dest(cluster[d], path, total["bytes"])
            reason = await trust.check(src_node, users[d], addrs[d], opts)
            if reason:
                raise TrustMissing(source, d, remote.peer(users[d], addrs[d]), reason)
        except TransferError as e:
            outcomes[d] = Outcome(d, False, str(e), source)
            emit(TransferProgress("-", "model", source, d, FAILED, message=str(e)))

    for d in todo:
        emit(
            TransferProgress(
                "-",
                "model",
                source,
                d,
                "preparing",
                total_bytes=total["bytes"],
                files_total=total["files"],
                message="checking the destination",
            )
        )
    await asyncio.gather(*(prepare(d) for d in todo))
    todo = [d for d in todo if d not in outcomes]

    async def transfer(sender: str, dest: str) -> Outcome:
        if sender != source:  # a fresh copy as sender: it needs its own trust towards dest
            reason = await trust.check(cluster[sender], users[dest], addrs[dest], opts)
            if reason:
                return Outcome(
                    dest,
                    False,
                    str(TrustMissing(sender, dest, remote.peer(users[dest], addrs[dest]), reason)),
                    sender,
                    blocked=True,
                )
        try:
            meta = await start_model_transfer(cluster, sender, dest, path, addrs[dest], users[dest], opts, total)
        except TransferBusy as e:
            return Outcome(dest, False, str(e), sender, e.running_id)
        except TransferError as e:
            return Outcome(dest, False, str(e), sender)
        _tell_cipher(meta, emit)
        return await carry_on_model(cluster, meta, emit, opts)

    if not wait:

        async def start_only(d: str) -> None:
            try:
                meta = await start_model_transfer(cluster, source, d, path, addrs[d], users[d], opts, total)
                _tell_cipher(meta, emit)
                outcomes[d] = Outcome(d, True, f"started {meta.id}", source, meta.id)
            except TransferError as e:
                outcomes[d] = Outcome(d, False, str(e), source, getattr(e, "running_id", None))

        await asyncio.gather(*(start_only(d) for d in todo))
        checked = await asyncio.gather(*adopted.values())  # only finished ones wait for verification here
        outcomes.update({o.dest: o for o in checked})
        return [outcomes[d] for d in targets if d in outcomes]

    fan = FanOut(source, todo, opts.streams_per_source)
    outcomes.update(await run_fanout(fan, transfer, adopted))
    return [outcomes[d] for d in targets if d in outcomes]
