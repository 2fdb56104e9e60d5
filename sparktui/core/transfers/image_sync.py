"""Copy a container image to the nodes that lack it: `docker save | ssh peer docker load`, run
detached on a node that holds it, byte progress through a counter in the pipe (see remote.py),
then the image ID must be the same on every node. Nodes already holding that ID are skipped.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

from ..state.events import TransferProgress
from . import remote, trust
from .addresses import fabric_addresses
from .errors import TransferBusy, TransferError, TrustMissing
from .follow import follow
from ..engines import ENGINES
from .options import TransferOptions
from .runner import Outcome, run_fanout
from .schedule import FanOut
from .state import DONE, FAILED, RUNNING, UNVERIFIED, TransferMeta, new_id
from .status import list_transfers, running_to

Emit = Callable[[Any], None]


def resolve_image(config, image_or_engine: str) -> str:
    """An engine name (sglang, vllm, ...) means the configured image; anything else is an image reference."""
    if image_or_engine in ENGINES:
        return config.image_for(image_or_engine) or image_or_engine
    return image_or_engine


async def image_ids(cluster, names: list[str], image: str) -> tuple[dict[str, tuple[str, int] | None], dict[str, str]]:
    """node -> (image ID, size in bytes), None where the node lacks the image; and node -> why it
    could not be asked (unreachable, no docker, no permission)."""
    errors: dict[str, str] = {}

    async def one(n: str) -> tuple[str, int] | None:
        r = await cluster[n].run(remote.image_id(image), timeout=60)
        if r.exit_status == 255:
            errors[n] = f"{n} is unreachable: {r.stderr.strip()}"
        elif r.exit_status == 127:
            errors[n] = f"docker is not installed on {n}"
        elif not r.ok and "permission denied" in r.stderr.lower():
            errors[n] = f"{n}: the login cannot use docker ({r.stderr.strip()[:200]})"
        elif r.ok and r.stdout.split():
            words = r.stdout.split()
            return words[0], int(words[1]) if len(words) > 1 and words[1].isdigit() else 0
        return None

    found = await asyncio.gather(*(one(n) for n in names))
    return dict(zip(names, found)), errors


async def carry_on_image(
    cluster, meta: TransferMeta, emit: Emit, opts: TransferOptions, already_ended: bool
) -> Outcome:
    """Follow a started save | load to its end (unless already_ended), then compare image IDs."""
    if not already_ended:
        ended = await follow(cluster[meta.source], meta, emit, opts)
        if ended.rc != 0:
            emit(
                TransferProgress(
                    meta.id,
                    "image",
                    meta.source,
                    meta.dest,
                    ended.state,
                    message=ended.message,
                    total_bytes=meta.total_bytes,
                )
            )
            return Outcome(meta.dest, False, ended.message or ended.state, meta.source, meta.id)
    emit(
        TransferProgress(
            meta.id,
            "image",
            meta.source,
            meta.dest,
            "verifying",
            total_bytes=meta.total_bytes,
            bytes=meta.total_bytes or 0,
            message="comparing image IDs",
        )
    )
    found, errors = await image_ids(cluster, [meta.dest], meta.image or "")
    got = found[meta.dest]
    ok = got is not None and got[0] == meta.image_id
    if ok:
        msg = f"verified: {meta.dest} has {meta.image} as {meta.image_id}"
    elif meta.dest in errors:
        msg = f"cannot check the image on {meta.dest}: {errors[meta.dest]}"
    elif got is None:
        msg = f"{meta.image} is not on {meta.dest} after docker load"
    else:
        msg = f"{meta.dest} has {meta.image} as {got[0]}, {meta.source} as {meta.image_id}"
    await cluster[meta.source].run(remote.write_verified(meta.id, {"ok": ok, "message": msg}), timeout=30)
    emit(
        TransferProgress(
            meta.id,
            "image",
            meta.source,
            meta.dest,
            DONE if ok else FAILED,
            total_bytes=meta.total_bytes,
            bytes=meta.total_bytes or 0,
            percent=100.0 if ok else None,
            message=msg,
        )
    )
    return Outcome(meta.dest, ok, msg, meta.source, meta.id)


async def sync_image(
    cluster,
    config,
    image_or_engine: str,
    dests: list[str] | None = None,
    *,
    emit: Emit | None = None,
    opts: TransferOptions | None = None,
    addrs: dict[str, str] | None = None,
    subnet: str | None = None,
    wait: bool = True,
) -> list[Outcome]:
    """Make `dests` (default: every node) hold the same image ID as the node that has it (the head
    first). Raises TransferError when no node has the image or a node cannot be asked.
    wait=False starts the transfers from that node and returns (ok = started)."""
    opts = opts or TransferOptions()
    emit = emit or (lambda e: None)
    image = resolve_image(config, image_or_engine)
    names = [n.name for n in config.nodes]
    targets = list(dict.fromkeys(dests or names))
    unknown = [d for d in targets if d not in names]
    if unknown:
        raise TransferError(f"unknown node(s): {', '.join(unknown)} (nodes: {', '.join(names)})")
    ids, errors = await image_ids(cluster, names, image)
    order = [config.head.name] + [n for n in names if n != config.head.name]
    source = next((n for n in order if ids[n] is not None), None)
    if source is None:
        asked = "; ".join(errors.values())
        raise TransferError(
            f"no node has the image {image}; pull it on one of them first "
            f"(`docker pull {image}` on {config.head.name})" + (f" ({asked})" if asked else "")
        )
    ref_id, size = ids[source]  # type: ignore[misc]
    outcomes: dict[str, Outcome] = {}
    todo = []
    for d in targets:
        if d in errors:  # a node that cannot be asked is only a problem when it is a destination
            outcomes[d] = Outcome(d, False, errors[d], None)
        elif ids[d] is not None and ids[d][0] == ref_id:  # type: ignore[index]
            outcomes[d] = Outcome(d, True, f"already has {image} as {ref_id}", None)
        else:
            todo.append(d)
    if not todo:
        return [outcomes[d] for d in targets]
    emit(
        TransferProgress(
            "-",
            "image",
            source,
            "-",
            "preparing",
            message=f"{image} is {ref_id} on {source}; copying to {', '.join(todo)}",
        )
    )
    if addrs is None:
        addrs, notes = await fabric_addresses(cluster, config, list(dict.fromkeys([source, *todo])), subnet)
        for note in notes:
            emit(TransferProgress("-", "image", source, "-", "preparing", message=note))

    records = await list_transfers(cluster)
    latest = {r.meta.dest: r for r in records if r.meta.kind == "image" and r.meta.image_id == ref_id}
    adopted: dict[str, Any] = {}
    fresh = []
    for d in todo:
        rec = latest.get(d)
        if rec is not None and rec.state == RUNNING and not wait:
            outcomes[d] = Outcome(d, True, f"already running from {rec.meta.source}", rec.meta.source, rec.id)
        elif rec is not None and (rec.state == UNVERIFIED or rec.state == RUNNING and wait):
            adopted[d] = carry_on_image(cluster, rec.meta, emit, opts, already_ended=rec.state == UNVERIFIED)
        else:
            fresh.append(d)

    users: dict[str, str] = {}

    async def prepare(d: str) -> None:
        try:
            users[d] = await trust.login_of(cluster[d])
            reason = await trust.check(cluster[source], users[d], addrs[d], opts)
            if reason:
                raise TrustMissing(source, d, remote.peer(users[d], addrs[d]), reason)
        except TransferError as e:
            outcomes[d] = Outcome(d, False, str(e), source)
            emit(TransferProgress("-", "image", source, d, FAILED, message=str(e)))

    await asyncio.gather(*(prepare(d) for d in fresh))
    fresh = [d for d in fresh if d not in outcomes]

    async def start(sender: str, dest: str) -> TransferMeta | Outcome:
        busy = running_to(await list_transfers(cluster), dest, "image")
        if busy is not None:
            e = TransferBusy(f"an image transfer to {dest} is already running ({busy.id})", busy.id)
            return Outcome(dest, False, str(e), sender, busy.id)
        meta = TransferMeta(
            id=new_id("image", dest),
            kind="image",
            source=sender,
            dest=dest,
            addr=addrs[dest],
            user=users[dest],
            image=image,
            image_id=ref_id,
            total_bytes=size or None,
        )
        job = remote.image_job(image, users[dest], addrs[dest], opts.ssh, opts.connect_timeout)
        r = await cluster[sender].run(remote.start_detached(meta.id, meta.to_json(), job), timeout=60)
        if not r.ok:
            return Outcome(dest, False, f"could not start docker save on {sender}: {r.stderr.strip()}", sender)
        emit(TransferProgress(meta.id, "image", sender, dest, RUNNING, total_bytes=meta.total_bytes))
        return meta

    async def transfer(sender: str, dest: str) -> Outcome:
        target = remote.peer(users[dest], addrs[dest])
        if sender != source:
            reason = await trust.check(cluster[sender], users[dest], addrs[dest], opts)
            if reason:
                return Outcome(dest, False, str(TrustMissing(sender, dest, target, reason)), sender, blocked=True)
        started = await start(sender, dest)
        if isinstance(started, Outcome):
            return started
        return await carry_on_image(cluster, started, emit, opts, already_ended=False)

    if not wait:

        async def start_only(d: str) -> None:
            started = await start(source, d)
            outcomes[d] = (
                started
                if isinstance(started, Outcome)
                else Outcome(d, True, f"started {started.id}", source, started.id)
            )

        await asyncio.gather(*(start_only(d) for d in fresh))
        checked = await asyncio.gather(*adopted.values())  # only finished ones wait for verification here
        outcomes.update({o.dest: o for o in checked})
        return [outcomes[d] for d in targets if d in outcomes]

    fan = FanOut(source, fresh, opts.streams_per_source)
    outcomes.update(await run_fanout(fan, transfer, adopted))
    return [outcomes[d] for d in targets if d in outcomes]
