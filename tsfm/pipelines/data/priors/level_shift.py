"""Level shifts: piecewise-constant levels (sharp steps or short ramps) over noise, sometimes with a season.

Real series jump when a price changes, a sensor is recalibrated, a store opens; a smooth GP prior almost never jumps,
so a model trained on it smears a step over many steps. TempoPFN's step generator builds series from sub-series of
stable / rising / falling / oscillating steps; here each series gets 1-8 shifts at random times, each of 0.5-3 units
(either sign, or all of one sign for a staircase), each a sharp step or a ramp of up to 24 steps, plus noise of
1-30 % of a unit and (with ``seasonality``'s probability) a daily/weekly-like cycle.
"""

from __future__ import annotations

import torch

from .common import (
    PERIODS_SHORT,
    bernoulli,
    choice,
    log_uniform,
    normal,
    randint,
    random_scale,
    random_season,
    time_grid,
    uniform,
)

__all__ = ["MAX_SHIFTS", "level_shift"]

#: At most this many shifts per series.
MAX_SHIFTS = 8


def level_shift(n: int, length: int, g: torch.Generator, *, seasonality: float = 0.4,
                noise: tuple[float, float] = (0.01, 0.3), max_ramp: int = 24) -> torch.Tensor:
    """``[n, length]`` series with 1-``MAX_SHIFTS`` level shifts.

    Args:
        seasonality: probability that a series also has a cycle (amplitude up to half a unit).
        noise: range of the (log-uniform) noise level in units of a shift.
        max_ramp: longest ramp of a gradual shift, in steps (0: every shift is a sharp step).
    """
    times = time_grid(length, g.device)
    count = randint(n, g, 1, MAX_SHIFTS + 1)
    active = torch.arange(MAX_SHIFTS, device=g.device).unsqueeze(0) < count  # [n, K]
    at = uniform(n, g, 0.05, 0.95, MAX_SHIFTS) * length
    staircase = bernoulli(n, g, 0.3)
    sign = torch.where(bernoulli(n, g, 0.5, MAX_SHIFTS), 1.0, -1.0)
    sign = torch.where(staircase, sign[:, :1], sign)
    size = sign * uniform(n, g, 0.5, 3.0, MAX_SHIFTS) * active
    ramp = torch.where(bernoulli(n, g, 0.3, MAX_SHIFTS), uniform(n, g, 1.0, max(max_ramp, 1), MAX_SHIFTS), 0.0)
    level = torch.zeros(n, length, device=g.device)
    for k in range(MAX_SHIFTS):  # one [n, L] at a time: memory stays O(n L)
        sharp = (times >= at[:, k : k + 1]).float()
        gradual = ((times - at[:, k : k + 1]) / ramp[:, k : k + 1].clamp_min(1e-3)).clamp(0.0, 1.0)
        level = level + size[:, k : k + 1] * torch.where(ramp[:, k : k + 1] > 0, gradual, sharp)
    season = random_season(times, choice(n, g, PERIODS_SHORT), g, harmonics=4)
    season = season * uniform(n, g, 0.05, 0.5) * bernoulli(n, g, seasonality)
    trend = normal(g, n, 1) * 0.5 * times / length * bernoulli(n, g, 0.3)
    series = level + season + trend + log_uniform(n, g, *noise) * normal(g, n, length)
    return random_scale(series, g)
