"""The device-resident batch sampler: windows are honest cuts of the series, augmentations do what they say, and
batch ``s`` depends only on ``(seed, s)`` (the basis of exact resume)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from tsfm.pipelines.data.batches import BatchConfig, BatchSampler
from tsfm.pipelines.data.corpus import Corpus, CorpusError

PLAIN = dict(synthetic_share=0.0, mixup_prob=0.0, stride_prob=0.0, noise_prob=0.0, missing_prob=0.0,
             mask_ratio=0.0, pool_size=0)


def ramp_corpus(lengths=(300, 500, 90, 1000)) -> Corpus:
    """Series whose values encode (series, position) exactly: series i holds 10_000 * i + t."""
    corpus = Corpus()
    for i, n in enumerate(lengths):
        corpus.append(np.arange(n, dtype=np.float32) + 10_000 * i, f"set{i % 2}")
    return corpus


def walk_prior(n: int, length: int, g: torch.Generator) -> torch.Tensor:
    return torch.randn(n, length, generator=g, device=g.device).cumsum(1)


def config(**changes) -> BatchConfig:
    return BatchConfig(**{"batch_size": 32, "context_length": 128, "prediction_length": 32, "patch_size": 16,
                          "min_context": 4, **changes})


def test_each_window_names_the_series_it_was_cut_from():
    """``Batch.series`` is what validation breakdowns by dataset or frequency rely on; the ramp corpus encodes the
    series in every value (10_000 * i + t), and pool windows get an index past the real series."""
    batch = BatchSampler(config(**PLAIN), ramp_corpus(), seed=5).draw(0)
    last_observed = batch.context[:, -1]
    np.testing.assert_array_equal(batch.series.numpy(), (last_observed // 10_000).long().numpy())
    mixed = BatchSampler(config(**{**PLAIN, "synthetic_share": 0.5, "pool_size": 64, "pool_chunks": 4}), ramp_corpus(),
                         prior=walk_prior, seed=5).draw(0)
    synthetic = mixed.series >= 4
    assert synthetic.any() and (~synthetic).any() and mixed.series.shape == (32,)


def test_plain_windows_are_contiguous_cuts_with_left_padding():
    sampler = BatchSampler(config(**PLAIN), ramp_corpus(), seed=3)
    batch = sampler.draw(0)
    assert batch.context.shape == (32, 128) and batch.target.shape == (32, 32)
    assert batch.hidden_patches.shape == (32, 8) and not batch.hidden_patches.any()
    lengths = set()
    for context, target in zip(batch.context, batch.target, strict=True):
        observed = torch.isfinite(context)
        count = int(observed.sum())
        lengths.add(count)
        assert count >= 1 and observed[-count:].all() and not observed[:-count].any()  # NaN only on the left
        values = torch.cat([context[-count:], target[torch.isfinite(target)]])
        assert torch.all(values.diff() == 1)  # one series, consecutive steps, target right after the context
        series, t0 = divmod(int(values[0]), 10_000)
        n = (300, 500, 90, 1000)[series]
        assert t0 >= 0 and t0 + values.numel() <= n
    assert len(lengths) > 3  # random context lengths, not only the longest


def test_a_held_out_end_is_forecast_from_the_history_before_it():
    """A series scored from step 900 on (a covering split's held-out end): every window's first forecast step is at
    or after 900, and its context reaches back into the steps before, up to the full context length."""
    corpus = Corpus()
    corpus.append(np.arange(1000, dtype=np.float32), "set0", score_from=900)
    batch = BatchSampler(config(**PLAIN, batch_size=256), corpus, seed=1).draw(0)
    first_forecast = batch.target[:, 0]
    assert torch.isfinite(first_forecast).all() and (first_forecast >= 900).all()
    observed = torch.isfinite(batch.context).sum(1)
    assert observed.max() == 128  # long contexts: from the history, not from the 100 held-out steps alone
    assert (batch.context[:, -1] == first_forecast - 1).all()  # the context ends right before the forecast


def test_a_corpus_with_a_score_from_or_frequency_per_series_missing_is_refused():
    with pytest.raises(CorpusError, match="one score_from and one frequency per series"):
        Corpus(series=[np.zeros(10)], datasets=["a"], score_from=[0, 1])
    with pytest.raises(CorpusError, match="one score_from and one frequency per series"):
        Corpus(series=[np.zeros(10)], datasets=["a"], frequencies=["H", "D"])
    assert Corpus(series=[np.zeros(10)], datasets=["a"]).frequencies == [""]  # unknown unless given


def test_same_seed_and_step_give_the_same_batch_and_others_differ():
    make = lambda seed: BatchSampler(config(pool_size=64), ramp_corpus(), prior=walk_prior, seed=seed)  # noqa: E731
    a, b, c = make(0), make(0), make(1)
    first, again = a.draw(5), b.draw(5)
    for x, y in zip(first, again, strict=True):
        torch.testing.assert_close(x, y, equal_nan=True, rtol=0, atol=0)
    assert not torch.equal(torch.nan_to_num(first.context), torch.nan_to_num(a.draw(6).context))
    assert not torch.equal(torch.nan_to_num(first.context), torch.nan_to_num(c.draw(5).context))


def test_a_fresh_sampler_reaches_the_pool_of_a_long_run():
    """The pool at step s is a function of (seed, s): jumping straight to s equals refreshing step by step."""
    cfg = config(pool_size=64, pool_chunks=4, refresh_every=2)
    running = BatchSampler(cfg, ramp_corpus(), prior=walk_prior, seed=7)
    for step in range(23):
        running.draw(step)
    fresh = BatchSampler(cfg, ramp_corpus(), prior=walk_prior, seed=7)
    for x, y in zip(running.draw(23), fresh.draw(23), strict=True):
        torch.testing.assert_close(x, y, equal_nan=True, rtol=0, atol=0)
    torch.testing.assert_close(running.values, fresh.values, equal_nan=True, rtol=0, atol=0)


def test_pool_is_refreshed_chunk_by_chunk():
    cfg = config(pool_size=64, pool_chunks=4, refresh_every=2, synthetic_share=1.0)
    sampler = BatchSampler(cfg, None, prior=walk_prior, seed=0)
    sampler.sync_pool(0)
    before = sampler.values.clone().view(64, -1)
    sampler.sync_pool(2)  # round 1 refreshes chunk 0 only
    after = sampler.values.view(64, -1)
    changed = (before != after).any(dim=1)
    assert changed[:16].all() and not changed[16:].any()


def test_synthetic_share_splits_the_draws():
    corpus = Corpus()
    corpus.append(np.full(400, -5.0, dtype=np.float32), "real")

    def positive_prior(n, length, g):
        return 5.0 + torch.rand(n, length, generator=g, device=g.device)

    cfg = config(**{**PLAIN, "synthetic_share": 0.25, "pool_size": 64, "batch_size": 4000})
    batch = BatchSampler(cfg, corpus, prior=positive_prior, seed=0).draw(0)
    synthetic_rows = (torch.nan_to_num(batch.context, nan=0.0).amax(dim=1) > 0).float().mean()
    assert abs(float(synthetic_rows) - 0.25) < 0.03


def test_mixup_is_a_convex_mix_of_mean_abs_scaled_windows():
    """Constant positive series scale to exactly 1, so every mix of them is 1 wherever something is observed."""
    corpus = Corpus()
    for i, level in enumerate((2.0, 30.0, 700.0)):
        corpus.append(np.full(400, level, dtype=np.float32), f"set{i}")
    cfg = config(**{**PLAIN, "mixup_prob": 1.0, "mixup_max_k": 3})
    batch = BatchSampler(cfg, corpus, seed=0).draw(0)
    observed = batch.context[torch.isfinite(batch.context)]
    torch.testing.assert_close(observed, torch.ones_like(observed))


def test_stride_reads_every_s_th_step():
    cfg = config(**{**PLAIN, "stride_prob": 1.0, "max_stride": 4, "batch_size": 64, "full_context_prob": 1.0})
    batch = BatchSampler(cfg, ramp_corpus((5000,)), seed=0).draw(0)
    steps = set()
    for context in batch.context:
        diffs = context[torch.isfinite(context)].diff()
        assert torch.all(diffs == diffs[0])
        steps.add(int(diffs[0]))
    assert steps <= {2, 3, 4} and len(steps) > 1


def test_noise_missing_and_masking_shares():
    cfg = config(**{**PLAIN, "noise_prob": 1.0, "missing_prob": 1.0, "missing_max": 0.5, "mask_ratio": 0.25,
                    "max_mask_run": 2, "batch_size": 512, "full_context_prob": 1.0})
    batch = BatchSampler(cfg, ramp_corpus((5000,)), seed=0).draw(0)
    observed = torch.isfinite(batch.context)
    assert 0.6 < observed.float().mean() < 0.9  # about a quarter of the steps dropped on average
    diffs = batch.context.diff(dim=1)
    assert (diffs[torch.isfinite(diffs)] != 1).float().mean() > 0.5  # noise moved the ramp's steps
    assert 0.15 < batch.hidden_patches.float().mean() < 0.3


def test_series_with_leading_nans_are_cut_after_their_first_value():
    corpus = Corpus()
    values = np.full(600, np.nan, dtype=np.float32)
    values[500:] = np.arange(100)
    corpus.append(values, "late")
    batch = BatchSampler(config(**{**PLAIN, "batch_size": 256}), corpus, seed=0).draw(0)
    assert torch.isfinite(batch.context).any(dim=1).all()


@pytest.mark.parametrize("change, match", [
    ({"context_length": 100}, "multiple of patch_size"),
    ({"mask_ratio": 1.0}, "mask_ratio"),
    ({"batch_size": 0}, "batch_size"),
    ({"pool_size": 10, "pool_chunks": 4}, "pool_size"),
    ({"synthetic_share": 1.5}, "synthetic_share"),
])
def test_bad_settings_are_refused(change, match):
    with pytest.raises(ValueError, match=match):
        config(**change)


def test_nothing_to_draw_from_is_refused():
    with pytest.raises(ValueError, match="needs real series"):
        BatchSampler(config(), None, prior=None)


def test_a_prior_of_the_wrong_shape_is_refused():
    cfg = dataclasses.replace(config(), pool_size=16, pool_chunks=1)
    sampler = BatchSampler(cfg, None, prior=lambda n, length, g: torch.zeros(n, length + 1), seed=0)
    with pytest.raises(ValueError, match="prior returned shape"):
        sampler.draw(0)
