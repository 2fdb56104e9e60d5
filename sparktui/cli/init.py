"""`sparktui init`: write a commented config from flags, after testing SSH and probing the nodes."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from ..core.config import firstrun
from ..core.config.config import ConfigError, SshConfig, default_image, user_config_path
from ..core.engines import ENGINES
from ..core.config.configwrite import ConfigExists, checked_text, default_header, example_text, write_config_file
from .common import CliExit, add_json_arg, err_console, journal, print_json

NODE_HELP = (
    "NAME=HOST[,user=U][,key=PATH][,port=N], repeated, the head first; HOST may be an address, "
    "a hostname or a ~/.ssh/config alias (a bare alias names the node too)"
)
SPEC_KEYS = {"user": "user", "key": "identity_file", "identity_file": "identity_file", "port": "port"}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("init", help="write a config: test SSH to each node, probe the fabric, write commented YAML")
    p.add_argument("--node", action="append", default=[], metavar="SPEC", help=NODE_HELP)
    p.add_argument("--model-path", metavar="DIR", help="checkpoint directory, the same absolute path on every node")
    p.add_argument("--model-name", metavar="NAME", help="served model name (default: the folder's name)")
    p.add_argument("--cluster", default="sparks", metavar="NAME", help="cluster name (default: sparks)")
    p.add_argument(
        "--image",
        action="append",
        default=[],
        metavar="ENGINE=IMAGE",
        help="the image that runs ENGINE, repeated; defaults: "
        + ", ".join(f"{e}={ref}" for e in ENGINES if (ref := default_image(e))),
    )
    for e in ENGINES:  # --image-ENGINE IMAGE: the older spelling, kept for scripts that use it
        p.add_argument(f"--image-{e}", dest=f"image_{e}", metavar="IMAGE", help=f"same as --image {e}=IMAGE")
    p.add_argument(
        "--fabric",
        metavar="SUBNET",
        help="the subnet joining the nodes (CIDR, an address on it or the "
        "head's interface); default: the best one the probe finds",
    )
    p.add_argument(
        "--known-hosts",
        metavar="FILE",
        help="known_hosts file to check and extend (default: ~/.ssh/known_hosts); written into the config",
    )
    p.add_argument(
        "--output",
        "-o",
        metavar="FILE",
        help=f"where to write (default: --config or $SPARKTUI_CONFIG when given, else {user_config_path()})",
    )
    p.add_argument("--force", action="store_true", help="replace an existing file")
    p.add_argument(
        "--accept-new-host-keys",
        action="store_true",
        help="trust a node's unknown host key (printed with its fingerprint) by adding it to known_hosts",
    )
    p.add_argument("--no-probe", action="store_true", help="write the config without connecting to the nodes")
    p.add_argument("--example", action="store_true", help="print the annotated example config and exit")
    add_json_arg(p)
    p.set_defaults(func=cmd_init)


def parse_node(spec: str) -> firstrun.NodeDraft:
    """NAME=HOST[,key=value...] or a bare HOST; raises ValueError with the reason."""
    head, *opts = [part.strip() for part in spec.split(",")]
    name, sep, host = head.partition("=")
    if not sep:
        name = host = head
    draft = firstrun.NodeDraft(name=name.strip(), host=host.strip())
    for opt in opts:
        key, sep, value = opt.partition("=")
        field = SPEC_KEYS.get(key.strip())
        if not sep or field is None:
            raise ValueError(f"--node {spec!r}: {opt!r} is not one of user=, key=, port=")
        value = value.strip()
        if field == "port":
            try:
                draft.port = int(value)
            except ValueError:
                raise ValueError(f"--node {spec!r}: port {value!r} is not a number") from None
        else:
            setattr(draft, field, value)
    return draft


def _drafts(args: argparse.Namespace) -> list[firstrun.NodeDraft]:
    if not args.node:
        raise CliExit(2, f"init: name the nodes with --node ({NODE_HELP})")
    drafts: list[firstrun.NodeDraft] = []
    problems = []
    for spec in args.node:
        try:
            d = parse_node(spec)
        except ValueError as e:
            problems.append(str(e))
            continue
        problems += [f"--node {spec!r}: {p}" for p in firstrun.draft_problems(d, drafts)]
        drafts.append(d)
    if problems:
        raise CliExit(2, "init: " + "\n      ".join(problems))
    return drafts


def _images(args: argparse.Namespace) -> dict[str, str]:
    """engine -> image named on the command line (--image ENGINE=IMAGE, or --image-ENGINE IMAGE)."""
    chosen = {e: ref for e in ENGINES if (ref := getattr(args, f"image_{e}", None))}
    for spec in args.image:
        engine, sep, ref = (part.strip() for part in spec.partition("="))
        if not sep or not ref:
            raise CliExit(2, f"init: --image {spec!r}: expected ENGINE=IMAGE, e.g. {next(iter(ENGINES))}=IMAGE")
        if engine not in ENGINES:
            raise CliExit(
                2, f"init: --image {spec!r}: unknown engine {engine!r} (expected one of: {', '.join(ENGINES)})"
            )
        chosen[engine] = ref
    return chosen


def _say(args: argparse.Namespace, text: str) -> None:
    if not args.json:
        print(text, flush=True)  # plain print: rich would wrap a long path across lines


async def _connect(args, drafts, ssh, jr) -> list[firstrun.SshTest]:
    tests = await firstrun.test_all(drafts, ssh, jr)
    unknown = [t for t in tests if t.unknown_key]
    if unknown and args.accept_new_host_keys:
        for t in unknown:
            path = firstrun.trust(t)
            k = t.unknown_key
            _say(args, f"trusted the host key of {k.node}: {k.algorithm} {k.fingerprint} (added to {path})")
        again = {
            t.node: t
            for t in await firstrun.test_all([d for d in drafts if d.name in {u.node for u in unknown}], ssh, jr)
        }
        tests = [again.get(t.node, t) for t in tests]
    return tests


async def cmd_init(args: argparse.Namespace) -> int:
    if args.example:
        sys.stdout.write(example_text())
        return 0
    drafts = _drafts(args)
    if not args.model_path:
        raise CliExit(2, "init: --model-path DIR is required (the checkpoint folder, the same path on every node)")
    # the file sparktui would read next: --output, else --config or $SPARKTUI_CONFIG, else the user's config
    named = args.output or getattr(args, "config", None) or os.environ.get("SPARKTUI_CONFIG")
    target = Path(named).expanduser() if named else user_config_path()
    if target.exists() and not args.force:  # before any SSH: nothing to lose by asking early
        raise CliExit(2, f"init: {target} exists; pass --force to replace it, or --output FILE")
    ssh = SshConfig(known_hosts=str(Path(args.known_hosts).expanduser()) if args.known_hosts else None)
    images = _images(args)
    config = firstrun.draft_config(drafts, args.model_path, ssh, args.cluster, args.model_name)
    for engine, ref in images.items():
        config.set_image(engine, ref)
    report: dict = {"path": str(target), "written": False, "nodes": [], "fabric": None, "warnings": []}
    notes: dict = {}
    if not args.no_probe:
        jr = journal()
        jr.cluster = args.cluster  # what init ran is journalled under the cluster it writes
        tests = await _connect(args, drafts, ssh, jr)
        report["nodes"] = [t.to_json() for t in tests]
        failed = [t for t in tests if not t.ok]
        if failed:
            return _refuse(args, report, failed)
        inv = await firstrun.discover(config, jr)
        names = [n.name for n in config.nodes]
        try:
            subnet = firstrun.choose_subnet(inv, args.fabric, names)
        except ValueError as e:
            raise CliExit(2, f"init: --fabric: {e}") from None
        notes = firstrun.pin_fabric(config, subnet)
        config.model.source = firstrun.model_holder(config, inv.facts)
        report["fabric"] = subnet.to_json() if subnet else None
        report["warnings"] = inv.warnings
        report["model"] = firstrun.model_summary(config, inv.facts)
        _say(args, "fabric: " + (firstrun.subnet_label(subnet) if subnet else "none found"))
        _say(args, "model: " + report["model"])
        report["images"] = firstrun.image_summary(config, inv.facts)
        for engine, line in report["images"].items():
            _say(args, f"{engine} image: {line}")
        for w in inv.warnings:
            _say(args, f"warning: {w}")
    try:
        text = checked_text(config, header=default_header(), iface_notes=notes)
        write_config_file(target, text, force=args.force)
    except ConfigError as e:
        raise CliExit(2, f"init: the values given make no valid config: {e.what} ({e.expected})") from None
    except ConfigExists as e:
        raise CliExit(2, f"init: {e}") from None
    except OSError as e:
        raise CliExit(1, f"init: cannot write {target}: {e.strerror or e}") from None
    report["written"] = True
    if args.json:
        print_json(report)
    else:
        flag = f" --config {shlex.quote(str(target))}" if target != user_config_path() else ""
        _say(args, f"wrote {target}; next: sparktui{flag} check")
    return 0


def _refuse(args, report: dict, failed: list[firstrun.SshTest]) -> int:
    if args.json:
        print_json(report)
    for t in failed:
        if t.unknown_key:
            k = t.unknown_key
            err_console.print(
                f"{k.describe()}. Compare it with `ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub` on the "
                f"node; if it matches, run init again with --accept-new-host-keys "
                f"(adds it to {k.known_hosts}).",
                markup=False,
                highlight=False,
            )
        else:
            err_console.print(t.error or f"{t.node}: SSH failed", markup=False, highlight=False)
    err_console.print(
        "nothing written (--no-probe writes the config without connecting)", markup=False, highlight=False
    )
    return 1
