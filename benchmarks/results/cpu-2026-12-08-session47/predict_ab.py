"""Forecast speed of one checkpoint with the ``tsfm`` found first on ``PYTHONPATH``: run once per code version
(session 47: before and after masked decoding in one pass with the Transformer's shared missing-token keys).

    PYTHONPATH=OLD_TREE python predict_ab.py tsfm/models/default --label before [--device cuda] [--series 4096]
    PYTHONPATH=. python predict_ab.py tsfm/models/default --label after

Series are generated (a daily sine under a random walk; no data files needed on the device machine); contexts of 512
and 2,048 steps, horizon 48, batches of 256; the best of three timed passes after a warm-up pass. Prints one line per
context and the largest forecast value, so two code versions' outputs can be compared too.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

import tsfm
from tsfm.checkpoint import load_model
from tsfm.forecast import predict


def series(count: int, length: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    steps = np.arange(length)
    phases = rng.uniform(0, 2 * np.pi, (count, 1))
    walk = rng.normal(scale=0.1, size=(count, length)).cumsum(axis=1)
    return (5 * np.sin(2 * np.pi * steps / 24 + phases) + walk + 10).astype(np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--label", required=True)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--series", type=int, default=4096)
    parser.add_argument("--contexts", default="512,2048")
    args = parser.parse_args()
    model = load_model(args.model).to(args.device)
    for context in (int(c) for c in args.contexts.split(",")):
        data = series(args.series, context)
        predict(data[:256], 48, model=model, batch_size=256)
        best = float("inf")
        for _ in range(3):
            if args.device == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            quantiles, _ = predict(data, 48, model=model, batch_size=256)
            if args.device == "cuda":
                torch.cuda.synchronize()
            best = min(best, time.perf_counter() - start)
        print(f"{args.label}: context {context}: {args.series / best:.1f} series/s ({best:.2f} s for {args.series}), "
              f"median[0, :3] {np.round(quantiles[0, 4, :3], 4).tolist()}, tsfm from {tsfm.__file__}, "
              f"{torch.cuda.get_device_name() if args.device == 'cuda' else 'cpu'}", flush=True)


if __name__ == "__main__":
    main()
