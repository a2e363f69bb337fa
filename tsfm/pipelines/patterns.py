"""Textbook patterns: can a checkpoint continue a sine, a sawtooth, a square wave, a trend with a season, or two
seasons at once?

Why: the benchmark's geometric means mix many effects; a forecaster that cannot continue a clean sine of period 96
over 480 steps has a defect no amount of averaging explains (it was how the masked future tokens' collapse to the
context mean was found). Each pattern is generated with a known period, a little Gaussian noise and a random phase;
the model forecasts it from a full context, and the error is reported per horizon block (the first patch, patches
2-4, the rest) as MAE divided by the pattern's standard deviation (``nMAE``: 0 is perfect, a forecast of the context
mean scores about 0.8-0.9 on a sine), beside Seasonal Naive with the true period (which only pays the noise). Seconds
on a CPU, so every trained checkpoint can be checked before the hour-long benchmark.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

__all__ = ["DEFAULT_PERIODS", "PATTERNS", "make_pattern", "pattern_scores", "plot_patterns", "run_patterns",
           "summary_table"]

#: ``shape(t, period, phase) -> values`` with amplitude about 1 around 0.
PATTERNS: dict[str, Callable[[np.ndarray, float, float], np.ndarray]] = {
    "sine": lambda t, p, ph: np.sin(2 * np.pi * t / p + ph),
    "sawtooth": lambda t, p, ph: 2 * ((t / p + ph / (2 * np.pi)) % 1.0) - 1,
    "square": lambda t, p, ph: np.sign(np.sin(2 * np.pi * t / p + ph)),
    "sine+trend": lambda t, p, ph: np.sin(2 * np.pi * t / p + ph) + 2.0 * t / len(t),
    "two seasons": lambda t, p, ph: np.sin(2 * np.pi * t / p + ph) + 0.6 * np.sin(2 * np.pi * t / (7 * p) + 2 * ph),
}

#: Periods in steps: a day of hourly data, 4 patches, a week of hourly data, a day of 5-minute data.
DEFAULT_PERIODS: tuple[int, ...] = (24, 96, 168, 288)

#: Horizon blocks in patches (start, stop): the first patch, patches 2-4, patches 5 onwards.
BLOCKS: tuple[tuple[str, int, int | None], ...] = (("patch 1", 0, 1), ("patches 2-4", 1, 4), ("patches 5+", 4, None))


def make_pattern(kind: str, period: int, length: int, *, noise: float = 0.05, seed: int = 0) -> np.ndarray:
    """``length`` float32 steps of pattern ``kind`` at ``period``: level 10, amplitude 3, noise ``noise`` x 3."""
    if kind not in PATTERNS:
        raise ValueError(f"pattern must be one of {sorted(PATTERNS)}, got {kind!r}")
    if period < 2 or length < 2 * period:
        raise ValueError(f"period must be >= 2 and length >= 2 x period, got period {period}, length {length}")
    rng = np.random.default_rng(seed)
    t = np.arange(length, dtype=np.float64)
    shape = PATTERNS[kind](t, float(period), float(rng.uniform(0, 2 * np.pi)))
    return (10.0 + 3.0 * shape + 3.0 * noise * rng.standard_normal(length)).astype(np.float32)


def _block_errors(forecast: np.ndarray, truth: np.ndarray, scale: float, patch: int) -> dict[str, float]:
    errors = np.abs(forecast - truth)
    return {name: float(errors[start * patch : None if stop is None else stop * patch].mean() / scale)
            for name, start, stop in BLOCKS}


def pattern_scores(
    model: Any,
    *,
    patterns: Sequence[str] = tuple(PATTERNS),
    periods: Sequence[int] = DEFAULT_PERIODS,
    decodings: Sequence[str] = ("masked", "autoregressive"),
    context_length: int | None = None,
    prediction_length: int = 480,
    seeds: int = 2,
    keep_forecasts: bool = False,
) -> pd.DataFrame:
    """One row per (pattern, period, decoding, seed): nMAE per horizon block and overall, for the model and for
    Seasonal Naive with the true period. ``keep_forecasts`` adds the context, truth and median forecast columns
    (for :func:`plot_patterns`). ``context_length`` defaults to the model's (what ``predict`` would give it)."""
    patch = int(model.config.patch_size)
    context_length = int(context_length or model.config.context_length)
    if prediction_length <= BLOCKS[-1][1] * patch:  # every horizon block must hold steps
        raise ValueError(f"prediction_length must exceed {BLOCKS[-1][1]} patches ({BLOCKS[-1][1] * patch} steps), "
                         f"got {prediction_length}")
    rows = []
    for kind in patterns:
        for period in periods:
            series = [make_pattern(kind, period, context_length + prediction_length, seed=seed)
                      for seed in range(seeds)]
            context = torch.from_numpy(np.stack([s[:context_length] for s in series]))
            for decoding in decodings:
                quantiles = model.forecast(context, prediction_length, decoding=decoding)
                median = quantiles[:, list(model.quantile_levels).index(0.5)].float().cpu().numpy()
                for seed, (values, forecast) in enumerate(zip(series, median, strict=True)):
                    truth, past = values[context_length:], values[:context_length]
                    scale = float(past.std())
                    naive = np.resize(past[-period:], prediction_length)
                    ours, reference = _block_errors(forecast, truth, scale, patch), _block_errors(
                        naive, truth, scale, patch)
                    row = {"pattern": kind, "period": period, "decoding": decoding, "seed": seed,
                           "nmae": float(np.abs(forecast - truth).mean() / scale),
                           "seasonal_naive_nmae": float(np.abs(naive - truth).mean() / scale),
                           **{f"nmae {name}": value for name, value in ours.items()},
                           **{f"seasonal_naive_nmae {name}": value for name, value in reference.items()}}
                    if keep_forecasts:
                        row.update(context=past, truth=truth, forecast=forecast)
                    rows.append(row)
    return pd.DataFrame(rows)


def summary_table(scores: pd.DataFrame) -> str:
    """Markdown: mean nMAE over seeds per pattern, period and decoding, by horizon block, with Seasonal Naive's."""
    blocks = [f"nmae {name}" for name, _, _ in BLOCKS]
    table = scores.groupby(["pattern", "period", "decoding"], sort=False)[
        [*blocks, "nmae", "seasonal_naive_nmae"]].mean().reset_index()
    header = ["pattern", "period", "decoding", *(name for name, _, _ in BLOCKS), "all", "seasonal naive"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * 3 + "--:|" * (len(header) - 3)]
    for row in table.itertuples(index=False):
        values = [f"{v:.3f}" for v in row[3:]]
        lines.append(f"| {row[0]} | {row[1]} | {row[2]} | " + " | ".join(values) + " |")
    return "\n".join(lines)


def plot_patterns(scores: pd.DataFrame, path: Path, *, show_steps: int = 768) -> Path:
    """A grid (pattern x period) of the last ``show_steps`` context steps, the truth and each decoding's median
    (needs ``pattern_scores(..., keep_forecasts=True)``; seed 0 is drawn)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if "forecast" not in scores:
        raise ValueError("plot_patterns needs the forecasts: call pattern_scores(..., keep_forecasts=True)")
    first = scores[scores["seed"] == 0]
    kinds, periods = list(dict.fromkeys(first["pattern"])), list(dict.fromkeys(first["period"]))
    fig, axes = plt.subplots(len(kinds), len(periods), figsize=(3.6 * len(periods), 2.2 * len(kinds)), squeeze=False)
    for i, kind in enumerate(kinds):
        for j, period in enumerate(periods):
            ax, cell = axes[i, j], first[(first["pattern"] == kind) & (first["period"] == period)]
            row = cell.iloc[0]
            past = row["context"][-show_steps:]
            future = np.arange(len(past), len(past) + len(row["truth"]))
            ax.plot(np.arange(len(past)), past, color="0.3", lw=0.6)
            ax.plot(future, row["truth"], color="0.3", lw=0.6, ls=":")
            for decoding, color in zip(cell["decoding"], ("tab:green", "tab:red", "tab:blue"), strict=False):
                forecast = cell[cell["decoding"] == decoding].iloc[0]["forecast"]
                ax.plot(future, forecast, color=color, lw=0.9, label=decoding)
            ax.set_title(f"{kind}, period {period}", fontsize=8)
            ax.tick_params(labelsize=6)
    axes[0, 0].legend(fontsize=6, loc="lower left")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def run_patterns(model: Any, out: Path, *, name: str = "model", command: str | None = None,
                 **kwargs: Any) -> tuple[pd.DataFrame, list[Path]]:
    """Score ``model`` on the patterns and write ``out/patterns.csv``, ``out/patterns.md`` (titled ``name``, with
    ``command``) and ``out/patterns.png``."""
    scores = pattern_scores(model, keep_forecasts=True, **kwargs)
    out.mkdir(parents=True, exist_ok=True)
    table = scores.drop(columns=["context", "truth", "forecast"])
    table.to_csv(out / "patterns.csv", index=False)
    plot = plot_patterns(scores, out / "patterns.png")
    context = len(scores["context"].iloc[0])
    horizon = len(scores["truth"].iloc[0])
    lines = [f"# Textbook patterns: {name}", "",
             f"nMAE (MAE over the pattern's standard deviation: 0 is perfect, a flat forecast at the context mean "
             f"scores about 0.9 on a sine) by horizon block, mean over {scores['seed'].nunique()} seeds; context "
             f"{context:,} steps, horizon {horizon:,}; Seasonal Naive with the true period for reference.", "",
             summary_table(table), "", f"![patterns]({plot.name})", ""]
    if command:
        lines += [f"Command: `{command}`", ""]
    (out / "patterns.md").write_text("\n".join(lines))
    return table, [out / "patterns.csv", out / "patterns.md", plot]
