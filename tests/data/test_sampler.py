"""Tests for pipelines.data.sampler: window layout, padding, determinism, workers, argument checks."""

import itertools

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from tsfm.pipelines.data.sampler import SyntheticStream, WindowSampler, draw_window

CONTEXT, HORIZON, MIN_CONTEXT = 64, 16, 8


def _sampler(series, **kwargs) -> WindowSampler:
    options = dict(context_length=CONTEXT, prediction_length=HORIZON, min_context=MIN_CONTEXT, patch_size=8, seed=0)
    return WindowSampler(series, **{**options, **kwargs})


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal, NaN included (torch.equal says NaN != NaN)."""
    return torch.equal(a.nan_to_num(-1e9), b.nan_to_num(-1e9))


def _take(dataset, n: int) -> list[dict[str, torch.Tensor]]:
    return list(itertools.islice(iter(dataset), n))


def test_target_directly_follows_the_context_on_an_arange_series():
    series = np.arange(1000, dtype=np.float32)
    for window in _take(_sampler([series]), 300):
        context, target = window["context"].numpy(), window["target"].numpy()
        observed = context[np.isfinite(context)]
        assert observed.size >= MIN_CONTEXT
        assert np.isnan(context[: CONTEXT - observed.size]).all()  # padding only on the left
        np.testing.assert_array_equal(np.diff(observed), 1.0)  # a contiguous slice of the series
        finite_target = target[np.isfinite(target)]
        np.testing.assert_array_equal(finite_target, observed[-1] + 1 + np.arange(finite_target.size))


def test_shapes_dtypes_and_default_collate():
    loader = DataLoader(_sampler([np.arange(300.0), np.random.default_rng(0).normal(size=90)]), batch_size=5)
    batch = next(iter(loader))
    assert set(batch) == {"context", "target"}
    assert batch["context"].shape == (5, CONTEXT) and batch["context"].dtype == torch.float32
    assert batch["target"].shape == (5, HORIZON) and batch["target"].dtype == torch.float32


def test_short_series_give_left_padded_contexts_and_nan_targets_past_the_end():
    series = np.arange(20, dtype=np.float32)  # shorter than the context: every context is padded
    windows = _take(_sampler([series]), 200)
    padded = [int(torch.isnan(w["context"]).sum()) for w in windows]
    assert min(padded) >= CONTEXT - 19
    assert any(torch.isnan(w["target"][-1]) for w in windows)  # the target runs past the end of the series
    assert all(torch.isfinite(w["target"][0]) for w in windows)


def test_context_lengths_vary_and_include_the_full_context():
    sizes = [int(torch.isfinite(w["context"]).sum()) for w in _take(_sampler([np.arange(5000.0)]), 400)]
    assert min(sizes) < CONTEXT // 2 and max(sizes) == CONTEXT
    assert sizes.count(CONTEXT) > 100  # full_context_prob = 0.5


def test_target_always_has_an_observed_value_in_gappy_series():
    series = np.full(2000, np.nan)
    series[::97] = 1.0  # one observation every 97 steps: most cut points have an empty target
    for window in _take(_sampler([series]), 200):
        assert torch.isfinite(window["target"]).any()


def test_short_series_are_skipped_and_weights_are_respected():
    too_short = -np.ones(MIN_CONTEXT)  # needs MIN_CONTEXT + 1 steps
    series = [too_short, np.zeros(100), np.ones(100)]
    values = {float(w["target"][0]) for w in _take(_sampler(series), 100)}
    assert values == {0.0, 1.0}
    values = {float(w["target"][0]) for w in _take(_sampler(series, weights=[1.0, 0.0, 1.0]), 100)}
    assert values == {1.0}


def test_same_seed_same_stream_other_seed_other_stream():
    series = [np.arange(3000.0), np.arange(500.0) * 2]

    def first(seed: int) -> torch.Tensor:
        return torch.stack([w["target"] for w in _take(_sampler(series, seed=seed), 20)])

    assert _same(first(1), first(1))
    assert not _same(first(1), first(2))


def test_set_epoch_changes_the_stream():
    sampler = _sampler([np.arange(3000.0)])
    before = torch.stack([w["target"] for w in _take(sampler, 10)])
    sampler.set_epoch(1)
    assert not _same(before, torch.stack([w["target"] for w in _take(sampler, 10)]))


def test_two_workers_draw_distinct_windows_and_split_the_epoch():
    sampler = _sampler([np.arange(100_000.0)], samples_per_epoch=40)
    loader = DataLoader(sampler, batch_size=10, num_workers=2)
    batches = [batch["target"][:, 0] for batch in loader]
    assert len(batches) == 4 and sum(b.numel() for b in batches) == 40
    starts = torch.cat(batches).tolist()
    assert len(set(starts)) == 40  # identical worker streams would repeat every window
    assert not _same(batches[0], batches[1])


def test_draw_window_respects_min_context_near_the_start():
    rng = np.random.default_rng(0)
    series = np.arange(MIN_CONTEXT + 1, dtype=np.float32)  # the only cut point is MIN_CONTEXT
    context, target = draw_window(
        series, rng, context_length=CONTEXT, prediction_length=HORIZON, min_context=MIN_CONTEXT
    )
    np.testing.assert_array_equal(context[-MIN_CONTEXT:], np.arange(MIN_CONTEXT))
    assert target[0] == MIN_CONTEXT and np.isnan(target[1:]).all()


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"context_length": 0}, "context_length"),
        ({"context_length": 60}, "context_length"),  # not a multiple of patch_size=8
        ({"prediction_length": 0}, "prediction_length"),
        ({"min_context": 0}, "min_context"),
        ({"min_context": CONTEXT + 8}, "min_context"),
        ({"patch_size": 0}, "patch_size"),
        ({"seed": -1}, "seed"),
        ({"weights": [1.0]}, "weights"),
        ({"weights": [1.0, -1.0]}, "weights"),
        ({"full_context_prob": 1.5}, "full_context_prob"),
        ({"samples_per_epoch": -1}, "samples_per_epoch"),
    ],
)
def test_bad_arguments_name_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=name):
        _sampler([np.arange(100.0), np.arange(50.0)], **kwargs)


def test_bad_series_name_the_argument():
    with pytest.raises(ValueError, match=r"series\[1\]"):
        _sampler([np.arange(100.0), np.ones((2, 50))])
    with pytest.raises(ValueError, match="series"):
        _sampler([np.arange(MIN_CONTEXT), np.full(100, np.nan)])


def _stream(**kwargs) -> SyntheticStream:
    options = dict(
        context_length=CONTEXT,
        prediction_length=HORIZON,
        min_context=MIN_CONTEXT,
        patch_size=8,
        seed=0,
        length=128,
        pool_size=6,
        initial_pool=2,
        grow_every=2,
        refresh_every=3,
    )
    return SyntheticStream(**{**options, **kwargs})


def test_synthetic_stream_windows_shapes_and_determinism():
    first = _take(_stream(), 40)
    assert all(w["context"].shape == (CONTEXT,) and w["target"].shape == (HORIZON,) for w in first)
    assert all(w["context"].dtype == torch.float32 and torch.isfinite(w["target"][0]) for w in first)
    again = _take(_stream(), 40)
    assert all(_same(a["target"], b["target"]) for a, b in zip(first, again, strict=True))
    other = _take(_stream(seed=1), 40)
    assert not all(_same(a["target"], b["target"]) for a, b in zip(first, other, strict=True))


def test_synthetic_stream_pool_grows_and_refreshes(monkeypatch):
    pools: list[list[np.ndarray]] = []
    original = SyntheticStream._update_pool

    def spy(self, pool, fresh, drawn, rng):
        original(self, pool, fresh, drawn, rng)
        pools.append([p.copy() for p in pool])

    monkeypatch.setattr(SyntheticStream, "_update_pool", spy)
    _take(_stream(mix={"random_walk": 1.0}), 40)
    assert len(pools[0]) == 2 and len(pools[-1]) == 6  # started small, grew to pool_size
    full = [p for p in pools if len(p) == 6]
    first_ids = {p.tobytes() for p in full[0]}
    assert {p.tobytes() for p in full[-1]} != first_ids  # members were replaced by fresh series


def test_synthetic_stream_workers_differ():
    loader = DataLoader(_stream(samples_per_epoch=16), batch_size=8, num_workers=2)
    first, second = (batch["context"] for batch in loader)
    assert not _same(first, second)


def test_synthetic_stream_bad_arguments():
    with pytest.raises(ValueError, match="pool_size"):
        _stream(pool_size=0)
    with pytest.raises(ValueError, match="length"):
        _stream(length=MIN_CONTEXT)
    with pytest.raises(ValueError, match="mix"):
        _stream(mix={"nope": 1.0})
