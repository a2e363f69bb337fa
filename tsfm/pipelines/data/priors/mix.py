"""The prior mix: which generator families exist (``PRIORS``), their default shares (``DEFAULT_PRIOR_MIX``), and
``sample_priors``, the one entry point the training pool calls.

Randomness is organised in blocks of ``block`` series (``BLOCK`` by default): one 62-bit seed is drawn from the
caller's generator, block ``b`` gets its own generator seeded by ``(seed, b)``, draws the family of each of its series
and makes each family's share in one vectorised call. So memory is bounded by a block (whatever ``n`` is), the host is
synchronised once per block (the family counts), and a call for ``n`` series begins with exactly the series of a call
for fewer whole blocks from the same generator state.

The block size is also the GPU's cost per series: every family is called once per block, and a block of the training
mix runs about 1,600 operators that launch a kernel, whatever its size (measured on the CPU: 6,308 for 1,024 series of
2,816 steps in blocks of 256, 1,575 in one block of 1,024). The training pool refreshes 1,024 series every 4 steps, so
with blocks of 256 its refreshes launched about 1,600 kernels per training step, two thirds of the step's 2,475 (the
forty-fifth session's profile), and the GPU waited while the host launched them. A larger block draws other series
from the same seed (the same distribution) and holds more memory at once (in proportion: see ``BLOCK``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping

import torch

from .common import constant
from .intermittent import intermittent
from .kernel_synth import kernel_synth
from .level_shift import level_shift
from .oscillator import oscillator
from .random_walk import random_walk
from .repeat import repeat
from .sde import sde
from .seasonal import seasonal
from .short import short
from .spikes import spikes
from .waves import waves
from .weather import weather

__all__ = ["BLOCK", "DEFAULT_PRIOR_MIX", "PRIORS", "Prior", "check_mix", "sample_priors"]

#: ``prior(n, length, generator) -> float32 [n, length]`` on ``generator.device``, NaN only as left padding.
Prior = Callable[[int, int, torch.Generator], torch.Tensor]

#: Every generator family by name (one module each).
PRIORS: dict[str, Prior] = {
    "kernel_synth": kernel_synth,
    "seasonal": seasonal,
    "intermittent": intermittent,
    "short": short,
    "level_shift": level_shift,
    "spikes": spikes,
    "sde": sde,
    "waves": waves,
    "oscillator": oscillator,
    "random_walk": random_walk,
    "repeat": repeat,
    "weather": weather,
}

#: Default shares (normalised when used). KernelSynth and calendar seasonality carry most of the signal (the
#: benchmark is mostly seasonal, its weakest spots 5-minute and hourly data); the others add the shapes a GP prior
#: rarely produces and the benchmark has (counts, short yearly-like histories, steps, spikes, walks). ``repeat`` (exact
#: cycles) is opt-in (``--prior-mix repeat=SHARE``) until a run with it has been judged on validation; so is
#: ``weather`` (a calendar cycle with a per-cycle AR(1) level and amplitude; not yet trained on).
DEFAULT_PRIOR_MIX: dict[str, float] = {
    "kernel_synth": 0.22,
    "seasonal": 0.22,
    "intermittent": 0.08,
    "short": 0.08,
    "level_shift": 0.07,
    "spikes": 0.05,
    "sde": 0.08,
    "waves": 0.06,
    "oscillator": 0.05,
    "random_walk": 0.09,
}

#: Series per block: the unit of randomness and of memory (KernelSynth at 2,304 steps: ~50 MB per block).
BLOCK = 256


def check_mix(mix: Mapping[str, float]) -> tuple[list[str], list[float]]:
    """The families of ``mix`` with a positive share, in registry order, and their shares; ``ValueError`` for an
    unknown family, a negative share or no positive share."""
    unknown = sorted(set(mix) - set(PRIORS))
    shares = [float(share) for share in mix.values()]
    if not mix or unknown or any(not share >= 0 for share in shares) or sum(shares) <= 0:
        raise ValueError(f"mix must map names from {sorted(PRIORS)} to non-negative shares with a positive sum, "
                         f"got {dict(mix)}" + (f" (unknown: {unknown})" if unknown else ""))
    names = [name for name in PRIORS if mix.get(name, 0.0) > 0]  # registry order: stable whatever the dict order
    return names, [float(mix[name]) for name in names]


def _block_generator(seed: int, block: int, device: torch.device) -> torch.Generator:
    digest = hashlib.sha256(f"priors:{seed}:{block}".encode()).digest()
    generator = torch.Generator(device=device)
    generator.manual_seed(int.from_bytes(digest[:8], "little") >> 1)
    return generator


def _same_device(asked: torch.device, actual: torch.device) -> bool:
    """``"cuda"`` matches the generator's ``cuda:0``; an explicit index must match."""
    return asked.type == actual.type and (asked.index is None or asked.index == actual.index)


def sample_priors(n: int, length: int, generator: torch.Generator, mix: Mapping[str, float] = DEFAULT_PRIOR_MIX,
                  device: torch.device | str | None = None, block: int = BLOCK) -> torch.Tensor:
    """``n`` synthetic series of ``length`` steps from the families in ``mix``: float32 ``[n, length]``.

    Args:
        n: number of series (>= 0).
        length: steps per series (>= 2).
        generator: all randomness comes from it (one draw is taken); its device is where the series are made.
        mix: family name (``PRIORS``) -> share; shares are normalised.
        device: must be ``generator.device`` if given (kept explicit for callers that pass both).
        block: series per block (see the module docstring): larger is fewer kernel launches per series and more
            memory at once; another block size draws other series.

    Returns:
        ``[n, length]`` float32 on the generator's device. NaN only as left padding (short series end at the
        right edge); every other value is finite. Deterministic in the generator's state.

    Example:
        >>> g = torch.Generator().manual_seed(0)
        >>> sample_priors(4, 64, g).shape
        torch.Size([4, 64])
    """
    if n < 0 or length < 2:
        raise ValueError(f"need n >= 0 and length >= 2, got n={n}, length={length}")
    if isinstance(block, bool) or not isinstance(block, int) or block < 1:
        raise ValueError(f"block must be a positive integer, got {block!r}")
    if device is not None and not _same_device(torch.device(device), generator.device):
        raise ValueError(f"device {device} differs from the generator's ({generator.device})")
    names, shares = check_mix(mix)
    device = generator.device
    seed = int(torch.randint(0, 2**62, (1,), generator=generator, device=device))
    weights = constant(tuple(shares), device)
    out = torch.empty(n, length, dtype=torch.float32, device=device)
    for index, start in enumerate(range(0, n, block)):
        size = min(block, n - start)
        g = _block_generator(seed, index, device)
        family = torch.multinomial(weights, size, replacement=True, generator=g)
        counts = torch.bincount(family, minlength=len(names)).tolist()  # the block's one host sync
        parts = [PRIORS[name](count, length, g) for name, count in zip(names, counts, strict=True) if count]
        order = torch.argsort(family, stable=True)  # rows of family 0 first, then family 1, ...
        rows = torch.empty(size, length, dtype=torch.float32, device=device)
        rows[order] = torch.cat(parts).to(torch.float32)
        out[start : start + size] = rows
    return out
