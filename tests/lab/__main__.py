"""Bring a lab up or down by hand.

python3 -m tests.lab up [--nodes N] [--max-sessions M] [--no-docker] [--storage overlay2]  # prints the config path
python3 -m tests.lab sh NODE CMD... [--lab DIR]                       # a command inside a node
python3 -m tests.lab list
python3 -m tests.lab down [DIR...]       # without DIR: every lab started with `up`
"""

from __future__ import annotations

import argparse
import sys

from .netlab import LAYOUTS, Lab, LabError, LabUnavailable, list_labs, teardown


def _cli_labs() -> list[dict]:
    return [s for s in list_labs() if s.get("owner_pid") is None]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m tests.lab", description="sparktui lab nodes on this machine")
    sub = p.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="start a lab that stays up until `down`")
    up.add_argument("--nodes", type=int, default=2)
    up.add_argument("--max-sessions", type=int, default=None)
    up.add_argument("--no-docker", action="store_true")
    up.add_argument("--storage", default="vfs", help="dockerd's storage driver (overlay2 for large images)")
    up.add_argument("--docker-tmpfs", default="", help="size of an in-memory /var/lib/docker per node, e.g. 6g")
    up.add_argument(
        "--layout",
        choices=LAYOUTS,
        default="fresh",
        help="sync: both halves of each port on a subnet of their own, as NVIDIA Sync writes them",
    )
    run = sub.add_parser("sh", help="run a command inside a node")
    run.add_argument("node")
    run.add_argument("command", nargs=argparse.REMAINDER)
    run.add_argument("--lab", default=None, help="lab directory (default: the newest lab from `up`)")
    sub.add_parser("list", help="labs on this machine")
    down = sub.add_parser("down", help="tear labs down")
    down.add_argument("dirs", nargs="*")
    a = p.parse_args(argv)

    if a.cmd == "up":
        try:
            lab = Lab(
                a.nodes,
                max_sessions=a.max_sessions,
                docker=not a.no_docker,
                own_process=False,
                storage=a.storage,
                docker_tmpfs=a.docker_tmpfs,
                layout=a.layout,
            ).up()
        except (LabUnavailable, LabError) as e:
            print(f"lab: {e}", file=sys.stderr)
            return 1
        print(lab.config_path)
        for n in lab.nodes:
            print(
                f"# {n.name}: mgmt {n.mgmt_ip}  fabric {n.fabric_iface} {n.fabric_ip}  wlan {n.wlan_ip}",
                file=sys.stderr,
            )
        print(f"# down: python3 -m tests.lab down {lab.dir}", file=sys.stderr)
        return 0
    if a.cmd == "list":
        for s in list_labs():
            owner = s.get("owner_pid") or "up"
            print(f"{s['dir']}  nodes={len(s.get('nodes', []))}  block={s.get('block')}.0.0/16  owner={owner}")
        return 0
    if a.cmd == "sh":
        dirs = [a.lab] if a.lab else [s["dir"] for s in _cli_labs()][-1:]
        if not dirs:
            print("lab: no lab is up (python3 -m tests.lab up)", file=sys.stderr)
            return 2
        r = Lab.attach(dirs[0]).sh(a.node, " ".join(a.command), check=False)
        sys.stdout.write(r.stdout)
        sys.stderr.write(r.stderr)
        return r.returncode
    states = [s for s in list_labs() if s["dir"] in a.dirs] if a.dirs else _cli_labs()
    rc = 0
    for s in states:
        problems = teardown(s)
        print(f"{s['dir']}: {'down' if not problems else '; '.join(problems)}")
        rc |= bool(problems)
    return rc


if __name__ == "__main__":
    sys.exit(main())
