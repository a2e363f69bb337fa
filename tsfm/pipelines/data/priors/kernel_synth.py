"""KernelSynth without Cholesky: random compositions of Gaussian-process kernels, each term sampled spectrally.

Chronos' KernelSynth (Ansari et al. 2024, appendix A) draws 1-5 kernels from a bank (periodic, RBF, rational
quadratic, linear, white noise, constant), joins them with random ``+`` / ``*`` and samples ``N(0, K)`` through an
``O(L^3)`` Cholesky per series (tens of ms at L = 1,024 on a CPU, ~1 MB of covariance per series at 2,304). Here
every term is sampled on its own, in ``O(L log L)``:

- **periodic** ``exp(-2 sin^2(pi d / p) / l^2)``: its spectrum is discrete, harmonic ``k`` of ``1/p`` with weight
  ``q_k = c_k I_k(l^-2) e^(-l^-2)`` (``I_k`` the modified Bessel function, ``c_0 = 1``, ``c_k = 2``), so a path is
  a random Fourier series with ``N(0, q_k)`` coefficients: an exact sample, truncated at 16 harmonics;
- **RBF / rational quadratic**: circulant embedding on a ``2L`` grid: the eigenvalues of the embedded covariance
  are the FFT of the lag profile (negative ones, from long length scales, clipped at 0), and one complex FFT of
  scaled Gaussians gives a path with that covariance;
- **linear** ``b^2 + (x - c)(x' - c)``: a random slope through ``c`` plus a random level; **white**: i.i.d. noise;
  **constant**: one random level.

Terms are independent zero-mean processes, so their sum has the sum kernel and their elementwise product the
product kernel as covariance (the product is no longer Gaussian, which only widens the prior). Composition is left
to right, as in Chronos. Memory is ``O(n L)`` per term: no ``[n, L, L]`` or ``[n, features, L]`` tensor.
"""

from __future__ import annotations

import math

import torch

from .common import bernoulli, choice, constant, log_uniform, normal, randint, random_scale, time_grid, uniform

__all__ = ["KINDS", "MAX_TERMS", "PERIODS", "circulant_paths", "kernel_synth", "periodic_paths"]

#: Term kinds and their draw shares (Chronos' bank is periodic-heavy; trends get a little more room here).
KINDS: dict[str, float] = {"periodic": 0.4, "rbf": 0.15, "rational_quadratic": 0.12, "linear": 0.13,
                           "white": 0.1, "constant": 0.1}

#: Periods in steps of the periodic kernel: the calendar cycles of common frequencies (days of 5-/15-/30-minute and
#: hourly data, weeks of hourly and daily data, years of daily, weekly, monthly and quarterly data) and a few more.
PERIODS: tuple[float, ...] = (4, 5, 6, 7, 12, 14, 24, 30, 48, 52.18, 60, 96, 144, 168, 288, 336, 365.25, 672, 2016)

#: At most this many kernels per composition (Chronos: 5).
MAX_TERMS = 5

_HARMONICS = 16
_PERIODIC_LENGTH_SCALES = (0.5, 1.0, 2.0)
_RQ_ALPHAS = (0.1, 1.0, 10.0)
_WHITE_LEVELS = (0.01, 0.1, 1.0)


def _bessel_weights(length_scale: float, harmonics: int) -> list[float]:
    """``q_k``, k = 0..harmonics-1, of the periodic kernel with ``length_scale`` (power series of ``I_k``, in
    float64 on the host once per import; the weights sum to 1 up to truncation)."""
    x = length_scale**-2
    weights = []
    for k in range(harmonics):
        series = sum(math.exp((2 * m + k) * math.log(x / 2) - math.lgamma(m + 1) - math.lgamma(m + k + 1))
                     for m in range(60))
        weights.append((1.0 if k == 0 else 2.0) * series * math.exp(-x))
    return weights


_BESSEL = [_bessel_weights(ls, _HARMONICS) for ls in _PERIODIC_LENGTH_SCALES]


def periodic_paths(t: torch.Tensor, period: torch.Tensor, scale_index: torch.Tensor,
                   g: torch.Generator) -> torch.Tensor:
    """Exact zero-mean GP paths ``[n, L]`` of the periodic kernel with ``period [n, 1]`` (steps) and length scale
    ``_PERIODIC_LENGTH_SCALES[scale_index [n, 1]]`` (truncated to ``_HARMONICS`` harmonics)."""
    n = period.shape[0]
    table = constant(_BESSEL, t.device)  # [scales, harmonics]
    sd = table[scale_index.squeeze(1)].sqrt()  # [n, harmonics]
    angle = 2.0 * math.pi * torch.remainder(t, period) / period
    unit = torch.polar(torch.ones_like(angle), angle)
    out = sd[:, :1] * normal(g, n, 1)  # k = 0: a constant
    power = torch.ones_like(unit)
    coefficients = normal(g, n, 2 * (_HARMONICS - 1))
    for k in range(1, _HARMONICS):
        power = power * unit
        a, b = coefficients[:, 2 * k - 2 : 2 * k - 1], coefficients[:, 2 * k - 1 : 2 * k]
        out = out + sd[:, k : k + 1] * (a * power.real + b * power.imag)
    return out


def circulant_paths(profile: torch.Tensor, length: int, g: torch.Generator) -> torch.Tensor:
    """Zero-mean stationary GP paths ``[n, length]`` from lag profiles ``profile [n, M]`` (``k(min(d, M - d))`` on a
    circular grid of ``M >= 2 length`` steps) by circulant embedding: ``x = Re(FFT(sqrt(lambda) * (z1 + i z2)))
    / sqrt(M)`` has covariance ``circulant(profile)``, whose top-left ``length x length`` block is the kernel."""
    n, size = profile.shape
    eigenvalues = torch.fft.fft(profile).real.clamp_min(0.0)
    noise = torch.complex(normal(g, n, size), normal(g, n, size))
    return (torch.fft.fft(eigenvalues.sqrt() * noise).real / math.sqrt(size))[:, :length]


def _stationary_profiles(n: int, length: int, rational: bool, g: torch.Generator) -> torch.Tensor:
    """Lag profiles ``[n, 2 length]`` of RBF kernels (or, with ``rational``, rational-quadratic ones with ``alpha``
    in 0.1, 1, 10) with length scales of 1-50 % of the series."""
    size = 2 * length
    lag = torch.arange(size, device=g.device, dtype=torch.float32)
    lag = torch.minimum(lag, size - lag).unsqueeze(0) / length  # circular distance, in series lengths
    scale = log_uniform(n, g, 0.01, 0.5)
    if not rational:
        return torch.exp(-0.5 * (lag / scale) ** 2)
    alpha = choice(n, g, _RQ_ALPHAS)
    return (1.0 + lag**2 / (2.0 * alpha * scale**2)) ** -alpha


def _paths(kind: str, n: int, length: int, g: torch.Generator) -> torch.Tensor:
    """``n`` zero-mean paths ``[n, length]`` of one random kernel of ``kind`` (a key of ``KINDS``)."""
    t = time_grid(length, g.device)
    if kind == "periodic":
        return periodic_paths(t, choice(n, g, PERIODS), randint(n, g, 0, len(_PERIODIC_LENGTH_SCALES)), g)
    if kind in ("rbf", "rational_quadratic"):
        return circulant_paths(_stationary_profiles(n, length, kind == "rational_quadratic", g), length, g)
    if kind == "linear":
        x = t / length
        return normal(g, n, 1) * (x - uniform(n, g, 0.0, 1.0)) + normal(g, n, 1) * bernoulli(n, g, 0.5)
    if kind == "white":
        return choice(n, g, _WHITE_LEVELS) * normal(g, n, length)
    return normal(g, n, 1).expand(n, length).clone()  # constant


def kernel_synth(n: int, length: int, g: torch.Generator) -> torch.Tensor:
    """``[n, length]`` KernelSynth series: ``j ~ U{1..5}`` random kernel terms joined left to right by random ``+``
    / ``*``, then scaled and shifted (``random_scale``).

    The terms of all series are grouped by kind (one host sync for the counts), so each kind's sampler runs once,
    on exactly the terms that use it, rather than every sampler on every term.
    """
    count = randint(n, g, 1, MAX_TERMS + 1)
    multiply = bernoulli(n, g, 0.5, MAX_TERMS)
    shares = constant(tuple(KINDS.values()), g.device)
    kind = torch.multinomial(shares, n * MAX_TERMS, replacement=True, generator=g).view(n, MAX_TERMS)
    active = torch.arange(MAX_TERMS, device=g.device).unsqueeze(0) < count
    kind = torch.where(active, kind, len(KINDS)).flatten()  # len(KINDS): an unused slot, no path needed
    sizes = torch.bincount(kind, minlength=len(KINDS) + 1).tolist()
    order = torch.argsort(kind, stable=True)
    terms = torch.zeros(n * MAX_TERMS, length, device=g.device)
    made = [_paths(name, size, length, g) for name, size in zip(KINDS, sizes, strict=False) if size]
    used = sum(sizes[: len(KINDS)])
    if used:
        terms[order[:used]] = torch.cat(made)
    terms = terms.view(n, MAX_TERMS, length)
    out = terms[:, 0]
    for slot in range(1, MAX_TERMS):
        term = terms[:, slot]
        joined = torch.where(multiply[:, slot : slot + 1], out * term, out + term)
        out = torch.where(count > slot, joined, out)
    return random_scale(out, g)
