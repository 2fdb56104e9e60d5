"""`vllm bench serve`, simulated: the benchmark client a vLLM image carries, so the simulator's image has one.

It behaves like the real client from outside (vllm/benchmarks/serve.py and lib/endpoint_request_func.py,
vLLM 0.31.0): the same options (unknown ones refused in argparse's words), a tqdm bar on stderr, the
summary table, and a --save-result JSON with the same keys and meanings (no --save-detailed lists). It
really sends the workload: streaming /v1/completions requests, at most --max-concurrency at once, over
HTTP/1.1 with the stdlib (the simulator has no aiohttp); TTFT is the first chunk with choices, each later
one an ITL, output tokens come from the usage chunk (`stream_options.include_usage`), as upstream.
Input length without a tokenizer: a prompt is --random-input-len four-character words ("abc " ...), which
the simulator counts as one token each (textgen.count_tokens: a token is about four characters); the
server's usage.prompt_tokens, when sent, wins, as upstream's prompt_len does.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import json
import math
import random
import statistics
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from urllib.parse import urlsplit


def add_serve_args(p: argparse.ArgumentParser) -> None:
    """The options sparktui's job passes (core/bench/client.py) and their neighbours, as upstream names them."""
    p.add_argument("--backend", default="openai")
    p.add_argument("--base-url", default=None)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--endpoint", default="/v1/completions")
    p.add_argument("--model", default=None)
    p.add_argument("--served-model-name", default=None)
    p.add_argument("--tokenizer", default=None)
    p.add_argument("--dataset-name", default="random", choices=["random"])
    p.add_argument("--random-input-len", type=int, default=1024)
    p.add_argument("--random-output-len", type=int, default=128)
    p.add_argument("--ignore-eos", action="store_true")
    p.add_argument("--num-prompts", type=int, default=1000)
    p.add_argument("--max-concurrency", type=int, default=None)
    p.add_argument("--request-rate", type=float, default=float("inf"))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--percentile-metrics", default=None)
    p.add_argument("--metric-percentiles", default="99")
    p.add_argument("--save-result", action="store_true")
    p.add_argument("--result-dir", default=None)
    p.add_argument("--result-filename", default=None)
    p.add_argument("--label", default=None)
    p.add_argument("--disable-tqdm", action="store_true")
    p.add_argument("--trust-remote-code", action="store_true")


def add_bench_parser(sub) -> None:
    bench = sub.add_parser("bench", help="vLLM bench subcommand.", usage="vllm bench <bench_type> [options]")
    types = bench.add_subparsers(dest="bench_type")
    serve = types.add_parser(
        "serve", help="Benchmark the online serving throughput.", usage="vllm bench serve [options]"
    )
    add_serve_args(serve)


@dataclass
class Output:
    prompt_len: int
    success: bool = False
    ttft: float = 0.0
    itl: list[float] = field(default_factory=list)
    latency: float = 0.0
    output_tokens: int = 0
    start_time: float = 0.0
    queue_time: float = 0.0
    error: str = ""


def prompt(n: int, rng: random.Random) -> str:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return " ".join("".join(rng.choice(letters) for _ in range(3)) for _ in range(max(1, n)))


async def _read_chunks(reader: asyncio.StreamReader):
    """The body of a chunked response, chunk by chunk, as it arrives."""
    while True:
        size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
        if size == 0:
            await reader.readline()
            return
        data = await reader.readexactly(size)
        await reader.readexactly(2)
        yield data


async def request(url: str, payload: dict, out: Output) -> None:
    u = urlsplit(url)
    body = json.dumps(payload).encode()
    st = time.perf_counter()
    out.start_time = st
    try:
        reader, writer = await asyncio.open_connection(u.hostname, u.port or 80)
    except OSError as e:
        out.error = f"Cannot connect to host {u.hostname}:{u.port}: {e}"
        return
    try:
        # the key as the real client sends it: OPENAI_API_KEY as a bearer token (endpoint_request_func.py)
        key = os.environ.get("OPENAI_API_KEY")
        auth = f"Authorization: Bearer {key}\r\n" if key else ""
        writer.write(
            (
                f"POST {u.path} HTTP/1.1\r\nHost: {u.netloc}\r\ncontent-type: application/json\r\n{auth}"
                f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
            ).encode()
            + body
        )
        await writer.drain()
        status = (await reader.readline()).decode("latin-1").split()
        headers = {}
        while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
            k, _, v = line.decode("latin-1").partition(":")
            headers[k.strip().lower()] = v.strip()
        if len(status) < 2 or status[1] != "200":
            out.error = (await reader.read(4096)).decode("utf-8", "replace") or " ".join(status[1:])
            return
        chunks = (
            _read_chunks(reader) if headers.get("transfer-encoding", "").lower() == "chunked" else _read_raw(reader)
        )
        buf, last, first = b"", st, False
        async for data in chunks:
            buf += data
            while b"\n\n" in buf:
                msg, buf = buf.split(b"\n\n", 1)
                msg = msg.strip().decode()
                if not msg or msg.startswith(":"):
                    continue
                chunk = msg.removeprefix("data: ")
                if chunk == "[DONE]":
                    continue
                doc = json.loads(chunk)
                if doc.get("choices"):
                    now = time.perf_counter()
                    if not first:
                        first, out.ttft = True, now - st
                    else:
                        out.itl.append(now - last)
                    last = now
                elif usage := doc.get("usage"):
                    out.output_tokens = usage.get("completion_tokens") or 0
                    if usage.get("prompt_tokens") is not None:
                        out.prompt_len = usage["prompt_tokens"]
        out.success = first
        if not first:
            out.error = "Never received a valid chunk to calculate TTFT."
        out.latency = last - st
    except (OSError, ValueError, asyncio.IncompleteReadError) as e:
        out.error = f"{type(e).__name__}: {e}"
    finally:
        writer.close()


async def _read_raw(reader: asyncio.StreamReader):
    while data := await reader.read(65536):
        yield data


class Bar:
    """tqdm's bar as the real client shows it: `\\r 50%|█████     | 4/8 [00:01<00:01,  6.10it/s]`."""

    def __init__(self, total: int) -> None:
        self.total, self.n, self.t0 = total, 0, time.perf_counter()
        self.show()

    @staticmethod
    def _clock(s: float) -> str:
        return f"{int(s) // 60:02d}:{int(s) % 60:02d}"

    def show(self) -> None:
        el = time.perf_counter() - self.t0
        frac = self.n / self.total if self.total else 1.0
        fill = int(frac * 10)
        rate = self.n / el if el > 0 and self.n else 0.0
        left = self._clock((self.total - self.n) / rate) if rate else "?"
        rate_s = f"{rate:5.2f}it/s" if rate else "?it/s"
        sys.stderr.write(
            f"\r{int(frac * 100):3d}%|{'█' * fill}{' ' * (10 - fill)}| {self.n}/{self.total} "
            f"[{self._clock(el)}<{left}, {rate_s}]"
        )
        sys.stderr.flush()

    def update(self) -> None:
        self.n += 1
        self.show()

    def close(self) -> None:
        self.show()
        sys.stderr.write("\n")
        sys.stderr.flush()


def _pct(values: list[float], p: float) -> float:
    """numpy.percentile's default (linear interpolation)."""
    if not values:
        return 0.0
    s = sorted(values)
    k = (len(s) - 1) * p / 100
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def _stats(values: list[float]) -> tuple[float, float, float]:
    v = values or [0.0]
    return statistics.fmean(v), statistics.median(v), statistics.pstdev(v)


def metrics(args: argparse.Namespace, outs: list[Output], duration: float) -> dict:
    """The result as serve.py's calculate_metrics and benchmark() build it (times in ms for the metrics)."""
    ok = [o for o in outs if o.success]
    out_lens = [o.output_tokens or 1 for o in ok]
    total_in, total_out = sum(o.prompt_len for o in ok), sum(out_lens)
    peak_tok, peak_conc = 0.0, 0
    if ok:  # per-second buckets of tokens and of requests in flight, as upstream counts them
        t0 = min(o.start_time for o in ok)
        n = int(math.ceil(max(o.start_time + o.latency for o in ok) - t0)) + 1
        toks, conc = [0] * n, [0] * n
        for o in ok:
            t = o.start_time + o.ttft
            for step in [0.0, *o.itl]:
                t += step
                if 0 <= int(t - t0) < n:
                    toks[int(t - t0)] += 1
            for sec in range(int(o.start_time - t0), int(o.start_time + o.latency - t0) + 1):
                conc[sec] += 1
        peak_tok, peak_conc = float(max(toks)), max(conc)
    res = {
        "date": datetime.now().strftime("%Y%m%d-%H%M%S"),
        "endpoint_type": args.backend,
        "backend": args.backend,
        "label": args.label,
        "model_id": args.model,
        "tokenizer_id": args.tokenizer or args.model,
        "num_prompts": args.num_prompts,
        "request_rate": "inf" if math.isinf(args.request_rate) else args.request_rate,
        "burstiness": 1.0,
        "max_concurrency": args.max_concurrency,
        "duration": duration,
        "completed": len(ok),
        "failed": len(outs) - len(ok),
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": len(ok) / duration,
        "request_goodput": None,
        "output_throughput": total_out / duration,
        "total_token_throughput": (total_in + total_out) / duration,
        "latencies": [o.latency for o in outs],
        "queue_times": [o.queue_time for o in outs],
        "max_output_tokens_per_s": peak_tok,
        "max_concurrent_requests": peak_conc,
        "rtfx": 0.0,
    }
    values = {
        "ttft": [o.ttft for o in ok],
        "tpot": [(o.latency - o.ttft) / (n - 1) for o, n in zip(ok, out_lens) if n > 1],
        "itl": [x for o in ok for x in o.itl],
        "e2el": [o.latency for o in ok],
    }
    pcts = [float(p) for p in args.metric_percentiles.split(",")]
    for name in (args.percentile_metrics or "ttft,tpot,itl").split(","):
        ms = [v * 1000 for v in values[name]]
        mean, median, std = _stats(ms)
        res[f"mean_{name}_ms"], res[f"median_{name}_ms"], res[f"std_{name}_ms"] = mean, median, std
        for p in pcts:
            res[f"p{int(p) if int(p) == p else p}_{name}_ms"] = _pct(ms, p)
    return res


def summary(res: dict) -> str:
    lines = ["{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="=")]
    row = "{:<40} {:<10}"
    lines += [row.format("Successful requests:", res["completed"]), row.format("Failed requests:", res["failed"])]
    if res["max_concurrency"] is not None:
        lines.append(row.format("Maximum request concurrency:", res["max_concurrency"]))
    rowf = "{:<40} {:<10.2f}"
    lines += [
        rowf.format("Benchmark duration (s):", res["duration"]),
        row.format("Total input tokens:", res["total_input_tokens"]),
        row.format("Total generated tokens:", res["total_output_tokens"]),
        rowf.format("Request throughput (req/s):", res["request_throughput"]),
        rowf.format("Output token throughput (tok/s):", res["output_throughput"]),
        rowf.format("Peak output token throughput (tok/s):", res["max_output_tokens_per_s"]),
        rowf.format("Peak concurrent requests:", res["max_concurrent_requests"]),
        rowf.format("Total token throughput (tok/s):", res["total_token_throughput"]),
    ]
    for key, name, header in (
        ("ttft", "TTFT", "Time to First Token"),
        ("tpot", "TPOT", "Time per Output Token (excl. 1st token)"),
        ("itl", "ITL", "Inter-token Latency"),
        ("e2el", "E2EL", "End-to-end Latency"),
    ):
        if f"mean_{key}_ms" not in res:
            continue
        lines.append("{s:{c}^{n}}".format(s=header, n=50, c="-"))
        lines += [
            rowf.format(f"Mean {name} (ms):", res[f"mean_{key}_ms"]),
            rowf.format(f"Median {name} (ms):", res[f"median_{key}_ms"]),
        ]
        lines += [
            rowf.format(f"P{k.split('_')[0][1:]} {name} (ms):", v)
            for k, v in res.items()
            if k.startswith("p") and k.endswith(f"_{key}_ms")
        ]
    return "\n".join(lines + ["=" * 50])


async def run(args: argparse.Namespace) -> dict:
    base = args.base_url or f"http://{args.host}:{args.port}"
    url = base.rstrip("/") + args.endpoint
    rng = random.Random(args.seed)
    prompts = [prompt(args.random_input_len, rng) for _ in range(args.num_prompts)]
    limit = asyncio.Semaphore(args.max_concurrency or args.num_prompts or 1)
    bar = None if args.disable_tqdm else Bar(len(prompts))

    def payload(text: str) -> dict:
        p = {
            "model": args.served_model_name or args.model,
            "prompt": text,
            "repetition_penalty": 1.0,
            "max_tokens": args.random_output_len,
            "logprobs": None,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if args.ignore_eos:
            p["ignore_eos"] = True
        return p

    async def one(text: str) -> Output:
        queued = time.perf_counter()
        async with limit:
            out = Output(prompt_len=args.random_input_len)
            out.queue_time = time.perf_counter() - queued
            await request(url, payload(text), out)
        if bar:
            bar.update()
        return out

    print(f"Traffic request rate: {args.request_rate}")
    print("Burstiness factor: 1.0 (Poisson process)")
    print(f"Maximum request concurrency: {args.max_concurrency}", flush=True)
    t0 = time.perf_counter()
    outs = list(await asyncio.gather(*(one(t) for t in prompts)))
    duration = time.perf_counter() - t0
    if bar:
        bar.close()
    failed = [o for o in outs if not o.success]
    if failed:
        print("Failed requests during benchmark run detected (capping to 10):")
        for i, o in enumerate(failed[:10]):
            print(f"Error {i}: {o.error}")
    return metrics(args, outs, duration)


def main(args: argparse.Namespace) -> int:
    if args.model is None:
        print("error: --model is required (the simulated client has no server model discovery)", file=sys.stderr)
        return 2
    print("Starting main benchmark run...", flush=True)
    res = asyncio.run(run(args))
    print(summary(res), flush=True)
    if args.save_result:
        name = args.result_filename or f"{args.backend}-{args.max_concurrency}-{res['date']}.json"
        path = Path(args.result_dir or ".") / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(res))
    if not res["completed"]:
        print(
            "All requests failed. This is likely due to a misconfiguration on the benchmark arguments.", file=sys.stderr
        )
        return 1
    return 0
