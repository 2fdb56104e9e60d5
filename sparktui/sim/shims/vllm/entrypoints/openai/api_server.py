"""`python3 -m vllm.entrypoints.openai.api_server --model M ...`, answered by the engine simulator."""

import sys

from sparktui.sim.vllm_server import api_server_main

if __name__ == "__main__":
    sys.exit(api_server_main(sys.argv[1:]))
