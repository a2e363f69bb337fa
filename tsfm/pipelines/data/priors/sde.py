"""Stochastic-differential-equation paths: regime-switching Ornstein-Uhlenbeck and geometric Brownian motion.

TempoPFN's OU generator (regime-switching mean, speed and volatility, with trends) is one of its strongest
synthetic families; GBM is the textbook price path (positive, multiplicative, volatility clustering when its
volatility switches regimes). Both are exact discretisations on a unit step:

- **OU**: ``x_t = phi x_{t-1} + (1 - phi) mu_t + sigma_t eps_t``, ``phi = exp(-theta)``; ``mu`` and ``sigma`` switch
  between 1-3 regimes at a rate of 0.05-2 % per step; the path starts at the first regime's mean. Computed with one
  FFT filter (``ar1_filter``), not a loop over time.
- **GBM**: ``log S_t = log S_0 + sum (drift - sigma_t^2 / 2 + sigma_t eps_t)``, ``sigma`` regime-switching too.
"""

from __future__ import annotations

import torch

from .common import ar1_filter, bernoulli, log_uniform, normal, randint, random_scale, uniform

__all__ = ["MAX_REGIMES", "gbm_paths", "ou_paths", "sde"]

#: At most this many regimes per path.
MAX_REGIMES = 3


def _regimes(n: int, length: int, g: torch.Generator, switch_rate: torch.Tensor) -> torch.Tensor:
    """Regime index ``[n, length]`` in ``0..count-1`` (count 1-``MAX_REGIMES`` per series), switching to the next
    regime (cyclically) at rate ``switch_rate [n, 1]`` per step."""
    count = randint(n, g, 1, MAX_REGIMES + 1)
    switches = (torch.rand(n, length, generator=g, device=g.device) < switch_rate).cumsum(dim=1)
    return torch.remainder(switches, count)


def ou_paths(n: int, length: int, g: torch.Generator, *, theta: torch.Tensor | None = None,
             switch_rate: torch.Tensor | None = None) -> torch.Tensor:
    """``[n, length]`` OU paths with speed ``theta [n, 1]`` (default log-uniform 0.002-0.5) and regime switching at
    ``switch_rate [n, 1]`` (default log-uniform 0.0005-0.02; 0: one regime)."""
    theta = log_uniform(n, g, 0.002, 0.5) if theta is None else theta
    switch_rate = log_uniform(n, g, 5e-4, 0.02) if switch_rate is None else switch_rate
    regime = _regimes(n, length, g, switch_rate)
    mu = torch.gather(normal(g, n, MAX_REGIMES) * 3.0, 1, regime)
    sigma = torch.gather(log_uniform(n, g, 0.1, 1.0, MAX_REGIMES), 1, regime)
    phi = torch.exp(-theta)
    shocks = (1.0 - phi) * mu + sigma * normal(g, n, length)
    stationary_sd = sigma[:, :1] / (1.0 - phi**2).clamp_min(1e-6).sqrt()
    start = mu[:, :1] + stationary_sd.clamp_max(10.0) * normal(g, n, 1)
    shocks = torch.cat([start, shocks[:, 1:]], dim=1)
    return ar1_filter(shocks, phi)


def gbm_paths(n: int, length: int, g: torch.Generator) -> torch.Tensor:
    """``[n, length]`` positive GBM paths starting at 1, per-step volatility 0.2-5 % switching regimes."""
    regime = _regimes(n, length, g, log_uniform(n, g, 5e-4, 0.02))
    sigma = torch.gather(log_uniform(n, g, 0.002, 0.05, MAX_REGIMES), 1, regime)
    drift = normal(g, n, 1) * uniform(n, g, 0.0, 2.0) / length
    log_returns = drift - 0.5 * sigma**2 + sigma * normal(g, n, length)
    log_price = log_returns.cumsum(dim=1)
    return torch.exp(log_price - log_price[:, :1])


def sde(n: int, length: int, g: torch.Generator) -> torch.Tensor:
    """``[n, length]``: 60 % regime-switching OU (random level), 40 % GBM (positive, only scaled)."""
    use_gbm = bernoulli(n, g, 0.4)
    ou = random_scale(ou_paths(n, length, g), g)
    gbm = random_scale(gbm_paths(n, length, g), g, offset=False)
    return torch.where(use_gbm, gbm, ou)
