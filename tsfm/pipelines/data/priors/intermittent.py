"""Intermittent counts: mostly zeros, occasional non-negative integer demand (retail items, spare parts).

Croston's view of intermittent demand (Croston 1972; Syntetos-Boylan classes): demand *occurs* at random with a
low probability per step (geometric inter-demand intervals), and its *size* is a count when it does. Here the
occurrence probability is 2-50 % per series, sometimes modulated by a weekly-like cycle or a slow drift (lumpy
demand in bursts); sizes are ``1 + Poisson(lambda)`` where ``lambda`` is log-normal per step (a Poisson-log-normal,
overdispersed like a negative binomial). A share of series is zero-inflated Poisson instead (size may be 0 too).
Values are exact non-negative integers and are never rescaled: counts are a shape the model must see as they are.
"""

from __future__ import annotations

import torch

from .common import PERIODS_SHORT, bernoulli, choice, log_uniform, normal, random_season, time_grid, uniform

__all__ = ["intermittent"]


def intermittent(n: int, length: int, g: torch.Generator) -> torch.Tensor:
    """``[n, length]`` intermittent count series (float32 holding non-negative integers)."""
    t = time_grid(length, g.device)
    rate = log_uniform(n, g, 0.02, 0.5)
    seasonal = bernoulli(n, g, 0.3) * uniform(n, g, 0.3, 0.9)
    cycle = random_season(t, choice(n, g, PERIODS_SHORT), g, harmonics=3)
    drift = torch.cumsum(normal(g, n, length), dim=1) / (length**0.5) * bernoulli(n, g, 0.3)
    occurrence = (rate * (1.0 + seasonal * cycle) * torch.exp(drift)).clamp(0.0, 0.95)
    occurs = torch.rand(n, length, generator=g, device=g.device) < occurrence
    mean_size = log_uniform(n, g, 0.3, 30.0)
    dispersion = uniform(n, g, 0.0, 1.0)
    lam = mean_size * torch.exp(dispersion * normal(g, n, length) - 0.5 * dispersion**2)
    counts = torch.poisson(lam, generator=g)
    zero_inflated = bernoulli(n, g, 0.25)
    sizes = torch.where(zero_inflated, counts, 1.0 + counts)
    return torch.where(occurs, sizes, torch.zeros_like(sizes))
