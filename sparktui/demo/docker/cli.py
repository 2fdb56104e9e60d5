"""`docker` on a simulated node: the commands sparktui and its users run, against the node's own store.

Run as `python3 -S -m sparktui.demo.docker.cli ARGS` by the launcher on the node's PATH. Errors
print docker's words to stderr and exit with docker's codes (1 daemon errors, 125 run errors).
"""

from __future__ import annotations

import sys

from . import containers_cmd as cc
from . import images_cmd as ic
from .store import DockerError, Store

COMMANDS = {
    "run": cc.cmd_run,
    "ps": cc.cmd_ps,
    "inspect": cc.cmd_inspect,
    "exec": cc.cmd_exec,
    "logs": cc.cmd_logs,
    "top": cc.cmd_top,
    "stop": cc.cmd_stop,
    "kill": cc.cmd_kill,
    "rm": cc.cmd_rm,
    "start": cc.cmd_start,
    "restart": cc.cmd_restart,
    "wait": cc.cmd_wait,
    "pause": cc.cmd_pause,
    "unpause": cc.cmd_unpause,
    "images": ic.cmd_images,
    "rmi": ic.cmd_rmi,
    "save": ic.cmd_save,
    "load": ic.cmd_load,
    "pull": ic.cmd_pull,
    "tag": ic.cmd_tag,
    "version": ic.cmd_version,
    "info": ic.cmd_info,
    "image": ic.cmd_image,
}
CONTAINER_SUB = {
    "ls": "ps",
    "list": "ps",
    "ps": "ps",
    "inspect": "inspect",
    "exec": "exec",
    "logs": "logs",
    "top": "top",
    "stop": "stop",
    "kill": "kill",
    "rm": "rm",
    "start": "start",
    "restart": "restart",
    "wait": "wait",
    "run": "run",
    "pause": "pause",
    "unpause": "unpause",
}


def main(argv: list[str]) -> int:
    args = list(argv)
    if not args or args[0] in ("-h", "--help", "help"):
        sys.stdout.write(
            "Usage:  docker [OPTIONS] COMMAND\n\nA self-sufficient runtime for containers "
            "(sparktui demo node)\n\nCommands: " + ", ".join(sorted(COMMANDS)) + "\n"
        )
        return 0
    if args[0] in ("-v", "--version"):
        sys.stdout.write(f"Docker version {ic.VERSION}, build 980b856\n")
        return 0
    cmd, rest = args[0], args[1:]
    if cmd == "container":
        sub = CONTAINER_SUB.get(rest[0] if rest else "")
        if sub is None:
            sys.stderr.write(f"docker: unknown command: docker container {rest[0] if rest else ''}\n")
            return 1
        cmd, rest = sub, rest[1:]
    fn = COMMANDS.get(cmd)
    if fn is None:
        sys.stderr.write(f"docker: unknown command: docker {cmd}\n\nRun 'docker --help' for more information\n")
        return 1
    try:
        return fn(Store(), rest)
    except DockerError as e:
        sys.stdout.flush()
        sys.stderr.write(f"{e}\n")
        return e.code
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
