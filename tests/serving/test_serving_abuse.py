"""Regression tests for issue 14, "the service under hostile traffic": one test (or a few) per defect, each failing
on the service as it was before the fix.

1. timestamps built off the event loop, vectorised, capped; 2. a cap on the size of an answer; 3. short 422 bodies;
4. bounded /metrics labels; 5. bounded queue, body read deadline, uvicorn limits; 6. a timeout frees the model
within one batch; 7. the API key before the body; 8. schema and validator agree; 9. the smaller items.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
import time
from typing import Any

import httpx
import pandas as pd
import pytest
import torch

from tsfm.config import ModelConfig
from tsfm.df_utils import future_timestamps, parse_freq
from tsfm.serving.settings import Settings


def one_series(**fields: Any) -> dict[str, Any]:
    series = {"target": [float(t % 5) for t in range(40)], **fields}
    return {"inputs": [series], "parameters": {"prediction_length": 4}}


class SlowModel(torch.nn.Module):
    """Repeats the last value after ``delay`` seconds per model call; counts its calls."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.config = ModelConfig(patch_size=4, context_length=64)
        self.delay = delay
        self.calls = 0
        self.weight = torch.nn.Parameter(torch.zeros(1))

    @property
    def quantile_levels(self) -> tuple[float, ...]:
        return self.config.quantile_levels

    def forecast(self, context: torch.Tensor, prediction_length: int) -> torch.Tensor:
        self.calls += 1
        time.sleep(self.delay)
        last = torch.nan_to_num(context[:, -1], nan=0.0)
        return last[:, None, None].expand(-1, len(self.quantile_levels), prediction_length).clone()


# ----------------------------------------------------------------------------------------------------------------
# 1. Timestamps: off the event loop, one date range per distinct series end, capped


def calendar_attack(n_series: int, horizon: int) -> dict[str, Any]:
    """Business-hour series with distinct starts: the most expensive timestamps pandas can be asked for."""
    days = [d for d in range(1, 32) if pd.Timestamp(2024, 1, d).dayofweek < 5]  # on the grid: Mon-Fri, 9-17 h
    inputs = [{"start": f"2024-01-{days[i % len(days)]:02d}T{9 + i % 8:02d}:00:00", "freq": "bh",
               "target": [1.0] * (8 + i // 200)} for i in range(n_series)]
    return {"inputs": inputs, "parameters": {"prediction_length": horizon, "quantile_levels": [0.5]}}


def test_health_answers_while_a_request_builds_many_calendar_timestamps(live_server) -> None:
    """Before: the request's timestamps were built on the event loop and /health waited seconds for them."""
    base = live_server(max_calendar_timestamps=10_000_000)
    body = calendar_attack(n_series=300, horizon=512)
    outcome: dict[str, Any] = {}

    def send() -> None:
        started = time.perf_counter()
        outcome["status"] = httpx.post(f"{base}/v1/forecast", json=body, timeout=120).status_code
        outcome["seconds"] = time.perf_counter() - started

    sender = threading.Thread(target=send)
    sender.start()
    waits = []
    with httpx.Client(base_url=base, timeout=60) as http:
        while sender.is_alive():
            started = time.perf_counter()
            assert http.get("/health").status_code == 200
            waits.append(time.perf_counter() - started)
            time.sleep(0.05)
    sender.join()
    assert outcome["status"] == 200
    assert max(waits) < 1.0, f"/health waited {max(waits):.2f} s while the forecast ran {outcome['seconds']:.2f} s"


def test_calendar_timestamps_over_the_limit_are_refused_with_the_cost(make_client) -> None:
    client = make_client(max_calendar_timestamps=1000)
    response = client.post("/v1/forecast", json=calendar_attack(n_series=30, horizon=64))
    assert response.status_code == 422, response.text
    (error,) = response.json()["detail"]
    assert error["loc"] == ["body", "inputs"]
    assert "1920" in error["msg"] and "1000" in error["msg"] and "max_calendar_timestamps" in error["msg"]


def test_timestamps_are_the_cores_for_every_distinct_end(client) -> None:
    """The service's stamps equal ``tsfm.df_utils.future_timestamps`` (what ``predict_df`` writes)."""
    starts = ["2024-01-01T09:00:00", "2024-01-01T09:00:00", "2024-02-05T10:00:00"]
    lengths = [10, 17, 10]
    for freq in ("bh", "MS", "W-SUN", "h", "15min"):
        offset = parse_freq(freq)
        inputs = []
        for start, n in zip(starts, lengths, strict=True):
            first = offset.rollforward(pd.Timestamp(start))
            inputs.append({"start": first.isoformat(), "freq": freq, "target": [1.0] * n})
        body = {"inputs": inputs, "parameters": {"prediction_length": 6, "quantile_levels": [0.5]}}
        response = client.post("/v1/forecast", json=body)
        assert response.status_code == 200, response.text
        for series, prediction in zip(inputs, response.json()["predictions"], strict=True):
            end = pd.Timestamp(series["start"]) + (len(series["target"]) - 1) * offset
            expected = future_timestamps(pd.DatetimeIndex([end]), offset, 6)
            assert prediction["timestamps"] == [stamp.isoformat() for stamp in expected], freq


# ----------------------------------------------------------------------------------------------------------------
# 2. The size of an answer


def test_answer_size_is_capped_with_the_product_in_the_message(make_client, series_request) -> None:
    client = make_client(max_forecast_values=1000)
    body = series_request(n_series=3, length=40, horizon=100, quantile_levels=[0.1, 0.5, 0.9])
    response = client.post("/v1/forecast", json=body)
    assert response.status_code == 422, response.text
    (error,) = response.json()["detail"]
    assert error["loc"] == ["body"]
    assert "3 series x 100 steps x 4" in error["msg"] and "1200" in error["msg"] and "1000" in error["msg"]
    assert client.post("/v1/forecast", json=series_request(n_series=2, length=40, horizon=100,
                                                           quantile_levels=[0.1, 0.5, 0.9])).status_code == 200


def test_default_answer_cap_refuses_the_gigabyte_request(make_client) -> None:
    """1,000 series x horizon 1,024 x 99 levels (about 25 kB asked, 1 GB answered before)."""
    client = make_client()
    levels = [round(0.01 * k, 2) for k in range(1, 100)]
    body = {"inputs": [{"target": [1.0, 2.0]}] * 1000,
            "parameters": {"prediction_length": 1024, "quantile_levels": levels}}
    started = time.perf_counter()
    response = client.post("/v1/forecast", json=body)
    assert response.status_code == 422 and "max_forecast_values" in response.text
    assert time.perf_counter() - started < 5


# ----------------------------------------------------------------------------------------------------------------
# 3. Error bodies stay small


@pytest.mark.parametrize(
    ("payload", "loc"),
    [([0.5] * 300_000, ["body"]),  # an array where an object belongs
     ({"inputs": [{"target": "1," * 200_000}], "parameters": {"prediction_length": 4}},
      ["body", "inputs", 0, "target"])],  # a long string where a list belongs
    ids=["array body", "string target"],
)
def test_422_does_not_echo_a_large_input(make_client, payload: Any, loc: list[Any]) -> None:
    client = make_client(max_body_bytes=64 * 1024 * 1024)
    raw = json.dumps(payload).encode()
    response = client.post("/v1/forecast", content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 422
    assert len(response.content) < 4096, f"{len(response.content)} bytes of error for {len(raw)} bytes of input"
    (error,) = response.json()["detail"]
    assert error["loc"] == loc and "should be" in error["msg"]


def test_422_lists_a_bounded_number_of_errors(make_client) -> None:
    client = make_client(max_points_per_series=100_000)
    raw = json.dumps({"inputs": [{"target": ["x"] * 20_000}], "parameters": {"prediction_length": 4}}).encode()
    response = client.post("/v1/forecast", content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 422 and len(response.content) < 8192
    detail = response.json()["detail"]
    assert 1 <= len(detail) <= 21 and "more errors" in detail[-1]["msg"]


# ----------------------------------------------------------------------------------------------------------------
# 4. /metrics labels


def test_metrics_labels_stay_a_fixed_set_under_made_up_methods(make_client) -> None:
    client = make_client()
    before = len(client.get("/metrics").content)
    for k in range(60):
        client.request(f"X{k}METHOD", "/v1/forecast")
        client.request("GET", f"/random/{k}")
    text = client.get("/metrics").text
    methods = set(re.findall(r'method="([^"]*)"', text))
    assert methods <= {"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "other"}, methods
    routes = set(re.findall(r'route="([^"]*)"', text))
    assert not [r for r in routes if r.startswith("/random")], routes
    assert len(text) < before + 8000


def test_metrics_need_the_key_when_one_is_set(make_client) -> None:
    client = make_client(api_key="s3cret")
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    assert client.get("/health").status_code == 200 and client.get("/ready").status_code == 200


# ----------------------------------------------------------------------------------------------------------------
# 5. Queue length, slow bodies, connection limits


def test_a_full_queue_answers_503_with_retry_after(tiny_model_path) -> None:
    from tsfm.serving.app import create_app

    model = SlowModel(delay=0.3)
    app = create_app(model=model, load_in_background=False, warmup=False, max_queued_series=4, batch_window_ms=0)
    body = {"inputs": [{"target": [1.0, 2.0, 3.0]}] * 2, "parameters": {"prediction_length": 2}}

    async def burst() -> list[httpx.Response]:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test", timeout=30) as http:
                return await asyncio.gather(*(http.post("/v1/forecast", json=body) for _ in range(8)))

    responses = asyncio.run(burst())
    statuses = sorted(r.status_code for r in responses)
    assert 200 in statuses and 503 in statuses and set(statuses) <= {200, 503}, statuses
    busy = next(r for r in responses if r.status_code == 503)
    assert busy.headers["retry-after"] and "queue" in busy.json()["detail"]


def test_a_body_sent_too_slowly_gets_408_and_the_connection_closes(live_server) -> None:
    base = live_server(body_timeout_s=0.5)
    port = int(base.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"POST /v1/forecast HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 1000\r\n\r\n{\"inputs\": [")
        started = time.perf_counter()
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
        waited = time.perf_counter() - started
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert waited < 5


def test_serve_passes_connection_limits_to_uvicorn(monkeypatch, tiny_model_path) -> None:
    import uvicorn

    from tsfm.serving import server

    seen: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda *args, **kwargs: seen.update(kwargs))
    monkeypatch.setenv("TSFM_LIMIT_CONCURRENCY", "77")
    server.run(model=str(tiny_model_path), port=1)
    assert seen["limit_concurrency"] == 77 and seen["timeout_keep_alive"] == Settings().timeout_keep_alive_s


# ----------------------------------------------------------------------------------------------------------------
# 6. A timed-out request frees the model within one batch


def test_a_timed_out_request_stops_at_the_next_batch(make_client) -> None:
    """Ten series in calls of two, 0.3 s a call: the request times out at 0.8 s, in its third call; the next request
    waits for that call only (before: for all five, and then timed out itself)."""
    model = SlowModel(delay=0.3)
    client = make_client(model=model, warmup=False, request_timeout_s=0.8, max_batch_series=2, batch_window_ms=0)
    big = {"inputs": [{"target": [float(i), 2.0, 3.0]} for i in range(10)], "parameters": {"prediction_length": 2}}
    assert client.post("/v1/forecast", json=big).status_code == 504
    started = time.perf_counter()
    small = client.post("/v1/forecast", json={"inputs": [{"target": [1.0, 2.0, 3.0]}],
                                              "parameters": {"prediction_length": 3}})
    waited = time.perf_counter() - started
    assert small.status_code == 200
    assert waited < 0.8, f"the next request waited {waited:.2f} s for the abandoned one"
    assert model.calls <= 4  # up to three calls of the big request (not five), then the small one


def test_a_client_that_disconnects_frees_the_model(live_server) -> None:
    """The work of a request whose client went away stops at its next call (nobody reads the answer)."""
    model = SlowModel(delay=0.3)
    base = live_server(model=model, warmup=False, max_batch_series=2, batch_window_ms=0)
    big = {"inputs": [{"target": [float(i), 2.0, 3.0]} for i in range(20)], "parameters": {"prediction_length": 2}}
    with pytest.raises(httpx.TimeoutException):
        httpx.post(f"{base}/v1/forecast", json=big, timeout=0.5)  # gives up and closes the connection
    time.sleep(0.5)
    calls = model.calls
    time.sleep(0.7)
    assert model.calls - calls <= 1, "the abandoned request kept the model busy"
    assert model.calls <= 5  # of the ten calls the request needed


def test_large_requests_take_turns_with_small_ones(make_client) -> None:
    """A large request's calls are queued one at a time, so a small request waits for one of them, not all."""
    from tsfm.serving.app import create_app

    model = SlowModel(delay=0.2)
    app = create_app(model=model, load_in_background=False, warmup=False, max_batch_series=2, batch_window_ms=0)
    big = {"inputs": [{"target": [float(i), 2.0, 3.0]} for i in range(12)], "parameters": {"prediction_length": 2}}
    small = {"inputs": [{"target": [1.0, 2.0, 3.0]}] * 2, "parameters": {"prediction_length": 2}}

    async def both() -> float:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test", timeout=30) as http:
                large = asyncio.ensure_future(http.post("/v1/forecast", json=big))
                await asyncio.sleep(0.1)  # the large request's first call is running
                started = time.perf_counter()
                assert (await http.post("/v1/forecast", json=small)).status_code == 200
                waited = time.perf_counter() - started
                assert (await large).status_code == 200
                return waited

    waited = asyncio.run(both())
    assert waited < 0.7, f"the small request waited {waited:.2f} s behind the large one (six calls: 1.2 s)"


def test_the_interactive_share_is_a_setting(monkeypatch) -> None:
    """``interactive_weight`` (TSFM_INTERACTIVE_WEIGHT) reaches the batcher; a share below 1 is refused by name."""
    from tsfm.serving.app import create_app

    monkeypatch.setenv("TSFM_INTERACTIVE_WEIGHT", "2")
    app = create_app(model=SlowModel(delay=0.0), load_in_background=False, warmup=False)

    async def weight() -> int:
        async with app.router.lifespan_context(app):
            return app.state.service.batcher.interactive_weight

    assert asyncio.run(weight()) == 2
    with pytest.raises(ValueError, match="interactive_weight"):
        Settings(interactive_weight=0)


# ----------------------------------------------------------------------------------------------------------------
# 7. The key before the body


@pytest.mark.parametrize(
    "content", [b"{", b"0" * 5000, b'{"inputs": []}'], ids=["malformed", "oversized", "invalid"]
)
def test_the_api_key_is_checked_before_the_body(make_client, content: bytes) -> None:
    client = make_client(api_key="s3cret", max_body_bytes=1000)
    response = client.post("/v1/forecast", content=content, headers={"content-type": "application/json"})
    assert response.status_code == 401 and response.headers["www-authenticate"] == "Bearer"


def test_401_comes_before_the_body_is_sent(live_server) -> None:
    base = live_server(api_key="s3cret", body_timeout_s=30)
    port = int(base.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"POST /v1/forecast HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n")
        assert sock.recv(4096).startswith(b"HTTP/1.1 401")


# ----------------------------------------------------------------------------------------------------------------
# 8. What the schema says is what is accepted


def test_integral_float_horizon_is_accepted_as_the_schema_says(client) -> None:
    body = one_series()
    body["parameters"]["prediction_length"] = 3.0
    response = client.post("/v1/forecast", json=body)
    assert response.status_code == 200, response.text
    assert len(response.json()["predictions"][0]["median"]) == 3
    body["parameters"]["prediction_length"] = 2.5
    assert client.post("/v1/forecast", json=body).status_code == 422


def test_freq_schema_is_a_pattern_and_every_documented_alias_is_accepted(client) -> None:
    from tsfm.serving.schemas import FREQ_ALIASES, FREQ_PATTERN

    spec = client.get("/openapi.json").json()
    freq = spec["components"]["schemas"]["SeriesInput"]["properties"]["freq"]
    patterns = [branch.get("pattern") for branch in freq.get("anyOf", [freq])]
    assert FREQ_PATTERN in patterns
    for alias in [*FREQ_ALIASES, "15min", "3h", "2W-MON"]:
        assert re.fullmatch(FREQ_PATTERN, alias), alias
        response = client.post("/v1/forecast", json=one_series(freq=alias))
        assert response.status_code == 200, (alias, response.text)
    for alias in ("fortnightly", "0h", "H", "M"):  # no multiplier 0; no aliases pandas deprecated
        assert not re.fullmatch(FREQ_PATTERN, alias)
        assert client.post("/v1/forecast", json=one_series(freq=alias)).status_code == 422


@pytest.mark.parametrize("start", ["12345", "2024-13-01", "2023-02-29", "2024-01-01 00:00:00", "yesterday"])
def test_start_must_be_an_iso_date(client, start: str) -> None:
    response = client.post("/v1/forecast", json=one_series(start=start, freq="D"))
    assert response.status_code == 422, response.text
    (error,) = response.json()["detail"]
    assert error["loc"] == ["body", "inputs", 0, "start"] and "ISO 8601" in error["msg"]


def test_dates_outside_pandas_nanosecond_range_work(client) -> None:
    response = client.post("/v1/forecast", json=one_series(start="1500-01-01", freq="D"))
    assert response.status_code == 200, response.text
    assert response.json()["predictions"][0]["timestamps"][0] == "1500-02-10T00:00:00"


def test_timestamps_past_year_9999_are_left_out_with_a_warning(client) -> None:
    response = client.post("/v1/forecast", json=one_series(start="9999-12-01", freq="D"))
    assert response.status_code == 200, response.text
    answer = response.json()
    assert "timestamps" not in answer["predictions"][0]
    assert any("9999" in w and "inputs[0]" in w for w in answer["warnings"])


def test_start_off_its_grid_is_rolled_forward_with_a_warning(client) -> None:
    response = client.post("/v1/forecast", json=one_series(start="2024-01-15", freq="MS"))
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["predictions"][0]["timestamps"][0] == "2027-06-01T00:00:00"  # Feb 2024 + 40 months
    assert any("inputs[0]" in w and "2024-02-01" in w for w in answer["warnings"])


# ----------------------------------------------------------------------------------------------------------------
# 9. Smaller items


def test_docs_do_not_call_the_swagger_validator(client) -> None:
    html = client.get("/docs").text
    assert '"validatorUrl": null' in html


def test_failed_load_does_not_show_a_path_on_ready(tmp_path) -> None:
    from fastapi.testclient import TestClient

    from tsfm.serving.app import create_app

    class Missing(SlowModel):
        def forecast(self, context: torch.Tensor, prediction_length: int) -> torch.Tensor:
            raise FileNotFoundError(f"{tmp_path}/weights/model.safetensors is missing")

    with TestClient(create_app(model=Missing(0.0), load_in_background=True)) as client:
        deadline = time.monotonic() + 20
        while (ready := client.get("/ready").json())["status"] == "loading":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert ready["status"] == "failed" and str(tmp_path) not in json.dumps(ready)
        assert "FileNotFoundError" in ready["detail"]


def test_non_ascii_api_key_is_refused_at_start() -> None:
    with pytest.raises(ValueError, match="api_key"):
        Settings(api_key="schlüssel")


def test_item_id_has_a_length_limit(client) -> None:
    response = client.post("/v1/forecast", json=one_series(item_id="x" * 10_000))
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"][:4] == ["body", "inputs", 0, "item_id"]


def test_integer_item_id_bounds_are_in_the_schema_as_the_validator_applies_them(client) -> None:
    """A schema-valid id must be accepted: the 64-bit bound is published in JSON Schema's words (a schemathesis
    run generated 2**63, which the schema allowed and the validator refused)."""
    spec = client.get("/openapi.json").json()
    branches = spec["components"]["schemas"]["SeriesInput"]["properties"]["item_id"]["anyOf"][0]["anyOf"]
    integer = next(b for b in branches if b.get("type") == "integer")
    assert integer["minimum"] == -(2**63) and integer["exclusiveMaximum"] == 2**63
    assert client.post("/v1/forecast", json=one_series(item_id=2**63 - 1)).status_code == 200
    response = client.post("/v1/forecast", json=one_series(item_id=2**63))
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"][:4] == ["body", "inputs", 0, "item_id"]


def test_the_point_forecast_is_called_median(client) -> None:
    prediction = client.post("/v1/forecast", json=one_series()).json()["predictions"][0]
    assert "median" in prediction and "mean" not in prediction
    spec = client.get("/openapi.json").json()
    assert "median" in spec["components"]["schemas"]["SeriesForecast"]["properties"]
