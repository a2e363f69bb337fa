"""Random-walk-like series: unit roots, near unit roots and integrated walks, with heavy-tailed steps.

Prices, inventories and many economic series are best forecast by their last value; a model must recognise a walk
and not invent a cycle in it. Kinds, one per series: a random walk with drift, an AR(1) just below the unit root
(``phi`` in 0.95-0.999: mean reversion too slow to see), an integrated walk (I(2): smooth, trending), and a walk
reflected at zero (a non-negative level, as a stock or a queue). Steps are Gaussian scale mixtures (log-normal
scale), so some walks have jumps; ForecastPFN-style random walks and Chronos' and TempoPFN's augmentations are the
precedent.
"""

from __future__ import annotations

import torch

from .common import ar1_filter, constant, log_uniform, normal, randint, random_scale, uniform

__all__ = ["KINDS", "random_walk"]

#: Walk kinds, in the order of their index.
KINDS: tuple[str, ...] = ("walk", "near_unit_root", "integrated", "reflected")


def random_walk(n: int, length: int, g: torch.Generator, *, kinds: tuple[str, ...] = KINDS) -> torch.Tensor:
    """``[n, length]`` random-walk-like series of a kind drawn from ``kinds``."""
    allowed = constant(tuple(KINDS.index(k) for k in kinds), g.device, torch.int64)
    kind = allowed[randint(n, g, 0, len(kinds))]
    tails = uniform(n, g, 0.0, 1.0)
    steps = normal(g, n, length) * torch.exp(tails * normal(g, n, length) - 0.5 * tails**2)
    steps = steps + normal(g, n, 1) * uniform(n, g, 0.0, 0.3)  # drift, up to 0.3 step sizes per step
    phi = torch.where(kind == 1, 1.0 - log_uniform(n, g, 1e-3, 0.05), torch.ones(n, 1, device=g.device))
    walk = ar1_filter(steps, phi)
    integrated = (walk - walk.mean(dim=1, keepdim=True)).cumsum(dim=1) / length**0.5
    reflected = (walk + uniform(n, g, 0.0, 3.0) * length**0.5).abs()
    out = torch.where(kind == 2, integrated, torch.where(kind == 3, reflected, walk))
    return torch.where(kind == 3, random_scale(out, g, offset=False), random_scale(out, g))
