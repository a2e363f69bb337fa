"""Throughput of the training data path alone: synthetic series per second per prior, and windows per second of the
batch sampler (with and without the pool refresh), to set beside what the training step consumes.

    python -m benchmarks.data_path --real data/pretrain [--batch-size 1024] [--context 2048] \
        [--horizon-patches 24] [--pool-size 16384] [--refresh-every 4] [--steps 40] [--out $OUT]

Prints a table last and appends JSON rows to ``OUT/data_path.jsonl``. Times are wall-clock around synchronised
device work (median of repeats for the priors; total over ``--steps`` draws for the sampler).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import torch

from tsfm.pipelines.data.batches import BatchConfig, BatchSampler
from tsfm.pipelines.data.corpus import load_corpus
from tsfm.pipelines.data.priors import PRIORS, sample_priors


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def time_priors(length: int, count: int, device: torch.device, repeats: int = 3) -> list[dict]:
    rows = []
    for name, prior in [*PRIORS.items(), ("mix (DEFAULT_PRIOR_MIX)", None)]:
        times = []
        for r in range(repeats + 1):
            g = torch.Generator(device=device)
            g.manual_seed(r)
            _sync(device)
            start = time.perf_counter()
            out = prior(count, length, g) if prior is not None else sample_priors(count, length, g)
            _sync(device)
            if r:  # the first call warms up (kernels, allocator)
                times.append(time.perf_counter() - start)
        seconds = statistics.median(times)
        rows.append({"what": "prior", "name": name, "length": length, "count": count,
                     "series_per_s": count / seconds, "finite_share": float(torch.isfinite(out).float().mean())})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def time_sampler(config: BatchConfig, real, device: torch.device, steps: int) -> list[dict]:
    rows = []
    sampler = BatchSampler(config, real, prior=sample_priors, seed=0, device=device)
    _sync(device)
    start = time.perf_counter()
    sampler.sync_pool(0)
    _sync(device)
    rows.append({"what": "pool build", "pool_size": config.pool_size, "seconds": time.perf_counter() - start})
    print(json.dumps(rows[-1]), flush=True)
    for label, refresh in (("draw + refresh", True), ("draw, no refresh", False)):
        sampler.draw(1)
        _sync(device)
        start = time.perf_counter()
        for i in range(2, steps + 2):
            batch = sampler.draw(i if refresh else 1)
        _sync(device)
        seconds = time.perf_counter() - start
        rows.append({"what": label, "batch_size": config.batch_size, "window": config.window_length,
                     "refresh_every": config.refresh_every, "ms_per_batch": 1e3 * seconds / steps,
                     "windows_per_s": steps * config.batch_size / seconds,
                     "observed_share": float(torch.isfinite(batch.context).float().mean())})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--real", type=Path, default=None, help="GIFT-Eval root of real series")
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--context", type=int, default=2048)
    parser.add_argument("--horizon-patches", type=int, default=24)
    parser.add_argument("--pool-size", type=int, default=16384)
    parser.add_argument("--refresh-every", type=int, default=4)
    parser.add_argument("--prior-count", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp")))
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    config = BatchConfig(batch_size=args.batch_size, context_length=args.context,
                         prediction_length=32 * args.horizon_patches, pool_size=args.pool_size,
                         refresh_every=args.refresh_every)
    real = load_corpus(args.real)[0] if args.real is not None else None
    rows = time_priors(config.series_length, args.prior_count, device)
    rows += time_sampler(config, real, device, args.steps)
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "data_path.jsonl", "a") as fh:
        for row in rows:
            fh.write(json.dumps({**row, "device": str(torch.cuda.get_device_name() if device.type == "cuda"
                                                        else "cpu")}) + "\n")
    print(f"\n{device}, torch {torch.__version__}")
    print("| what | rate |\n|---|---|")
    for row in rows:
        if row["what"] == "prior":
            print(f"| prior {row['name']} (length {row['length']}) | {row['series_per_s']:,.0f} series/s |")
        elif row["what"] == "pool build":
            print(f"| pool build ({row['pool_size']} series) | {row['seconds']:.2f} s |")
        else:
            print(f"| sampler, {row['what']} | {row['windows_per_s']:,.0f} windows/s "
                  f"({row['ms_per_batch']:.1f} ms per batch of {row['batch_size']}) |")


if __name__ == "__main__":
    main()
