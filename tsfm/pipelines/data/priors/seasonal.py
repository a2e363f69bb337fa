"""Trend x seasonality x noise with calendar periods: the ForecastPFN / Mamba4Cast recipe.

ForecastPFN (Dooley et al. 2023) and Mamba4Cast (Bhethanabhotla et al. 2024) build series as
``trend(t) * season(t) * noise(t)`` where the seasonal factors follow the calendar of a sampled frequency. Here a
frequency is drawn from ``CALENDARS`` (5-minute data: a 288-step day and a 2,016-step week; hourly: 24 and 168;
daily: 7 and 365.25; monthly: 12; ...), each series gets a random start phase, a main cycle and (often) the longer
one, each a random Fourier profile, combined additively or multiplicatively with a linear or exponential trend and
Gaussian or log-normal noise. Multiplicative series are positive, as sales and traffic are.
"""

from __future__ import annotations

import torch

from .common import (
    CALENDARS,
    bernoulli,
    constant,
    log_uniform,
    normal,
    randint,
    random_scale,
    random_season,
    time_grid,
    uniform,
)

__all__ = ["seasonal"]


def _calendar_periods(names: tuple[str, ...] | None, n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Main and long period ``[n, 1]`` each, of a calendar drawn per series among ``names`` (default: all)."""
    rows = [CALENDARS[name] for name in (names or tuple(CALENDARS))]
    table = constant(tuple(rows), g.device)
    pick = randint(n, g, 0, len(rows)).squeeze(1)
    return table[pick, :1], table[pick, 1:]


def seasonal(n: int, length: int, g: torch.Generator, *, calendars: tuple[str, ...] | None = None,
             noise: tuple[float, float] = (0.01, 0.3)) -> torch.Tensor:
    """``[n, length]`` trend x seasonality x noise series.

    Args:
        calendars: names of ``CALENDARS`` to draw from (default: all).
        noise: range of the (log-uniform) noise level relative to the seasonal amplitude.
    """
    t = time_grid(length, g.device)
    main, long = _calendar_periods(calendars, n, g)
    start = uniform(n, g, 0.0, 1.0) * torch.where(long > 0, long, main)  # where in the calendar the series begins
    clock = t + start
    season_main = uniform(n, g, 0.3, 1.0) * random_season(clock, main, g, harmonics=10)
    has_long = (long > 0) & bernoulli(n, g, 0.6)
    season_long = uniform(n, g, 0.1, 0.6) * random_season(clock, long.clamp_min(1.0), g, harmonics=4) * has_long
    progress = t / length
    slope = normal(g, n, 1) * uniform(n, g, 0.0, 1.0)
    exponential = bernoulli(n, g, 0.3)
    growth = torch.where(exponential, torch.exp(slope * progress), 1.0 + slope.clamp(-0.8, 2.0) * progress)
    noise_level = log_uniform(n, g, *noise)
    multiplicative = bernoulli(n, g, 0.5)
    eps = normal(g, n, length) * noise_level
    # Multiplicative: a positive level times (1 + seasons) times log-normal noise; the factors stay positive.
    factors = (1.0 + 0.9 * season_main) * (1.0 + 0.9 * season_long) * torch.exp(eps)
    multiplied = growth.clamp_min(0.05) * factors
    added = (growth - 1.0) * uniform(n, g, 0.0, 3.0) + season_main + season_long + eps
    # Only additive series get a random level: shifting a multiplicative one could make it negative.
    return torch.where(multiplicative, random_scale(multiplied, g, offset=False), random_scale(added, g))
