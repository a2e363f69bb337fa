"""Micro-batching: concurrent requests share model calls on one model thread, off the event loop.

Torch inference is CPU-bound and blocking, so it must not run on the event loop (that would stall every other
request, ``/health`` included). All inference runs on one dedicated thread, one batch at a time, on one model
instance: the model is used by one thread only and memory stays flat. While that thread is busy, new requests
queue; when it frees up, everything queued (up to ``max_batch_series`` series) goes into the next call. When the
thread is idle, the first request holds the batch open for ``window_s`` so that requests arriving together share
a call. With batching off, each request is its own call (still on the model thread).

Work is bounded two ways. A call's size is counted in series times forecast passes: a horizon up to
``steps_per_pass`` is one pass, longer horizons take more. Under masked decoding that is the model's trained
horizon (a series with horizon 1,024 and a trained horizon of 128 weighs as much as eight with horizon 48); under
autoregressive decoding the model re-reads its window every 4 patches of 32 steps (horizon 48: one pass, 1,024:
eight). A request larger than ``max_batch_series`` of that
weight is split into jobs of at most that weight,
queued one after the other: the next job joins the queue when the previous one is done, so when its caller gives up
(a timeout, a disconnect), no further job of it is queued and the model is free again after at most the one call
that was running. And the queue holds at most ``max_queued_series`` series: a
request that would pass it fails at once with ``QueueFull`` (the app answers 503 with ``Retry-After``), since
waiting in a longer queue would only add latency for everyone.

Who goes next. Requests that fit one call (``interactive``: the usual client) and the jobs of requests split into
several calls (``bulk``) wait in two queues, each first come, first served; a call is filled from the interactive
queue first, then with bulk jobs that still fit. So a small request that arrives while a large one is being
served runs before the large one's remaining calls, and one large request (or several) cannot push the small
clients' latency up by its whole size. Bulk work is not starved either: the two queues are served by deficit
round-robin in work units (series x passes), weighted ``interactive_weight`` to 1. While bulk work waits, every
unit of interactive work served earns the bulk queue a unit of credit; once the credit covers ``interactive_weight``
times the next bulk job's weight (at most a full call's), that job goes first in the next call and spends it.
With the defaults (weight 4, 64 units per call) a large request gets a full call after at most about four full
calls of small requests, a fifth of the model; with no small requests waiting it runs back to back. Bulk jobs of
several large requests take turns (each request has one job queued at a time). Fairness is between requests:
clients are not told apart (they share the API key), so per-client quotas belong to a proxy in front.

A batch is cut by horizon (``prediction_length``) and run through ``tsfm.predict`` itself, with the union of the
requested quantile levels; each request then takes its rows and its levels. So the numbers are those of
``predict`` on the same series: ``predict`` groups series by length and pads each as if it were alone, and its
quantile interpolation is per level. The one caveat is the model's own arithmetic: on CPU, a batch of 1 to 3
series can round differently in the last float32 bit than a batch of 4 or more (BLAS picks other kernels), and
``predict`` on a single series shows the same; results match to float32 rounding always, and bit for bit when the
batch sizes agree.

This module knows nothing of HTTP: it takes arrays and returns arrays or exceptions.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import math
import time
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from tsfm.forecast import SupportsForecast, predict

log = logging.getLogger("tsfm.serving")


class BatcherClosed(RuntimeError):
    """The batcher stopped (the service is shutting down) before this job ran."""


class QueueFull(RuntimeError):
    """The queue holds ``max_queued_series`` series already; the request was not queued."""


class Forecast(NamedTuple):
    """One request's result: quantiles ``[N, H, len(levels)]`` and median ``[N, H]`` (float32), as ``predict``."""

    quantiles: np.ndarray
    median: np.ndarray


class BatchStats(NamedTuple):
    """What one model call did, for metrics."""

    requests: int
    series: int
    seconds: float


@dataclass(eq=False)
class _Job:
    series: list[np.ndarray]
    prediction_length: int
    quantile_levels: tuple[float, ...]
    infer_nonnegative: bool | None
    naive_blend: str | None
    flip_equivariant: bool | None
    future: asyncio.Future[Forecast]
    weight: int  # work units: series x forecast passes
    bulk: bool = False  # one of several calls of a large request
    enqueued: float = field(default_factory=time.monotonic)


class MicroBatcher:
    """Queue of forecast jobs served by one model thread.

    Args:
        model: a loaded model (``tsfm.model.Forecaster`` or anything ``tsfm.predict`` accepts).
        enabled: merge concurrent requests into shared calls; ``False`` runs each request alone.
        window_s: how long an idle batcher waits after the first request for more to join.
        max_batch_series: series per model call (each weighted by its forecast passes); a larger request is split.
        steps_per_pass: horizon of one forecast pass (``ServedModel.steps_per_pass``); ``None``: every horizon is one.
        max_queued_series: series that may wait (all requests together); ``None``: no limit.
        interactive_weight: while both wait, requests that fit one call get this many work units for every unit
            given to the calls of larger requests (deficit round-robin; at least 1).
        on_batch: called on the event loop after each model call (metrics).

    Use ``start()`` inside the running event loop, then ``await submit(...)``; ``close()`` fails what is pending.
    """

    def __init__(
        self,
        model: SupportsForecast,
        *,
        enabled: bool = True,
        window_s: float = 0.005,
        max_batch_series: int = 256,
        steps_per_pass: int | None = None,
        max_queued_series: int | None = None,
        interactive_weight: int = 4,
        on_batch: Callable[[BatchStats], None] | None = None,
        executor: ThreadPoolExecutor | None = None,
    ) -> None:
        self.model = model
        self.enabled = enabled
        self.window_s = window_s
        self.max_batch_series = max(max_batch_series, 1)
        self.steps_per_pass = steps_per_pass
        self.max_queued_series = max_queued_series
        self.interactive_weight = max(int(interactive_weight), 1)
        self.on_batch = on_batch
        self._executor = executor or ThreadPoolExecutor(max_workers=1, thread_name_prefix="tsfm-model")
        self._owns_executor = executor is None
        self._interactive: collections.deque[_Job] = collections.deque()  # requests that fit one call
        self._bulk: collections.deque[_Job] = collections.deque()  # jobs of requests split into several calls
        self._bulk_credit = 0  # work units: interactive work served while bulk work waited, less what bulk spent
        self._running: list[_Job] = []  # the batch on the model thread now
        self._wakeup: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def queued_series(self) -> int:
        """Series waiting for the model (jobs whose caller gave up are not counted)."""
        return sum(len(job.series) for job in self._queued() if not job.future.done())

    def _queued(self) -> list[_Job]:
        return [*self._interactive, *self._bulk]

    def start(self) -> None:
        """Start the collector task on the running loop."""
        if self._task is None:
            self._wakeup = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._collect(), name="tsfm-batcher")

    async def close(self) -> None:
        """Stop collecting; requests queued or running fail with ``BatcherClosed``."""
        running = self._running  # taken first: cancelling the collector clears it
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        for job in [*running, *self._queued()]:
            if not job.future.done():
                job.future.set_exception(BatcherClosed("the service is shutting down"))
        self._running = []
        self._interactive.clear()
        self._bulk.clear()
        if self._owns_executor:
            self._executor.shutdown(wait=False, cancel_futures=True)

    async def submit(
        self, series: Sequence[np.ndarray], prediction_length: int, quantile_levels: Sequence[float],
        infer_nonnegative: bool | None = None, naive_blend: str | None = None,
        flip_equivariant: bool | None = None,
    ) -> Forecast:
        """Forecast ``series`` (already validated: 1-D float arrays with an observed value) and wait for it;
        ``infer_nonnegative``, ``naive_blend`` and ``flip_equivariant`` as ``tsfm.predict`` takes them.

        Cancelling the caller (a timeout) drops the jobs that have not started and discards the result of the one
        that has. A request of more than ``max_batch_series`` work units is split into calls queued as bulk work.

        Raises:
            QueueFull: the queue is not empty and would hold more than ``max_queued_series`` series with these.
        """
        if self._task is None or self._wakeup is None:
            raise RuntimeError("MicroBatcher.start() was not called")
        series = list(series)
        if self.max_queued_series is not None and (self._interactive or self._bulk):
            queued = self.queued_series
            if queued + len(series) > self.max_queued_series:
                raise QueueFull(
                    f"the forecast queue is full ({queued} series waiting, limit {self.max_queued_series}: "
                    "max_queued_series); retry shortly"
                )
        loop = asyncio.get_running_loop()
        levels = tuple(quantile_levels)
        parts: list[Forecast] = []
        passes = self._passes(prediction_length) * self._images(flip_equivariant)
        size = max(1, self.max_batch_series // passes)
        bulk = len(series) > size
        queue = self._bulk if bulk else self._interactive
        for first in range(0, len(series), size):
            future: asyncio.Future[Forecast] = loop.create_future()
            part = series[first : first + size]
            queue.append(_Job(part, prediction_length, levels, infer_nonnegative, naive_blend, flip_equivariant, future,
                              weight=len(part) * passes, bulk=bulk))
            self._wakeup.set()
            try:
                parts.append(await future)
            except BaseException:  # a timeout or disconnect (cancellation), or a failed part: stop here
                future.cancel()
                raise
        if len(parts) == 1:
            return parts[0]
        return Forecast(np.concatenate([p.quantiles for p in parts]), np.concatenate([p.median for p in parts]))

    # ------------------------------------------------------------------------------------------------------------

    async def _collect(self) -> None:
        """Forever: wait for work, hold the window open, take a batch, run it on the model thread."""
        assert self._wakeup is not None
        loop = asyncio.get_running_loop()
        while True:
            while not (self._interactive or self._bulk):
                self._wakeup.clear()
                await self._wakeup.wait()
            if self.enabled:
                await self._hold_window()
            jobs = self._take_batch()
            if not jobs:
                continue
            started = time.perf_counter()
            self._running = jobs
            try:
                results: list[Forecast | BaseException] = await loop.run_in_executor(self._executor, self._run, jobs)
            except Exception as err:  # a bug in _run must fail this batch, not stop the batcher for good
                results = [err] * len(jobs)
            finally:
                self._running = []
            for job, result in zip(jobs, results, strict=True):
                if job.future.done():  # the caller gave up (timeout) while the model ran
                    continue
                if isinstance(result, BaseException):
                    job.future.set_exception(result)
                else:
                    job.future.set_result(result)
            if self.on_batch is not None:
                stats = BatchStats(len(jobs), sum(len(j.series) for j in jobs), time.perf_counter() - started)
                try:
                    self.on_batch(stats)
                except Exception:  # metrics are not worth failing requests over
                    log.exception("on_batch callback failed")
            # let the callers just answered run first: a large request queues its next job now, so the next batch
            # is chosen knowing that bulk work waits
            await asyncio.sleep(0)

    async def _hold_window(self) -> None:
        """Wait until the batch is full or ``window_s`` has passed since the oldest queued request arrived."""
        assert self._wakeup is not None
        deadline = min(queue[0].enqueued for queue in (self._interactive, self._bulk) if queue) + self.window_s
        while self.queued_series < self.max_batch_series:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            self._wakeup.clear()
            try:
                await asyncio.wait_for(self._wakeup.wait(), remaining)
            except asyncio.TimeoutError:  # not the builtin on Python 3.10
                return

    def _take_batch(self) -> list[_Job]:
        """The next call's jobs, up to a weight of ``max_batch_series`` (at least one job), skipping abandoned ones.

        Interactive jobs first, in arrival order, then bulk jobs that still fit; but when the bulk queue's credit
        covers ``interactive_weight`` times its first job's weight, that job goes first (see the module docstring).
        Each queue is walked in order and every job that fits is taken, so a small job can fill the room a large one
        leaves; a job passed over stays at the head of its queue and opens the next call of its kind."""
        for queue in (self._interactive, self._bulk):
            live = [job for job in queue if not job.future.done()]
            if len(live) != len(queue):
                queue.clear()
                queue.extend(live)
        bulk_waited = bool(self._bulk)
        jobs: list[_Job] = []
        total = 0

        def take_from(queue: collections.deque[_Job], limit: int | None = None) -> None:
            nonlocal total
            kept: collections.deque[_Job] = collections.deque()
            for job in queue:
                fits = self.enabled and total + job.weight <= self.max_batch_series
                if (not jobs or fits) and (limit is None or limit > 0):
                    jobs.append(job)
                    total += job.weight
                    limit = None if limit is None else limit - 1
                else:
                    kept.append(job)
            queue.clear()
            queue.extend(kept)

        cap = self.interactive_weight * self.max_batch_series  # the credit for one full call, no more
        if bulk_waited:
            # a job heavier than a call (one series with more passes than a call holds) costs a full call's credit:
            # the most the credit can hold, so it is not starved
            price = self.interactive_weight * min(self._bulk[0].weight, self.max_batch_series)
            if self._bulk_credit >= price:
                take_from(self._bulk, limit=1)  # the bulk queue's turn
        take_from(self._interactive)
        take_from(self._bulk)
        interactive_units = sum(job.weight for job in jobs if not job.bulk)
        bulk_units = total - interactive_units
        if bulk_waited:
            self._bulk_credit += interactive_units
        self._bulk_credit = max(0, min(self._bulk_credit, cap) - self.interactive_weight * bulk_units)
        return jobs

    def _images(self, flip_equivariant: bool | None) -> int:
        """Forecasts per series: 2 under the sign-flip average (the series and its mirror image go through the model
        in one batch: twice the rows and the memory), else 1; ``None`` is the model's own setting."""
        flipped = self.model.config.flip_equivariant if flip_equivariant is None else flip_equivariant
        return 2 if flipped else 1

    def _passes(self, prediction_length: int) -> int:
        """Forecast passes of one series: a horizon past the trained one is rolled out pass by pass."""
        if self.steps_per_pass is None:
            return 1
        return max(1, math.ceil(prediction_length / self.steps_per_pass))

    def _run(self, jobs: list[_Job]) -> list[Forecast | BaseException]:
        """On the model thread: one ``predict`` per horizon, ``infer_nonnegative``, ``naive_blend`` and
        ``flip_equivariant``; a failing group is retried job by job."""
        results: dict[int, Forecast | BaseException] = {}
        groups: dict[tuple[int, bool | None, str | None, bool | None], list[int]] = collections.defaultdict(list)
        for i, job in enumerate(jobs):
            groups[job.prediction_length, job.infer_nonnegative, job.naive_blend, job.flip_equivariant].append(i)
        for (horizon, *_), members in groups.items():
            group = [jobs[i] for i in members]
            try:
                for i, forecast in zip(members, self._predict_group(group, horizon), strict=True):
                    results[i] = forecast
            except Exception as err:
                if len(group) == 1:
                    results[members[0]] = err
                    continue
                for i, job in zip(members, group, strict=True):  # isolate the bad request from the others
                    try:
                        results[i] = self._predict_group([job], horizon)[0]
                    except Exception as job_err:
                        results[i] = job_err
        return [results[i] for i in range(len(jobs))]

    def _predict_group(self, jobs: list[_Job], horizon: int) -> list[Forecast]:
        levels = sorted({q for job in jobs for q in job.quantile_levels})
        column = {q: j for j, q in enumerate(levels)}
        series = [s for job in jobs for s in job.series]
        with warnings.catch_warnings():
            # predict warns about long horizons and clamped levels; the app reports those per request instead
            warnings.simplefilter("ignore")
            quantiles, median = predict(
                series,
                horizon,
                model=self.model,
                quantile_levels=levels,
                batch_size=self.max_batch_series,
                show_progress=False,
                infer_nonnegative=jobs[0].infer_nonnegative,  # one value per group (_run)
                naive_blend=jobs[0].naive_blend,
                flip_equivariant=jobs[0].flip_equivariant,
            )
        out: list[Forecast] = []
        start = 0
        for job in jobs:
            rows = slice(start, start + len(job.series))
            start += len(job.series)
            picked = [column[q] for q in job.quantile_levels]
            out.append(Forecast(quantiles[rows][:, :, picked], median[rows]))
        return out
