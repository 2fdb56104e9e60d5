"""The `sglang` command (sglang/cli/main.py): `sglang serve ...` runs what `python3 -m sglang.launch_server ...`
runs; `sglang version` prints the release. Releases before 0.5.5 have no such command."""

import sys

from sparktui.sim.metrics_catalog import _key as release_order
from sparktui.sim.sglang_args import VERSION

SERVE_SINCE = "0.5.5"  # sparktui/core/engines/sglang.py SGLANG_SERVE_SINCE (the simulator imports no core)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if release_order(VERSION) < release_order(SERVE_SINCE):  # as the shell says when the image has no such program
        sys.stderr.write("sh: 1: sglang: not found\n")
        return 127
    if argv[:1] == ["version"]:
        print(f"sglang version: {VERSION}")
        return 0
    if argv[:1] != ["serve"]:
        sys.stderr.write(
            "usage: sglang [-h] {serve,generate,version} ...\n"
            "sglang: error: the following arguments are required: subcommand\n"
        )
        return 2
    rest = argv[1:]
    if rest and not rest[0].startswith("-"):  # `sglang serve MODEL` (0.5.23 cli/serve.py)
        rest = ["--model-path", rest[0], *rest[1:]]
    from sparktui.sim.sglang_server import main as serve

    return serve(rest)
