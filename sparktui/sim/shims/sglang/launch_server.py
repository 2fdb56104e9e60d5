"""Entry point of `python3 -m sglang.launch_server`, answered by the engine simulator."""

import sys

from sparktui.sim.sglang_server import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
