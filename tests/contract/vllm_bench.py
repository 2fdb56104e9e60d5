"""Runs inside a vLLM contract environment: `vllm bench serve ARGS...` as the `vllm` command runs it.

Without a GPU, vLLM cannot infer its platform, and releases before 0.12 build every subcommand's parser
(serve's needs the platform) before dispatching; the CPU platform is set first, as probe.py does. The
benchmark client itself never touches a device.

    python vllm_bench.py serve --backend openai ...
"""

import sys

import vllm.platforms as platforms
from vllm.platforms.cpu import CpuPlatform

platforms._current_platform = CpuPlatform()

from vllm.entrypoints.cli.main import main  # noqa: E402 - after the platform is set

sys.argv = ["vllm", "bench", *sys.argv[1:]]
main()
