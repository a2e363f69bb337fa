"""CPU inference benchmark: series per second and peak memory of ``tsfm.predict`` for every backbone at 10M.

1,000 real series (windows of 512 steps cut from M4 hourly, ETTh1, ETTh2, exchange rate and NYC taxi in
``../shared/data/raw``), horizon
48. Each backbone runs in its own process so peak RSS is its own; weights are random (speed does not depend on
them). Prints a table last and appends it, with the command and machine, to ``benchmarks/RESULTS.md``.

    python -m benchmarks.predict_cpu [--series 1000] [--batch-size 256] [--no-write]
    python -m benchmarks.predict_cpu --checkpoints default,/path/to/model   # trained checkpoints instead, as they
                                                                           # ship (their context and decoding)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "RESULTS.md"
SPECS = ("xlstm[3:1]", "xlstm[1:0]", "mamba2", "gdn", "gdn[neg_eigval]", "transformer")
CONTEXT, HORIZON = 512, 48
CHECKPOINT_PREFIX = "checkpoint:"


def real_windows(count: int) -> np.ndarray:
    """``count`` non-overlapping 512-step windows from real hourly data, round-robin over the sources."""
    import pandas as pd

    raw = Path(os.environ.get("TSFM_SHARED_DIR", REPO.parent / "shared")) / "data" / "raw"
    if not raw.is_dir():
        sys.exit(f"error: {raw} not found; the benchmark needs the shared raw data")
    series = []
    m4 = pd.read_csv(raw / "m4_hourly_train.csv", index_col=0)
    series += [row.dropna().to_numpy(np.float32) for _, row in m4.iterrows()]
    for name, time_column in (("ETTh1.csv", "date"), ("ETTh2.csv", "date"), ("exchange_rate.csv", None),
                              ("taxi_new_york_passengers.csv", "time")):
        frame = pd.read_csv(raw / name)
        frame = frame.drop(columns=time_column) if time_column else frame
        series += [frame[c].to_numpy(np.float32) for c in frame.columns]
    windows = []
    offset = 0
    while len(windows) < count:
        added = False
        for s in series:
            end = len(s) - offset * CONTEXT
            if end >= CONTEXT and len(windows) < count:
                windows.append(s[end - CONTEXT : end])
                added = True
        if not added:
            sys.exit(f"error: only {len(windows)} windows of {CONTEXT} steps available")
        offset += 1
    return np.stack(windows)


def run_one(spec: str, series: int, batch_size: int, threads: int | None) -> dict:
    """In a child process: build the 10M model, forecast every window once (after a warm-up batch)."""
    import torch

    if threads:
        torch.set_num_threads(threads)

    from tsfm.forecast import predict
    from tsfm.model import Forecaster, num_parameters
    from tsfm.presets import preset_config

    torch.manual_seed(0)
    data = real_windows(series)
    if spec.startswith(CHECKPOINT_PREFIX):
        from tsfm.checkpoint import load_model

        model = load_model(spec.removeprefix(CHECKPOINT_PREFIX))
    else:
        model = Forecaster(preset_config(spec, "10M", context_length=CONTEXT)).eval()
    predict(data[:batch_size], HORIZON, model=model, batch_size=batch_size)  # warm-up
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    quantiles, _ = predict(data, HORIZON, model=model, batch_size=batch_size)
    seconds = time.perf_counter() - start
    assert np.isfinite(quantiles).all()
    return {
        "spec": spec,
        "params": num_parameters(model),
        "decoding": model.config.decoding,
        "seconds": seconds,
        "series_per_s": series / seconds,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "rss_after_warmup_mib": rss_before / 1024,
        "threads": torch.get_num_threads(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--specs", default=",".join(SPECS))
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--checkpoints", default=None,
                        help="comma-separated checkpoint folders (or 'default') to time instead of random --specs")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_one(args.child, args.series, args.batch_size, args.threads)))
        return
    rows = []
    specs = ([CHECKPOINT_PREFIX + c for c in args.checkpoints.split(",")] if args.checkpoints
             else args.specs.split(","))
    for spec in specs:
        cmd = [sys.executable, __file__, "--child", spec, "--series", str(args.series),
               "--batch-size", str(args.batch_size)] + (["--threads", str(args.threads)] if args.threads else [])
        out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=REPO)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(f"{spec}: {rows[-1]['series_per_s']:.1f} series/s", file=sys.stderr)
    fastest = max(r["series_per_s"] for r in rows)
    lines = [
        "| model | params | decoding | series/s | relative | seconds | peak RSS MiB |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['spec']} | {r['params']:,} | {r['decoding']} | {r['series_per_s']:.1f} "
                     f"| {r['series_per_s'] / fastest:.2f} | {r['seconds']:.1f} | {r['peak_rss_mib']:.0f} |")
    table = "\n".join(lines)
    print(table)
    if not args.no_write:
        header = (f"\n## CPU inference, {args.series} real series, context {CONTEXT}, horizon {HORIZON} "
                  f"({date.today().isoformat()})\n\n"
                  f"Command: `python -m benchmarks.predict_cpu {' '.join(sys.argv[1:])}`. "
                  f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
                  f"torch threads {rows[0]['threads']}, Python {platform.python_version()}. "
                  f"{'Trained checkpoints' if args.checkpoints else 'Random 10M weights'}; "
                  "peak RSS is the whole process (Python, torch, data, model).\n\n")
        raw = "\n\nRaw rows:\n\n```\n" + "\n".join(json.dumps(r) for r in rows) + "\n```\n"
        with RESULTS.open("a") as f:
            f.write(header + table + raw)


if __name__ == "__main__":
    main()
