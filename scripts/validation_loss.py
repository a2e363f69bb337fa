"""Validation loss of several checkpoints on one and the same held-out set: how runs are compared and chosen.

The training loop picks a run's checkpoint by its validation loss; choosing *between* runs (another seed, a run
continued with ``tsfm train --init-from``) needs the same rule on the same windows, never the benchmark. This
script rebuilds the validation set the way training does (the same hash split of the corpus, the fixed
``VALIDATION_SEED``, the first checkpoint's recorded training settings) and prints each checkpoint's pinball loss
on it, bf16 autocast on a GPU as in training. Losses compare across checkpoints of one call, and with the losses
logged in training on the same device type.

    PYTHONPATH=. python3 scripts/validation_loss.py tsfm/models/default runs/a/model --real-data data/device/pretrain \
        [--device cuda] [--out FILE.json] [--breakdown]

``--breakdown`` also splits each loss into the tokens that forecast the context's next patch and the masked future
tokens, over groups of windows (a period found in the context or not, by :func:`tsfm.seasonality.detect_period`;
short or full observed context; the frequency band of the window's dataset; the dataset), with unweighted means over
the context bands and over the datasets: it says where two checkpoints differ, e.g. whether a change that acts on
the future tokens helps the windows it was meant for.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
from pathlib import Path

import torch

from tsfm.checkpoint import load_model, read_checkpoint_config, resolve_model_path
from tsfm.config import ModelConfig
from tsfm.heads import pinball_per_step
from tsfm.model import Forecaster
from tsfm.pipelines.data.batches import Batch
from tsfm.pipelines.data.corpus import VALIDATION_SPLITS, load_corpus
from tsfm.pipelines.data.frequency import normalise_freq
from tsfm.pipelines.data.gift_format import iter_entries
from tsfm.pipelines.evaluate import paired_ratio_interval
from tsfm.pipelines.train import TrainConfig, validation_batches
from tsfm.seasonality import detect_period

WINDOW_FIELDS = ("context_length", "patch_size", "train_horizon_patches", "quantile_levels")
"""The model settings that shape the validation windows and their loss (``validation_batches``): models that agree
on them are scored on the same windows, whatever their backbone, size or grown modules."""


def check_same_windows(parser: argparse.ArgumentParser, name: str, config: ModelConfig, first: ModelConfig) -> None:
    """A usage error unless ``config`` agrees with the first checkpoint's on ``WINDOW_FIELDS``."""
    if any(getattr(config, k) != getattr(first, k) for k in WINDOW_FIELDS):
        parser.error(f"{name} differs from the first checkpoint in {WINDOW_FIELDS}: their validation windows would "
                     "differ")


def add_validation_arguments(parser: argparse.ArgumentParser) -> None:
    """The options that say which held-out windows to rebuild (shared with ``validation_forecast.py``)."""
    parser.add_argument("--real-data", type=Path, required=True, help="the corpus the runs were trained on")
    parser.add_argument("--validation-share", type=float, default=0.05, help="as given to tsfm train (0.05)")
    parser.add_argument("--validation-split", choices=VALIDATION_SPLITS, default="series",
                        help="as given to tsfm train (series); common: what series and covering both hold out, "
                             "to compare runs trained under different splits")
    parser.add_argument("--val-batches", type=int, default=None, help="default: the first checkpoint's setting")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", type=Path, default=None, help="also write the rows as JSON")


def recorded_train_config(training: dict) -> dict:
    """The training settings a checkpoint records; for a weight-space average (``scripts/average_checkpoints.py``),
    those of its first member that records them, however deep the averages nest (a soup's members continue one
    parent on one corpus, so they share the settings the validation windows are drawn by)."""
    if training.get("train_config"):
        return dict(training["train_config"])
    for member in training.get("averaged_from") or []:
        if found := recorded_train_config(member.get("training") or {}):
            return found
    return {}


def rebuild_validation(checkpoint: str, args: argparse.Namespace
                       ) -> tuple[ModelConfig, TrainConfig, list[Batch], dict[str, torch.Tensor]]:
    """The validation windows of ``checkpoint``'s training, as ``tsfm train`` drew them (its recorded settings, the
    hash split, ``VALIDATION_SEED``), with the options of :func:`add_validation_arguments`, and their groups
    (:func:`window_groups`); ``SystemExit`` with a message when the checkpoint records no training settings."""
    model_config, training = read_checkpoint_config(resolve_model_path(checkpoint))
    recorded = recorded_train_config(training)
    if not recorded:
        raise SystemExit(f"{checkpoint} records no training settings; its validation set cannot be rebuilt")
    if args.val_batches is not None:
        recorded["val_batches"] = args.val_batches
    train_config = TrainConfig(**{k: v for k, v in recorded.items() if k in TrainConfig.__dataclass_fields__})
    _, validation = load_corpus(args.real_data, validation_share=args.validation_share,
                                validation_split=args.validation_split)
    batches = validation_batches(model_config, train_config, validation, args.device)
    windows = sum(b.context.shape[0] for b in batches)
    print(f"{len(validation)} held-out series, {windows} windows, context {train_config.context_length}, "
          f"horizon {batches[0].target.shape[1]}")
    window_datasets = [validation.datasets[int(i)] for b in batches for i in b.series.cpu()]
    bands = _dataset_bands(args.real_data, sorted(set(window_datasets)))
    window_bands = [bands[name] for name in window_datasets]
    return model_config, train_config, batches, window_groups(batches, window_bands, window_datasets)


FREQUENCY_BANDS = {"S": "finer than hourly", "T": "finer than hourly", "H": "hourly", "D": "daily", "B": "daily",
                   "W": "weekly", "M": "monthly", "Q": "quarterly or yearly", "A": "quarterly or yearly",
                   "Y": "quarterly or yearly"}
"""Coarse bands of the datasets' frequencies (by :func:`normalise_freq`'s base letter): the benchmark is mostly
hourly and finer, the held-out series mostly monthly and coarser, so the loss is also reported per band."""


def _dataset_bands(root: Path, names: list[str]) -> dict[str, str]:
    """Each dataset's frequency band, from the ``freq`` of its first stored series."""
    return {name: FREQUENCY_BANDS.get(normalise_freq(next(iter_entries(root / name))["freq"]), "other")
            for name in names}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="+", help="checkpoint folders or built-in names")
    add_validation_arguments(parser)
    parser.add_argument("--breakdown", action="store_true",
                        help="also the context and future tokens' losses over groups of windows")
    args = parser.parse_args()
    model_config, _, batches, groups = rebuild_validation(args.models[0], args)
    windows = sum(b.context.shape[0] for b in batches)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if str(args.device).startswith("cuda") \
        else contextlib.nullcontext()
    rows = []
    print("| checkpoint | steps (own + parents) | validation loss |\n|---|---|---|")
    for name in args.models:
        model = load_model(name, device=args.device)
        check_same_windows(parser, name, model.config, model_config)
        with torch.no_grad(), autocast:
            losses = [float(model.training_loss(b.context, b.target)) for b in batches]
        loss = sum(losses) / len(losses)
        steps = _lineage_steps(read_checkpoint_config(resolve_model_path(name))[1])
        rows.append({"checkpoint": name, "steps": steps, "validation_loss": loss})
        print(f"| {name} | {' + '.join(map(str, steps))} | {loss:.4f} |")
        if args.breakdown:
            with torch.no_grad(), autocast:
                rows[-1]["breakdown"] = _breakdown(model, batches, groups)
    if args.breakdown:
        _print_breakdown(rows)
        _pair_by_dataset(rows)
    if args.out:
        args.out.write_text(json.dumps({"windows": windows, "rows": rows}, indent=2) + "\n")


CONTEXT_BANDS = {"context < 512 steps": (0, 512), "context 512-1,999 steps": (512, 2000),
                 "context >= 2,000 steps": (2000, math.inf)}
"""Bands of observed context: the held-out windows are mostly short (91% under 512 steps on the capped corpus), the
benchmark's mostly long, so each band is reported and so is their unweighted mean (``BAND_MEAN``)."""
BAND_MEAN = "mean of the context bands"
DATASET_PREFIX = "dataset: "
DATASET_MEAN = "mean of the datasets"
"""Each held-out dataset weighs alike, as configurations do in GIFT-Eval's means. The sampler draws the windows
dataset-balanced, so this is near the pooled loss when every dataset gets its share; it stays balanced where one
does not (a split with few series of a dataset, a dataset whose windows are mostly empty)."""


def group_means(values: dict[str, float]) -> dict[str, float]:
    """The unweighted means of per-group ``values`` over the context bands (``BAND_MEAN``) and over the datasets
    (``DATASET_MEAN``) found among their keys; groups without windows must be left out of ``values``."""
    means = {}
    for mean, members in ((BAND_MEAN, [g for g in CONTEXT_BANDS if g in values]),
                          (DATASET_MEAN, [g for g in values if g.startswith(DATASET_PREFIX)])):
        if members:
            means[mean] = sum(values[g] for g in members) / len(members)
    return means


def window_groups(batches: list[Batch], frequency_bands: list[str] | None = None,
                  datasets: list[str] | None = None) -> dict[str, torch.Tensor]:
    """Boolean masks over all windows: what the windows are, independent of any model. A period of 24 steps or more
    (a day of hourly or finer data, a year of weekly) is split out: the benchmark's weakest configurations are such
    series, and the held-out windows have few of them. ``frequency_bands`` and ``datasets`` (one per window) add a
    group per band and per dataset that has windows."""
    periods = torch.cat([detect_period(b.context.float()) for b in batches]).cpu()
    observed = torch.cat([(~torch.isnan(b.context)).sum(1) for b in batches]).cpu()
    groups = {"all windows": periods >= 0, "a period found": periods > 0, "a period of 2-23 steps": (periods > 0)
              & (periods < 24), "a period of 24+ steps": periods >= 24, "no period found": periods == 0,
              **{band: (observed >= low) & (observed < high) for band, (low, high) in CONTEXT_BANDS.items()}}
    if frequency_bands is not None:
        order = [*dict.fromkeys(FREQUENCY_BANDS.values()), "other"]
        for band in sorted(set(frequency_bands), key=order.index):
            groups[f"frequency: {band}"] = torch.tensor([b == band for b in frequency_bands])
    for name in sorted(set(datasets or ())):
        groups[DATASET_PREFIX + name] = torch.tensor([d == name for d in datasets])
    return groups


def _breakdown(model: Forecaster, batches: list[Batch], groups: dict[str, torch.Tensor]) -> dict[str, dict[str, float]]:
    """Pinball loss of the context tokens and of the future tokens, pooled over the steps of each window group
    (the same terms as ``training_loss``, which averages them all per batch)."""
    parts: dict[str, list[torch.Tensor]] = {"context": [], "future": []}
    for batch in batches:
        context_tokens = batch.context.shape[1] // model.config.patch_size
        future_tokens = -(-batch.target.shape[1] // model.config.patch_size)
        out = model(batch.context, num_future_tokens=future_tokens - 1)
        truth = model.next_patch_truth(batch.context, batch.target, out.scale).float()
        loss, observed = (t.cpu() for t in pinball_per_step(out.quantiles.float(), truth, model.quantile_levels))
        for part, tokens in (("context", slice(None, context_tokens - 1)), ("future", slice(context_tokens - 1, None))):
            parts[part].append(torch.stack([loss[:, tokens].sum((1, 2)), observed[:, tokens].sum((1, 2))], 1))
    sums = {part: torch.cat(values) for part, values in parts.items()}
    rows = {group: {"windows": int(mask.sum()),
                    **{part: float(t[mask, 0].sum() / t[mask, 1].sum().clamp(min=1)) for part, t in sums.items()}}
            for group, mask in groups.items()}
    means = {part: group_means({g: r[part] for g, r in rows.items() if r["windows"]}) for part in sums}
    for mean in means["context"]:
        rows[mean] = {"windows": int(groups["all windows"].sum()), **{part: means[part][mean] for part in sums}}
    return rows


def _print_breakdown(rows: list[dict]) -> None:
    print("\n| windows | count | " + " | ".join(f"{r['checkpoint']}: context / future" for r in rows) + " |")
    print("|---|--:|" + "---|" * len(rows))
    for group, first in rows[0]["breakdown"].items():
        if not first["windows"]:
            continue
        cells = [f"{r['breakdown'][group]['context']:.4f} / {r['breakdown'][group]['future']:.4f}" for r in rows]
        print(f"| {group} | {first['windows']} | " + " | ".join(cells) + " |")


def paired_over_datasets(losses: dict[str, float], reference: dict[str, float]) -> tuple[float, float, float]:
    """``losses`` against ``reference`` (a loss per window group) over the held-out datasets: the geometric mean of
    the per-dataset ratios with its 95% BCa interval, the benchmark's statistic (``tsfm report --reference``). The
    pooled loss is carried by the datasets with the largest scaled errors; this weighs each held-out dataset alike."""
    datasets = [g for g in reference if g.startswith(DATASET_PREFIX)]
    return paired_ratio_interval([losses[g] for g in datasets], [reference[g] for g in datasets])


def print_paired_over_datasets(title: str, reference: dict[str, float],
                               candidates: list[tuple[str, dict[str, float], dict]], field: str) -> None:
    """Each candidate ``(label, losses, row)`` against ``reference`` (:func:`paired_over_datasets`), printed under
    ``title`` and stored in ``row[field]``; nothing where fewer than two held-out datasets have windows."""
    count = sum(g.startswith(DATASET_PREFIX) for g in reference)
    if count < 2 or not candidates:
        return
    print(f"\n{title}, paired over the {count} held-out datasets (geometric mean of the per-dataset ratios, 95% BCa "
          "interval):")
    for label, losses, row in candidates:
        ratio, low, high = paired_over_datasets(losses, reference)
        row[field] = [ratio, low, high]
        print(f"- {label}: {ratio:.3f} [{low:.3f}, {high:.3f}]")


def _pair_by_dataset(rows: list[dict]) -> None:
    """Each later checkpoint's future-token loss against the first's, paired over the held-out datasets (added to
    its row as ``paired_future_ratio`` and printed)."""
    def future(row: dict) -> dict[str, float]:
        return {g: v["future"] for g, v in row["breakdown"].items() if v["windows"]}

    print_paired_over_datasets(f"Future tokens against {rows[0]['checkpoint']}", future(rows[0]),
                               [(row["checkpoint"], future(row), row) for row in rows[1:]], "paired_future_ratio")


def _lineage_steps(training: dict) -> list[int]:
    """Steps of the checkpoint's own run, then of each run it was started from (``parent``), newest first."""
    steps = [training.get("steps") or 0]
    parent = training.get("parent")
    while parent:
        steps.append(parent.get("steps") or 0)
        parent = parent.get("parent")
    return steps


if __name__ == "__main__":
    main()
