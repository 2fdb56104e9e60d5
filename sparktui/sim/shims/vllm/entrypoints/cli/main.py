"""The `vllm` console script's target, answered by the engine simulator."""

import sys

from sparktui.sim.vllm_server import cli_main as main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
