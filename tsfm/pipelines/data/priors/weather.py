"""A calendar cycle whose level and amplitude wander from one cycle to the next: weather on a daily shape.

The benchmark's near-periodic series (a 5-minute temperature sensor, hourly loads, `m4_hourly`) repeat one shape
every day, but each day a little warmer or cooler, stronger or weaker, than the day before, and the next day is more
like today than like last week. The other families do not draw that: ``repeat`` copies a cycle exactly (training on
four times its share made the model copy clean cycles 20% closer and the benchmark worse: ``benchmarks/RESULTS.md``,
thirty-fourth session), ``seasonal`` adds white noise to a fixed cycle, ``kernel_synth``'s periodic kernels have no
per-cycle persistence. Here each series is one random profile (``random_season``; sometimes cut flat below a
threshold, as nights are) with a calendar period, multiplied by an amplitude and shifted by a level that are AR(1)
paths over cycles (persistence ``phi`` per series), interpolated linearly within a cycle so the series has no jump
at the cycle's boundary, plus a little noise.
"""

from __future__ import annotations

import torch

from .common import (
    CALENDARS,
    ar1_filter,
    bernoulli,
    choice,
    log_uniform,
    normal,
    random_scale,
    random_season,
    time_grid,
    uniform,
)

__all__ = ["weather"]


def weather(n: int, length: int, g: torch.Generator, *, calendars: tuple[str, ...] | None = None,
            persistence: tuple[float, float] = (0.3, 0.97),
            level_step: tuple[float, float] = (0.02, 0.5), amplitude_step: tuple[float, float] = (0.02, 0.3),
            noise: tuple[float, float] = (1e-3, 0.05)) -> torch.Tensor:
    """``[n, length]`` series of a calendar cycle with a per-cycle AR(1) level and amplitude.

    Args:
        calendars: names of ``CALENDARS`` whose main cycle a series takes (default: all).
        persistence: range of each series' AR(1) coefficient over cycles (uniform).
        level_step: range of the level's shock per cycle, relative to the cycle's peak (log-uniform).
        amplitude_step: range of the log-amplitude's shock per cycle (log-uniform).
        noise: range of the step-to-step noise level, relative to the cycle's peak (log-uniform).
    """
    t = time_grid(length, g.device)
    period = choice(n, g, [CALENDARS[name][0] for name in (calendars or tuple(CALENDARS))])
    clock = t + uniform(n, g, 0.0, 1.0) * period  # where in its cycle the series begins
    shape = random_season(clock, period, g, decay=(0.3, 2.0))
    flat = bernoulli(n, g, 0.4)  # a floor: nights of a temperature curve, hours of no load
    shape = torch.where(flat, torch.maximum(shape, uniform(n, g, -0.6, 0.3)), shape)
    # one level and one amplitude per cycle, as AR(1) paths over the cycles the longest-period series spans
    cycles = int(torch.ceil((length + period.max()) / period.min()).item()) + 2
    phi = uniform(n, g, *persistence)
    level = ar1_filter(normal(g, n, cycles) * log_uniform(n, g, *level_step), phi)
    amplitude = torch.exp(ar1_filter(normal(g, n, cycles) * log_uniform(n, g, *amplitude_step), phi))
    position = clock / period
    index = position.floor().long().clamp(max=cycles - 2)
    frac = position - position.floor()

    def along(path: torch.Tensor) -> torch.Tensor:
        """A per-cycle path read at every step, linearly between the cycles' values."""
        return torch.lerp(torch.gather(path, 1, index), torch.gather(path, 1, index + 1), frac)

    series = along(amplitude) * shape + along(level) + log_uniform(n, g, *noise) * normal(g, n, length)
    return random_scale(series, g)
