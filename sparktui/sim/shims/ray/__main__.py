import sys

from sparktui.sim.ray_cli import main

sys.exit(main(sys.argv[1:]))
