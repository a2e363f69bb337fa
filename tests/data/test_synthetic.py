"""Tests for pipelines.data.synthetic: determinism, shapes, the kernel algebra, periodicity, TSMixup convexity."""

import itertools

import numpy as np
import pytest

from tsfm.pipelines.data.synthetic import (
    GENERATORS,
    KERNEL_BANK,
    CompositeKernel,
    ConstantKernel,
    LinearKernel,
    PeriodicKernel,
    RBFKernel,
    WhiteKernel,
    as_matrix,
    iter_kernel_synth,
    iter_synthetic_series,
    kernel_synth,
    random_kernel,
    sample_gp,
    synthetic_series,
    ts_mixup,
)

LENGTH = 256  # Cholesky cost grows as length³: tests stay short, the code is the same at 1024.


def _autocorrelation(x: np.ndarray, lag: int) -> float:
    return float(np.corrcoef(x[:-lag], x[lag:])[0, 1])


def test_kernel_synth_shape_dtype_and_determinism():
    first = kernel_synth(6, LENGTH, seed=3)
    assert first.shape == (6, LENGTH) and first.dtype == np.float32
    np.testing.assert_array_equal(first, kernel_synth(6, LENGTH, seed=3))
    assert not np.array_equal(first, kernel_synth(6, LENGTH, seed=4))


def test_series_are_index_addressable_and_the_stream_matches():
    many = kernel_synth(5, LENGTH, seed=11)
    np.testing.assert_array_equal(many[:2], kernel_synth(2, LENGTH, seed=11))
    np.testing.assert_array_equal(np.stack(list(itertools.islice(iter_kernel_synth(LENGTH, 11), 5))), many)
    np.testing.assert_array_equal(next(iter_kernel_synth(LENGTH, 11, start=3)), many[3])


def test_kernel_synth_is_finite_and_not_degenerate():
    series = kernel_synth(48, LENGTH, seed=0)
    assert np.isfinite(series).all()
    relative_std = series.std(axis=1) / (np.abs(series).mean(axis=1) + 1e-12)
    assert (relative_std > 1e-2).mean() >= 0.85
    # Different series, not one path repeated.
    assert len({round(float(s[0]), 6) for s in series}) > 40


@pytest.mark.parametrize("period", [7, 24, 30])
def test_periodic_samples_repeat_at_their_period(period):
    for seed in range(3):
        x = sample_gp(PeriodicKernel(period, 1.0), 512, np.random.default_rng(seed))
        assert _autocorrelation(x, period) > 0.99
        # A half-period shift of a periodic path with harmonics is far from a copy.
        assert _autocorrelation(x, period // 2) < 0.9


def test_composite_covariance_equals_the_matrix_algebra():
    periodic, rbf, line, white = PeriodicKernel(12, 0.5), RBFKernel(0.1), LinearKernel(0.5, 1.0), WhiteKernel(0.1)
    kernel = CompositeKernel((periodic, rbf, line, white), ("*", "+", "*"))
    expected = (as_matrix(periodic.covariance(64)) * as_matrix(rbf.covariance(64)) + line.covariance(64)) * np.diag(
        np.full(64, 0.1)
    )
    np.testing.assert_allclose(kernel.covariance(64), expected)
    stationary = CompositeKernel((periodic, ConstantKernel(2.0)), ("+",)).covariance(64)
    assert stationary.shape == (64,)  # stays a lag profile
    matrix = as_matrix(stationary)
    np.testing.assert_allclose(matrix, matrix.T)
    assert matrix[5, 17] == stationary[12] and matrix[17, 5] == stationary[12]


def test_bank_covariances_are_positive_semidefinite():
    for kernel in KERNEL_BANK:
        matrix = as_matrix(kernel.covariance(64))
        assert np.linalg.eigvalsh(matrix).min() > -1e-8 * max(1.0, np.abs(matrix).max()), kernel


def test_random_kernel_draws_one_to_five_terms():
    rng = np.random.default_rng(0)
    sizes = {len(random_kernel(rng).kernels) for _ in range(200)}
    assert sizes == {1, 2, 3, 4, 5}
    with pytest.raises(ValueError, match="ops"):
        CompositeKernel((RBFKernel(0.1), RBFKernel(0.2)), ("-",))


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_each_generator_gives_finite_series(name):
    series = synthetic_series(8, LENGTH, seed=1, mix={name: 1.0})
    assert series.shape == (8, LENGTH) and series.dtype == np.float32
    assert np.isfinite(series).all()
    assert (series.std(axis=1) > 0).mean() >= 0.75


def test_synthetic_series_determinism_and_stream():
    first = synthetic_series(10, LENGTH, seed=5)
    np.testing.assert_array_equal(first, synthetic_series(10, LENGTH, seed=5))
    np.testing.assert_array_equal(np.stack(list(itertools.islice(iter_synthetic_series(LENGTH, 5), 10))), first)


def test_intermittent_series_are_sparse_counts():
    series = synthetic_series(10, LENGTH, seed=2, mix={"intermittent": 1.0})
    assert (series >= 0).all() and np.array_equal(series, np.round(series))
    assert ((series == 0).mean(axis=1) > 0.3).all()


def test_bad_arguments_name_the_argument():
    with pytest.raises(ValueError, match="mix"):
        synthetic_series(2, LENGTH, seed=0, mix={"nope": 1.0})
    with pytest.raises(ValueError, match="mix"):
        synthetic_series(2, LENGTH, seed=0, mix={"trend": -1.0})
    with pytest.raises(ValueError, match="seed"):
        kernel_synth(2, LENGTH, seed=-1)
    with pytest.raises(ValueError, match="length"):
        kernel_synth(2, 1, seed=0)
    with pytest.raises(ValueError, match="n_series"):
        kernel_synth(-1, LENGTH, seed=0)


def test_ts_mixup_is_convex():
    # After mean-abs scaling a constant +2 becomes +1 and a constant -5 becomes -1: every mixture lies in [-1, 1],
    # single-series draws sit at the ends and real mixtures strictly inside.
    series = [np.full(300, 2.0), np.full(300, -5.0)]
    mixed = ts_mixup(series, 200, max_k=3, length=64, seed=0)
    assert mixed.shape == (200, 64) and mixed.dtype == np.float32
    assert (mixed >= -1 - 1e-6).all() and (mixed <= 1 + 1e-6).all()
    values = mixed[:, 0]
    assert ((values > -0.99) & (values < 0.99)).mean() > 0.3
    assert np.isclose(np.abs(values), 1.0).mean() > 0.1


def test_ts_mixup_with_k1_returns_scaled_windows_of_the_inputs():
    base = np.arange(1.0, 101.0)
    out = ts_mixup([base], 5, max_k=1, length=20, seed=1)
    for row in out:
        # The window base[s : s + 20] holds s+1 .. s+20, so its mean is s + 10.5 and neighbours differ by 1 / mean.
        start = round(1.0 / float(row[1] - row[0]) - 10.5)
        np.testing.assert_allclose(row, base[start : start + 20] / base[start : start + 20].mean(), rtol=1e-5)


def test_ts_mixup_pads_short_series_and_handles_nan():
    out = ts_mixup([np.array([1.0, np.nan, 3.0]), np.full(10, np.nan)], 4, length=8, seed=0)
    assert np.isnan(out[:, :5]).all() and np.isnan(out[:, 6]).all()
    assert np.isfinite(out[:, [5, 7]]).all()
    np.testing.assert_array_equal(out, ts_mixup([np.array([1.0, np.nan, 3.0])], 4, length=8, seed=0))


def test_ts_mixup_bad_arguments():
    with pytest.raises(ValueError, match="series_list"):
        ts_mixup([np.full(10, np.nan)], 2, length=8, seed=0)
    with pytest.raises(ValueError, match="max_k"):
        ts_mixup([np.ones(10)], 2, max_k=0, length=8, seed=0)
    with pytest.raises(ValueError, match="series_list"):
        ts_mixup([np.ones((2, 10))], 2, length=8, seed=0)
