"""Abuse benchmark of the REST service: the attacks of issue 14 replayed while well-behaved clients forecast.

A real ``tsfm serve`` on loopback (API key set, every other setting at its default). Two phases of ``--duration``
seconds each on the same server after a warm-up: ``calm``, only the well-behaved clients (16 by default, each
posting 10 series x 512 points, horizon 48, back to back, as ``serve_load.py`` does); then ``attack``, the same
clients while the attacks below run beside them. Reports the well-behaved clients' p50/p99 latency and error count in
each phase, the p99 ratio (target: at most 2), every attack's answers by status, the server's peak resident memory
per phase, the size of ``/metrics`` before and after, and how long the slow connections stayed open.

Every attack is bounded in count (``MAX``) and in time (the phase), loopback only:

    calendar        1,000 business-hour series, 184 distinct starts, horizon 1,024 (422 by the cost cap)
    calendar_ok     48 distinct business-hour ends x horizon 1,024: in the cap, written in the helper process (200)
    huge_answer     1,000 series x horizon 1,024 x 99 levels (a 25 kB body; 422 by the answer cap)
    big_invalid     a 16 MB body with one bad value at its end (422, short)
    no_key          16 MB bodies without the key (401 before the body is read)
    methods         made-up HTTP methods on /metrics and /v1/forecast (labels must stay a fixed set)
    slow_body       connections that send headers and half a body, then nothing (408 after body_timeout_s)
    slow_headers    connections that send half their headers, then nothing (closed after timeout_keep_alive)
    max_work        the largest in-limit work, 1,000 series x 512 points, horizon 64 (served, in turns)
    abandon         max_work requests whose client disconnects after 0.5 s (their work is cancelled)

    python benchmarks/serve_abuse.py [--duration 30] [--clients 16] [--model default|PATH] [--warmup 5]
                                     [--attacks all|name,name] [--attacker-nice 0-19] [--no-write]

Writes the raw rows (one per request: phase, kind, start offset, latency, status) to
``benchmarks/results/serve_abuse-<date>.csv`` and appends the tables, with the command and machine, to
``benchmarks/RESULTS.md``. The attacks run in a process of their own, as remote attackers would: in the
well-behaved clients' event loop, the attack code's own work (sending 16 MB bodies, 400 slow sockets) delayed their
requests and was counted as server latency. Both share the machine with the server, so on a small machine the
attack clients' CPU use is still part of what the well-behaved clients feel; ``--attacker-nice 19`` runs the attack
process at the lowest CPU priority, nearer remote attackers (the server's own work for the attacks is unchanged).
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import multiprocessing
import os
import platform
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_load import free_port, make_bodies, rss_mib, wait_ready

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "RESULTS.md"
RAW_DIR = REPO / "benchmarks" / "results"
KEY = "abuse-bench-key"
AUTH = {"Authorization": f"Bearer {KEY}", "content-type": "application/json"}
MAX = {  # requests (or connections) per attack, at most
    "calendar": 20, "calendar_ok": 6, "huge_answer": 20, "big_invalid": 6, "no_key": 20, "methods": 300,
    "slow_body": 200, "slow_headers": 200, "max_work": 4, "abandon": 6,
}
ATTACKS = tuple(MAX)


@dataclass
class Record:
    rows: list[tuple[str, str, float, float, int]] = field(default_factory=list)  # phase, kind, t, latency, status
    slow_open_s: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))

    def add(self, phase: str, kind: str, started: float, origin: float, status: int) -> None:
        self.rows.append((phase, kind, started - origin, time.perf_counter() - started, status))


# ----------------------------------------------------------------------------------------------------------------
# Bodies


def calendar_body(n_series: int, distinct: int) -> bytes:
    days = [d for d in range(1, 32) if date(2024, 1, d).weekday() < 5]
    starts = [f"2024-01-{days[k % len(days)]:02d}T{9 + (k // len(days)) % 8:02d}:00:00" for k in range(distinct)]
    inputs = [{"start": starts[i % distinct], "freq": "bh", "target": [1.0 + (i % 7)] * 16} for i in range(n_series)]
    return json.dumps({"inputs": inputs, "parameters": {"prediction_length": 1024, "quantile_levels": [0.5]}}).encode()


def huge_answer_body() -> bytes:
    levels = [round(0.01 * k, 2) for k in range(1, 100)]
    inputs = [{"target": [1.0, 2.0, 3.0]}] * 1000
    return json.dumps({"inputs": inputs, "parameters": {"prediction_length": 1024, "quantile_levels": levels}}).encode()


def big_invalid_body(size: int) -> bytes:
    """Just under ``size`` bytes of valid-looking series with one string at the very end (refused at parse)."""
    row = json.dumps({"target": [0.123456] * 1000})
    count = (size - 200) // (len(row) + 2)
    inputs = ",".join([row] * count)
    return ('{"inputs": [' + inputs + ', {"target": [1.0, "x"]}], "parameters": {"prediction_length": 4}}').encode()


def max_work_body() -> bytes:
    rng = np.random.default_rng(1)
    inputs = [{"target": np.round(rng.normal(size=512).cumsum(), 3).tolist()} for _ in range(1000)]
    return json.dumps({"inputs": inputs, "parameters": {"prediction_length": 64, "quantile_levels": [0.1, 0.5, 0.9]}
                       }).encode()


# ----------------------------------------------------------------------------------------------------------------
# Clients


async def good_clients(base: str, bodies: list[bytes], clients: int, seconds: float, phase: str, rec: Record,
                       origin: float) -> None:
    import httpx

    deadline = time.perf_counter() + seconds
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)

    async def client(index: int, http: httpx.AsyncClient) -> None:
        k = index
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            try:
                status = (await http.post("/v1/forecast", content=bodies[k % len(bodies)], headers=AUTH)).status_code
            except httpx.HTTPError:
                status = 0
            rec.add(phase, "good", started, origin, status)
            k += clients

    async with httpx.AsyncClient(base_url=base, timeout=120, limits=limits) as http:
        await asyncio.gather(*(client(i, http) for i in range(clients)))


async def repeat(base: str, name: str, body: bytes, headers: dict[str, str], deadline: float, rec: Record,
                 origin: float, *, timeout: float = 120, method: str = "POST", path: str = "/v1/forecast") -> None:
    """Send ``body`` up to ``MAX[name]`` times, one after the other, until the phase ends."""
    import httpx

    async with httpx.AsyncClient(base_url=base, timeout=timeout) as http:
        for _ in range(MAX[name]):
            if time.perf_counter() >= deadline:
                return
            started = time.perf_counter()
            try:
                status = (await http.request(method, path, content=body, headers=headers)).status_code
            except httpx.TimeoutException:
                status = -1  # the attacker gave up (abandon)
            except httpx.HTTPError:
                status = 0
            rec.add("attack", name, started, origin, status)
            await asyncio.sleep(0.05)


async def methods(base: str, deadline: float, rec: Record, origin: float) -> None:
    import httpx

    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        for k in range(MAX["methods"]):
            if time.perf_counter() >= deadline:
                return
            started = time.perf_counter()
            path = "/metrics" if k % 2 else "/v1/forecast"
            try:
                status = (await http.request(f"M{k}X", path, headers=AUTH)).status_code
            except httpx.HTTPError:
                status = 0
            rec.add("attack", "methods", started, origin, status)


async def slow_connections(port: int, name: str, payload: bytes, deadline: float, rec: Record, origin: float) -> None:
    """``MAX[name]`` connections that send ``payload`` and then nothing; record how each ended and when."""

    async def one() -> None:
        started = time.perf_counter()
        status = 0
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            rec.add("attack", name, started, origin, -2)
            return
        try:
            writer.write(payload)
            await writer.drain()
            remaining = max(deadline + 30 - time.perf_counter(), 1.0)
            answer = await asyncio.wait_for(reader.read(), remaining)  # until the server closes
            match = re.match(rb"HTTP/1\.1 (\d{3})", answer)
            status = int(match.group(1)) if match else 1  # 1: closed without an answer
        except (asyncio.TimeoutError, OSError):
            status = -1  # still open when we gave up
        finally:
            writer.close()
        rec.add("attack", name, started, origin, status)
        rec.slow_open_s[name].append(time.perf_counter() - started)

    await asyncio.gather(*(one() for _ in range(MAX[name])))


async def attack_phase(base: str, port: int, bodies: dict[str, bytes], names: list[str], seconds: float, rec: Record,
                       origin: float) -> None:
    deadline = time.perf_counter() + seconds
    no_key = {"content-type": "application/json"}
    tasks = []
    simple = {"calendar": AUTH, "calendar_ok": AUTH, "huge_answer": AUTH, "big_invalid": AUTH, "no_key": no_key,
              "max_work": AUTH}
    for name in names:
        if name in simple:
            tasks.append(repeat(base, name, bodies[name], simple[name], deadline, rec, origin))
        elif name == "abandon":
            tasks.append(repeat(base, name, bodies["max_work"], AUTH, deadline, rec, origin, timeout=0.5))
        elif name == "methods":
            tasks.append(methods(base, deadline, rec, origin))
        elif name == "slow_body":
            head = (f"POST /v1/forecast HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n"
                    "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n").encode()
            tasks.append(slow_connections(port, name, head + b'{"inputs": [', deadline, rec, origin))
        elif name == "slow_headers":
            tasks.append(slow_connections(port, name, b"POST /v1/forecast HTTP/1.1\r\nHost: x\r\nContent-Le",
                                          deadline, rec, origin))
    await asyncio.gather(*tasks)


def attack_bodies() -> dict[str, bytes]:
    bodies = {"calendar": calendar_body(1000, 1000), "calendar_ok": calendar_body(48, 48),
              "huge_answer": huge_answer_body(), "big_invalid": big_invalid_body(16 * 1024 * 1024 - 4096),
              "max_work": max_work_body()}
    bodies["no_key"] = bodies["big_invalid"]
    return bodies


def attacker_process(base: str, port: int, names: list[str], seconds: float, origin: float, ready: Any, go: Any,
                     results: Any, niceness: int = 0) -> None:
    """The attack phase in its own process: build the bodies, say ready, wait for the start, send the rows back.
    ``time.perf_counter`` is the system-wide monotonic clock on Linux, so ``origin`` is shared with the parent.
    ``niceness`` > 0 lowers this process's CPU priority (``--attacker-nice``)."""
    if niceness:
        os.nice(niceness)
    bodies = attack_bodies()
    ready.set()
    go.wait()
    rec = Record()
    asyncio.run(attack_phase(base, port, bodies, names, seconds, rec, origin))
    results.put((rec.rows, dict(rec.slow_open_s)))


# ----------------------------------------------------------------------------------------------------------------
# Server and measurement


def start_server(model: str, port: int, log_path: Path) -> subprocess.Popen[bytes]:
    script = Path(sys.executable).with_name("tsfm")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "tsfm.cli"]
    env = {**os.environ, "TSFM_API_KEY": KEY}
    return subprocess.Popen(
        [*command, "serve", "--model", model, "--port", str(port), "--log-level", "warning"],
        stdout=log_path.open("wb"), stderr=subprocess.STDOUT, env=env,
    )


class PeakMemory:
    """Samples the server's RSS every 0.1 s on a thread; ``take()`` returns and resets the peak."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak, self.stop = pid, 0.0, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(0.1):
            try:
                self.peak = max(self.peak, rss_mib(self.pid))
            except (OSError, AttributeError):
                return

    def take(self) -> float:
        peak, self.peak = self.peak, rss_mib(self.pid)
        return max(peak, self.peak)


def summary(rec: Record, phases: dict[str, float], memory: dict[str, float], metrics_bytes: tuple[int, int],
            health_after: int) -> str:
    lines = [
        "| phase | well-behaved requests | errors | req/s | p50 ms | p99 ms | p99 vs calm | server peak RSS MiB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    p99 = {}
    for phase, seconds in phases.items():
        good = [(lat, st) for ph, kind, _, lat, st in rec.rows if ph == phase and kind == "good"]
        ms = np.asarray([lat for lat, st in good if st == 200]) * 1000
        errors = sum(1 for _, st in good if st != 200)
        p99[phase] = float(np.percentile(ms, 99)) if ms.size else float("nan")
        lines.append(
            f"| {phase} | {len(good)} | {errors} | {len(good) / seconds:.1f} | {np.percentile(ms, 50):.0f} "
            f"| {p99[phase]:.0f} | {p99[phase] / p99['calm']:.2f}x | {memory[phase]:.0f} |"
        )
    lines += ["", "| attack | sent | answers (status: count) | median ms | max ms |", "|---|---|---|---|---|"]
    by_kind: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for phase, kind, _, lat, st in rec.rows:
        if phase == "attack" and kind != "good":
            by_kind[kind].append((lat, st))
    labels = {0: "transport error", -1: "given up / still open", -2: "refused", 1: "closed"}
    for kind in ATTACKS:
        if kind not in by_kind:
            continue
        counts = Counter(st for _, st in by_kind[kind])
        text = ", ".join(f"{labels.get(st, st)}: {n}" for st, n in sorted(counts.items()))
        ms = np.asarray([lat for lat, _ in by_kind[kind]]) * 1000
        lines.append(f"| {kind} | {len(ms)} | {text} | {np.median(ms):.0f} | {ms.max():.0f} |")
    lines += ["", f"/metrics: {metrics_bytes[0]} bytes before the attack, {metrics_bytes[1]} after; "
              f"/health after the attack: {health_after}."]
    return "\n".join(lines)


def main() -> None:
    import httpx

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=30.0, help="seconds per phase (default: 30)")
    parser.add_argument("--clients", type=int, default=16, help="well-behaved clients (default: 16)")
    parser.add_argument("--model", default="default", help="model to serve (default: the shipped default)")
    parser.add_argument("--warmup", type=float, default=5.0, help="unmeasured seconds of calm load first")
    parser.add_argument("--attacks", default="all", help=f"comma-separated subset of {','.join(ATTACKS)}")
    parser.add_argument("--no-write", action="store_true", help="print only; write neither CSV nor RESULTS.md")
    parser.add_argument("--attacker-nice", type=int, default=0, choices=range(20), metavar="0-19",
                        help="CPU niceness of the attack process (default 0: same priority as the server); 19 "
                        "approximates remote attackers, whose sending costs the server's machine nothing")
    args = parser.parse_args()
    names = list(ATTACKS) if args.attacks == "all" else [n.strip() for n in args.attacks.split(",")]
    unknown = set(names) - set(ATTACKS)
    if unknown:
        sys.exit(f"error: unknown attacks {sorted(unknown)}")

    print("building bodies ...", file=sys.stderr)
    good = make_bodies(10, 512, 48, 16)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log_path = Path(os.environ.get("TMPDIR", "/tmp")) / "serve-abuse.log"
    process = start_server(args.model, port, log_path)
    rec = Record()
    try:
        wait_ready(base, process)
        memory_probe = PeakMemory(process.pid)
        origin = time.perf_counter()
        asyncio.run(good_clients(base, good, args.clients, args.warmup, "warmup", rec, origin))
        memory_probe.take()
        print(f"calm: {args.clients} clients for {args.duration:g} s ...", file=sys.stderr)
        asyncio.run(good_clients(base, good, args.clients, args.duration, "calm", rec, origin))
        memory = {"calm": memory_probe.take()}
        metrics_before = len(httpx.get(f"{base}/metrics", headers=AUTH, timeout=30).content)
        print(f"attack: {args.clients} clients and {', '.join(names)} for {args.duration:g} s ...", file=sys.stderr)

        spawn = multiprocessing.get_context("spawn")
        ready, go, results = spawn.Event(), spawn.Event(), spawn.Queue()
        attacker = spawn.Process(target=attacker_process,
                                 args=(base, port, names, args.duration, origin, ready, go, results,
                                       args.attacker_nice), daemon=True)
        attacker.start()
        if not ready.wait(timeout=300):
            sys.exit("error: the attack process did not get ready in 300 s")
        go.set()
        asyncio.run(good_clients(base, good, args.clients, args.duration, "attack", rec, origin))
        rows, slow_open_s = results.get(timeout=args.duration + 300)  # slow sockets outlive the phase
        attacker.join(timeout=30)
        rec.rows.extend(rows)
        for name, seconds in slow_open_s.items():
            rec.slow_open_s[name].extend(seconds)
        memory["attack"] = memory_probe.take()
        metrics_after = len(httpx.get(f"{base}/metrics", headers=AUTH, timeout=30).content)
        health = httpx.get(f"{base}/health", timeout=30).status_code
        memory_probe.stop.set()
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
    # the slow connections outlive the phase by their timeouts: their "open" times are in the raw rows
    result = summary(rec, {"calm": args.duration, "attack": args.duration}, memory, (metrics_before, metrics_after),
                     health)
    for name, seconds in rec.slow_open_s.items():
        result += f"\n{name}: {len(seconds)} connections, open for {min(seconds):.1f}-{max(seconds):.1f} s."
    print(result)
    if args.no_write:
        return
    RAW_DIR.mkdir(parents=True, exist_ok=True)
    raw = RAW_DIR / f"serve_abuse-{date.today().isoformat()}.csv"
    for run in range(2, 100):  # an earlier run of the day keeps its rows (RESULTS.md names its file)
        if not raw.exists():
            break
        raw = RAW_DIR / f"serve_abuse-{date.today().isoformat()}-{run}.csv"
    with raw.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["phase", "kind", "start_s", "latency_s", "status"])
        writer.writerows((ph, kind, f"{t:.4f}", f"{lat:.4f}", st) for ph, kind, t, lat, st in rec.rows)
    command = " ".join(["python benchmarks/serve_abuse.py", *sys.argv[1:]])
    header = (
        f"\n## REST service under attack: {args.clients} well-behaved clients, with and without the issue 14 "
        f"attacks ({date.today().isoformat()})\n\n"
        f"Command: `{command}`. Model: `{args.model}`. {args.duration:g} s per phase after {args.warmup:g} s of "
        f"warm-up; one `tsfm serve` process (1 worker, API key set, default limits), the well-behaved clients "
        f"in a second process and the attacks in a third (niceness {args.attacker_nice}), on the same machine. "
        f"Well-behaved request: 10 series "
        f"x 512 points, horizon 48. Raw rows: "
        f"`{raw.relative_to(REPO)}`. Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}.\n\n"
    )
    with RESULTS.open("a") as f:
        f.write(header + result + "\n")
    print(f"appended to {RESULTS}; raw rows in {raw}", file=sys.stderr)


if __name__ == "__main__":
    main()
