"""Damped oscillators: ringing after a kick, and noise-driven resonance.

A second-order linear system ``x_t = 2 r cos(w) x_{t-1} - r^2 x_{t-2} + u_t`` (an AR(2) with complex roots
``r e^{+-iw}``) is a damped spring: after an impulse it rings at period ``2 pi / w`` with envelope ``r^t``; driven by
white noise it is the classic quasi-periodic stochastic cycle (sunspots, business cycles, vibration sensors) whose
period drifts and whose amplitude breathes, unlike a fixed sinusoid. Both are computed as one FFT convolution of the
drive with the impulse response ``r^k sin((k+1) w) / sin w``:

- **free**: 1-4 kicks (the first at the start), so the series rings down and is re-excited;
- **driven**: Gaussian drive at every step.
"""

from __future__ import annotations

import math

import torch

from .common import bernoulli, impulse_filter, log_uniform, normal, randint, random_scale, time_grid, uniform

__all__ = ["MAX_KICKS", "oscillator"]

#: At most this many kicks of a free oscillator.
MAX_KICKS = 4


def oscillator(n: int, length: int, g: torch.Generator, *, driven: float = 0.5,
               period: tuple[float, float] = (4.0, 200.0), damping: tuple[float, float] = (1e-3, 0.1),
               kicks: int = MAX_KICKS) -> torch.Tensor:
    """``[n, length]`` damped-oscillator paths.

    Args:
        driven: share of noise-driven series (the rest are kicked free oscillators).
        period: ringing period range in steps (log-uniform).
        damping: range of ``-log r`` per step (log-uniform): the envelope falls by ``e`` in ``1 / damping`` steps.
        kicks: most kicks of a free oscillator (the first always at t = 0).
    """
    t = time_grid(length, g.device)
    omega = 2.0 * math.pi / log_uniform(n, g, *period)
    r = torch.exp(-log_uniform(n, g, *damping))
    response = r**t * torch.sin((t + 1.0) * omega) / torch.sin(omega).clamp_min(1e-3)
    count = randint(n, g, 1, max(kicks, 1) + 1)
    at = torch.cat([torch.zeros(n, 1, device=g.device), uniform(n, g, 0.2, 0.9, max(kicks, 1) - 1) * length], dim=1)
    at = torch.where(torch.arange(at.shape[1], device=g.device).unsqueeze(0) < count, at.floor(), -1.0)
    kick_sizes = normal(g, n, at.shape[1])
    impulses = torch.zeros(n, length, device=g.device)
    impulses = impulses.scatter_add(1, at.clamp_min(0).long(), torch.where(at >= 0, kick_sizes, 0.0))
    drive = torch.where(bernoulli(n, g, driven), normal(g, n, length), impulses)
    path = impulse_filter(drive, response)
    path = path / path.abs().amax(dim=1, keepdim=True).clamp_min(1e-6)
    return random_scale(path + uniform(n, g, 0.0, 0.05) * normal(g, n, length), g)
