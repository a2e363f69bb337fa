"""Building blocks shared by the prior generators: random draws on the generator's device, calendar periods,
seasonal cycles, linear filters and the final scale / offset.

Every helper is batched over series (``[n, ...]``) and draws only from the ``torch.Generator`` it is given, on that
generator's device, so a generator family is one short chain of tensor ops on CPU or CUDA alike. Nothing here
synchronises with the host. This module knows nothing of which families exist or how they are mixed.
"""

from __future__ import annotations

import functools
import math

import torch

__all__ = [
    "CALENDARS",
    "PERIODS_SHORT",
    "ar1_filter",
    "bernoulli",
    "choice",
    "constant",
    "fourier_series",
    "impulse_filter",
    "left_pad",
    "log_uniform",
    "normal",
    "randint",
    "random_scale",
    "random_season",
    "time_grid",
    "uniform",
]

#: Seasonal periods (in steps) of common sampling frequencies: the first is the main cycle (the day of intraday
#: data, the week of daily data, the year of monthly data), the second a longer one (0: none). 5-minute data has a
#: 288-step day and a 2,016-step week: the long cycles our benchmark's high-frequency sets need.
CALENDARS: dict[str, tuple[float, float]] = {
    "5min": (288.0, 2016.0),
    "10min": (144.0, 1008.0),
    "15min": (96.0, 672.0),
    "30min": (48.0, 336.0),
    "hourly": (24.0, 168.0),
    "daily": (7.0, 365.25),
    "business_daily": (5.0, 261.0),
    "weekly": (52.18, 0.0),
    "monthly": (12.0, 0.0),
    "quarterly": (4.0, 0.0),
}

#: Short cycles for generators whose season is a side feature: business and calendar weeks, months, days, years.
PERIODS_SHORT: tuple[float, ...] = (5.0, 7.0, 12.0, 24.0, 52.18)


@functools.lru_cache(maxsize=256)
def _constant(values: tuple, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    return torch.tensor(values, dtype=dtype, device=device)


def constant(values: tuple | list, device: torch.device, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A small constant table on ``device``, copied there once and cached (read-only by convention).

    Why: on CUDA ``torch.tensor(..., device=...)`` from host memory waits for the device to finish its queued work;
    a generator family that built its tables on every call would synchronise the host a dozen times per block.
    """
    frozen = tuple(tuple(row) if isinstance(row, list | tuple) else row for row in values)
    return _constant(frozen, dtype, torch.device(device))


def uniform(n: int, g: torch.Generator, low: float, high: float, width: int = 1) -> torch.Tensor:
    """``U(low, high)`` of shape ``[n, width]``."""
    return low + (high - low) * torch.rand(n, width, generator=g, device=g.device)


def log_uniform(n: int, g: torch.Generator, low: float, high: float, width: int = 1) -> torch.Tensor:
    """Log-uniform on ``[low, high]`` (both > 0): every order of magnitude equally likely."""
    return torch.exp(uniform(n, g, math.log(low), math.log(high), width))


def normal(g: torch.Generator, *shape: int) -> torch.Tensor:
    """Standard normal of ``shape``."""
    return torch.randn(*shape, generator=g, device=g.device)


def bernoulli(n: int, g: torch.Generator, p: float | torch.Tensor, width: int = 1) -> torch.Tensor:
    """Boolean ``[n, width]``, True with probability ``p`` (a float or a tensor broadcasting to it)."""
    return torch.rand(n, width, generator=g, device=g.device) < p


def randint(n: int, g: torch.Generator, low: int, high: int, width: int = 1) -> torch.Tensor:
    """Integers in ``[low, high)`` of shape ``[n, width]`` (int64)."""
    return torch.randint(low, high, (n, width), generator=g, device=g.device)


def choice(n: int, g: torch.Generator, values: list[float] | tuple[float, ...]) -> torch.Tensor:
    """One of ``values`` per series, uniformly: float ``[n, 1]``."""
    table = constant(tuple(values), g.device)
    return table[randint(n, g, 0, len(values))]


def time_grid(length: int, device: torch.device) -> torch.Tensor:
    """``[1, length]`` steps ``0..length-1`` (float32)."""
    return torch.arange(length, dtype=torch.float32, device=device).unsqueeze(0)


def fourier_series(t: torch.Tensor, period: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """``sum_k cos[:, k] cos(2 pi (k+1) t / period) + sin[:, k] sin(...)`` for ``t [1, L]``, ``period [n, 1]``
    and coefficients ``[n, K]``; ``[n, L]``.

    The harmonics are powers of one unit phasor (``z^(k+1)``, one complex multiply each) rather than ``K`` cosine
    evaluations of an ``[n, K, L]`` tensor: memory stays ``[n, L]`` whatever ``K`` is. The phase is reduced modulo
    the period first so that float32 keeps its precision at ``t`` in the thousands.
    """
    angle = 2.0 * math.pi * torch.remainder(t, period) / period
    unit = torch.polar(torch.ones_like(angle), angle)
    power = unit
    out = torch.zeros_like(angle)
    for k in range(cos.shape[1]):
        if k:
            power = power * unit
        out = out + cos[:, k : k + 1] * power.real + sin[:, k : k + 1] * power.imag
    return out


def random_season(t: torch.Tensor, period: torch.Tensor, g: torch.Generator, harmonics: int = 8,
                  decay: tuple[float, float] = (0.5, 2.0)) -> torch.Tensor:
    """A random cycle of ``period`` steps per series ``[n, L]``, peak absolute value 1.

    Harmonic ``k`` has amplitude ``~ k^-d`` with ``d ~ U(decay)``: small ``d`` gives spiky profiles (a morning and an
    evening peak in a daily load curve), large ``d`` near-sinusoids.
    """
    n = period.shape[0]
    k = torch.arange(1, harmonics + 1, device=t.device, dtype=torch.float32).unsqueeze(0)
    amplitude = k ** -uniform(n, g, *decay)
    season = fourier_series(t, period, amplitude * normal(g, n, harmonics), amplitude * normal(g, n, harmonics))
    return season / season.abs().amax(dim=1, keepdim=True).clamp_min(1e-6)


def impulse_filter(x: torch.Tensor, response: torch.Tensor) -> torch.Tensor:
    """Causal convolution of each row of ``x [n, L]`` with its impulse response ``response [n, L]`` by FFT
    (``O(L log L)``, no loop over time): ``y_t = sum_{s <= t} response_{t-s} x_s``."""
    length = x.shape[1]
    size = 2 * length
    spectrum = torch.fft.rfft(x, size) * torch.fft.rfft(response, size)
    return torch.fft.irfft(spectrum, size)[:, :length]


def ar1_filter(x: torch.Tensor, phi: torch.Tensor) -> torch.Tensor:
    """``y_t = phi y_{t-1} + x_t`` (``y_0 = x_0``) per row, ``phi [n, 1]`` in ``[0, 1]``: an AR(1) / OU path from its
    shocks. ``phi = 1`` is a random walk (a cumulative sum, exact)."""
    lags = torch.arange(x.shape[1], device=x.device, dtype=torch.float32).unsqueeze(0)
    response = torch.where(phi >= 1.0, torch.ones_like(lags), phi.clamp(0.0, 1.0) ** lags)
    filtered = impulse_filter(x, response)
    return torch.where(phi >= 1.0, x.cumsum(dim=1), filtered)


def left_pad(x: torch.Tensor, observed: torch.Tensor) -> torch.Tensor:
    """Keep the last ``observed [n, 1]`` steps of each row and set the rest to NaN: a short series whose history
    ends at the right edge, as the sampler expects."""
    t = torch.arange(x.shape[1], device=x.device).unsqueeze(0)
    return torch.where(t >= x.shape[1] - observed, x, torch.full_like(x, float("nan")))


def random_scale(x: torch.Tensor, g: torch.Generator, *, offset: bool = True,
                 magnitude: tuple[float, float] = (1e-2, 1e4)) -> torch.Tensor:
    """Multiply each row by a log-uniform positive scale and, with ``offset``, add a level of up to a few times the
    row's spread (either sign), so values span many orders of magnitude and levels far from zero.

    A positive scale keeps the sign of every value: generators that produce non-negative series stay non-negative
    when they pass ``offset=False``.
    """
    n = x.shape[0]
    scaled = x * log_uniform(n, g, *magnitude)
    if not offset:
        return scaled
    spread = scaled.nan_to_num(0.0).std(dim=1, keepdim=True)
    shift = torch.where(bernoulli(n, g, 0.5), uniform(n, g, -5.0, 5.0) * spread, torch.zeros_like(spread))
    return scaled + shift
