"""Command-line flags the way docker's CLI (cobra) reads them: --flag=value, --flag value, -abc, -eK=V."""

from __future__ import annotations

from dataclasses import dataclass, field

from .store import DockerError


@dataclass
class Spec:
    """A command's flags: canonical name -> aliases; `values` take an argument, `bools` do not."""

    command: str
    values: dict[str, tuple[str, ...]] = field(default_factory=dict)
    bools: dict[str, tuple[str, ...]] = field(default_factory=dict)
    interspersed: bool = True  # False: flags end at the first positional (run, exec: the rest is the command)

    def lookup(self, token: str) -> tuple[str, bool] | None:
        for name, aliases in self.values.items():
            if token in aliases:
                return name, True
        for name, aliases in self.bools.items():
            if token in aliases:
                return name, False
        return None


def _unknown(spec: Spec, token: str) -> DockerError:
    if token.startswith("--"):
        what = f"unknown flag: {token}"
    else:
        what = f"unknown shorthand flag: '{token[1]}' in {token}"
    return DockerError(f"{what}\nSee 'docker {spec.command} --help'.", 125)


def parse(spec: Spec, args: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    """(flag name -> values in order; a bool's value is "true"/"false"), positionals."""
    opts: dict[str, list[str]] = {}
    pos: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        i += 1
        if a == "--":
            pos += args[i:]
            break
        if not a.startswith("-") or a == "-":
            pos.append(a)
            if not spec.interspersed:
                pos += args[i:]
                break
            continue
        if a.startswith("--"):
            name_part, eq, val = a.partition("=")
            hit = spec.lookup(name_part)
            if hit is None:
                raise _unknown(spec, name_part)
            name, takes = hit
            if takes:
                if not eq:
                    if i >= len(args):
                        raise DockerError(
                            f"flag needs an argument: {name_part}\nSee 'docker {spec.command} --help'.", 125
                        )
                    val = args[i]
                    i += 1
                opts.setdefault(name, []).append(val)
            else:
                opts.setdefault(name, []).append(val if eq else "true")
            continue
        # short flags: -d, -it, -eK=V, -e K=V, -w/dir
        j = 1
        while j < len(a):
            hit = spec.lookup("-" + a[j])
            if hit is None:
                raise _unknown(spec, "-" + a[j:])
            name, takes = hit
            if not takes:
                opts.setdefault(name, []).append("true")
                j += 1
                continue
            rest = a[j + 1 :]
            if rest.startswith("="):
                rest = rest[1:]
            if not rest:
                if i >= len(args):
                    raise DockerError(
                        f"flag needs an argument: '{a[j]}' in -{a[j]}\nSee 'docker {spec.command} --help'.", 125
                    )
                rest = args[i]
                i += 1
            opts.setdefault(name, []).append(rest)
            break
    return opts, pos


def flag(opts: dict[str, list[str]], name: str) -> bool:
    return bool(opts.get(name)) and opts[name][-1].lower() not in ("false", "0")


def last(opts: dict[str, list[str]], name: str, default: str | None = None) -> str | None:
    return opts[name][-1] if opts.get(name) else default
