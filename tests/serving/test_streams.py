"""Streams in the REST service (issue 15 item 3): ``/v1/streams`` open, observations, forecast, delete.

The service's stream forecast must be exactly what ``tsfm.stream`` gives for the same data and model; streams expire
when idle, are capped in number and memory, refuse bad input with the field named, and (with ``stream_dir``)
survive a restart of a real ``tsfm serve`` process. The tiny ``xlstm[1:1]`` checkpoint of ``conftest.py`` (patches of
32, context 512, streams that carry their state) keeps it fast.
"""

from __future__ import annotations

import contextlib
import math
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient

import tsfm
from tsfm.serving.streams import StreamStore
from tsfm.stream import open_stream

LEVELS = [0.1, 0.5, 0.9]
UNKNOWN_ID = "A" * 32  # the shape of an id, but never handed out


def wave(n: int, phase: float = 0.0, level: float = 10.0) -> list[float]:
    return [level + 3 * math.sin((t + phase) / 4) for t in range(n)]


def opening(n_series: int = 2, length: int = 100) -> dict[str, Any]:
    """Two series: an hourly one with an id and timestamps, one bare one; ragged lengths."""
    inputs: list[dict[str, Any]] = [
        {"item_id": "north", "start": "2024-01-01T00:00:00", "freq": "h", "target": wave(length)},
    ]
    inputs += [{"target": wave(length - 30 + i, phase=i, level=5.0)} for i in range(1, n_series)]
    return {"inputs": inputs}


def floats(values: list[float | None]) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values], dtype=np.float64)


@contextlib.contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """The app's model thread uses ``torch_threads``; the reference must add up in the same order."""
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny_stream_model(tiny_model_path: Path) -> Any:
    return tsfm.load_model(tiny_model_path)


@pytest.fixture(scope="module")
def client(open_client: Callable[..., Any], tiny_model_path: Path) -> Iterator[TestClient]:
    with open_client(tiny_model_path, torch_threads=1, max_points_per_series=200) as shared:
        yield shared


@pytest.fixture
def make_tiny_client(open_client: Callable[..., Any], tiny_model_path: Path) -> Iterator[Callable[..., TestClient]]:
    """``make_tiny_client(**settings)``: a fresh app on the tiny model, closed after the test."""
    with contextlib.ExitStack() as stack:
        yield lambda **settings: stack.enter_context(open_client(tiny_model_path, torch_threads=1, **settings))


def open_new(client: TestClient, body: dict[str, Any] | None = None) -> str:
    answer = client.post("/v1/streams", json=body or opening())
    assert answer.status_code == 201, answer.text
    return str(answer.json()["stream_id"])


def loc_of(answer: httpx.Response) -> list[Any]:
    assert answer.status_code == 422, answer.text
    return list(answer.json()["detail"][0]["loc"])


# ----------------------------------------------------------------------------------------------------------------
# The life of a stream


def test_open_update_forecast_delete_equals_the_library(client: TestClient, tiny_stream_model: Any) -> None:
    body = opening()
    opened = client.post("/v1/streams", json=body)
    assert opened.status_code == 201, opened.text
    info = opened.json()
    stream_id = info["stream_id"]
    assert info["series"] == 2 and info["expires_in_s"] == pytest.approx(3600, abs=5) and info["warnings"] == []

    updates = [
        [[1.0, 2.0, None] * 11, [3.0] * 5],  # 33 steps: one patch completed, one step buffered; nulls are missing
        [[], [4.0, None] * 20],  # an empty list adds nothing to that series
    ]
    answers = [client.post(f"/v1/streams/{stream_id}/observations", json={"values": u}) for u in updates]
    assert [a.status_code for a in answers] == [200, 200], answers[-1].text
    assert answers[0].json()["steps"] == [33, 5] and answers[0].json()["patches_completed"] == [1, 0]
    assert answers[1].json()["buffered"] == [1, 13] and answers[1].json()["patches_completed"] == [0, 1]
    assert answers[1].json()["reanchors"] == [0, 0]

    forecast = client.post(f"/v1/streams/{stream_id}/forecast",
                           json={"prediction_length": 5, "quantile_levels": LEVELS})
    assert forecast.status_code == 200, forecast.text
    result = forecast.json()
    assert result["model"] == "tiny" and [p["item_id"] for p in result["predictions"]] == ["north", 1]
    north, bare = result["predictions"]
    # 100 + 33 hourly values from 2024-01-01T00:00: the last at 2024-01-06T12:00, the forecast continues from it
    assert north["timestamps"] == [f"2024-01-06T{h}:00:00" for h in range(13, 18)] and "timestamps" not in bare

    with torch_threads(1):
        stream = open_stream(tiny_stream_model, [floats(s["target"]) for s in body["inputs"]])
        for update in updates:
            stream.update([floats(row) for row in update])
        quantiles, median = stream.forecast(5, LEVELS)
    for i, prediction in enumerate(result["predictions"]):
        np.testing.assert_array_equal(np.asarray(prediction["median"], dtype=np.float32), median[i])
        for j, level in enumerate(LEVELS):
            np.testing.assert_array_equal(np.asarray(prediction[str(level)], dtype=np.float32), quantiles[i, :, j])

    again = client.post(f"/v1/streams/{stream_id}/forecast", json={"prediction_length": 5, "quantile_levels": LEVELS})
    assert again.json() == result  # forecasting does not change the state

    assert client.delete(f"/v1/streams/{stream_id}").status_code == 204
    assert client.delete(f"/v1/streams/{stream_id}").status_code == 404
    assert client.post(f"/v1/streams/{stream_id}/forecast", json={"prediction_length": 3}).status_code == 404
    assert client.post(f"/v1/streams/{stream_id}/observations", json={"values": [[1.0], [1.0]]}).status_code == 404


def test_the_reanchoring_bound_is_chosen_when_a_stream_opens(client: TestClient) -> None:
    """``max_drift``: a series that jumps to 50x its level re-anchors under the default bound, not with ``null``."""
    jump = {"values": [[5000.0] * 64, [3.0] * 32]}
    counts = {}
    for name, extra in [("default", {}), ("never", {"max_drift": None}), ("loose", {"max_drift": 1e6})]:
        stream_id = open_new(client, {**opening(), **extra})
        answer = client.post(f"/v1/streams/{stream_id}/observations", json=jump)
        assert answer.status_code == 200, answer.text
        counts[name] = answer.json()["reanchors"][0]
        client.delete(f"/v1/streams/{stream_id}")
    assert counts["default"] >= 1 and counts["never"] == 0 and counts["loose"] == 0, counts
    for bad in [1.0, 0.5, -2, "2", 1e7]:
        assert loc_of(client.post("/v1/streams", json={**opening(), "max_drift": bad})) == ["body", "max_drift"]


def test_timestamps_must_continue_the_series(client: TestClient) -> None:
    stream_id = open_new(client)  # north: 100 hourly values, the last at 2024-01-05T03:00
    url = f"/v1/streams/{stream_id}/observations"
    good = {"values": [[1.0, 2.0], [1.0]], "timestamps": [["2024-01-05T04:00:00", "2024-01-05T05:00:00"], None]}
    assert client.post(url, json=good).status_code == 200

    overlapping = {"values": [[1.0], []], "timestamps": [["2024-01-05T05:00:00"], None]}
    answer = client.post(url, json=overlapping)
    assert loc_of(answer) == ["body", "timestamps", 0, 0] and "overlaps" in answer.json()["detail"][0]["msg"]
    out_of_order = {"values": [[1.0, 2.0], []], "timestamps": [["2024-01-05T07:00:00", "2024-01-05T06:00:00"], None]}
    answer = client.post(url, json=out_of_order)
    assert loc_of(answer) == ["body", "timestamps", 0, 0] and "expected 2024-01-05T06:00:00" in answer.text
    swapped = {"values": [[1.0, 2.0], []], "timestamps": [["2024-01-05T06:00:00", "2024-01-05T06:00:00"], None]}
    answer = client.post(url, json=swapped)
    assert loc_of(answer) == ["body", "timestamps", 0, 1] and "out of order" in answer.text
    no_axis = {"values": [[], [1.0]], "timestamps": [None, ["2024-01-05T06:00:00"]]}
    assert loc_of(client.post(url, json=no_axis)) == ["body", "timestamps", 1]
    wrong_length = {"values": [[1.0, 2.0], []], "timestamps": [["2024-01-05T06:00:00"], None]}
    assert loc_of(client.post(url, json=wrong_length)) == ["body", "timestamps", 0]

    # refused updates changed nothing: the next step is still 06:00, and a forecast continues from 05:00
    assert client.post(url, json={"values": [[3.0], []], "timestamps": [["2024-01-05T06:00:00"], None]}).status_code \
        == 200
    forecast = client.post(f"/v1/streams/{stream_id}/forecast", json={"prediction_length": 2}).json()
    assert forecast["predictions"][0]["timestamps"] == ["2024-01-05T07:00:00", "2024-01-05T08:00:00"]


def test_bad_requests_name_the_field(client: TestClient) -> None:
    stream_id = open_new(client)
    update, forecast = f"/v1/streams/{stream_id}/observations", f"/v1/streams/{stream_id}/forecast"

    for method, path in [("post", f"/v1/streams/{UNKNOWN_ID}/observations"),
                         ("post", f"/v1/streams/{UNKNOWN_ID}/forecast"), ("delete", f"/v1/streams/{UNKNOWN_ID}")]:
        answer = client.request(method.upper(), path, json={"values": [[1.0]], "prediction_length": 1})
        assert answer.status_code == 404 and "no open stream" in answer.json()["detail"]
    for bad_id in ["abc", "A" * 31 + "!", "A" * 33, "..." + "A" * 29]:
        answer = client.post(f"/v1/streams/{bad_id}/forecast", json={"prediction_length": 1})
        assert loc_of(answer) == ["path", "stream_id"]

    answer = client.post(update, json={"values": [[1.0]]})
    assert loc_of(answer) == ["body", "values"] and "the stream has 2" in answer.text
    infinite = client.post(update, content=b'{"values": [[1.0], [2.0, Infinity]]}',
                           headers={"content-type": "application/json"})
    assert loc_of(infinite) == ["body", "values", 1] and "infinite" in infinite.text
    too_long = client.post(update, json={"values": [[1.0] * 201, []]})  # max_points_per_series=200
    assert loc_of(too_long) == ["body", "values", 0]
    assert loc_of(client.post(update, json={"values": [["1.0"], []]}))[:3] == ["body", "values", 0]
    assert loc_of(client.post(update, json={"values": [[], []], "extra": 1})) == ["body", "extra"]
    assert loc_of(client.post(update, content=b"{", headers={"content-type": "application/json"}))[0] == "body"

    assert loc_of(client.post(forecast, json={"prediction_length": 0})) == ["body", "prediction_length"]
    repeated = client.post(forecast, json={"prediction_length": 2, "quantile_levels": [0.5, 0.5]})
    assert loc_of(repeated) == ["body", "quantile_levels"]
    bad_open = client.post("/v1/streams", json={"inputs": [{"target": [1.0, None] * 3},
                                                           {"target": []}]})
    assert loc_of(bad_open) == ["body", "inputs", 1, "target"]
    assert loc_of(client.post("/v1/streams", json={**opening(), "model": "other"})) == ["body", "model"]
    # after all that the stream is untouched
    assert client.post(update, json={"values": [[1.0], [2.0]]}).json()["steps"] == [1, 1]


def test_streams_expire_when_idle(make_tiny_client: Callable[..., TestClient]) -> None:
    client = make_tiny_client(stream_idle_s=100)
    store: StreamStore = client.app.state.service.stream_store  # type: ignore[attr-defined]
    now = [1000.0]
    store.clock = lambda: now[0]
    kept, dropped = open_new(client), open_new(client)
    now[0] += 60
    assert client.post(f"/v1/streams/{kept}/observations", json={"values": [[1.0], []]}).status_code == 200
    now[0] += 60  # dropped: idle 120 s; kept: 60 s
    answer = client.post(f"/v1/streams/{dropped}/forecast", json={"prediction_length": 2})
    assert answer.status_code == 404 and "expired" in answer.json()["detail"]
    assert client.post(f"/v1/streams/{kept}/forecast", json={"prediction_length": 2}).status_code == 200
    now[0] += 101
    assert store.sweep() == 1 and store.entries == {}
    metrics = client.get("/metrics").text
    assert 'tsfm_stream_events_total{event="expired"} 2.0' in metrics and "tsfm_streams_open 0.0" in metrics


def test_the_periodic_sweep_removes_idle_streams(make_tiny_client: Callable[..., TestClient]) -> None:
    client = make_tiny_client(stream_idle_s=0.2)
    store: StreamStore = client.app.state.service.stream_store  # type: ignore[attr-defined]
    open_new(client)
    deadline = time.monotonic() + 10
    while store.entries and time.monotonic() < deadline:  # no request touches it: only the sweeper can remove it
        time.sleep(0.05)
    assert store.entries == {}


def test_caps_on_streams_and_memory(make_tiny_client: Callable[..., TestClient]) -> None:
    client = make_tiny_client(max_streams=2)
    first, _ = open_new(client), open_new(client)
    full = client.post("/v1/streams", json=opening())
    assert full.status_code == 429 and "max_streams" in full.json()["detail"] and full.headers["Retry-After"]
    assert client.delete(f"/v1/streams/{first}").status_code == 204
    open_new(client)
    assert 'tsfm_stream_events_total{event="refused"} 1.0' in client.get("/metrics").text

    store: StreamStore = client.app.state.service.stream_store  # type: ignore[attr-defined]
    per_series = client.app.state.service.stream_bytes_per_series  # type: ignore[attr-defined]
    assert per_series > 512 * 4  # the kept tail and the state tensors
    assert store.total_bytes == 4 * per_series

    small = make_tiny_client(max_stream_bytes=3 * per_series)
    too_big = small.post("/v1/streams", json=opening(n_series=4))
    assert too_big.status_code == 413 and "max_stream_bytes" in too_big.json()["detail"]
    open_new(small)  # two series
    crowded = small.post("/v1/streams", json=opening(n_series=2))
    assert crowded.status_code == 507 and "max_stream_bytes" in crowded.json()["detail"]
    assert small.post("/v1/streams", json=opening(n_series=1)).status_code == 201


def test_streams_need_the_api_key(make_tiny_client: Callable[..., TestClient]) -> None:
    client = make_tiny_client(api_key="stream-key")
    assert client.post("/v1/streams", json=opening()).status_code == 401
    assert client.post(f"/v1/streams/{UNKNOWN_ID}/forecast", json={"prediction_length": 1}).status_code == 401
    assert client.delete(f"/v1/streams/{UNKNOWN_ID}").status_code == 401
    auth = {"Authorization": "Bearer stream-key"}
    assert client.post("/v1/streams", json=opening(), headers=auth).status_code == 201


def test_streams_can_be_turned_off(make_tiny_client: Callable[..., TestClient]) -> None:
    answer = make_tiny_client(max_streams=0).post("/v1/streams", json=opening())
    assert answer.status_code == 503 and "max_streams=0" in answer.json()["detail"]


def test_concurrent_updates_of_one_stream_are_serialised(live_server: Callable[..., str]) -> None:
    """Updates sent at once over real connections: each is applied whole, none is lost (its lock serialises them)."""
    from concurrent.futures import ThreadPoolExecutor

    base = live_server(torch_threads=1)
    with httpx.Client(base_url=base, timeout=30) as http:
        stream_id = http.post("/v1/streams", json={"inputs": [{"target": wave(64)}]}).json()["stream_id"]

        def send(k: int) -> dict[str, Any]:
            answer = http.post(f"/v1/streams/{stream_id}/observations", json={"values": [[10.0 + k % 3] * 5]})
            assert answer.status_code == 200, answer.text
            return dict(answer.json())

        with ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(send, range(12)))
        assert sum(sum(a["patches_completed"]) for a in answers) == 60 // 32
        assert sorted(a["buffered"][0] for a in answers) == sorted((5 * k) % 32 for k in range(1, 13))
        assert http.post(f"/v1/streams/{stream_id}/forecast", json={"prediction_length": 3}).status_code == 200


class LastValue(torch.nn.Module):
    """A forecaster that is not a tsfm ``Forecaster``: it serves /v1/forecast but has no state to stream."""

    def __init__(self) -> None:
        super().__init__()
        from tsfm.config import ModelConfig

        self.config = ModelConfig(patch_size=4, context_length=64)
        self.weight = torch.nn.Parameter(torch.zeros(1))

    @property
    def quantile_levels(self) -> tuple[float, ...]:
        return self.config.quantile_levels

    def forecast(self, context: torch.Tensor, prediction_length: int) -> torch.Tensor:
        last = torch.nan_to_num(context[:, -1], nan=0.0)
        return last[:, None, None].expand(-1, len(self.quantile_levels), prediction_length).clone()


def test_a_model_without_state_serves_forecasts_but_no_streams(open_client: Callable[..., Any]) -> None:
    with open_client(LastValue()) as client:
        assert client.get("/ready").status_code == 200
        answer = client.post("/v1/streams", json=opening())
        assert answer.status_code == 503 and "not a tsfm Forecaster" in answer.json()["detail"]


# ----------------------------------------------------------------------------------------------------------------
# Snapshots


def test_snapshots_survive_a_new_app(make_tiny_client: Callable[..., TestClient], tmp_path: Path) -> None:
    first = make_tiny_client(stream_dir=str(tmp_path))
    stream_id = open_new(first)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{stream_id}.safetensors"]
    assert first.post(f"/v1/streams/{stream_id}/observations",
                      json={"values": [wave(40, 3), wave(7)], "timestamps": [None, None]}).status_code == 200
    before = first.post(f"/v1/streams/{stream_id}/forecast", json={"prediction_length": 4}).json()

    (tmp_path / "notes.txt").write_text("not a stream")  # foreign files are left alone
    (tmp_path / f"{'B' * 32}.safetensors").write_bytes(b"garbage")  # a corrupt snapshot is skipped, not fatal
    second = make_tiny_client(stream_dir=str(tmp_path))
    assert second.post(f"/v1/streams/{stream_id}/forecast", json={"prediction_length": 4}).json() == before

    assert second.delete(f"/v1/streams/{stream_id}").status_code == 204
    assert not (tmp_path / f"{stream_id}.safetensors").exists()


def test_an_update_that_cannot_be_saved_is_not_applied(
    make_tiny_client: Callable[..., TestClient], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = make_tiny_client(stream_dir=str(tmp_path))
    stream_id = open_new(client)
    before = client.post(f"/v1/streams/{stream_id}/forecast", json={"prediction_length": 3}).json()
    saved = (tmp_path / f"{stream_id}.safetensors").read_bytes()

    def fail(*args: Any) -> None:
        raise OSError("disk full")

    store: StreamStore = client.app.state.service.stream_store  # type: ignore[attr-defined]
    monkeypatch.setattr(store, "write_snapshot", fail)
    answer = client.post(f"/v1/streams/{stream_id}/observations", json={"values": [wave(64), wave(64)]})
    assert answer.status_code == 500 and "not applied" in answer.json()["detail"]
    assert client.post(f"/v1/streams/{stream_id}/forecast", json={"prediction_length": 3}).json() == before
    assert (tmp_path / f"{stream_id}.safetensors").read_bytes() == saved


def test_a_restarted_server_forecasts_what_it_acknowledged(
    serve_process: Callable[..., tuple[str, subprocess.Popen[str]]], tmp_path: Path, tiny_model_path: Path
) -> None:
    """A real ``tsfm serve`` with ``--stream-dir``, killed (SIGKILL: no shutdown hook runs) after acknowledging an
    update; a new process on the same folder forecasts exactly what the first one did."""
    folder = tmp_path / "streams"
    args = ("--model", str(tiny_model_path), "--stream-dir", str(folder), "--stream-idle-s", "600",
            "--max-streams", "10")
    env = {"TSFM_TORCH_THREADS": "1"}
    base, process = serve_process(*args, env=env)
    body = {"prediction_length": 6, "quantile_levels": LEVELS}
    with httpx.Client(base_url=base, timeout=30) as http:
        stream_id = http.post("/v1/streams", json=opening()).json()["stream_id"]
        update = http.post(f"/v1/streams/{stream_id}/observations", json={"values": [wave(45, 1), [None, 2.0]]})
        assert update.status_code == 200, update.text
        before = http.post(f"/v1/streams/{stream_id}/forecast", json=body).json()
    process.kill()
    process.wait(timeout=20)

    base, _ = serve_process(*args, env=env)
    with httpx.Client(base_url=base, timeout=30) as http:
        assert http.post(f"/v1/streams/{stream_id}/forecast", json=body).json() == before
        assert 'tsfm_streams_open 1.0' in http.get("/metrics").text
