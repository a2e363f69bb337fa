"""Forecast-path validation: score a checkpoint's *inference options* on the held-out windows, never the benchmark.

``scripts/validation_loss.py`` scores the training objective (one forward pass, every token); options that act only
when forecasting need the forecasts themselves: ``infer_nonnegative`` (``Forecaster.forecast``) and the sign-flip
average that TimesFM 2.5 offers as ``force_flip_invariance`` (``ModelConfig.flip_equivariant``: level ``q`` of ``x``
averaged with minus level ``1 - q`` of ``-x``; see ``benchmarks/RESULTS.md``, fifteenth and forty-first sessions).

This script rebuilds the same validation windows (the hash split, ``VALIDATION_SEED``, the checkpoint's recorded
settings), forecasts each window's future patches through ``Forecaster.forecast`` once for every checkpoint given
and option combination (also, if asked, from a shorter context or with another decoding, and with ``--pairs`` the
level-by-level average of every two of them: an ensemble of options or of checkpoints), and prints the pinball
loss in each window's scaled units (the context's ``fit_scale``, the truth clipped at ``TARGET_CLAMP`` as in
training), pooled over observed steps, with the breakdown over window groups of ``validation_loss.py``. The rule:
an option becomes a shipped model's default only if it lowers this loss.

    PYTHONPATH=. python3 scripts/validation_forecast.py tsfm/models/default [runs/x/model ...] \
        --real-data data/device/pretrain --validation-split common [--val-batches 2] [--device cuda] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import itertools
import json

import torch
from tqdm.auto import tqdm
from validation_loss import (  # a sibling script (scripts/)
    BAND_MEAN,
    DATASET_MEAN,
    add_validation_arguments,
    check_same_windows,
    group_means,
    print_paired_over_datasets,
    rebuild_validation,
)

from tsfm.checkpoint import load_model
from tsfm.heads import pinball_per_step
from tsfm.model import TARGET_CLAMP, clamp_if_nonnegative, has_no_negative_value
from tsfm.scaling import ScaleParams, apply_scale, fit_scale


def forecast(model, context: torch.Tensor, horizon: int, *, context_length: int, decoding: str,
             flip_invariant: bool, naive_blend: str) -> torch.Tensor:
    """``[B, Q, H]`` quantiles under the options, before the clamp: the context's last ``context_length`` steps,
    ``decoding``, the Seasonal-Naive blend and the sign-flip average (``Forecaster.forecast``'s
    ``flip_equivariant``; the levels must be symmetric about 0.5)."""
    return model.forecast(context[:, -context_length:], horizon, decoding, infer_nonnegative=False,
                          naive_blend=naive_blend, flip_equivariant=flip_invariant)


def score(quantiles: torch.Tensor, targets: torch.Tensor, params: ScaleParams, levels, groups) -> dict[str, float]:
    """Pinball loss of ``[N, Q, H]`` quantiles per window group that has windows, in the context's scaled units with
    the truth clipped at ``TARGET_CLAMP`` as training does (a near-constant context would otherwise dominate the
    mean)."""
    truth = apply_scale(targets, params).clamp(-TARGET_CLAMP, TARGET_CLAMP)
    predicted = (quantiles - params.loc[:, :, None]) / params.scale[:, :, None]
    loss, weight = pinball_per_step(predicted, truth, levels)
    per_window = torch.stack([loss.sum(1), weight.sum(1)], 1)
    row = {group: float(per_window[mask, 0].sum() / per_window[mask, 1].sum().clamp(min=1))
           for group, mask in groups.items() if mask.any()}
    return {**row, **group_means(row)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="+",
                        help="checkpoint folders or built-in names, scored on the first one's validation windows")
    add_validation_arguments(parser)
    parser.add_argument("--batch-size", type=int, default=256, help="windows per forecast call")
    parser.add_argument("--context-lengths", default=None,
                        help="comma-separated: also forecast from only the last N steps of each window (default: "
                             "the model's context length alone)")
    parser.add_argument("--decodings", default=None, help="comma-separated (default: the model's decoding alone)")
    flips = parser.add_mutually_exclusive_group()
    flips.add_argument("--flip", choices=("on", "off", "both"), default="both",
                       help="score with the sign-flip average (on), without it (off) or both ways (default)")
    flips.add_argument("--no-flip", dest="flip", action="store_const", const="off",
                       help="the same as --flip off (half the time)")
    parser.add_argument("--naive-blends", default=None,
                        help="comma-separated tsfm.naive_blend settings (default: the model's alone)")
    parser.add_argument("--pairs", action="store_true",
                        help="also score the level-by-level quantile average of every pair of option combinations")
    args = parser.parse_args(argv)

    if len(set(args.models)) < len(args.models):
        parser.error("each checkpoint once: a repeated one would be scored (and paired) as itself")
    model_config, _, batches, groups = rebuild_validation(args.models[0], args)
    contexts = torch.cat([b.context for b in batches]).float()
    targets = torch.cat([b.target for b in batches]).float()
    models = {name: load_model(name, device=args.device) for name in args.models}
    for name, model in models.items():
        check_same_windows(parser, name, model.config, model_config)
    levels = models[args.models[0]].quantile_levels  # one for all: the window check compares the levels
    choices = {
        "model": args.models,
        "context_length": [int(n) for n in args.context_lengths.split(",")] if args.context_lengths
        else [model_config.context_length],
        "decoding": args.decodings.split(",") if args.decodings else [model_config.decoding],
        "flip_invariant": {"on": [True], "off": [False], "both": [False, True]}[args.flip],
        "naive_blend": args.naive_blends.split(",") if args.naive_blends else [model_config.naive_blend],
    }
    params = ScaleParams(*(t.cpu() for t in fit_scale(contexts)))
    nonnegative = has_no_negative_value(contexts)
    raw: dict[tuple, torch.Tensor] = {}
    for values in itertools.product(*choices.values()):
        options = dict(zip(choices, values, strict=True))
        model = models[options.pop("model")]
        raw[values] = torch.cat([
            forecast(model, contexts[start : start + args.batch_size], targets.shape[1], **options).float().cpu()
            for start in tqdm(range(0, contexts.shape[0], args.batch_size), desc=str(options), leave=False)
        ])  # [N, Q, H]
    # an ensemble averages its members' quantiles level by level (Vincentisation), then clamps
    members = [[key] for key in raw]
    if args.pairs:
        members += [list(pair) for pair in itertools.combinations(raw, 2)]
    rows = []
    for group in members:
        averaged = torch.stack([raw[key] for key in group]).mean(0)
        for clamp in (False, True):
            quantiles = clamp_if_nonnegative(averaged, nonnegative) if clamp else averaged
            label = " + ".join("/".join(str(v) for v in key) for key in group) + (" (clamped)" if clamp else "")
            row = {"options": label, "members": [dict(zip(choices, key, strict=True)) for key in group],
                   "infer_nonnegative": clamp, **score(quantiles, targets, params, levels, groups)}
            rows.append(row)
            print(f"{label}: all windows {row['all windows']:.4f}, {BAND_MEAN} {row[BAND_MEAN]:.4f}, "
                  f"{DATASET_MEAN} {row[DATASET_MEAN]:.4f}", flush=True)
    names = [name for name in rows[0] if name not in ("options", "members", "infer_nonnegative")]
    print("\n| " + "/".join(choices) + " | " + " | ".join(names) + " |")
    print("|---|" + "--:|" * len(names))
    for row in rows:
        print("| " + row["options"] + " | " + " | ".join(f"{row[n]:.4f}" for n in names) + " |")
    counts = {group: int(mask.sum()) for group, mask in groups.items()}
    print("windows per group:", counts)
    _pair_by_dataset(rows)
    if args.out:
        args.out.write_text(json.dumps({"models": args.models, "windows": counts, "rows": rows}, indent=2) + "\n")


def _pair_by_dataset(rows: list[dict]) -> None:
    """Every later row against the first with the same clamp setting, paired over the held-out datasets
    (``paired_dataset_ratio`` in the row, and printed): the validation half of the rule that ships a model
    (``benchmarks/RESULTS.md``: not above 1 on the forecast path, with the decoding it ships with)."""
    for clamp in (False, True):
        first, *later = [row for row in rows if row["infer_nonnegative"] == clamp]
        print_paired_over_datasets(f"Against {first['options']}", first, [(row["options"], row, row) for row in later],
                                   "paired_dataset_ratio")


if __name__ == "__main__":
    main()
