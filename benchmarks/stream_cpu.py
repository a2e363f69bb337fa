"""CPU streaming benchmark (issue 15): update 1,000 open streams by one patch and forecast 48 steps, against
``predict()`` re-reading 2,048-step contexts of the same series.

Series are generated (daily and weekly seasonality at hourly resolution, trend, noise, a few NaN), seeded. The
streams open on the first 2,048 steps; each round appends one patch (32 steps) to every stream and forecasts 48
steps; the baseline runs ``predict(..., context_length=2048)`` on the same series ending at the same step. Both use
a shipped model (``--model``, ``default``: a Transformer, whose stream re-reads each kept tail at every forecast;
``recurrent``: its state is carried) with its decoding and, unless ``--naive-blend`` says otherwise, its
Seasonal-Naive blend (whose backtest re-reads each stream's kept tail at every forecast). Prints a table and writes
the raw rows as JSON.

    OMP_NUM_THREADS=1 python -m benchmarks.stream_cpu [--model recurrent] [--series 1000] [--rounds 3] [--threads 1]
        [--naive-blend off] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
CONTEXT, HORIZON, PATCH = 2048, 48, 32


def generate(count: int, length: int, seed: int = 0) -> np.ndarray:
    """``[count, length]`` hourly-looking series: level, trend, daily and weekly cycles, noise, 0.5% NaN."""
    rng = np.random.default_rng(seed)
    t = np.arange(length)
    level = rng.uniform(10, 1000, size=(count, 1))
    amp = level * rng.uniform(0.05, 0.3, size=(count, 1))
    series = (
        level
        + amp * np.sin(2 * np.pi * t / 24 + rng.uniform(0, 6.3, size=(count, 1)))
        + 0.5 * amp * np.sin(2 * np.pi * t / 168)
        + level * rng.normal(0, 1e-4, size=(count, 1)) * t
        + 0.1 * amp * rng.normal(size=(count, length))
    )
    series[rng.random(series.shape) < 0.005] = np.nan
    return series


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="default", help="a built-in model or a checkpoint folder")
    parser.add_argument("--series", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3, help="patches appended (one update + forecast each)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=256, help="predict()'s batch size")
    parser.add_argument("--naive-blend", default=None,
                        help="naive_blend for stream forecasts and predict() (default: the model's)")
    parser.add_argument("--out", type=Path, default=None, help="raw rows as JSON (default: print only)")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from tsfm.checkpoint import load_model
    from tsfm.forecast import predict
    from tsfm.stream import open_stream

    model = load_model(args.model)
    blend = model.config.naive_blend if args.naive_blend is None else args.naive_blend
    data = generate(args.series, CONTEXT + args.rounds * PATCH)
    rows: list[dict[str, object]] = []

    def record(what: str, seconds: float, **extra: object) -> None:
        rows.append({"what": what, "model": args.model, "series": args.series, "seconds": seconds,
                     "threads": args.threads, "naive_blend": blend, **extra})
        print(f"{what}: {seconds:.3f} s", flush=True)

    start = time.perf_counter()
    stream = open_stream(model, data[:, :CONTEXT], context_length=CONTEXT)
    record("open_streams", time.perf_counter() - start)
    for r in range(args.rounds):
        end = CONTEXT + (r + 1) * PATCH
        start = time.perf_counter()
        stream.update(data[:, end - PATCH : end])
        updated = time.perf_counter()
        _, stream_median = stream.forecast(HORIZON, naive_blend=blend)
        done = time.perf_counter()
        record("stream_update", updated - start, round=r)
        record("stream_forecast", done - updated, round=r)
        record("stream_update_forecast", done - start, round=r)
        if r == args.rounds - 1:
            start = time.perf_counter()
            _, full_median = predict(
                data[:, end - CONTEXT : end], HORIZON, model=model, context_length=CONTEXT,
                batch_size=args.batch_size, show_progress=False, naive_blend=blend,
            )
            seconds = time.perf_counter() - start
            spread = np.nanstd(data[:, end - CONTEXT : end], axis=1, keepdims=True)
            gap = float(np.median(np.abs(stream_median - full_median) / spread))
            record("predict_2048", seconds, round=r, median_abs_gap_in_stds=gap)
    stream_s = float(np.median([row["seconds"] for row in rows if row["what"] == "stream_update_forecast"]))
    predict_s = next(float(row["seconds"]) for row in rows if row["what"] == "predict_2048")
    update_s = float(np.median([row["seconds"] for row in rows if row["what"] == "stream_update"]))
    forecast_s = float(np.median([row["seconds"] for row in rows if row["what"] == "stream_forecast"]))
    print(f"\nmodel {args.model} ({model.config.backbone}, {model.num_parameters():,} params, {model.config.decoding}, "
          f"naive_blend {blend}), {args.series} series, horizon {HORIZON}, threads {args.threads}, "
          f"{platform.machine()}")
    print("| step | seconds | series/s | vs predict |")
    print("|---|---|---|---|")
    for name, sec in [("stream update (1 patch)", update_s), ("stream forecast (48)", forecast_s),
                      ("stream update + forecast", stream_s), ("predict(), 2,048-step contexts", predict_s)]:
        print(f"| {name} | {sec:.3f} | {args.series / sec:,.0f} | {predict_s / sec:.1f}x |")
    if args.out is not None:
        args.out.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
