"""Turn a trained checkpoint into a shipped model (``tsfm/models/default``, ``tsfm/models/recurrent``): bf16 weights in
shards under 16 MiB, the shipped inference settings (masked decoding; non-negative forecasts for series never
negative; the Seasonal-Naive blend ``inverse_mse``; the sign-flip average; each chosen by the rules in
benchmarks/RESULTS.md), provenance kept.

    python scripts/ship_default.py runs/default-10m/model tsfm/models/default [--decoding masked]
        [--no-infer-nonnegative] [--naive-blend inverse_mse] [--no-flip-equivariant]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
from pathlib import Path

import torch

from tsfm.checkpoint import MAX_SHARD_BYTES, load_model, save_model
from tsfm.config import DECODINGS, NAIVE_BLENDS
from tsfm.model import Forecaster


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", type=Path, help="the trained model folder (tsfm train writes OUT/model)")
    parser.add_argument("out", type=Path, help="where the shipped model goes (replaced)")
    parser.add_argument("--decoding", choices=DECODINGS, default="masked")
    parser.add_argument("--infer-nonnegative", action=argparse.BooleanOptionalAction, default=True,
                        help="ModelConfig.infer_nonnegative (default: on)")
    parser.add_argument("--naive-blend", choices=NAIVE_BLENDS, default="inverse_mse",
                        help="ModelConfig.naive_blend (default: inverse_mse)")
    parser.add_argument("--flip-equivariant", action=argparse.BooleanOptionalAction, default=True,
                        help="ModelConfig.flip_equivariant (default: on)")
    args = parser.parse_args(argv)
    trained = load_model(args.checkpoint)
    inference = {"decoding": args.decoding, "infer_nonnegative": args.infer_nonnegative,
                 "naive_blend": args.naive_blend, "flip_equivariant": args.flip_equivariant}
    shipped = Forecaster(dataclasses.replace(trained.config, **inference)).eval()
    shipped.load_state_dict(trained.state_dict())
    training = json.loads((args.checkpoint / "config.json").read_text())["training"]
    training["stored_dtype"] = "bfloat16"
    card = args.out / "README.md"
    card_text = card.read_text() if card.exists() else None  # the model card is written by hand: keep it
    if args.out.exists():
        shutil.rmtree(args.out)
    save_model(shipped, args.out, training=training, dtype=torch.bfloat16, max_shard_bytes=MAX_SHARD_BYTES)
    if card_text is not None:
        card.write_text(card_text)
    print(f"wrote {args.out} ({inference})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
