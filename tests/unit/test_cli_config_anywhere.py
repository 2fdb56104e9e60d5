"""`--config FILE` is taken after any command's words, as before them: `sparktui sync model --config x.yaml`
once stopped at "unrecognized arguments" while `sparktui status --config x.yaml` worked."""

from __future__ import annotations

import argparse

from sparktui.cli import build_parser

# commands that read no cluster config: a log file, the built-in demo, writing a first config
NO_CONFIG = {"diagnose", "demo up", "demo down", "init"}


def leaves(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield " ".join(words)
        return
    for group in subs:
        for name, sub in group.choices.items():
            yield from leaves(sub, (*words, name))


def test_every_command_that_reads_the_config_takes_it_after_its_words():
    commands = sorted(set(leaves(build_parser())))
    assert {"sync model", "sync image", "setup trust", "launch", "status"} <= set(commands)
    for command in commands:
        if command in NO_CONFIG:
            continue
        argv = [*command.split(), "--config", "/x/sparktui.yaml"]
        if command == "sync image":
            argv.insert(2, "vllm")
        elif command == "sync cancel":
            argv.insert(2, "t-1")
        try:
            args = build_parser(argv).parse_args(argv)
        except SystemExit as e:  # a required positional this loop does not know: say which
            raise AssertionError(f"{command}: argv {argv} did not parse") from e
        assert args.config == "/x/sparktui.yaml", command


def test_before_the_words_still_works_and_the_later_one_wins():
    argv = ["--config", "/a.yaml", "sync", "model", "--config", "/b.yaml"]
    assert build_parser(argv).parse_args(argv).config == "/b.yaml"
    argv = ["--config", "/a.yaml", "sync", "status"]
    assert build_parser(argv).parse_args(argv).config == "/a.yaml"
