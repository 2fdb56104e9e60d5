"""The benchmark client, run on the head node, detached, so the SSH tunnel is not what is measured.

The client is vLLM's own `vllm bench serve` (vllm/benchmarks/serve.py, vLLM 0.11.0 and 0.33.0 alike), with
its OpenAI completions backend: it speaks to SGLang's and vLLM's /v1/completions the same way, so one
client and one workload serve every engine and the numbers compare. Where it comes from, on the head:
  1. `vllm` on the node's PATH (a native install);
  2. else the configured vLLM image, already on the node (`sparktui sync image` puts it there; nodes need
     no internet), run as a container with the host's network, named so a stop can remove it.
Either way the client runs under setsid in ~/.local/state/sparktui/bench/<id>/ (log, pid, rc, one result
file per concurrency), as transfers do, so an interrupted sparktui can stop it and nothing stays behind.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from ..engines import ENGINES

# the transfers' "any live process in group $g" (reads /proc with the shell's own `read`)
from ..remote.procgroup import GROUP_ALIVE_FN

# the engine whose image carries the client (vLLM's `vllm bench serve`): the same client for every engine
CLIENT_ENGINE = next(e for e in ENGINES.values() if e.bench_client)
BENCH_CLIENT = CLIENT_ENGINE.bench_client

STATE_ROOT = ".local/state/sparktui/bench"  # under the head's $HOME
PRUNE_DAYS = 14
MARK = "=== sparktui bench concurrency "  # the job writes this before each run of the client
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# tqdm's bar as vllm bench serve prints it: " 50%|█████     | 8/16 [00:01<00:01,  6.1it/s]"
_BAR = re.compile(r"(\d+)/(\d+) \[")

# the vLLM client's percentiles: TTFT and ITL at p50 and p99 (serve.py: p{N}_{metric}_ms in the result)
PERCENTILE_ARGS = ["--percentile-metrics", "ttft,tpot,itl", "--metric-percentiles", "50,99"]


class ClientMissing(Exception):
    """No benchmark client on the head: the message names it and the fix."""


@dataclass
class Workload:
    concurrency: list[int]
    input_len: int = 512
    output_len: int = 128
    prompts_per_slot: int = 4  # requests per concurrency slot: enough for a p99 at 32, quick at 1

    def num_prompts(self, c: int) -> int:
        return max(8, self.prompts_per_slot * c)


def check_id(bid: str) -> str:
    if not _ID.fullmatch(bid):
        raise ValueError(f"not a bench id: {bid!r}")
    return bid


def state_dir_word(bid: str) -> str:
    return f'"$HOME"/{STATE_ROOT}/{shlex.quote(check_id(bid))}'


def container_name(bid: str) -> str:
    return f"sparktui-bench-{check_id(bid)}"


def find_client(image: str) -> str:
    """Prints `path` or `image` (where the client is), else `none`. A `vllm` on the PATH counts only when it
    has `bench serve` (a release before the CLI benchmarks has none; the engine simulator's has its own)."""
    exe, words = BENCH_CLIENT[0], " ".join(BENCH_CLIENT)
    return (
        f"if command -v {exe} >/dev/null 2>&1 && {words} --help >/dev/null 2>&1; then echo path; "
        f"elif command -v docker >/dev/null 2>&1 && docker image inspect {shlex.quote(image)} >/dev/null 2>&1; "
        "then echo image; else echo none; fi"
    )


def missing_fix(node: str, image: str) -> str:
    return f"sparktui sync image vllm --to {node} (copies {image} from a node that has it; or docker pull it on {node})"


def missing_message(node: str, image: str) -> str:
    return (
        f"no benchmark client on {node}: `vllm bench serve` is neither on its PATH nor in {image} there "
        f"(that image is not on the node; a `vllm` without `bench serve` does not count); "
        f"fix: {missing_fix(node, image)}"
    )


def client_argv(where: str, bid: str, image: str, model_path: str, c: int) -> list[str]:
    """The words before `bench serve ...` for one concurrency's run."""
    if where == "path":
        return [BENCH_CLIENT[0]]
    # HF_HUB_OFFLINE: the tokenizer is the model's own directory, nodes may have no internet
    return [
        "docker",
        "run",
        "--rm",
        "--name",
        f"{container_name(bid)}-c{c}",
        "--network",
        "host",
        "--entrypoint",
        BENCH_CLIENT[0],
        "-e",
        "HF_HUB_OFFLINE=1",
        "-e",
        "OPENAI_API_KEY",
        "-v",
        f"{model_path}:{model_path}:ro",
        "-v",
        "__DIR__:__DIR__",
        image,
    ]


def bench_args(port: int, model: str, tokenizer: str, w: Workload, c: int) -> list[str]:
    return [
        *BENCH_CLIENT[1:],
        "--backend",
        "openai",
        "--base-url",
        f"http://127.0.0.1:{int(port)}",
        "--endpoint",
        "/v1/completions",
        "--model",
        model,
        "--tokenizer",
        tokenizer,
        "--dataset-name",
        "random",
        "--random-input-len",
        str(int(w.input_len)),
        "--random-output-len",
        str(int(w.output_len)),
        "--ignore-eos",
        "--num-prompts",
        str(w.num_prompts(c)),
        "--max-concurrency",
        str(int(c)),
        "--seed",
        "1",
        *PERCENTILE_ARGS,
        "--save-result",
        "--result-dir",
        "__DIR__",
        "--result-filename",
        f"c{int(c)}.json",
    ]


def job(where: str, bid: str, image: str, port: int, model: str, model_path: str, w: Workload) -> str:
    """The detached job: the client once per concurrency, in order; stops at the first failure."""
    lines = []
    for c in w.concurrency:
        argv = client_argv(where, bid, image, model_path, c) + bench_args(port, model, model_path, w, c)
        cmd = shlex.join(argv).replace("__DIR__", '"$PWD"')
        lines.append(f"echo {shlex.quote(MARK + str(int(c)))}\n{cmd} || exit $?")
    return "\n".join(lines)


def start(bid: str, job_text: str, key_on_stdin: bool = False) -> str:
    """Create the state directory and start the job under setsid; prints its pid (= its process group).

    key_on_stdin: the endpoint's API key comes on stdin; it goes to a file only its owner reads, which the
    job reads into OPENAI_API_KEY (what vllm bench serve's openai backend sends as a bearer token,
    vllm/benchmarks/lib/endpoint_request_func.py) and removes, so it is on no command line and in no log."""
    take = "OPENAI_API_KEY=$(cat key 2>/dev/null); rm -f key; export OPENAI_API_KEY; " if key_on_stdin else ""
    inner = f"echo $$ > pid; {take}( {job_text}\n); echo $? > rc.tmp; mv rc.tmp rc"
    return (
        "set -e\n"
        f'find "$HOME"/{STATE_ROOT} -mindepth 2 -maxdepth 2 -name rc -mtime +{PRUNE_DAYS} 2>/dev/null '
        '| while read -r f; do rm -rf -- "${f%/rc}"; done\n'
        f"d={state_dir_word(bid)}\n"
        'mkdir -p "$d"\ncd "$d"\n: > log\n'
        + ("(umask 077; cat > key)\n" if key_on_stdin else "")
        + f"setsid nohup sh -c {shlex.quote(inner)} </dev/null >log 2>&1 &\n"
        "echo $!\n"
    )


def poll(bid: str, tail: int = 4000) -> str:
    """`rc=<code|> alive=<0|1>` then the log's last bytes."""
    return (
        f"cd {state_dir_word(bid)} || exit 3\n"
        'p=$(cat pid 2>/dev/null); a=0; [ -n "$p" ] && kill -0 "$p" 2>/dev/null && a=1\n'
        'echo "rc=$(cat rc 2>/dev/null) alive=$a"\n'
        f"tail -c {int(tail)} log 2>/dev/null"
    )


def stop(bid: str) -> str:
    """Stop the job's process group and any client container; waits (5 s at most) until no live process of
    the group is left (zombies of an orphaned job do not count: nodes' containers may have no reaper),
    then kills what is left."""
    name = container_name(bid)
    return (
        f"cd {state_dir_word(bid)} 2>/dev/null || exit 0\n"
        f"{GROUP_ALIVE_FN}\n"
        "p=$(cat pid 2>/dev/null); g=$p\n"
        '[ -z "$p" ] || kill -TERM -"$p" 2>/dev/null || true\n'
        "if command -v docker >/dev/null 2>&1; then "
        f"ids=$(docker ps -aq --filter name={shlex.quote(name)} 2>/dev/null); "
        '[ -z "$ids" ] || docker rm -f $ids >/dev/null 2>&1 || true; fi\n'
        'i=0; while [ -n "$p" ] && galive && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done\n'
        '[ -z "$p" ] || kill -KILL -"$p" 2>/dev/null || true\n'
        "[ -e rc ] || { echo 130 > rc.tmp; mv rc.tmp rc; }\n"
    )


def watchdog(bid: str) -> str:
    """Held open by sparktui for the run (Node.held): when its stdin ends (sparktui done, killed, even with
    -9, or its connection gone) it stops the job unless the job has ended. sshd sends no signal to a command
    without a PTY, only EOF; a TERM or HUP from elsewhere stops the job too. The job stays detached (a PTY's
    hangup would not reach a client running in a container; stop() removes that too)."""
    body = stop(bid).split("\n", 1)[1]  # stop() without its first line: the watchdog is in the directory
    return (
        f"cd {state_dir_word(bid)} || exit 0\n"
        f"s() {{ [ -e rc ] || {{\n{body}}}; }}\n"
        "trap 's; exit 0' HUP INT TERM\n"
        "cat >/dev/null\ns\n"
    )


def read_results(bid: str, concurrency: list[int]) -> str:
    """Each concurrency's result file, framed: `--- c<N>` then its JSON (nothing when it is missing)."""
    parts = [f'echo "--- c{int(c)}"; cat c{int(c)}.json 2>/dev/null; echo' for c in concurrency]
    return f"cd {state_dir_word(bid)} || exit 3\n" + "\n".join(parts)


def split_results(text: str) -> dict[int, str]:
    out: dict[int, str] = {}
    cur: int | None = None
    for line in text.splitlines():
        m = re.fullmatch(r"--- c(\d+)", line.strip())
        if m:
            cur = int(m.group(1))
            out[cur] = ""
        elif cur is not None:
            out[cur] += line + "\n"
    return {c: t for c, t in out.items() if t.strip()}


@dataclass
class Progress:
    concurrency: int | None = None  # the run under way
    done: int = 0
    total: int = 0
    last_line: str = ""

    def words(self) -> str:
        if self.concurrency is None:
            return "starting the client"
        bar = f": {self.done}/{self.total} requests" if self.total else ""
        return f"concurrency {self.concurrency}{bar}"


def progress(log_tail: str) -> Progress:
    """Where the job is, from the end of its log (tqdm's \\r-separated bar included)."""
    p = Progress()
    i = log_tail.rfind(MARK)
    if i >= 0:
        head = log_tail[i + len(MARK) :].split("\n", 1)[0].strip()
        p.concurrency = int(head) if head.isdigit() else None
    after = log_tail[i:] if i >= 0 else log_tail
    bars = _BAR.findall(after)
    if bars:
        p.done, p.total = int(bars[-1][0]), int(bars[-1][1])
    lines = [ln.strip() for ln in re.split(r"[\r\n]", log_tail) if ln.strip()]
    p.last_line = lines[-1][:200] if lines else ""
    return p


def image_lacks_fix(node: str) -> str:
    e = CLIENT_ENGINE
    return (
        f"set images.{e.name} to a {e.label} release image and `sparktui sync image {e.name} --to {node}`, "
        f"or install {e.package} on {node}"
    )


def image_lacks_message(node: str, image: str) -> str:
    return (
        f"no benchmark client on {node}: the `vllm` in {image} has no `bench serve` (a vLLM before its "
        f"CLI benchmarks, or an image whose `vllm` only serves); fix: {image_lacks_fix(node)}"
    )


def lacks_bench(log_tail: str) -> bool:
    """The `vllm` that ran has no `bench` subcommand (argparse's refusal): a release before the benchmark
    client moved into the CLI, or an image whose `vllm` only serves."""
    return "invalid choice: 'bench'" in log_tail


def failure_words(log_tail: str) -> str:
    """The client's own last words when it failed (its error line, else the last lines)."""
    lines = [ln.strip() for ln in re.split(r"[\r\n]", log_tail) if ln.strip() and not _BAR.search(ln)]
    errs = [ln for ln in lines if re.search(r"Error|error:|No such|not found|denied", ln)]
    return (errs[-1] if errs else " | ".join(lines[-3:]))[:400]
