"""Regular non-sinusoidal waves: sawtooth, square (any duty cycle), triangle and pulse trains.

A Fourier-based prior only makes smooth cycles; machines, schedules and billing cycles make sharp ones (a tank that
fills and empties, a shift pattern that is on or off, a counter that resets). After TempoPFN's sawtooth and sine
generators: one shape per series with a period of 4 steps to a third of the series (log-uniform), a random phase,
sometimes a slow amplitude modulation, plus an optional linear trend and noise.
"""

from __future__ import annotations

import math

import torch

from .common import bernoulli, constant, log_uniform, normal, randint, random_scale, time_grid, uniform

__all__ = ["SHAPES", "waves"]

#: Wave shapes, in the order of their index.
SHAPES: tuple[str, ...] = ("sawtooth", "square", "triangle", "pulse")


def waves(n: int, length: int, g: torch.Generator, *, shapes: tuple[str, ...] = SHAPES,
          period: tuple[float, float] | None = None, noise: tuple[float, float] = (0.005, 0.2),
          trend: bool = True) -> torch.Tensor:
    """``[n, length]`` waves of a shape drawn from ``shapes``.

    Args:
        shapes: names of ``SHAPES`` to draw from.
        period: period range in steps (log-uniform; default 4 to a third of the series).
        noise: noise level range (log-uniform, relative to the amplitude); ``(0, 0)``: none.
        trend: whether a share of series gets a linear trend and amplitude modulation.
    """
    low, high = period or (4.0, max(4.0, length / 3))
    p = log_uniform(n, g, low, high) if low > 0 and high > low else torch.full((n, 1), float(low), device=g.device)
    t = time_grid(length, g.device)
    phase = torch.remainder(t / p + uniform(n, g, 0.0, 1.0), 1.0)  # 0..1 within each cycle
    allowed = constant(tuple(SHAPES.index(s) for s in shapes), g.device, torch.int64)
    shape = allowed[randint(n, g, 0, len(shapes))]
    rising = torch.where(bernoulli(n, g, 0.7), 1.0, -1.0)
    duty = uniform(n, g, 0.1, 0.9)
    pulse_width = uniform(n, g, 0.02, 0.15)
    forms = (rising * (2.0 * phase - 1.0),
             torch.where(phase < duty, 1.0, -1.0),
             1.0 - 4.0 * (phase - 0.5).abs(),
             torch.where(phase < pulse_width, 1.0, 0.0))
    wave = forms[-1]
    for index in range(len(forms) - 2, -1, -1):
        wave = torch.where(shape == index, forms[index], wave)
    if trend:
        modulated = bernoulli(n, g, 0.3)
        slow = 1.0 + 0.5 * torch.sin(2 * math.pi * t / (length * uniform(n, g, 0.5, 2.0)) + uniform(n, g, 0, 6.3))
        wave = torch.where(modulated, wave * slow, wave)
        wave = wave + normal(g, n, 1) * t / length * bernoulli(n, g, 0.4)
    level = log_uniform(n, g, *noise) if noise[0] > 0 else torch.zeros(n, 1, device=g.device)
    return random_scale(wave + level * normal(g, n, length), g)
