"""Synthetic priors for pretraining, made on the device: one module per generator family, mixed by ``sample_priors``.

Families (see ``reports/priors/README.md`` for pictures and the sources of the ideas): ``kernel_synth`` (Chronos'
KernelSynth, sampled spectrally), ``seasonal`` (trend x calendar seasonality x noise, ForecastPFN / Mamba4Cast),
``intermittent`` (Croston-like counts), ``short`` (yearly / quarterly-like histories of 10-60 points) and more.
Every family is ``prior(n, length, generator) -> float32 [n, length]`` in vectorised torch on the generator's device.
This package knows nothing of windows or batches (``tsfm.pipelines.data.batches`` cuts those).
"""

from .mix import BLOCK, DEFAULT_PRIOR_MIX, PRIORS, Prior, check_mix, sample_priors

__all__ = ["BLOCK", "DEFAULT_PRIOR_MIX", "PRIORS", "Prior", "check_mix", "sample_priors"]
