"""Quick-look plots of forecasts: history tail, median and quantile bands, one small panel per series.

For eyeballing a forecast (``tsfm forecast --plot``), not for publication figures; the benchmark plots live in
``pipelines/report.py``. matplotlib is imported inside the function and used through ``matplotlib.figure.Figure``
with the Agg canvas, never through pyplot, so calling this never changes the backend or the figures of the
caller's session (a notebook keeps working as before).
"""

from __future__ import annotations

import math
import os
from collections.abc import Hashable, Sequence
from pathlib import Path

import pandas as pd

from tsfm.forecast import POINT_FORECAST

# (low, high) level pairs drawn as bands, widest first; a pair is drawn when both columns are in the forecast
BANDS: tuple[tuple[float, float], ...] = ((0.1, 0.9), (0.2, 0.8))
HISTORY_HORIZONS = 4  # show this many horizons of history before the forecast


def plot_forecast(
    history_df: pd.DataFrame,
    forecast_df: pd.DataFrame,
    *,
    path: str | os.PathLike[str],
    id_column: Hashable = "item_id",
    timestamp_column: Hashable = "timestamp",
    target: Hashable = "target",
    quantile_levels: Sequence[float] | None = None,
    max_series: int = 6,
    ncols: int = 3,
) -> Path:
    """Write a PNG with one panel per series (the first ``max_series`` in forecast order).

    Args:
        history_df: the data the forecast was made from (long format).
        forecast_df: the output of ``predict_df`` (``median`` and one ``str(level)`` column per level).
        path: where to write the PNG; parent folders are created.
        id_column, timestamp_column, target: column names, as given to ``predict_df``.
        quantile_levels: the levels available in ``forecast_df``; ``None`` reads them from its column names.
            Bands are drawn for 10-90% and 20-80% when those levels are present.
        max_series: panels to draw at most.
        ncols: panels per row.

    Returns:
        The path written.
    """
    Figure = _matplotlib_figure()

    from tsfm.df_utils import parse_timestamps

    levels = _available_levels(forecast_df, quantile_levels)
    item_ids = list(pd.unique(forecast_df[id_column]))[:max_series]
    if not item_ids:
        raise ValueError("forecast_df has no rows to plot")
    history = history_df[[id_column, timestamp_column, target]].copy()
    history[timestamp_column] = parse_timestamps(history[timestamp_column], timestamp_column)
    ncols = min(ncols, len(item_ids))
    nrows = math.ceil(len(item_ids) / ncols)
    fig = Figure(figsize=(4.2 * ncols, 2.8 * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax, item_id in zip(axes, item_ids, strict=False):
        past = history[history[id_column] == item_id].sort_values(timestamp_column)
        future = forecast_df[forecast_df[id_column] == item_id]
        _draw_panel(ax, past, future, timestamp_column, target, levels)
        ax.set_title(str(item_id), fontsize=9)
    for ax in axes[len(item_ids) :]:
        ax.set_visible(False)
    axes[0].legend(fontsize=7, loc="upper left")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path


def _available_levels(forecast_df: pd.DataFrame, quantile_levels: Sequence[float] | None) -> list[float]:
    """The quantile levels that have a column in ``forecast_df``."""
    if quantile_levels is not None:
        return [float(q) for q in quantile_levels if str(float(q)) in forecast_df.columns]
    levels = []
    for column in forecast_df.columns:
        try:
            level = float(column)
        except (TypeError, ValueError):
            continue
        if 0.0 < level < 1.0:
            levels.append(level)
    return sorted(levels)


def _draw_panel(
    ax, past: pd.DataFrame, future: pd.DataFrame, timestamp_column: Hashable, target: Hashable, levels: list[float]
) -> None:
    """History tail in grey, median in blue, bands shaded lighter the wider they are."""
    tail = past.tail(HISTORY_HORIZONS * max(len(future), 1))
    ax.plot(tail[timestamp_column], tail[target], color="0.3", linewidth=1.0, label="history")
    stamps = future[timestamp_column]
    for (low, high), alpha in zip(BANDS, (0.2, 0.35), strict=True):
        if low in levels and high in levels:
            ax.fill_between(
                stamps, future[str(low)], future[str(high)], color="tab:blue", alpha=alpha, linewidth=0,
                label=f"{low:.0%}-{high:.0%}",
            )
    ax.plot(stamps, future[POINT_FORECAST], color="tab:blue", linewidth=1.2, label="median")
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter

    locator = AutoDateLocator(maxticks=7)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(ConciseDateFormatter(locator))  # short labels that do not collide
    ax.tick_params(labelsize=7)


def _matplotlib_figure() -> type:
    """matplotlib's ``Figure``, or an ImportError naming the extra that installs it (it is not a core dependency)."""
    try:
        from matplotlib.figure import Figure
    except ImportError as err:
        raise ImportError(f"plotting needs the plotting extra (pip install 'tsfm[plotting]'): {err}") from None
    return Figure
