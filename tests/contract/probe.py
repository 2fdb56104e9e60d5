"""Runs inside an engine's contract environment (not sparktui's): builds the engine's real argument
parser and answers, for each argv given on stdin, whether it parses; lists the environment variables
that release reads. Prints one JSON object.

    python probe.py vllm|sglang|ray < {"argvs": [[...], ...], "env": ["NAME", ...]}
"""

import argparse
import contextlib
import io
import json
import os
import re
import sys


def vllm_parser():
    import vllm.platforms as platforms
    from vllm.platforms.cpu import CpuPlatform

    platforms._current_platform = CpuPlatform()  # without a GPU vLLM cannot infer its device
    import importlib

    make_arg_parser = None
    for where in (
        "vllm.entrypoints.common.cli_args",
        "vllm.entrypoints.launchers.cli_args",
        "vllm.entrypoints.openai.cli_args",
    ):  # where each release keeps it
        try:
            make_arg_parser = importlib.import_module(where).make_arg_parser
            break
        except ModuleNotFoundError as e:
            if not (e.name or "").startswith(where.rsplit(".", 1)[0]):
                raise  # a dependency is missing, not this location
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:
        from vllm.utils import FlexibleArgumentParser
    return make_arg_parser(FlexibleArgumentParser())


def vllm_args(argv):
    """`vllm serve MODEL ...` -> the serve parser's arguments (the positional model as --model)."""
    if argv[:2] != ["vllm", "serve"]:
        raise ValueError(f"not a vllm serve command: {argv[:3]}")
    rest = list(argv[2:])
    if rest and not rest[0].startswith("-"):
        rest = ["--model", rest[0]] + rest[1:]
    return rest


def vllm_env():
    import vllm.envs as envs

    return set(envs.environment_variables)


def sglang_parser():
    from sglang.srt.server_args import ServerArgs

    p = argparse.ArgumentParser()
    ServerArgs.add_cli_args(p)
    return p


def sglang_args(argv):
    if argv[:2] == ["sglang", "serve"]:
        # the `sglang` console script (sglang.cli.main) hands what follows `serve` to prepare_server_args
        from importlib.metadata import entry_points

        if not [e for e in entry_points(group="console_scripts") if e.name == "sglang"]:
            raise ValueError("this release has no `sglang` command (no sglang serve)")
        return argv[2:]
    if argv[:3] != ["python3", "-m", "sglang.launch_server"]:
        raise ValueError(f"not an sglang launch_server command: {argv[:3]}")
    return argv[3:]


def package_strings(pkg):
    """Names a package's Python source mentions as string literals: what it can read from os.environ."""
    root = os.path.dirname(__import__(pkg).__file__)
    names = set()
    for d, _, files in os.walk(root):
        for f in files:
            if f.endswith(".py"):
                with open(os.path.join(d, f), encoding="utf-8", errors="replace") as fh:
                    names.update(re.findall(r"[\"']([A-Z][A-Z0-9_]{2,})[\"']", fh.read()))
                    fh.seek(0)
                    # SGLang's Envs class declares variables as attributes: NAME = EnvBool(...)
                    names.update(re.findall(r"^\s+([A-Z][A-Z0-9_]{2,})\s*=\s*Env\w+\(", fh.read(), re.M))
    return names


def ray_check(argv):
    from ray.scripts.scripts import cli

    if argv[:1] != ["ray"]:
        raise ValueError(f"not a ray command: {argv[:2]}")
    ctx = cli.make_context("ray", list(argv[1:]), resilient_parsing=False)
    sub = cli.get_command(ctx, argv[1])
    if sub is None:
        raise ValueError(f"ray has no command {argv[1]!r}")
    sub.make_context(f"ray {argv[1]}", list(argv[2:]))


def main():
    engine = sys.argv[1]
    req = json.load(sys.stdin)
    out = {"engine": engine, "results": [], "env_read": {}}
    if engine == "vllm":
        import vllm

        out["version"] = vllm.__version__
        parser, to_args, known = vllm_parser(), vllm_args, vllm_env() | package_strings("vllm")
    elif engine == "sglang":
        import sglang

        out["version"] = getattr(sglang, "__version__", "?")
        parser, to_args, known = sglang_parser(), sglang_args, package_strings("sglang")
    elif engine == "ray":
        import ray

        out["version"] = ray.__version__
        parser, to_args, known = None, None, package_strings("ray")
    else:
        raise SystemExit(f"unknown engine {engine}")
    for argv in req["argvs"]:
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                if parser is None:
                    ray_check(argv)
                else:
                    parser.parse_args(to_args(argv))
            out["results"].append({"ok": True})
        except SystemExit:
            lines = [ln for ln in err.getvalue().splitlines() if "error:" in ln]
            out["results"].append({"ok": False, "error": (lines[-1] if lines else err.getvalue())[-600:]})
        except Exception as e:  # click errors, bad shapes
            out["results"].append({"ok": False, "error": f"{type(e).__name__}: {e}"[-600:]})
    out["env_read"] = {n: n in known for n in req["env"]}
    # every option string the parser knows: the engine's flags for the shared vocabulary must be among them
    out["options"] = sorted(parser._option_string_actions) if parser is not None else []
    print(json.dumps(out))


if __name__ == "__main__":
    main()
