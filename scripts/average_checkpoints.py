"""Average the weights of checkpoints of one architecture into one model (a "model soup", or stochastic weight
averaging over a run's saved points), so a candidate costs one forward pass at inference, not one per member.

Averaging only makes sense for checkpoints of one lineage (the same initialisation trained on, e.g. the default's
continuations): weights of independent runs do not line up. The result is a plain checkpoint folder, judged like any
other (``scripts/judge_checkpoints.py``) before it ships.

    python scripts/average_checkpoints.py runs/a/model runs/b/model [...] --out runs/soup/model \
        [--weights 0.5,0.5] [--dtype bfloat16]
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

import torch

from tsfm.checkpoint import MAX_SHARD_BYTES, load_model, read_checkpoint_config, resolve_model_path, save_model
from tsfm.model import Forecaster

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def average_models(models: list[Forecaster], weights: list[float]) -> Forecaster:
    """A new model whose floating-point tensors are the ``weights``-weighted mean (in float32) of the members';
    any other tensor (e.g. an integer buffer) must be equal in every member.

    Raises:
        ValueError: fewer than two members, a weight count that differs from the member count, a negative or
            all-zero weight, members of different architectures, or unequal non-float tensors.
    """
    if len(models) < 2:
        raise ValueError(f"average needs at least two checkpoints, got {len(models)}")
    if len(weights) != len(models):
        raise ValueError(f"--weights: {len(weights)} weight(s) for {len(models)} checkpoints")
    if any(w < 0 for w in weights) or sum(weights) <= 0:
        raise ValueError(f"--weights must be non-negative and not all zero, got {weights}")
    first = models[0].config
    for index, model in enumerate(models[1:], start=2):
        if differ := first.network_differences(model.config):  # inference settings may differ (the first's kept)
            raise ValueError(f"checkpoint {index} has another architecture than the first ({', '.join(differ)})")
    total = sum(weights)
    states = [model.state_dict() for model in models]
    averaged = {}
    for name, tensor in states[0].items():
        if tensor.is_floating_point():
            averaged[name] = sum(w / total * state[name].float() for w, state in zip(weights, states, strict=True))
        elif all(torch.equal(tensor, state[name]) for state in states[1:]):
            averaged[name] = tensor
        else:
            raise ValueError(f"{name}: a non-float tensor that differs between checkpoints cannot be averaged")
    soup = Forecaster(models[0].config).eval()
    soup.load_state_dict(averaged)
    return soup


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoints", nargs="+", help="checkpoint folders (or built-in names) of one architecture")
    parser.add_argument("--out", type=Path, required=True, help="the averaged model's folder (replaced)")
    parser.add_argument("--weights", type=lambda s: [float(v) for v in s.split(",")], default=None,
                        help="comma-separated weights, one per checkpoint (default: equal)")
    parser.add_argument("--dtype", choices=DTYPES, default="float32",
                        help="stored dtype (bfloat16: as a shipped model is stored, so it is judged as it would ship)")
    args = parser.parse_args(argv)
    weights = args.weights or [1.0] * len(args.checkpoints)
    try:
        soup = average_models([load_model(c) for c in args.checkpoints], weights)
    except ValueError as err:
        parser.error(str(err))
    members = [{"checkpoint": str(c), "weight": w,
                "training": read_checkpoint_config(resolve_model_path(c))[1]}
               for c, w in zip(args.checkpoints, weights, strict=True)]
    command = shlex.join(["python", "scripts/average_checkpoints.py", *(sys.argv[1:] if argv is None else argv)])
    save_model(soup, args.out, training={"command": command, "averaged_from": members, "stored_dtype": args.dtype},
               dtype=DTYPES[args.dtype], max_shard_bytes=MAX_SHARD_BYTES)  # files a device call can bring back
    print(f"wrote {args.out}: the weighted mean of {len(members)} checkpoints ({', '.join(map(str, weights))})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
