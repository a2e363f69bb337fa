"""Short series: yearly / quarterly / monthly-like histories of 10-60 observations, left-padded with NaN.

The M3/M4/tourism yearly and quarterly sets hold series of a few dozen points with strong trends, slow curvature
and (quarterly, monthly) a weak season; a model that only saw 2,000-step histories has never met them. Each series
is a damped or exponential trend, optionally a period-4 or -12 cycle, and AR(1) noise, observed only on its last
``U{min_observed..max_observed}`` steps (the rest is NaN, so the history ends at the right edge as in the sampler).
Levels are positive more often than not (sales, tourists, GDP).
"""

from __future__ import annotations

import torch

from .common import (
    ar1_filter,
    bernoulli,
    choice,
    left_pad,
    log_uniform,
    normal,
    randint,
    random_scale,
    random_season,
    time_grid,
    uniform,
)

__all__ = ["short"]


def short(n: int, length: int, g: torch.Generator, *, min_observed: int = 10, max_observed: int = 60) -> torch.Tensor:
    """``[n, length]`` series with ``U{min_observed..max_observed}`` (capped at ``length``) observed values at the
    right edge and NaN before them."""
    observed = randint(n, g, min(min_observed, length), min(max_observed, length) + 1)
    t = time_grid(length, g.device)
    age = (t - (length - observed)).clamp_min(0.0) / observed  # 0 at the first observation, ~1 at the last
    slope = normal(g, n, 1) * log_uniform(n, g, 0.2, 3.0)
    damping = uniform(n, g, 0.0, 1.0)
    damped = slope * (1.0 - torch.exp(-3.0 * damping * age)) / (3.0 * damping).clamp_min(1e-3)
    linear = slope * age
    exponential = torch.expm1(slope.clamp(-1.5, 1.5) * age)
    kind = randint(n, g, 0, 3)
    trend = torch.where(kind == 0, linear, torch.where(kind == 1, damped, exponential))
    period = choice(n, g, (4.0, 12.0))
    season = random_season(t, period, g, harmonics=3) * uniform(n, g, 0.0, 0.3) * bernoulli(n, g, 0.4)
    noise = ar1_filter(normal(g, n, length), uniform(n, g, 0.0, 0.9)) * log_uniform(n, g, 0.005, 0.1)
    series = 1.0 + trend + season + noise
    # 70 %: shifted so the observed part is positive (a level above its lowest point), then only scaled.
    positive = bernoulli(n, g, 0.7)
    spread = series.std(dim=1, keepdim=True)
    lifted = series - _observed_min(series, observed) + log_uniform(n, g, 0.05, 5.0) * spread
    out = torch.where(positive, random_scale(lifted, g, offset=False), random_scale(series, g))
    return left_pad(out, observed)


def _observed_min(series: torch.Tensor, observed: torch.Tensor) -> torch.Tensor:
    """Lowest value of each row over its last ``observed`` steps: ``[n, 1]``."""
    t = torch.arange(series.shape[1], device=series.device).unsqueeze(0)
    masked = torch.where(t >= series.shape[1] - observed, series, torch.full_like(series, float("inf")))
    return masked.amin(dim=1, keepdim=True)
