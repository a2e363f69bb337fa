"""One random cycle repeated exactly: the copy task that near-periodic real series set.

Some benchmark series repeat the same daily profile almost to the decimal (`m4_hourly` series whose in-sample
seasonal differences are 0.1% of their level; the summer days of `yosemite_temps/5T`). There Seasonal Naive is
nearly exact, MASE divides by those tiny differences, and a model that only *approximately* follows the cycle loses
by a factor of several (benchmarks/RESULTS.md, seventeenth session). The other families never repeat exactly: their
seasonality comes with trend, noise or modulation. Here each series is one random profile (``random_season`` with
spiky to smooth harmonics, sometimes cut flat below a threshold, as a temperature or load curve is at night) tiled
with an integer period, so the values of one cycle recur bit for bit; half of the series add a little noise. Periods
are calendar ones (7, 12, 24, ..., 288) or any integer from 2, always at least two cycles in the series.
"""

from __future__ import annotations

import torch

from .common import bernoulli, constant, log_uniform, normal, randint, random_scale, random_season, time_grid, uniform

__all__ = ["CALENDAR_PERIODS", "repeat"]

#: Calendar periods: a week of days, a year of months or weeks, a day of hours or of 30/15/10/5 minutes, a week
#: of hours.
CALENDAR_PERIODS: tuple[int, ...] = (7, 12, 24, 48, 52, 96, 144, 168, 288)


def repeat(n: int, length: int, g: torch.Generator, *, calendar_share: float = 0.5,
           noisy_share: float = 0.5, noise: tuple[float, float] = (1e-3, 0.05)) -> torch.Tensor:
    """``[n, length]`` series that repeat one random cycle with an integer period.

    Args:
        calendar_share: share of series whose period is a calendar one (the rest: log-uniform integers from 2).
        noisy_share: share of series with Gaussian noise added (the rest repeat exactly).
        noise: noise level range (log-uniform, relative to the cycle's peak).
    """
    longest = max(2, length // 2)
    calendar = constant(CALENDAR_PERIODS, g.device)[randint(n, g, 0, len(CALENDAR_PERIODS))]
    drawn = torch.floor(log_uniform(n, g, 2.0, float(longest) + 1.0))
    period = torch.where(bernoulli(n, g, calendar_share), calendar, drawn).clamp(2.0, float(longest))
    t = time_grid(length, g.device)
    cycle = random_season(t, period, g, decay=(0.3, 2.0))
    flat = bernoulli(n, g, 0.4)  # a floor: nights of a temperature curve, hours of no load
    cycle = torch.where(flat, torch.maximum(cycle, uniform(n, g, -0.6, 0.3)), cycle)
    level = torch.where(bernoulli(n, g, noisy_share), log_uniform(n, g, *noise), torch.zeros(n, 1, device=g.device))
    return random_scale(cycle + level * normal(g, n, length), g)
