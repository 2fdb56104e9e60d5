"""A plan as plain POSIX shell scripts, one per node, runnable by hand, plus a README with the order.

Secrets never land in the files: each script reads them from its environment at run time
(`-e NAME` without a value, and a `${NAME:?}` check up front).
"""

from __future__ import annotations

import math
import shlex
from pathlib import Path

from ..engines.common import Step, render_lines
from .plan import Plan


def script_name(plan: Plan, node: str) -> str:
    rank = next((n.rank for n in plan.nodes if n.name == node), 0)
    safe = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in node)
    return f"{rank}-{safe}.sh"


def _wait_lines(step: Step) -> list[str]:
    polls = max(1, math.ceil((step.timeout or 300) / step.interval))
    check = f"{step.script} 2>/dev/null | grep -cE {shlex.quote(step.expect_ere or '.')}"
    give_up = shlex.quote(f"gave up after {int(step.timeout or 300)} s: {step.description}")
    return [
        "i=0",
        f'until [ "$({check})" -ge {step.expect_count} ]; do',
        "  i=$((i + 1))",
        f'  if [ "$i" -ge {polls} ]; then echo {give_up} >&2; exit 1; fi',
        f"  sleep {step.interval:g}",
        "done",
    ]


def node_script(plan: Plan, node: str) -> str:
    """The script for one node: its steps in plan order."""
    n = next(x for x in plan.nodes if x.name == node)
    steps = plan.steps_for(node)
    secrets = list(dict.fromkeys(name for s in steps for name in s.secrets))
    out = [
        "#!/bin/sh",
        f"# sparktui plan {plan.plan_id}: {plan.engine} ({plan.mode}), deployment {plan.deployment}, "
        f"TP {plan.tp} x PP {plan.pp}",
        f"# Node {n.name}, rank {n.rank} ({n.role}): rendezvous {plan.subnet or '?'} on {n.iface or '?'} "
        f"{n.ip or '?'}, RDMA {n.rdma or 'none'}",
        "# Run it on that node; README.txt gives the order across nodes.",
        "set -eu",
        "",
    ]
    if plan.errors:  # the file stays readable, but running it stops before the first command
        why = "; ".join(plan.errors)
        out += [
            "# NOT RUNNABLE: this plan has errors (README.txt lists them); fix them and export again.",
            f"echo {shlex.quote('sparktui: this plan has errors, nothing was run: ' + why)} >&2",
            "exit 1",
            "",
        ]
    if secrets:
        out.append("# Secrets come from the environment, never from this file.")
        out += [f': "${{{s}:?set {s} in the environment first}}"' for s in secrets]
        out.append("")
    removed: set[str] = set()
    for i, step in enumerate(steps, 1):
        out.append(f"# {i}. {step.description}")
        if step.kind == "run" and step.container and step.container not in removed:
            removed.add(step.container)
            out.append(
                f"docker rm -f {shlex.quote(step.container)} >/dev/null 2>&1 || true"
                "  # a container left by an earlier run of this plan"
            )
        if step.kind == "wait":
            out += _wait_lines(step)
        else:
            out.append(render_lines(step.words, "export") if step.words else step.script)
        out.append("")
    return "\n".join(out)


def readme(plan: Plan) -> str:
    order: list[str] = []
    for s in plan.steps:
        if s.node not in order:
            order.append(s.node)
    lines = [
        f"sparktui plan {plan.plan_id}: {plan.engine} ({plan.mode}) for deployment {plan.deployment}",
        f"Model {plan.model_path} (served as {plan.served_model_name or plan.model_path}), image {plan.image}",
        f"TP {plan.tp} x PP {plan.pp}, rendezvous {plan.subnet or '?'}, head {plan.head_ip or '?'}:"
        f"{plan.rendezvous_port}",
        "",
        "Run each script on its own node, in this order:",
    ]
    for i, node in enumerate(order, 1):
        lines.append(f"  {i}. on {node}: sh {script_name(plan, node)}")
        for s in plan.steps_for(node):
            lines.append(f"       - {s.description}")
    if any(s.kind == "wait" for s in plan.steps):
        lines += ["", "A script that waits keeps waiting for the ones after it: start those while it waits."]
    secrets = list(dict.fromkeys(name for s in plan.steps for name in s.secrets))
    if secrets:
        lines += ["", "Set these in the environment first (they are not written here): " + ", ".join(secrets)]
    head = plan.nodes[0].name if plan.nodes else "the head"
    lines += ["", f"Ready when, on {head}: curl -s http://127.0.0.1:{plan.port}/health answers 200."]
    if plan.warnings:
        lines += ["", "Warnings:"] + [f"  - {w}" for w in plan.warnings]
    if plan.errors:
        lines += ["", "This plan has errors; the scripts are for reading until they are fixed:"]
        lines += [f"  - {e}" for e in plan.errors]
    return "\n".join(lines) + "\n"


def export_files(plan: Plan) -> dict[str, str]:
    """File name -> content."""
    files = {script_name(plan, n.name): node_script(plan, n.name) for n in plan.nodes if plan.steps_for(n.name)}
    files["README.txt"] = readme(plan)
    return files


def write_export(plan: Plan, directory: str | Path) -> list[Path]:
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    out = []
    for name, text in export_files(plan).items():
        p = d / name
        p.write_text(text, encoding="utf-8")
        if name.endswith(".sh"):
            p.chmod(0o755 if plan.ok else 0o644)  # a refused plan's scripts are for reading
        out.append(p)
    return out
