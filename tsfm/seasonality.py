"""The seasonal hint: a period read from the context itself, and the Seasonal-Naive values it gives the future.

A recurrent backbone forecasting 480 steps of a 288-step daily cycle has to replay that shape from its state; its
peaks fade and bend where patches meet, while Seasonal Naive copies yesterday exactly (``reports/patterns``). With
``ModelConfig.seasonal_hint`` each masked future token also receives the values one season before it, so the
model corrects a copy instead of recalling one.

The period is estimated from the context (the strongest autocorrelation peak of the linearly detrended series), not
taken from a frequency string: the same rule then serves pretraining on synthetic series that have no calendar,
``predict`` on bare arrays, streams and the service, and training sees exactly what inference computes.
"""

from __future__ import annotations

import torch

#: Smallest period considered: lag 1 is the naive forecast, which the context's last token already carries.
MIN_PERIOD = 2
#: An autocorrelation peak weaker than this gives no hint (the future tokens stay as without the hint).
MIN_STRENGTH = 0.3
#: Peaks within this fraction of the strongest count as the same season; the shortest of them is taken, so a
#: daily cycle is not read as two days.
HARMONIC_TOLERANCE = 0.9
#: Multiples of a candidate period whose autocorrelation refines the period (:func:`_refine_by_multiples`).
COMB_TEETH = 8


def detect_period(context: torch.Tensor, max_period: int | None = None) -> torch.Tensor:
    """The dominant period of each row of ``context [B, T]`` (NaN = missing), ``[B]`` int64, 0 where none.

    The autocorrelation of the detrended, observed steps is read at every lag with at least one full period of
    overlap (missing steps excluded from both the sums and their counts). Its peaks count after it first turns
    negative; the period is the shortest peak within :data:`HARMONIC_TOLERANCE` of the strongest, if that one
    reaches :data:`MIN_STRENGTH`, then refined by the autocorrelation at its multiples. Scale-free: an affine change
    of the values gives the same period, so a stream's fixed scale and a fitted one agree.
    """
    if context.dim() != 2:
        raise ValueError(f"context must be [batch, time], got shape {tuple(context.shape)}")
    batch, length = context.shape
    limit = length // 2 if max_period is None else min(max_period, length // 2)
    if batch == 0 or limit < MIN_PERIOD + 1:
        return torch.zeros(batch, dtype=torch.long, device=context.device)
    x = context.float()
    observed = ~torch.isnan(x)
    weight = observed.float()
    count = weight.sum(1, keepdim=True).clamp(min=1.0)
    t = torch.arange(length, device=x.device, dtype=torch.float32)[None]
    values = torch.where(observed, x, torch.zeros_like(x))
    t_mean, v_mean = (t * weight).sum(1, keepdim=True) / count, values.sum(1, keepdim=True) / count
    dt = (t - t_mean) * weight
    slope = (dt * (values - v_mean)).sum(1, keepdim=True) / (dt * dt).sum(1, keepdim=True).clamp(min=1e-12)
    residual = torch.where(observed, values - v_mean - slope * (t - t_mean), torch.zeros_like(x))
    size = 2 * length
    sums = _autocovariance(residual, size)[:, : limit + 2]
    pairs = _autocovariance(weight, size)[:, : limit + 2].round()
    variance = sums[:, :1] / pairs[:, :1].clamp(min=1.0)
    acf = (sums / pairs.clamp(min=1.0)) / variance.clamp(min=1e-12)
    lags = torch.arange(limit + 2, device=x.device)[None]
    enough = pairs >= lags  # at least one full period of observed pairs at this lag
    # a season's peak comes after the autocorrelation has gone negative (half a period out of phase); the bumps
    # of noise on the slow decay before that are not seasons
    crossed = torch.cumsum((acf < 0).int(), dim=1) > 0
    peak = _neighbourhood_maxima(acf) & enough & crossed & (lags >= MIN_PERIOD) & (lags <= limit)
    total = (torch.where(observed, values - v_mean, torch.zeros_like(x)) ** 2).sum(1, keepdim=True) / count
    peak &= variance > 1e-6 * total  # a straight line has nothing left after detrending
    scores = torch.where(peak, acf, torch.full_like(acf, -2.0))
    best = scores.max(dim=1, keepdim=True).values
    # every multiple of a season peaks about as high, and noise decides which is highest: take the shortest
    near = peak & (acf >= HARMONIC_TOLERANCE * best)
    period = torch.where(near, lags, torch.full_like(lags, length)).min(dim=1).values
    period = torch.where(best[:, 0] >= MIN_STRENGTH, period, torch.zeros_like(period))
    return _refine_by_multiples(period, acf, enough, limit)


def _refine_by_multiples(period: torch.Tensor, acf: torch.Tensor, enough: torch.Tensor, limit: int) -> torch.Tensor:
    """``period [B]`` moved to the lag within ``max(1, p // 8)`` of it whose first :data:`COMB_TEETH` multiples (up
    to ``limit``, with enough pairs) have the highest mean autocorrelation; 0 stays 0, ties keep the nearest.

    A smooth cycle's autocorrelation peak is broad, and day-to-day changes move its top: on a 5-minute temperature
    sensor the peak read 277-287 for a 288-step day, so Seasonal Naive built on it drifted out of phase by a step or
    more per period over a long horizon (``benchmarks/RESULTS.md``, thirty-fourth session). A wrong period misses
    its ``k``-th multiple ``k`` times as far, so the multiples together are a sharper estimate.
    """
    reach = max(1, limit // 8)  # the widest any row may move, known without reading the periods off the device
    # offsets nearest first, so that the first maximum is the nearest of equal scores
    offsets = torch.arange(2 * reach + 1, device=period.device)
    offsets = torch.where(offsets % 2 == 1, (offsets + 1) // 2, -(offsets // 2))
    candidate = period[:, None] + offsets[None]  # [B, C]
    allowed = (offsets[None].abs() <= (period[:, None] // 8).clamp(min=1)) & (candidate >= MIN_PERIOD) \
        & (candidate <= limit)
    teeth = torch.arange(1, COMB_TEETH + 1, device=period.device)
    lag = candidate[:, :, None] * teeth[None, None]  # [B, C, K]
    index = lag.clamp(0, limit).flatten(1)
    usable = (lag <= limit) & torch.gather(enough, 1, index).view_as(lag)
    values = torch.gather(acf, 1, index).view_as(lag)
    score = torch.where(usable, values, 0.0).sum(2) / usable.sum(2).clamp(min=1)
    score = torch.where(allowed & usable.any(2), score, torch.full_like(score, -3.0))
    chosen = torch.gather(candidate, 1, score.argmax(1, keepdim=True))[:, 0]
    return torch.where(period > 0, chosen, period)


def _neighbourhood_maxima(acf: torch.Tensor) -> torch.Tensor:
    """``[B, K]`` bool: lag ``k`` holds the largest value within ``max(1, k // 8)`` lags either side. A window that
    grows with the lag keeps the noise ripples on a long season's broad peak from counting as peaks of their own."""
    lags = torch.arange(acf.shape[1], device=acf.device)
    result = torch.zeros_like(acf, dtype=torch.bool)
    low = 0
    while low < acf.shape[1]:
        high = max(2 * low, 16)
        half = max(1, low // 8)
        pooled = torch.nn.functional.max_pool1d(acf[:, None], 2 * half + 1, stride=1, padding=half)[:, 0]
        band = (lags >= low) & (lags < high)
        result |= band[None] & (acf >= pooled)
        low = high
    return result


def _autocovariance(x: torch.Tensor, size: int) -> torch.Tensor:
    """``sum_t x[t] x[t + k]`` for every lag ``k``, through one FFT of ``x`` zero-padded to ``size``."""
    spectrum = torch.fft.rfft(x, n=size, dim=-1)
    return torch.fft.irfft(spectrum * spectrum.conj(), n=size, dim=-1)


def seasonal_naive_hint(context: torch.Tensor, period: torch.Tensor, horizon: int) -> torch.Tensor:
    """``[B, horizon]``: the last season of ``context [B, T]`` repeated past its end (Seasonal Naive), NaN in rows
    whose ``period [B]`` is 0 and where the copied step was missing."""
    length = context.shape[1]
    steps = torch.arange(horizon, device=context.device)[None]
    safe = period.clamp(min=1)[:, None]
    index = (length - safe + steps % safe).clamp(0, length - 1)
    hint = torch.gather(context, 1, index)
    return torch.where(period[:, None] > 0, hint, torch.full_like(hint, float("nan")))
