"""Spikes: a quiet baseline with rare large excursions (outages, promotions, bursts of traffic).

After TempoPFN's spike generator (V-shaped and "chopped" plateau spikes, spread out or in a burst, mostly on one side
of the baseline), plus one-step impulses with an exponential decay (a surge that fades). Each series has 1-10 spikes
of 8-80 baseline noise levels; the baseline is noise, sometimes with a cycle. Half the series are non-negative
(a zero-floored baseline with upward spikes, as counts of events are).
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

__all__ = ["MAX_SPIKES", "spikes"]

#: At most this many spikes per series.
MAX_SPIKES = 10


def spikes(n: int, length: int, g: torch.Generator) -> torch.Tensor:
    """``[n, length]`` series with 1-``MAX_SPIKES`` spikes (V, plateau or decaying impulse; one shape per series)."""
    times = time_grid(length, g.device)
    count = randint(n, g, 1, MAX_SPIKES + 1)
    active = torch.arange(MAX_SPIKES, device=g.device).unsqueeze(0) < count
    burst = bernoulli(n, g, 0.15)  # spikes clustered within a tenth of the series
    centre = uniform(n, g, 0.1, 0.9) * length
    at = torch.where(burst, centre + uniform(n, g, -0.05, 0.05, MAX_SPIKES) * length,
                     uniform(n, g, 0.0, 1.0, MAX_SPIKES) * length).round()
    width = log_uniform(n, g, 1.0, 40.0)
    shape = randint(n, g, 0, 3)
    chop = uniform(n, g, 1.5, 4.0)
    upward = bernoulli(n, g, 0.8)
    sign = torch.where(upward, 1.0, torch.where(bernoulli(n, g, 0.5, MAX_SPIKES), 1.0, -1.0))
    height = sign * log_uniform(n, g, 8.0, 80.0, MAX_SPIKES) * active
    excursions = torch.zeros(n, length, device=g.device)
    for k in range(MAX_SPIKES):  # one [n, L] at a time: memory stays O(n L)
        distance = (times - at[:, k : k + 1]) / width
        v_shape = (1.0 - distance.abs()).clamp_min(0.0)
        plateau = (chop * v_shape).clamp_max(1.0)
        decay = torch.where(distance >= 0, torch.exp(-distance.clamp_min(0.0)), torch.zeros_like(distance))
        profile = torch.where(shape == 0, v_shape, torch.where(shape == 1, plateau, decay))
        excursions = excursions + height[:, k : k + 1] * profile
    season = random_season(times, choice(n, g, PERIODS_SHORT), g, harmonics=3) * bernoulli(n, g, 0.4)
    baseline = normal(g, n, length) + 2.0 * season
    series = baseline + excursions
    non_negative = bernoulli(n, g, 0.5) & upward
    floored = (series - baseline.amin(dim=1, keepdim=True)).clamp_min(0.0)
    return torch.where(non_negative, random_scale(floored, g, offset=False), random_scale(series, g))
