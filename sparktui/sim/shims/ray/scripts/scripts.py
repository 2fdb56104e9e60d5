"""The `ray` console script's target, answered by the engine simulator."""

import sys

from sparktui.sim.ray_cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
