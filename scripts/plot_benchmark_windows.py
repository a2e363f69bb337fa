"""Forecasts of several models on the test windows of one benchmark configuration, beside the truth: why a model
loses where it loses.

A normalised geometric mean says *that* a configuration is bad (``yosemite_temps/5T`` at 1.6-2.4 x Seasonal Naive);
this picture says *how* (a late cycle, a low peak, a jump at a patch boundary). One panel per test window: the last
``--history`` steps of the context, the truth, and each model's median with its 10-90% band. The title of each panel
gives every model's MASE on that window (MAE over the context's in-sample seasonal-naive error, as GIFT-Eval scales
it), so the picture and the score can be read together. ``--worst`` shows the windows where the first model loses
most to the last one instead of the first windows: where a configuration's mean comes from.

    PYTHONPATH=. python scripts/plot_benchmark_windows.py yosemite_temps/5T/medium default runs/x/model \
        seasonal_naive --benchmark data/benchmark --out yosemite_medium.png [--windows 4] [--history 576] [--worst]
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from tsfm.pipelines.data.gift_eval import GiftEvalDataset
from tsfm.pipelines.evaluate.configs import config_keys, select_configs
from tsfm.pipelines.evaluate.errors import EvaluationError
from tsfm.pipelines.evaluate.models import eval_model

QUANTILE_BAND = (0.1, 0.9)


def benchmark_windows(benchmark: str, key: str) -> tuple[GiftEvalDataset, list[dict[str, Any]], list[dict[str, Any]]]:
    """The configuration ``key`` of ``benchmark`` and its test windows (gluonts inputs and labels)."""
    chosen = select_configs(benchmark, [key])
    if len(chosen) != 1:
        keys = config_keys(benchmark, chosen)
        raise SystemExit(
            f"{key!r} names {len(chosen)} configurations ({', '.join(keys.values())}); give one result key"
        )
    name, term = chosen[0]
    dataset = GiftEvalDataset.per_variate(name, term, root=benchmark)
    inputs, labels = zip(*dataset.test_data, strict=True)
    return dataset, list(inputs), list(labels)


def forecast_bands(model: str, dataset: GiftEvalDataset, inputs: list[dict[str, Any]]) -> np.ndarray:
    """``[window, 3, horizon]``: the low band, median and high band of ``model`` on each window."""
    predictor = eval_model(model).make_predictor(dataset)
    levels = (QUANTILE_BAND[0], 0.5, QUANTILE_BAND[1])
    return np.stack([[f.quantile(q) for q in levels] for f in predictor.predict(inputs)])


def seasonal_error(context: np.ndarray, season: int) -> float:
    """MASE's scale for one window: gluonts' own seasonal error of the context, NaN masked, as ``evaluate_model``
    computes it (so per-window MASE averages to ``tsfm evaluate``'s MASE[0.5])."""
    from gluonts.ev.ts_stats import seasonal_error as gluonts_seasonal_error

    return float(gluonts_seasonal_error(np.ma.masked_invalid(context), seasonality=season, time_axis=-1).item())


def short_name(model: str) -> str:
    """``runs/x/model`` -> ``x``; built-in names and baselines stay as given."""
    path = Path(model)
    return path.parent.name if path.name == "model" and path.parent.name else path.name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config", help="a result key, e.g. yosemite_temps/5T/medium")
    parser.add_argument("models", nargs="+", help="'default', checkpoint folders, or baselines (seasonal_naive)")
    parser.add_argument("--benchmark", required=True, help="built by `tsfm data build-benchmark`")
    parser.add_argument("--out", required=True, help="PNG file to write")
    parser.add_argument("--windows", type=int, default=4, help="panels: N test windows (default 4)")
    parser.add_argument(
        "--worst",
        action="store_true",
        help="the N windows where the first model's MASE exceeds the last model's most (default: the first N)",
    )
    parser.add_argument("--history", type=int, default=576, help="context steps shown before each window")
    args = parser.parse_args()
    if args.windows < 1:
        parser.error(f"--windows must be at least 1, got {args.windows}")
    if args.worst and len(args.models) < 2:
        parser.error("--worst compares the first model with the last: give at least two models")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    try:
        dataset, inputs, labels = benchmark_windows(args.benchmark, args.config)
        if not args.worst:  # only the shown windows need forecasts
            inputs, labels = inputs[: args.windows], labels[: args.windows]
        bands = {model: forecast_bands(model, dataset, inputs) for model in args.models}
    except EvaluationError as err:  # a bad benchmark, configuration or model: one line, no traceback
        raise SystemExit(f"error: {err}") from None
    truths = [np.asarray(label["target"], dtype=float) for label in labels]
    scales = np.array([seasonal_error(np.asarray(c["target"], dtype=float), dataset.season_length) for c in inputs])
    maes = {
        m: np.array([np.nanmean(np.abs(b[i][1] - truths[i])) for i in range(len(truths))]) for m, b in bands.items()
    }
    mases = {m: mae / scales for m, mae in maes.items()}
    first, last = args.models[0], args.models[-1]
    order = np.argsort(-(mases[first] - mases[last]), kind="stable") if args.worst else np.arange(len(truths))
    chosen = order[: args.windows]
    shown = len(chosen)

    fig, axes = plt.subplots(shown, 1, figsize=(12, 2.8 * shown), squeeze=False)
    for ax, i in zip(axes[:, 0], chosen, strict=True):
        truth = truths[i]
        history = np.asarray(inputs[i]["target"], dtype=float)[-args.history :]
        past = np.arange(-len(history), 0)
        future = np.arange(len(truth))
        ax.plot(past, history, color="black", linewidth=0.8)
        ax.plot(future, truth, color="black", linewidth=1.2, label="truth")
        for model, band in bands.items():
            low, median, high = band[i]
            (line,) = ax.plot(future, median, linewidth=1.0, label=short_name(model))
            ax.fill_between(future, low, high, color=line.get_color(), alpha=0.15, linewidth=0)
        ax.axvline(0, color="grey", linewidth=0.6)
        scores = ", ".join(f"{short_name(m)} {mases[m][i]:.2f}" for m in bands)
        ax.set_title(f"{dataset.config_key}, window {i + 1}: MASE {scores} (scale {scales[i]:.3g})", fontsize=9)
    axes[0, 0].legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")
    print("windows " + " ".join(str(i + 1) for i in chosen))
    for model in bands:
        print(f"{model}: MAE per window " + " ".join(f"{maes[model][i]:.3f}" for i in chosen))
        print(f"{model}: MASE per window " + " ".join(f"{mases[model][i]:.3f}" for i in chosen))
    if args.worst:
        excess = mases[first] - mases[last]
        top = excess[chosen].sum() / excess.sum() if excess.sum() > 0 else float("nan")
        print(
            f"{short_name(first)} - {short_name(last)} MASE, summed over all {len(excess)} windows: "
            f"{excess.sum():.2f}; share of the {shown} shown: {top:.2f}"
        )


if __name__ == "__main__":
    main()
