"""Runs inside an engine's contract environment (not sparktui's): builds the engine's real argument
parser and answers, for each argv given on stdin, whether it parses; lists the environment variables
that release reads. Prints one JSON object.

    python probe.py vllm|sglang|ray < {"argvs": [[...], ...], "env": ["NAME", ...]}
    python probe.py vllm|sglang|ray --serve   # one such request per line, one answer line each
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


ANSWER = "PROBE-ANSWER "  # --serve: the line that carries an answer (an import may print lines of its own)


def load(engine):
    """Import the release once: (version, parser factory, argv -> args, env names it reads)."""
    if engine == "vllm":
        import vllm

        return vllm.__version__, vllm_parser, vllm_args, vllm_env() | package_strings("vllm")
    if engine == "sglang":
        import sglang

        return getattr(sglang, "__version__", "?"), sglang_parser, sglang_args, package_strings("sglang")
    if engine == "ray":
        import ray

        return ray.__version__, None, None, package_strings("ray")
    raise SystemExit(f"unknown engine {engine}")


def answer(engine, loaded, req):
    """One request's answer, from a parser built for it alone (as a process of its own would)."""
    version, make_parser, to_args, known = loaded
    parser = make_parser() if make_parser else None
    out = {"engine": engine, "version": version, "results": [], "env_read": {}}
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
    return out


def main():
    engine = sys.argv[1]
    if sys.argv[2:] == ["--serve"]:
        # one request per line, each answered on one line, until stdin closes: the release is imported
        # once for all the questions a test run asks it (an import of vLLM takes seconds)
        loaded = load(engine)
        for line in sys.stdin:
            print(ANSWER + json.dumps(answer(engine, loaded, json.loads(line))), flush=True)
        return
    req = json.load(sys.stdin)
    print(json.dumps(answer(engine, load(engine), req)))


if __name__ == "__main__":
    main()
