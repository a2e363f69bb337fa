"""serving/batching.py without HTTP: merging, limits, isolation of bad jobs, cancellation, shutdown, and numbers equal
to ``tsfm.predict``."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

import numpy as np
import pytest

from tsfm.df_utils import ForecastInputError
from tsfm.forecast import predict
from tsfm.serving.batching import BatcherClosed, BatchStats, Forecast, MicroBatcher

T = TypeVar("T")


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coroutine)


def make_series(n: int, length: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.normal(size=length).cumsum() for _ in range(n)]


async def started(model: Any, **options: Any) -> tuple[MicroBatcher, list[BatchStats]]:
    stats: list[BatchStats] = []
    batcher = MicroBatcher(model, on_batch=stats.append, **options)
    batcher.start()
    return batcher, stats


def test_concurrent_jobs_share_one_call_and_equal_predict(tiny_model) -> None:
    jobs = [(make_series(4, 96, seed=k), 24, (0.1, 0.5, 0.9)) for k in range(6)]

    async def main() -> tuple[list[Forecast], list[BatchStats]]:
        batcher, stats = await started(tiny_model, window_s=0.2)
        results = await asyncio.gather(*(batcher.submit(*job) for job in jobs))
        await batcher.close()
        return results, stats

    results, stats = run(main())
    assert stats[0].requests == 6 and stats[0].series == 24 and len(stats) == 1
    for (series, horizon, levels), result in zip(jobs, results, strict=True):
        quantiles, median = predict(series, horizon, model=tiny_model, quantile_levels=levels)
        np.testing.assert_array_equal(result.quantiles, quantiles)
        np.testing.assert_array_equal(result.median, median)


def test_mixed_horizons_and_levels_in_one_batch(tiny_model) -> None:
    jobs = [
        (make_series(4, 64, seed=1), 10, (0.5,)),
        (make_series(5, 200, seed=2), 40, (0.9, 0.15, 0.5)),
        (make_series(4, 64, seed=3), 10, (0.2, 0.8)),
    ]

    async def main() -> list[Forecast]:
        batcher, _ = await started(tiny_model, window_s=0.2)
        results = await asyncio.gather(*(batcher.submit(*job) for job in jobs))
        await batcher.close()
        return results

    for (series, horizon, levels), result in zip(jobs, run(main()), strict=True):
        assert result.quantiles.shape == (len(series), horizon, len(levels))
        quantiles, median = predict(series, horizon, model=tiny_model, quantile_levels=levels)
        np.testing.assert_array_equal(result.quantiles, quantiles)
        np.testing.assert_array_equal(result.median, median)


def test_single_series_matches_predict_to_float32_rounding(tiny_model) -> None:
    """Batched with others, a lone series may round differently in the last bit than predict() on it alone (BLAS
    chooses other kernels for 1-3 rows); the difference stays at float32 rounding."""
    lone = make_series(1, 128, seed=7)

    async def main() -> Forecast:
        batcher, _ = await started(tiny_model, window_s=0.2)
        others = batcher.submit(make_series(6, 128, seed=8), 32, (0.5,))
        result, _ = await asyncio.gather(batcher.submit(lone, 32, (0.1, 0.9)), others)
        await batcher.close()
        return result

    result = run(main())
    quantiles, _ = predict(lone, 32, model=tiny_model, quantile_levels=(0.1, 0.9))
    np.testing.assert_allclose(result.quantiles, quantiles, rtol=1e-5, atol=1e-5 * np.abs(quantiles).max())


def test_disabled_batching_runs_each_request_alone(tiny_model) -> None:
    async def main() -> list[BatchStats]:
        batcher, stats = await started(tiny_model, enabled=False)
        await asyncio.gather(*(batcher.submit(make_series(2, 64, seed=k), 8, (0.5,)) for k in range(4)))
        await batcher.close()
        return stats

    assert [s.requests for s in run(main())] == [1, 1, 1, 1]


def test_max_batch_series_caps_a_call(tiny_model) -> None:
    async def main() -> list[BatchStats]:
        batcher, stats = await started(tiny_model, window_s=0.2, max_batch_series=8)
        await asyncio.gather(*(batcher.submit(make_series(3, 64, seed=k), 8, (0.5,)) for k in range(5)))
        big = await batcher.submit(make_series(20, 64, seed=9), 8, (0.5,))  # larger than the cap: split
        assert big.median.shape == (20, 8)
        await batcher.close()
        return stats

    stats = run(main())
    assert all(s.series <= 8 for s in stats[:-3]) and sum(s.series for s in stats[:-3]) == 15
    assert [(s.requests, s.series) for s in stats[-3:]] == [(1, 8), (1, 8), (1, 4)]


def test_a_bad_job_fails_alone(tiny_model) -> None:
    good = make_series(4, 64, seed=1)
    bad = [np.full(64, np.nan)]  # the schema refuses this; the batcher must still not let it sink the batch

    async def main() -> list[Any]:
        batcher, _ = await started(tiny_model, window_s=0.2)
        results = await asyncio.gather(
            batcher.submit(good, 8, (0.5,)), batcher.submit(bad, 8, (0.5,)), return_exceptions=True
        )
        await batcher.close()
        return results

    result, error = run(main())
    assert isinstance(error, ForecastInputError) and "no observed values" in str(error)
    np.testing.assert_array_equal(result.median, predict(good, 8, model=tiny_model)[1])


class GatedModel:
    """Wraps a model; ``forecast`` waits for ``gate`` so a test can hold the model thread busy."""

    def __init__(self, model: Any) -> None:
        self.inner = model
        self.config = model.config
        self.gate = threading.Event()
        self.calls = 0

    @property
    def quantile_levels(self) -> tuple[float, ...]:
        return self.inner.quantile_levels

    def forecast(self, context: Any, prediction_length: int) -> Any:
        self.calls += 1
        self.gate.wait(timeout=10)
        return self.inner.forecast(context, prediction_length)


def test_abandoned_jobs_are_skipped_and_close_fails_pending(tiny_model) -> None:
    model = GatedModel(tiny_model)

    async def main() -> None:
        batcher, stats = await started(model, window_s=0.0)
        first = asyncio.ensure_future(batcher.submit(make_series(1, 64, seed=0), 8, (0.5,)))
        await asyncio.sleep(0.05)  # the first job is now running (blocked on the gate)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(batcher.submit(make_series(1, 64, seed=1), 8, (0.5,)), 0.05)
        queued = asyncio.ensure_future(batcher.submit(make_series(1, 64, seed=2), 8, (0.5,)))
        model.gate.set()
        await first
        await queued
        assert model.calls == 2  # the abandoned job never reached the model
        assert [s.requests for s in stats] == [1, 1]

        model.gate.clear()
        running = asyncio.ensure_future(batcher.submit(make_series(1, 64, seed=3), 8, (0.5,)))
        await asyncio.sleep(0.05)
        pending = asyncio.ensure_future(batcher.submit(make_series(1, 64, seed=4), 8, (0.5,)))
        await asyncio.sleep(0)
        await batcher.close()  # neither the running nor the queued caller is left waiting forever
        model.gate.set()
        for caller in (running, pending):
            with pytest.raises(BatcherClosed, match="shutting down"):
                await caller

    run(main())


def test_a_failing_batch_does_not_stop_the_batcher(tiny_model, monkeypatch: pytest.MonkeyPatch) -> None:
    async def main() -> None:
        batcher, _ = await started(tiny_model, window_s=0.0)
        real_run = batcher._run
        monkeypatch.setattr(batcher, "_run", lambda jobs: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            await batcher.submit(make_series(4, 64, seed=0), 8, (0.5,))
        monkeypatch.setattr(batcher, "_run", real_run)
        result = await batcher.submit(make_series(4, 64, seed=0), 8, (0.5,))
        assert result.median.shape == (4, 8)
        await batcher.close()

    run(main())


def test_submit_before_start_is_an_error(tiny_model) -> None:
    async def main() -> None:
        with pytest.raises(RuntimeError, match="start"):
            await MicroBatcher(tiny_model).submit(make_series(1, 8, seed=0), 4, (0.5,))

    run(main())


def test_the_unit_of_work_follows_the_decoding(tiny_model) -> None:
    """The batcher's unit of work follows the decoding: a masked pass covers the trained horizon, an autoregressive
    one REANCHOR_PATCHES patches (the window is re-read that often), and long horizons are split into calls by that
    weight, so one in-limit request cannot hold the model for one huge call."""
    import dataclasses

    from tsfm.model import REANCHOR_PATCHES, Forecaster
    from tsfm.serving.registry import ServedModel

    masked = ServedModel(tiny_model)
    assert tiny_model.config.decoding == "masked"
    assert masked.steps_per_pass == masked.trained_horizon == 128
    small_patches = dataclasses.replace(tiny_model.config, decoding="autoregressive", patch_size=8)
    assert ServedModel(Forecaster(small_patches)).steps_per_pass == 8 * REANCHOR_PATCHES

    async def main() -> list[BatchStats]:
        batcher, stats = await started(tiny_model, max_batch_series=64, steps_per_pass=32)
        await batcher.submit(make_series(8, 96, seed=1), 1024, (0.5,))  # 8 series x 32 passes: 4 calls of 2
        await batcher.close()
        return stats

    assert [s.series for s in run(main())] == [2, 2, 2, 2]


def test_the_sign_flip_average_weighs_each_series_twice(tiny_model) -> None:
    """Under the sign-flip average a series and its mirror image both go through the model, so a call holds half as
    many series (the model's own setting where a request says nothing), and the numbers are still ``predict``'s."""
    from tsfm.model import Forecaster

    flipping = Forecaster(tiny_model.config.replace(flip_equivariant=True)).eval()
    flipping.load_state_dict(tiny_model.state_dict())
    series = make_series(8, 96, seed=2)

    async def main(flip: bool | None) -> tuple[list[BatchStats], Forecast]:
        batcher, stats = await started(flipping, max_batch_series=4)
        result = await batcher.submit(series, 16, (0.1, 0.5, 0.9), flip_equivariant=flip)
        await batcher.close()
        return stats, result

    for flip, calls in ((None, [2, 2, 2, 2]), (True, [2, 2, 2, 2]), (False, [4, 4])):
        stats, result = run(main(flip))
        assert [s.series for s in stats] == calls
        expected, _ = predict(series, 16, model=flipping, quantile_levels=(0.1, 0.5, 0.9), flip_equivariant=flip)
        np.testing.assert_allclose(result.quantiles, expected, rtol=1e-5, atol=1e-5)


class SteppedModel:
    """Wraps a model; records each call's horizon and rows, and holds every call until the test lets it go.

    Requests are told apart by their horizon (the batcher runs one ``predict`` per horizon, one ``forecast`` each)."""

    def __init__(self, model: Any) -> None:
        self.inner = model
        self.config = model.config
        self.calls: list[tuple[int, int]] = []  # (horizon, rows), in the order the model ran them
        self.proceed = threading.Semaphore(0)

    @property
    def quantile_levels(self) -> tuple[float, ...]:
        return self.inner.quantile_levels

    def forecast(self, context: Any, prediction_length: int) -> Any:
        self.calls.append((prediction_length, int(context.shape[0])))
        assert self.proceed.acquire(timeout=10), "the test never let this call go"
        return self.inner.forecast(context, prediction_length)


async def until(condition: Any, timeout: float = 10.0) -> None:
    """Poll ``condition`` on the event loop (the model thread runs meanwhile)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "timed out waiting for the batcher"
        await asyncio.sleep(0.001)


def test_small_requests_go_before_the_remaining_calls_of_a_large_one(tiny_model) -> None:
    """A large request split into calls does not hold its place in the queue: a small request that arrives while
    the large one is being served runs before the large one's remaining calls, even when the next of those calls
    is already queued, and the large request still completes."""
    model = SteppedModel(tiny_model)
    large, first, second = 10, 11, 12  # horizons name the requests

    async def main() -> None:
        batcher, _ = await started(model, window_s=0.0, max_batch_series=4)
        big = asyncio.ensure_future(batcher.submit(make_series(12, 64, seed=0), large, (0.5,)))  # 3 calls of 4
        await until(lambda: len(model.calls) == 1)  # the large request's first call is on the model
        small_1 = asyncio.ensure_future(batcher.submit(make_series(1, 64, seed=1), first, (0.5,)))
        await until(lambda: batcher.queued_series == 1)
        model.proceed.release()  # the first large call ends; the waiting small request goes next
        await until(lambda: len(model.calls) == 2)
        await until(lambda: batcher.queued_series == 4)  # meanwhile the large request's second call was queued
        small_2 = asyncio.ensure_future(batcher.submit(make_series(1, 64, seed=2), second, (0.5,)))
        await until(lambda: batcher.queued_series == 5)
        model.proceed.release(100)
        result, *_ = await asyncio.gather(big, small_1, small_2)
        assert result.median.shape == (12, large)
        await batcher.close()

    run(main())
    assert model.calls == [(large, 4), (first, 1), (second, 1), (large, 4), (large, 4)]


@pytest.mark.parametrize(
    ("steps_per_pass", "large", "large_series", "large_calls"),
    [
        (None, 10, 16, 4),  # 16 series of one pass: 4 calls of 4 series
        (8, 40, 3, 3),  # 3 series of 5 passes each, more than a call's 4 units: 3 calls of one series
    ],
)
def test_a_large_request_is_not_starved_by_a_steady_stream_of_small_ones(
    tiny_model, steps_per_pass: int | None, large: int, large_series: int, large_calls: int
) -> None:
    """Small requests go first, but not for ever: while they keep the queue busy, the large request's calls still
    get their share of the model (one unit of work for every ``interactive_weight`` units of small work), so it
    completes long before the small clients stop; also when one of its calls weighs more than a call holds."""
    model = SteppedModel(tiny_model)
    model.proceed.release(10_000)  # no holding: the model runs freely
    small = 7  # one pass under either steps_per_pass
    done: list[int] = []

    async def main() -> int:
        batcher, _ = await started(
            model, window_s=0.0, max_batch_series=4, interactive_weight=3, steps_per_pass=steps_per_pass
        )

        async def client(k: int) -> None:  # back to back, as the benchmark's well-behaved clients
            for j in range(40):
                await batcher.submit(make_series(2, 64, seed=100 * k + j), small, (0.5,))
                done.append(k)

        clients = [asyncio.ensure_future(client(k)) for k in range(3)]  # 6 series wanted, 4 per call: always a queue
        await until(lambda: len(model.calls) >= 3)
        result = await batcher.submit(make_series(large_series, 64, seed=9), large, (0.5,))
        small_done = len(done)
        await asyncio.gather(*clients)
        await batcher.close()
        assert result.median.shape == (large_series, large)
        return small_done

    small_done = run(main())
    assert small_done < 3 * 40 / 2  # the large request finished in the first half of the small clients' work
    horizons = [h for h, _ in model.calls]
    at = [i for i, h in enumerate(horizons) if h == large]
    assert len(at) == large_calls
    gaps = [sum(rows for h, rows in model.calls[a + 1 : b]) for a, b in itertools.pairwise(at)]  # small units
    assert all(gap <= 3 * 4 + 4 for gap in gaps), gaps  # a bounded wait: 3 x 4 units, plus one call of slack
    assert all(gap >= 4 for gap in gaps), gaps  # and the small requests did go first


def test_jobs_asking_for_and_against_the_nonnegative_clamp_share_a_batch_and_get_their_own(tiny_model) -> None:
    """``infer_nonnegative`` per job: None follows the model, False keeps negative quantiles, True clamps; jobs of
    all three in one batch each get what ``predict`` gives them alone."""
    rng = np.random.default_rng(5)
    series = [np.abs(rng.normal(0.0, 5.0, size=96)) for _ in range(3)]  # never negative, spread near 0
    flags = (None, False, True)

    async def main() -> tuple[list[Forecast], list[BatchStats]]:
        batcher, stats = await started(tiny_model, window_s=0.2)
        results = await asyncio.gather(*(batcher.submit(series, 24, (0.1, 0.5), flag) for flag in flags))
        await batcher.close()
        return results, stats

    results, stats = run(main())
    assert len(stats) == 1 and stats[0].requests == 3  # one batch, three groups inside it
    for flag, result in zip(flags, results, strict=True):
        quantiles, _ = predict(series, 24, model=tiny_model, quantile_levels=(0.1, 0.5), infer_nonnegative=flag)
        np.testing.assert_array_equal(result.quantiles, quantiles)
    assert (results[1].quantiles < 0).any(), "the tiny model must give negative quantiles for the test to mean much"
    assert (results[2].quantiles >= 0).all()
