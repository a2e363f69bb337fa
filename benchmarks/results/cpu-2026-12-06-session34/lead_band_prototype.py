"""Prototype, not shipped code: the Seasonal-Naive blend with its weight read per band of lead times.

The shipped blend (``tsfm.naive_blend``, rule ``inverse_mse``) holds out the context's last ``h`` steps, forecasts
them from the steps before with the model and with Seasonal Naive, and moves every quantile of the real forecast by
``w * (naive - median)`` with ONE weight per series, ``w = mse_model / (mse_model + mse_naive)``. Where the model's
error relative to Seasonal Naive grows with the lead time (``yosemite_temps/5T`` medium/long: good on the first day,
worse later) one weight cannot follow it. Here the backtest's ``h`` held-out steps are cut into consecutive bands,
each band gets its own ``inverse_mse`` weight from both models' squared errors on its steps (the shipped
``observed`` masking; a band without an observed step, or a row that cannot be backtested, gets weight 0), and the
forecast's lead ``i`` takes the weight of band ``min(i // band_length, n_bands - 1)`` (the forecast's horizon can
exceed ``h``). ``--bands``:

- ``period``: bands one detected period long (per series; ``h = 720`` with period 288 gives 288, 288, 144),
- ``quarters``: four equal bands of ``h`` (``ceil(h / 4)`` steps, the last one shorter),
- ``cumulative``: the bands of ``period``, band ``k`` weighted by the errors on all backtest steps up to its end,
- ``one``: one band (the shipped blend, for checks).

Everything else (period detection, which rows are backtested, the shift applied to all quantiles, ``how == "off"``)
is the shipped blend; rules other than ``inverse_mse`` fall back to it. Judged like ``two_origin_prototype.py``
(whose :func:`judge_blend` it uses), about 5 min per run on the 2-core CPU machine:

    cd /work/main && PYTHONPATH=.:scripts:benchmarks/results/cpu-2026-12-06-session27 .venv/bin/python \
        benchmarks/results/cpu-2026-12-06-session34/lead_band_prototype.py --bands period \
        --judge benchmarks/results/cpu-2026-12-06-session27/judge --reference-name tf10-cont2 \
        --benchmark data/benchmark --real-data data/device/pretrain \
        --out benchmarks/results/cpu-2026-12-06-session34/lead-band-period
"""

from __future__ import annotations

from collections.abc import Callable

import torch

import tsfm.naive_blend
from tsfm.naive_blend import backtest_horizon, backtestable
from tsfm.seasonality import detect_period, seasonal_naive_hint

BANDS = ("period", "quarters", "cumulative", "one")

Backtest = Callable[[torch.Tensor, int], torch.Tensor]
Blend = Callable[[torch.Tensor, torch.Tensor, int, str, Backtest], torch.Tensor]


def band_length(period: torch.Tensor, horizon: int, bands: str) -> torch.Tensor:
    """``[B]`` int64 steps per band of a backtest of ``horizon`` steps for series of ``period [B]``."""
    if bands in ("period", "cumulative"):
        length = period.clamp(min=1)
    elif bands == "quarters":
        length = torch.full_like(period, -(-horizon // 4))
    elif bands == "one":
        length = torch.full_like(period, horizon)
    else:
        raise ValueError(f"bands must be one of {', '.join(BANDS)}, got {bands!r}")
    return length.clamp(min=1, max=max(horizon, 1))


def band_index(length: torch.Tensor, n_bands: torch.Tensor, steps: int) -> torch.Tensor:
    """``[B, steps]`` int64: the band of each lead ``i``, ``min(i // length, n_bands - 1)``."""
    lead = torch.arange(steps, device=length.device)[None]
    return torch.minimum(lead // length[:, None], (n_bands - 1)[:, None])


def band_weights(context: torch.Tensor, period: torch.Tensor, backtest_median: torch.Tensor,
                 bands: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``inverse_mse`` weights of Seasonal Naive per band, ``[B, n]`` (``n`` the most bands of any row; 0 past a
    row's own bands, where no observed step, and where the row cannot be backtested), and the band length ``[B]``."""
    horizon = backtest_median.shape[1]
    history, truth = context[:, :-horizon], context[:, -horizon:]
    naive = seasonal_naive_hint(history, period, horizon)
    observed = ~torch.isnan(truth) & ~torch.isnan(naive)
    length = band_length(period, horizon, bands)
    n_bands = -(-horizon // length)  # ceil division, per row
    index = band_index(length, n_bands, horizon)
    width = int(n_bands.max())
    zeros = torch.zeros(context.shape[0], width, dtype=context.dtype, device=context.device)
    count = zeros.scatter_add(1, index, observed.to(context.dtype))
    model_sum = zeros.scatter_add(1, index, torch.where(observed, (backtest_median - truth).abs() ** 2, 0.0))
    naive_sum = zeros.scatter_add(1, index, torch.where(observed, (naive - truth).abs() ** 2, 0.0))
    if bands == "cumulative":
        count, model_sum, naive_sum = count.cumsum(1), model_sum.cumsum(1), naive_sum.cumsum(1)
    model_error = model_sum / count.clamp(min=1)  # means, as the shipped naive_weight computes them
    naive_error = naive_sum / count.clamp(min=1)
    total = model_error + naive_error
    weight = torch.where(total > 0, model_error / total.clamp(min=torch.finfo(total.dtype).tiny), 0.0)
    usable = backtestable(history, period)[:, None] & (count > 0)
    return torch.where(usable, weight, 0.0), length


def lead_band_blend(bands: str) -> Blend:
    """A drop-in ``blend_with_seasonal_naive`` whose Seasonal-Naive weight is read per band of lead times."""
    band_length(torch.zeros(1, dtype=torch.long), 1, bands)  # reject an unknown name early

    def blend_with_seasonal_naive(context: torch.Tensor, quantiles: torch.Tensor, median_index: int, how: str,
                                  backtest: Backtest) -> torch.Tensor:
        if how != "inverse_mse":  # "off" and the other rules as shipped
            return tsfm.naive_blend.blend_with_seasonal_naive(context, quantiles, median_index, how, backtest)
        horizon = backtest_horizon(context.shape[1], quantiles.shape[2])
        if horizon < 1:
            return quantiles
        period = detect_period(context)
        history = context[:, :-horizon]
        rows = torch.nonzero(backtestable(history, period)).flatten()
        if rows.numel() == 0:
            return quantiles  # no series can be backtested: spare the second forecast
        per_band, length = band_weights(context[rows], period[rows], backtest(history[rows], horizon), bands)
        per_band = per_band.to(quantiles.dtype)
        n_bands = -(-horizon // length)
        lead_band = band_index(length, n_bands, quantiles.shape[2])
        weight = torch.zeros(context.shape[0], quantiles.shape[2], dtype=quantiles.dtype, device=quantiles.device)
        weight[rows] = torch.gather(per_band, 1, lead_band)
        naive = seasonal_naive_hint(context, period, quantiles.shape[2])
        shift = torch.nan_to_num(naive - quantiles[:, median_index], nan=0.0) * weight
        return quantiles + shift[:, None, :]

    return blend_with_seasonal_naive


def main() -> None:
    from two_origin_prototype import judge_arguments, judge_blend  # the judge needs scripts/ on PYTHONPATH

    parser = judge_arguments(__doc__.splitlines()[0])
    parser.add_argument("--bands", choices=BANDS, required=True, help="how the backtest's steps are cut into bands")
    args = parser.parse_args()
    judge_blend(args, lead_band_blend(args.bands), f"lead-band-{args.bands}")


if __name__ == "__main__":
    main()
