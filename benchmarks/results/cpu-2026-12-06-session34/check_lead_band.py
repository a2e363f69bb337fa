"""Checks of ``lead_band_prototype.py`` on tiny synthetic tensors (no model, a few seconds):

    cd /work/main && PYTHONPATH=.:benchmarks/results/cpu-2026-12-06-session34 .venv/bin/python \
        benchmarks/results/cpu-2026-12-06-session34/check_lead_band.py
"""

from __future__ import annotations

import math

import torch
from lead_band_prototype import band_index, band_length, band_weights, lead_band_blend

from tsfm.naive_blend import backtest_horizon, blend_with_seasonal_naive
from tsfm.seasonality import detect_period, seasonal_naive_hint

PERIOD = 24


def seasonal(batch: int, length: int, seed: int = 0) -> torch.Tensor:
    """``[batch, length]`` daily-like cycles of :data:`PERIOD` steps with a little noise."""
    generator = torch.Generator().manual_seed(seed)
    t = torch.arange(length, dtype=torch.float32)
    phase = torch.rand(batch, 1, generator=generator) * 6.28
    level = torch.randn(batch, 1, generator=generator) * 5
    noise = 0.1 * torch.randn(batch, length, generator=generator)
    return level + torch.sin(2 * math.pi * t / PERIOD + phase) + noise


def quantiles_of(context: torch.Tensor, horizon: int) -> torch.Tensor:
    """``[B, 3, horizon]`` sorted quantiles around a deliberately off median."""
    median = torch.nan_to_num(seasonal_naive_hint(context, torch.full((context.shape[0],), PERIOD), horizon)) + 0.5
    return torch.stack([median - 1, median, median + 1], 1)


def noisy_backtest(seed: int) -> object:
    """A stand-in for the model's backtest: Seasonal Naive plus noise whose size grows over the leads."""

    def backtest(history: torch.Tensor, horizon: int) -> torch.Tensor:
        generator = torch.Generator().manual_seed(seed)
        base = seasonal_naive_hint(history, detect_period(history), horizon)
        grow = torch.linspace(0.05, 1.0, horizon)[None]
        return torch.nan_to_num(base, nan=0.0) + grow * torch.randn(base.shape, generator=generator)

    return backtest


def check_one_band_is_shipped() -> None:
    """``--bands one`` reproduces the shipped blend, with missing steps, short rows, and H above and below h."""
    context = seasonal(6, 160)
    context[1, 150:152] = float("nan")  # missing steps in the backtest's truth
    context[2, :110] = float("nan")  # too short to backtest
    context[3] = torch.randn(160)  # probably no season
    context[4, 100:] = float("nan")  # nothing observed in the held-out steps
    for horizon in (10, 48, 80, 120):
        quantiles = quantiles_of(context, horizon)
        for how in ("inverse_mse", "inverse_mae", "switch", "off"):
            expected = blend_with_seasonal_naive(context, quantiles, 1, how, noisy_backtest(1))
            got = lead_band_blend("one")(context, quantiles, 1, how, noisy_backtest(1))
            torch.testing.assert_close(got, expected, msg=f"one band, H={horizon}, {how}")
            for bands in ("period", "quarters", "cumulative"):  # rules other than inverse_mse: shipped
                if how != "inverse_mse":
                    torch.testing.assert_close(lead_band_blend(bands)(context, quantiles, 1, how, noisy_backtest(1)),
                                               expected)
    print("one band == shipped blend (4 horizons x 4 rules), other rules fall back: ok")


def check_half_perfect() -> None:
    """A backtest exact on the first half of ``h`` and far off on the second: weights ~0 then ~1."""
    context = seasonal(3, 192)
    horizon = 96  # h = min(96, 192 // 2)
    period = detect_period(context)
    assert bool((period == PERIOD).all()), period
    truth = context[:, -horizon:]
    median = truth.clone()
    median[:, horizon // 2:] += 10.0
    weights, length = band_weights(context, period, median, "quarters")
    assert length.tolist() == [24, 24, 24], length
    assert weights.shape == (3, 4), weights.shape
    assert bool((weights[:, :2] == 0).all()), weights
    assert bool((weights[:, 2:] > 0.99).all()), weights
    cumulative, _ = band_weights(context, period, median, "cumulative")  # bands of one period (24) as well
    assert bool((cumulative[:, :2] == 0).all()) and bool((cumulative[:, 2:] > 0.98).all()), cumulative
    # the whole blend: leads of the first half are left alone, the second half moved (almost) to Seasonal Naive
    quantiles = quantiles_of(context, horizon)

    def exact_then_off(history: torch.Tensor, steps: int) -> torch.Tensor:
        return median

    blended = lead_band_blend("quarters")(context, quantiles, 1, "inverse_mse", exact_then_off)
    naive = seasonal_naive_hint(context, period, horizon)
    torch.testing.assert_close(blended[:, :, :48], quantiles[:, :, :48])
    assert float((blended[:, 1, 48:] - naive[:, 48:]).abs().max()) < 0.01 * 0.5 + 1e-6
    shipped = blend_with_seasonal_naive(context, quantiles, 1, "inverse_mse", exact_then_off)
    assert bool(((shipped[:, 1] - quantiles[:, 1]).abs() > 0.3).all())  # one weight moves every lead alike
    print(f"half-perfect backtest: quarter weights {weights[0].tolist()} , cumulative {cumulative[0].tolist()}: ok")


def check_band_layout() -> None:
    """Band lengths and the lead-to-band map, ``H`` above ``h`` included."""
    period = torch.tensor([288, 0, 1000, 5])
    assert band_length(period, 720, "period").tolist() == [288, 1, 720, 5]
    assert band_length(period, 720, "quarters").tolist() == [180] * 4
    assert band_length(period, 10, "quarters").tolist() == [3] * 4  # ceil(10 / 4): bands 3, 3, 3, 1
    length = torch.tensor([288])
    n_bands = -(-720 // length)
    index = band_index(length, n_bands, 720)[0]
    sizes = torch.bincount(index).tolist()
    assert sizes == [288, 288, 144], sizes
    beyond = band_index(length, n_bands, 1000)[0]  # H > h: the last band's weight carries on
    assert beyond[576:].eq(2).all() and beyond[:288].eq(0).all()
    assert band_index(torch.tensor([3]), torch.tensor([4]), 12)[0].tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert backtest_horizon(2048, 720) == 720 and backtest_horizon(1000, 720) == 500
    print("band layout (period 288, h 720 -> 288, 288, 144; H > h keeps the last band): ok")


def check_band_weights_by_hand() -> None:
    """Per-band weights equal the shipped formula applied to each band's own steps; unusable rows get 0."""
    context = seasonal(4, 200, seed=3)
    context[0, -30:-25] = float("nan")
    context[3, :150] = float("nan")  # 50 steps, no two whole periods before the held-out steps
    horizon = 60
    period = detect_period(context)
    median = noisy_backtest(7)(context[:, :-horizon], horizon)
    weights, length = band_weights(context, period, median, "period")
    assert period[:3].tolist() == [PERIOD] * 3 and length[:3].tolist() == [PERIOD] * 3, (period, length)
    truth = context[:, -horizon:]
    naive = seasonal_naive_hint(context[:, :-horizon], period, horizon)
    for row in range(3):
        for band, (start, end) in enumerate([(0, 24), (24, 48), (48, 60)]):  # 24, 24 and the 12 left
            seen = ~torch.isnan(truth[row, start:end])
            model = ((median[row, start:end] - truth[row, start:end])[seen] ** 2).mean()
            simple = ((naive[row, start:end] - truth[row, start:end])[seen] ** 2).mean()
            torch.testing.assert_close(weights[row, band], model / (model + simple))
    assert bool((weights[3] == 0).all())
    print(f"per-band weights by hand (period {int(length[0])}, h {horizon}): {weights[0].tolist()}: ok")


def check_shift() -> None:
    """All quantiles move by the same amount (spread and order kept); unusable rows are untouched."""
    context = seasonal(3, 300, seed=5)
    context[2, :260] = float("nan")
    quantiles = quantiles_of(context, 200)
    for bands in ("period", "quarters", "cumulative"):
        out = lead_band_blend(bands)(context, quantiles, 1, "inverse_mse", noisy_backtest(2))
        torch.testing.assert_close(out[:, 2] - out[:, 0], quantiles[:, 2] - quantiles[:, 0])
        torch.testing.assert_close(out[2], quantiles[2])
        assert bool(torch.isfinite(out).all())
    print("shift equal over quantiles, unusable rows untouched (three variants): ok")


if __name__ == "__main__":
    check_band_layout()
    check_one_band_is_shipped()
    check_half_perfect()
    check_band_weights_by_hand()
    check_shift()
