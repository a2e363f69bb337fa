"""The synthetic priors: every family has the right shape, is deterministic and finite where observed, and shows the
property it exists for; the mix respects its shares and is built block by block."""

from __future__ import annotations

import math

import pytest
import torch

from tsfm.pipelines.data.priors import BLOCK, DEFAULT_PRIOR_MIX, PRIORS, sample_priors
from tsfm.pipelines.data.priors.common import ar1_filter
from tsfm.pipelines.data.priors.intermittent import intermittent
from tsfm.pipelines.data.priors.kernel_synth import circulant_paths, kernel_synth, periodic_paths
from tsfm.pipelines.data.priors.level_shift import level_shift
from tsfm.pipelines.data.priors.oscillator import oscillator
from tsfm.pipelines.data.priors.random_walk import random_walk
from tsfm.pipelines.data.priors.repeat import repeat
from tsfm.pipelines.data.priors.sde import gbm_paths, ou_paths
from tsfm.pipelines.data.priors.seasonal import seasonal
from tsfm.pipelines.data.priors.short import short
from tsfm.pipelines.data.priors.spikes import spikes
from tsfm.pipelines.data.priors.waves import waves
from tsfm.pipelines.data.priors.weather import weather

LENGTH = 512


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def autocorrelation(x: torch.Tensor, lag: int) -> torch.Tensor:
    """Lag-``lag`` autocorrelation of each row of ``x [n, L]`` (rows standardised over their length)."""
    z = (x - x.mean(dim=1, keepdim=True)) / x.std(dim=1, keepdim=True).clamp_min(1e-12)
    return (z[:, lag:] * z[:, :-lag]).mean(dim=1)


# ---------------------------------------------------------------------------------------------- every family --


@pytest.mark.parametrize("name", sorted(PRIORS))
def test_every_family_has_shape_dtype_and_finite_observed_values(name):
    x = PRIORS[name](40, LENGTH, gen())
    assert x.shape == (40, LENGTH) and x.dtype == torch.float32
    observed = torch.isfinite(x)
    assert not x.isinf().any()
    counts = observed.sum(dim=1)
    assert (counts >= 1).all()
    for row, count in zip(observed, counts.tolist(), strict=True):  # NaN only as left padding
        assert row[LENGTH - count :].all()


@pytest.mark.parametrize("name", sorted(PRIORS))
def test_every_family_is_deterministic_in_the_generator(name):
    a, b = PRIORS[name](16, LENGTH, gen(5)), PRIORS[name](16, LENGTH, gen(5))
    c = PRIORS[name](16, LENGTH, gen(6))
    assert torch.equal(a.nan_to_num(1e30), b.nan_to_num(1e30))
    assert not torch.equal(a.nan_to_num(1e30), c.nan_to_num(1e30))


@pytest.mark.parametrize("name", sorted(PRIORS))
def test_every_family_works_at_tiny_lengths(name):
    x = PRIORS[name](3, 8, gen())
    assert x.shape == (3, 8) and torch.isfinite(x[:, -1]).all()


# ------------------------------------------------------------------------------------------ defining properties --


def test_periodic_kernel_paths_have_the_kernel_as_covariance():
    """Exact spectral sampling: the empirical covariance of many paths matches exp(-2 sin^2(pi d / p) / l^2)."""
    n, period = 4000, 24.0
    t = torch.arange(96, dtype=torch.float32).unsqueeze(0)
    x = periodic_paths(t, torch.full((n, 1), period), torch.ones(n, 1, dtype=torch.int64), gen())  # l = 1
    for lag in (0, 3, 6, 12, 24):
        empirical = float((x[:, 10] * x[:, 10 + lag]).mean())
        expected = math.exp(-2.0 * math.sin(math.pi * lag / period) ** 2)
        assert abs(empirical - expected) < 0.06, (lag, empirical, expected)


def test_circulant_paths_have_the_rbf_covariance():
    n, length, scale = 4000, 200, 10.0
    lag = torch.arange(2 * length, dtype=torch.float32)
    lag = torch.minimum(lag, 2 * length - lag)
    profile = torch.exp(-0.5 * (lag / scale) ** 2).expand(n, -1)
    x = circulant_paths(profile, length, gen())
    for d in (0, 5, 10, 20, 40):
        empirical = float((x[:, 50] * x[:, 50 + d]).mean())
        assert abs(empirical - math.exp(-0.5 * (d / scale) ** 2)) < 0.06, d


def test_kernel_synth_is_a_mix_of_smooth_and_rough_paths_of_many_scales():
    x = kernel_synth(200, LENGTH, gen())
    smooth = autocorrelation(x, 1) > 0.95
    assert 0.2 < float(smooth.float().mean()) < 0.95  # both smooth GP paths and noisy compositions
    spread = x.std(dim=1)
    assert float(spread.max() / spread.min()) > 1e3  # random scales across orders of magnitude


@pytest.mark.parametrize(("calendar", "period"), [("hourly", 24), ("5min", 288), ("monthly", 12)])
def test_seasonal_series_peak_in_autocorrelation_at_the_calendar_period(calendar, period):
    length = 4 * period if period > 100 else LENGTH
    x = seasonal(64, length, gen(), calendars=(calendar,), noise=(0.01, 0.02))
    detrended = x - torch.linspace(0, 1, length) * (x[:, -period:].mean(1, keepdim=True) - x[:, :period].mean(
        1, keepdim=True))  # the trend would make every lag look alike
    at_period = autocorrelation(detrended, period)
    off_period = torch.stack([autocorrelation(detrended, lag) for lag in range(period // 4, 3 * period // 4)])
    assert float((at_period > off_period.max(dim=0).values).float().mean()) > 0.9


def test_intermittent_series_are_counts_with_many_zeros():
    x = intermittent(200, LENGTH, gen())
    assert (x >= 0).all() and torch.equal(x, x.round())
    zero_share = (x == 0).float().mean(dim=1)
    assert float(zero_share.median()) > 0.5 and (zero_share < 1).float().mean() > 0.95
    assert (x > 1).any()  # not just 0/1 indicators


def test_short_series_have_the_stated_number_of_observations_at_the_right_edge():
    x = short(50, LENGTH, gen(), min_observed=25, max_observed=25)
    assert (torch.isfinite(x).sum(dim=1) == 25).all() and torch.isfinite(x[:, -25:]).all()
    counts = torch.isfinite(short(400, LENGTH, gen())).sum(dim=1)
    assert int(counts.min()) == 10 and int(counts.max()) == 60


def test_ar1_filter_is_the_recursion():
    shocks, phi = torch.randn(3, 50, generator=gen()), torch.tensor([[0.0], [0.7], [1.0]])
    expected = shocks.clone()
    for t in range(1, 50):
        expected[:, t] += phi[:, 0] * expected[:, t - 1]
    assert torch.allclose(ar1_filter(shocks, phi), expected, atol=1e-4)


# ------------------------------------------------------------------------------------------------------ mix --


def test_sample_priors_shape_determinism_and_finiteness():
    a = sample_priors(300, LENGTH, gen(1))
    b = sample_priors(300, LENGTH, gen(1))
    assert a.shape == (300, LENGTH) and a.dtype == torch.float32
    assert torch.equal(a.nan_to_num(1e30), b.nan_to_num(1e30))
    assert not torch.equal(a.nan_to_num(1e30), sample_priors(300, LENGTH, gen(2)).nan_to_num(1e30))
    assert torch.isfinite(a[:, -1]).all()


def test_sample_priors_respects_the_mix_weights():
    """Short series (<= 60 observed of 512) and intermittent ones (integers with zeros) are told apart exactly."""
    x = sample_priors(2000, LENGTH, gen(), mix={"short": 0.3, "intermittent": 0.7})
    is_short = torch.isnan(x[:, 0])
    assert abs(float(is_short.float().mean()) - 0.3) < 0.04
    counts = x[~is_short]
    assert (counts >= 0).all() and torch.equal(counts, counts.round())


def test_sample_priors_in_blocks_is_the_same_as_one_call():
    """A call is made block by block: a longer call from the same generator state starts with the same series."""
    one = sample_priors(2 * BLOCK, 64, gen(3))
    longer = sample_priors(3 * BLOCK + 17, 64, gen(3))
    assert torch.equal(one.nan_to_num(1e30), longer[: 2 * BLOCK].nan_to_num(1e30))


def test_a_larger_block_draws_other_series_of_the_same_mix_with_fewer_operators():
    """Every family is called once per block, so one block of 4 x BLOCK series runs about a quarter of the operators
    (on a GPU, kernel launches) of four blocks; the series are other draws of the same mix, as deterministic."""
    from torch.profiler import ProfilerActivity, profile

    def operators(block: int) -> tuple[int, torch.Tensor]:
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            series = sample_priors(4 * BLOCK, 64, gen(5), block=block)
        outer = [e for e in prof.events() if e.name.startswith("aten::")
                 and (e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::"))]
        return len(outer), series

    small_count, small = operators(BLOCK)
    large_count, large = operators(4 * BLOCK)
    assert large_count < 0.4 * small_count
    assert large.shape == small.shape and torch.isfinite(large[:, -1]).all()
    assert not torch.equal(large.nan_to_num(1e30), small.nan_to_num(1e30))
    assert torch.equal(large.nan_to_num(1e30), sample_priors(4 * BLOCK, 64, gen(5), block=4 * BLOCK).nan_to_num(1e30))


def test_sample_priors_refuses_bad_arguments():
    for block in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="block must be a positive integer"):
            sample_priors(4, 64, gen(), block=block)
    with pytest.raises(ValueError, match="unknown"):
        sample_priors(4, 64, gen(), mix={"nope": 1.0})
    with pytest.raises(ValueError, match="non-negative"):
        sample_priors(4, 64, gen(), mix={"short": 0.0})
    with pytest.raises(ValueError, match="length"):
        sample_priors(4, 1, gen())


def test_default_mix_names_only_registered_families():
    assert set(DEFAULT_PRIOR_MIX) <= set(PRIORS) and abs(sum(DEFAULT_PRIOR_MIX.values()) - 1.0) < 1e-9


def test_level_shifts_have_a_step():
    x = level_shift(50, LENGTH, gen(), seasonality=0.0, noise=(0.001, 0.002), max_ramp=0)
    jumps = x.diff(dim=1).abs()
    assert (jumps.amax(dim=1) > 20 * jumps.median(dim=1).values).all()


def test_spikes_stand_far_out_of_the_baseline():
    x = spikes(100, LENGTH, gen())
    median = x.median(dim=1, keepdim=True).values
    mad = 1.4826 * (x - median).abs().median(dim=1, keepdim=True).values
    robust_z = ((x - median).abs() / mad.clamp_min(1e-12)).amax(dim=1)
    assert float((robust_z > 6).float().mean()) > 0.9  # Gaussian noise alone: about 3.5 at this length


def test_ou_paths_revert_at_their_speed_and_gbm_paths_are_positive():
    theta = torch.full((200, 1), 0.1)
    x = ou_paths(200, 2048, gen(), theta=theta, switch_rate=torch.zeros(200, 1))
    assert abs(float(autocorrelation(x, 1).mean()) - math.exp(-0.1)) < 0.02
    assert (gbm_paths(100, LENGTH, gen()) > 0).all()


def test_regimes_switch_the_ou_level():
    x = ou_paths(200, 2048, gen(), theta=torch.full((200, 1), 0.3), switch_rate=torch.full((200, 1), 0.005))
    halves = torch.stack([x[:, i * 256 : (i + 1) * 256].mean(dim=1) for i in range(8)], dim=1)
    calm = ou_paths(200, 2048, gen(), theta=torch.full((200, 1), 0.3), switch_rate=torch.zeros(200, 1))
    calm_halves = torch.stack([calm[:, i * 256 : (i + 1) * 256].mean(dim=1) for i in range(8)], dim=1)
    assert float(halves.std(dim=1).median()) > 3 * float(calm_halves.std(dim=1).median())


def test_square_waves_take_two_values_and_sawtooths_repeat_at_their_period():
    square = waves(20, LENGTH, gen(), shapes=("square",), noise=(0.0, 0.0), trend=False)
    assert all(len(torch.unique(row)) <= 2 for row in square)
    saw = waves(20, LENGTH, gen(), shapes=("sawtooth",), period=(20.0, 20.0), noise=(0.0, 0.0), trend=False)
    spread = saw.std(dim=1, keepdim=True)
    assert ((saw[:, 20:] - saw[:, :-20]).abs() < 1e-3 * spread).float().mean() > 0.98  # resets may round apart
    assert ((saw.diff(dim=1).abs() > 0.5 * spread).sum(dim=1) >= LENGTH // 20 - 2).all()  # one reset per period


def test_free_oscillators_ring_down_and_driven_ones_resonate_at_their_period():
    free = oscillator(50, LENGTH, gen(), driven=0.0, damping=(0.01, 0.02), kicks=1)
    centred = free - free.mean(dim=1, keepdim=True)
    quarter = LENGTH // 4
    assert (centred[:, -quarter:].abs().amax(1) < 0.5 * centred[:, :quarter].abs().amax(1)).all()
    driven = oscillator(50, 2048, gen(), driven=1.0, period=(20.0, 20.0), damping=(0.005, 0.01))
    spectrum = torch.fft.rfft(driven - driven.mean(dim=1, keepdim=True)).abs()
    peak = spectrum[:, 1:].argmax(dim=1).float().add(1) / 2048
    assert float(((peak - 1 / 20).abs() < 0.005).float().mean()) > 0.9


def test_random_walks_have_uncorrelated_steps_and_persistent_levels():
    x = random_walk(100, LENGTH, gen(), kinds=("walk",))
    assert float((autocorrelation(x, 1) > 0.9).float().mean()) > 0.9
    assert float((autocorrelation(x.diff(dim=1), 1).abs() < 0.15).float().mean()) > 0.9
    smooth = random_walk(100, LENGTH, gen(), kinds=("integrated",))
    assert float((autocorrelation(smooth.diff(dim=1), 1) > 0.9).float().mean()) > 0.9
    assert (random_walk(50, LENGTH, gen(), kinds=("reflected",)) >= 0).all()


def _exact_period(row: torch.Tensor) -> int | None:
    """The smallest lag at which ``row`` repeats bit for bit, or None."""
    return next((q for q in range(1, row.shape[0] // 2 + 1) if torch.equal(row[q:], row[:-q])), None)


def test_repeat_series_repeat_one_cycle_exactly_and_noisy_ones_do_not():
    exact = repeat(32, LENGTH, gen(), noisy_share=0.0)
    periods = [_exact_period(row) for row in exact]
    assert all(p is not None and 2 <= p <= LENGTH // 2 for p in periods)
    assert len(set(periods)) > 5  # calendar and drawn periods, not one
    assert all(row.std() > 0 for row in exact)  # a cycle, not a constant
    noisy = repeat(32, LENGTH, gen(), noisy_share=1.0)
    assert all(_exact_period(row) is None for row in noisy)


def _day_levels(x: torch.Tensor, period: int) -> torch.Tensor:
    """``[n, days]``: the mean of each whole ``period``-step cycle of each row (from the row's end backwards)."""
    days = x.shape[1] // period
    return x[:, x.shape[1] - days * period :].reshape(x.shape[0], days, period).mean(dim=2)


def test_weather_cycles_persist_from_day_to_day_and_do_not_repeat_exactly():
    """A daily cycle whose daily mean wanders with persistence: consecutive days' means correlate (a weather front
    lasts), unlike the ``seasonal`` family's white noise around a fixed cycle, and no series repeats exactly."""
    length, period = 24 * 60, 24

    def day_to_day(x: torch.Tensor) -> float:
        """Lag-1 correlation of the daily means after their linear trend is removed (a trend alone persists)."""
        levels = _day_levels(x, period)
        days = torch.arange(levels.shape[1], dtype=torch.float32) - (levels.shape[1] - 1) / 2
        slope = (levels * days).sum(dim=1, keepdim=True) / (days * days).sum()
        levels = levels - levels.mean(dim=1, keepdim=True) - slope * days
        levels = levels / levels.std(dim=1, keepdim=True).clamp_min(1e-12)
        return float((levels[:, 1:] * levels[:, :-1]).mean())

    wandering = weather(64, length, gen(), calendars=("hourly",), persistence=(0.9, 0.95))
    still = seasonal(64, length, gen(), calendars=("hourly",))
    assert day_to_day(wandering) > 0.5 > day_to_day(still)
    assert all(_exact_period(row) is None for row in wandering[:8])
    assert (autocorrelation(wandering, period) > 0.5).float().mean() > 0.8  # still a daily cycle


def test_sample_priors_fills_the_batch_sampler_pool_deterministically():
    from tsfm.pipelines.data.batches import BatchConfig, BatchSampler

    cfg = BatchConfig(batch_size=16, context_length=128, prediction_length=32, patch_size=16, min_context=4,
                      pool_size=64, pool_chunks=4, refresh_every=2, synthetic_share=1.0)
    first = BatchSampler(cfg, None, prior=sample_priors, seed=1).draw(5)
    again = BatchSampler(cfg, None, prior=sample_priors, seed=1).draw(5)
    assert torch.equal(first.context.nan_to_num(1e30), again.context.nan_to_num(1e30))
    assert torch.isfinite(first.context[:, -1]).all()
