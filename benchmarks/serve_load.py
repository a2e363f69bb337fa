"""Load benchmark of the REST service: a real ``tsfm serve`` on loopback, with micro-batching on and off.

32 concurrent clients (default) send ``POST /v1/forecast`` for 60 s each run, every request 10 series of 512 points
and horizon 48, against a server started fresh per mode. Reports throughput, latency p50/p95/p99, the error count
(must be 0), the mean number of requests per model call (from the server's /metrics), and the server's resident
memory when ready, after a warm-up, and at the end (growth under steady load would be a leak). Prints a table
last and appends it, with the command and machine, to ``benchmarks/RESULTS.md``.

    python -m benchmarks.serve_load [--duration 60] [--clients 32] [--model default|PATH] [--modes on,off]
                                    [--warmup 5] [--rss-every S] [--no-write]

A soak (``--duration 600 --modes on --rss-every 30``) also samples the server's memory every ``S`` seconds and
prints the trace with the growth per minute over the second half: allocator and cache warm-up level off early, a
leak keeps the same slope to the end.

The load generator runs in this process (asyncio + httpx) and the server in another; on a small machine they share
the cores, so absolute numbers understate a dedicated server; the on/off comparison is like for like.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import date
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "RESULTS.md"
READY_TIMEOUT_S = 180
DISTINCT_BODIES = 16  # requests differ (so no cache could help) but are built once, outside the timed loop


def make_bodies(series: int, length: int, horizon: int, count: int, seed: int = 0) -> list[bytes]:
    """``count`` JSON bodies of ``series`` random-walk-plus-seasonality series each."""
    import json

    rng = np.random.default_rng(seed)
    t = np.arange(length)
    bodies = []
    for _ in range(count):
        inputs = []
        for i in range(series):
            values = 50 + 10 * np.sin(2 * np.pi * t / 24 + rng.uniform(0, 6)) + rng.normal(size=length).cumsum()
            inputs.append({"item_id": f"s{i}", "target": np.round(values, 3).tolist()})
        bodies.append(json.dumps({"inputs": inputs, "parameters": {"prediction_length": horizon}}).encode())
    return bodies


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rss_mib(pid: int) -> float:
    """Resident memory of a process, from /proc (Linux)."""
    text = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+) kB", text).group(1)) / 1024


def start_server(model: str, batching: bool, port: int, log_path: Path) -> subprocess.Popen[bytes]:
    script = Path(sys.executable).with_name("tsfm")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "tsfm.cli"]
    env = {**os.environ, "TSFM_BATCHING": str(batching).lower(), "TSFM_REQUEST_TIMEOUT_S": "120"}
    log = log_path.open("wb")
    return subprocess.Popen(
        [*command, "serve", "--model", model, "--port", str(port), "--log-level", "warning"],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )


def wait_ready(base: str, process: subprocess.Popen[bytes]) -> None:
    import httpx

    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            sys.exit(f"error: the server exited with code {process.returncode} before it was ready")
        try:
            if httpx.get(f"{base}/ready", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    sys.exit(f"error: the server was not ready within {READY_TIMEOUT_S} s")


async def load(base: str, bodies: list[bytes], clients: int, seconds: float) -> tuple[list[float], int, int]:
    """``clients`` tasks post back to back for ``seconds``: (latencies of successes in s, successes, errors)."""
    import httpx

    latencies: list[float] = []
    errors = 0
    deadline = time.perf_counter() + seconds
    headers = {"content-type": "application/json"}
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)

    async def client(index: int, http: httpx.AsyncClient) -> None:
        nonlocal errors
        k = index
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            try:
                response = await http.post("/v1/forecast", content=bodies[k % len(bodies)], headers=headers)
                ok = response.status_code == 200
            except httpx.HTTPError:
                ok = False
            if ok:
                latencies.append(time.perf_counter() - started)
            else:
                errors += 1
            k += clients

    async with httpx.AsyncClient(base_url=base, timeout=120, limits=limits) as http:
        await asyncio.gather(*(client(i, http) for i in range(clients)))
    return latencies, len(latencies), errors


def mean_batch(base: str) -> float:
    """Mean requests per model call, from the server's Prometheus histogram."""
    import httpx

    text = httpx.get(f"{base}/metrics", timeout=10).text
    total = float(re.search(r"^tsfm_batch_requests_sum (\S+)$", text, re.M).group(1))
    count = float(re.search(r"^tsfm_batch_requests_count (\S+)$", text, re.M).group(1))
    return total / count if count else float("nan")


def run_mode(args: argparse.Namespace, batching: bool, bodies: list[bytes], log_dir: Path) -> dict[str, float]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    process = start_server(args.model, batching, port, log_dir / f"serve-batching-{batching}.log")
    try:
        wait_ready(base, process)
        rss_ready = rss_mib(process.pid)
        if args.warmup > 0:
            asyncio.run(load(base, bodies, args.clients, args.warmup))
        rss_warm = rss_mib(process.pid)
        trace: list[tuple[float, float]] = []
        stop = threading.Event()
        started = time.perf_counter()
        sampler = threading.Thread(target=sample_rss, args=(process.pid, args.rss_every, started, trace, stop))
        if args.rss_every > 0:
            sampler.start()
        latencies, done, errors = asyncio.run(load(base, bodies, args.clients, args.duration))
        elapsed = time.perf_counter() - started
        stop.set()
        if sampler.is_alive():
            sampler.join()
        rss_end = rss_mib(process.pid)
        per_call = mean_batch(base)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
    ms = np.asarray(latencies) * 1000 if latencies else np.asarray([np.nan])
    return {
        "batching": batching,
        "requests": done,
        "errors": errors,
        "req_per_s": done / elapsed,
        "series_per_s": done * args.series / elapsed,
        "p50": float(np.percentile(ms, 50)),
        "p95": float(np.percentile(ms, 95)),
        "p99": float(np.percentile(ms, 99)),
        "per_call": per_call,
        "rss_ready": rss_ready,
        "rss_warm": rss_warm,
        "rss_end": rss_end,
        "rss_trace": trace,
    }


def sample_rss(pid: int, every: float, started: float, trace: list[tuple[float, float]], stop: threading.Event) -> None:
    """Append ``(seconds since start, RSS MiB)`` every ``every`` seconds until ``stop`` is set."""
    while not stop.wait(every):
        trace.append((time.perf_counter() - started, rss_mib(pid)))


def rss_trace_table(row: dict[str, object]) -> str:
    """The memory trace of one run and its growth per minute over the second half (least squares)."""
    trace = row["rss_trace"]
    if len(trace) < 4:
        return ""
    seconds, mib = (np.asarray(column) for column in zip(*trace, strict=True))
    half = seconds >= seconds[-1] / 2
    slope = float(np.polyfit(seconds[half], mib[half], 1)[0]) * 60
    samples = " ".join(f"{t:.0f}s:{m:.0f}" for t, m in trace)
    mode = "on" if row["batching"] else "off"
    return (
        f"RSS trace, micro-batching {mode} (MiB): {samples}\n"
        f"growth over the second half: {slope:+.2f} MiB/min (first sample {mib[0]:.0f}, max {mib.max():.0f}, "
        f"last {mib[-1]:.0f})"
    )


def table(rows: list[dict[str, float]]) -> str:
    lines = [
        "| micro-batching | requests | errors | req/s | series/s | p50 ms | p95 ms | p99 ms | requests per model call "
        "| RSS MiB ready / warm / end |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {'on' if r['batching'] else 'off'} | {r['requests']} | {r['errors']} | {r['req_per_s']:.1f} "
            f"| {r['series_per_s']:.0f} | {r['p50']:.0f} | {r['p95']:.0f} | {r['p99']:.0f} | {r['per_call']:.1f} "
            f"| {r['rss_ready']:.0f} / {r['rss_warm']:.0f} / {r['rss_end']:.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=60.0, help="measured seconds per mode (default: 60)")
    parser.add_argument("--clients", type=int, default=32, help="concurrent clients (default: 32)")
    parser.add_argument("--series", type=int, default=10, help="series per request (default: 10)")
    parser.add_argument("--length", type=int, default=512, help="points per series (default: 512)")
    parser.add_argument("--horizon", type=int, default=48, help="prediction_length (default: 48)")
    parser.add_argument("--model", default="default", help="model to serve (default: the shipped default)")
    parser.add_argument("--modes", default="on,off", help="micro-batching modes to run, in order (default: on,off)")
    parser.add_argument("--warmup", type=float, default=5.0, help="unmeasured seconds of load first (default: 5)")
    parser.add_argument(
        "--rss-every", type=float, default=0.0, help="sample the server's memory every S seconds (default: off)"
    )
    parser.add_argument("--no-write", action="store_true", help="print only; do not append to RESULTS.md")
    args = parser.parse_args()

    bodies = make_bodies(args.series, args.length, args.horizon, DISTINCT_BODIES)
    log_dir = Path(os.environ.get("TMPDIR", "/tmp"))
    rows = []
    for mode in args.modes.split(","):
        batching = {"on": True, "off": False}[mode.strip()]
        print(f"micro-batching {mode}: {args.clients} clients for {args.duration:g} s ...", file=sys.stderr)
        rows.append(run_mode(args, batching, bodies, log_dir))
    traces = [text for text in map(rss_trace_table, rows) if text]
    result = "\n\n".join([table(rows), *traces])
    print(result)
    if not args.no_write:
        command = " ".join(["python -m benchmarks.serve_load", *sys.argv[1:]])
        header = (
            f"\n## REST service under load: {args.clients} clients, {args.series} series x {args.length} points, "
            f"horizon {args.horizon} ({date.today().isoformat()})\n\n"
            f"Command: `{command}`. Model: `{args.model}`. {args.duration:g} s measured per mode after "
            f"{args.warmup:g} s of warm-up; one `tsfm serve` process (1 worker) per mode, load generator in another "
            f"process on the same machine. Machine: {platform.processor() or platform.machine()}, "
            f"{os.cpu_count()} cores, Python {platform.python_version()}.\n\n"
        )
        with RESULTS.open("a") as f:
            f.write(header + result + "\n")
        print(f"appended to {RESULTS}", file=sys.stderr)


if __name__ == "__main__":
    main()
