"""Probe: centre each context on its recent level instead of its mean (an A/B on the CPU, not a package feature).

The default model's forecast drifts back toward the level its 2,048-step context held earlier (``benchmarks/
RESULTS.md``, twenty-second session: ``gefcom2012_load``, ``exchange_rate``; reading only the last 512 steps halves
the loss to Seasonal Naive there). The pipeline scales every context to zero mean over the whole context (DESIGN
§2.1), so a model unsure of the direction shrinks its forecast toward that mean: toward the past. This probe asks
whether a model trained with the centre at the *recent* level (the mean of the last patch's observed values; the
whole-context mean where that patch is empty; the spread as before) has less of that bias. It runs ``tsfm`` or one
of the scripts with :func:`tsfm.model.fit_scale` replaced, so training, validation inside training and every forecast
use the other centre; ``scripts/validation_forecast.py`` still scores in the context-mean units (its own
``fit_scale``), so both arms are judged alike.

    python scripts/probe_scale_center.py [--recent-steps 32] tsfm train --preset 1M ... --out runs/probe-centre/recent
    python scripts/probe_scale_center.py scripts/validation_forecast.py runs/probe-centre/recent/model ...
    python scripts/probe_scale_center.py scripts/eval_checkpoints.py runs/probe-centre/recent/model ...

Streams (``tsfm.stream``) keep the mean centre: a checkpoint trained here is for this probe only.
"""

from __future__ import annotations

import functools
import runpy
import sys
from pathlib import Path

import torch

import tsfm.model
from tsfm.scaling import ScaleParams, fit_scale

RECENT_STEPS = 32
"""The last patch: where the centre is taken (``--recent-steps`` changes it)."""


def fit_recent_scale(context: torch.Tensor, recent_steps: int = RECENT_STEPS) -> ScaleParams:
    """:func:`tsfm.scaling.fit_scale` with ``loc`` moved to the mean of the last ``recent_steps`` observed values
    (kept at the whole-context mean where none of them is observed); ``scale`` unchanged."""
    params, tail = fit_scale(context), context[..., -recent_steps:]
    seen = (~torch.isnan(tail)).any(dim=-1, keepdim=True)
    return ScaleParams(torch.where(seen, fit_scale(tail).loc, params.loc), params.scale)


def main(argv: list[str]) -> None:
    recent_steps = RECENT_STEPS
    if argv[:1] == ["--recent-steps"]:
        recent_steps, argv = int(argv[1]), argv[2:]
    if not argv or recent_steps < 1:
        sys.exit(__doc__)
    # the forward pass, forecasts and autoregressive re-reads
    tsfm.model.fit_scale = functools.partial(fit_recent_scale, recent_steps=recent_steps)
    if argv[0] == "tsfm":
        from tsfm.cli import main as tsfm_main

        sys.exit(tsfm_main(argv[1:]))
    script = Path(argv[0])
    sys.path.insert(0, str(script.resolve().parent))  # the scripts import their siblings
    sys.argv = argv
    runpy.run_path(str(script), run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
