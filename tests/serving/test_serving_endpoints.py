"""Every endpoint of serving/app.py with good input: forecast (vs ``tsfm.predict``), models, probes, metrics, docs,
the page, CORS, and the start-up states (loading, failed)."""

from __future__ import annotations

import asyncio
import itertools
import re
import time
from typing import Any

import httpx
import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient

from tsfm.config import ModelConfig
from tsfm.forecast import predict
from tsfm.serving.app import create_app


def test_health_and_ready(client: TestClient) -> None:
    assert client.get("/health").json() == {"status": "ok"}
    response = client.get("/ready")
    assert response.status_code == 200 and response.json() == {"status": "ready"}


def test_forecast_answer_matches_predict(client: TestClient, tiny_model_path, series_request) -> None:
    body = series_request(n_series=5, length=100, horizon=20, quantile_levels=[0.9, 0.1, 0.5, 0.25])
    body["inputs"][1]["target"][10:30] = [None] * 20  # missing values
    body["inputs"][2]["target"] = body["inputs"][2]["target"][:37]  # another length bucket
    response = client.post("/v1/forecast", json=body)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["model"] == "tiny" and answer["warnings"] == []

    series = [np.array(s["target"], dtype=float) for s in body["inputs"]]
    quantiles, median = predict(series, 20, model=tiny_model_path, quantile_levels=[0.9, 0.1, 0.5, 0.25])
    assert [p["item_id"] for p in answer["predictions"]] == ["s0", "s1", "s2", "s3", "s4"]
    for i, prediction in enumerate(answer["predictions"]):
        assert set(prediction) == {"item_id", "median", "0.9", "0.1", "0.5", "0.25"}  # no timestamps without start
        # float32 values travel as exact float64 JSON numbers: equal bit for bit after the round trip
        np.testing.assert_array_equal(np.float32(prediction["median"]), median[i])
        for j, level in enumerate(["0.9", "0.1", "0.5", "0.25"]):
            np.testing.assert_array_equal(np.float32(prediction[level]), quantiles[i, :, j])


def test_forecast_defaults_item_ids_and_levels(client: TestClient) -> None:
    body = {"inputs": [{"target": [1.0, 2.0, 3.0, 2.0] * 8}, {"target": [5, 6, 7]}],
            "parameters": {"prediction_length": 3}}
    answer = client.post("/v1/forecast", json=body).json()
    assert [p["item_id"] for p in answer["predictions"]] == [0, 1]
    levels = [f"0.{k}" for k in range(1, 10)]
    assert all(len(p[q]) == 3 for p in answer["predictions"] for q in [*levels, "median"])
    first = answer["predictions"][0]
    for lower, upper in itertools.pairwise(levels):  # sorted quantiles: no crossing
        assert all(a <= b for a, b in zip(first[lower], first[upper], strict=True))


@pytest.mark.parametrize(
    ("start", "freq", "length", "expected"),
    [
        ("2024-01-01T00:00:00", "h", 30, ["2024-01-02T06:00:00", "2024-01-02T07:00:00", "2024-01-02T08:00:00"]),
        ("2024-01-01T00:00:00Z", "15min", 4, ["2024-01-01T01:00:00+00:00", "2024-01-01T01:15:00+00:00",
                                               "2024-01-01T01:30:00+00:00"]),
        ("2023-11-01", "MS", 3, ["2024-02-01T00:00:00", "2024-03-01T00:00:00", "2024-04-01T00:00:00"]),
        ("2024-01-07", "W-SUN", 2, ["2024-01-21T00:00:00", "2024-01-28T00:00:00", "2024-02-04T00:00:00"]),
    ],
)
def test_timestamps_continue_each_series(client: TestClient, start, freq, length, expected) -> None:
    body = {
        "inputs": [{"item_id": "a", "start": start, "freq": freq, "target": [float(t) for t in range(length)]}],
        "parameters": {"prediction_length": 3},
    }
    response = client.post("/v1/forecast", json=body)
    assert response.status_code == 200, response.text
    assert response.json()["predictions"][0]["timestamps"] == expected


def test_timestamps_only_with_start_and_freq(client: TestClient) -> None:
    body = {"inputs": [{"target": [1.0, 2.0, 3.0], "freq": "h"}, {"target": [1.0, 2.0], "start": "2024-01-01"}],
            "parameters": {"prediction_length": 2}}
    predictions = client.post("/v1/forecast", json=body).json()["predictions"]
    assert all("timestamps" not in p for p in predictions)


def test_warnings_for_long_horizons_clamped_levels_and_long_context(client: TestClient) -> None:
    body = {"inputs": [{"target": [float(t % 7) for t in range(600)]}],
            "parameters": {"prediction_length": 130, "quantile_levels": [0.05, 0.5]}}
    answer = client.post("/v1/forecast", json=body).json()
    text = " ".join(answer["warnings"])
    assert "past the 128 steps" in text and "[0.05]" in text and "last 512 values" in text
    assert len(answer["predictions"][0]["median"]) == 130


def test_models_lists_the_model_and_limits(client: TestClient) -> None:
    answer = client.get("/v1/models").json()
    (model,) = answer["models"]
    assert model["name"] == "tiny" and model["default"] and model["ready"]
    assert model["backbone"] == "xlstm[1:1]" and model["context_length"] == 512 and model["trained_horizon"] == 128
    assert model["parameters"] > 0 and model["quantile_levels"][4] == 0.5
    assert model["decoding"] == "masked" and model["infer_nonnegative"] is False  # the tiny model's config
    assert answer["limits"]["max_series_per_request"] == 1000 and answer["limits"]["max_body_bytes"] > 0


def test_metrics_count_requests_errors_and_batches(make_client, series_request) -> None:
    client = make_client()
    assert client.post("/v1/forecast", json=series_request(n_series=3)).status_code == 200
    assert client.post("/v1/forecast", json={"inputs": []}).status_code == 422
    assert client.get("/no-such-page").status_code == 404
    text = client.get("/metrics").text
    assert client.get("/metrics").headers["content-type"].startswith("text/plain")
    assert 'tsfm_http_requests_total{method="POST",route="/v1/forecast",status="200"} 1.0' in text
    assert 'tsfm_http_errors_total{route="/v1/forecast",status="422"} 1.0' in text
    assert 'tsfm_http_requests_total{method="GET",route="unmatched",status="404"} 1.0' in text
    assert re.search(r'tsfm_http_request_duration_seconds_count\{method="POST",route="/v1/forecast"\} 2\.0', text)
    assert "tsfm_batch_series_sum 3.0" in text and "tsfm_batch_requests_count 1.0" in text
    assert "tsfm_forecast_series_total 3.0" in text
    assert 'tsfm_model_ready{model="tiny"} 1.0' in text


def test_openapi_and_docs(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    operation = spec["paths"]["/v1/forecast"]["post"]
    examples = operation["requestBody"]["content"]["application/json"]["examples"]
    assert {"minimal", "timestamps", "missing"} <= set(examples)
    for status in ("413", "422", "503", "504"):
        assert status in operation["responses"]
    schemas = spec["components"]["schemas"]
    assert schemas["ForecastRequest"]["properties"]["inputs"]["maxItems"] == 1000
    assert schemas["Parameters"]["properties"]["prediction_length"]["maximum"] == 1024
    assert set(spec["paths"]) >= {"/v1/forecast", "/v1/models", "/health", "/ready", "/metrics"}
    docs = client.get("/docs")
    assert docs.status_code == 200 and "swagger" in docs.text.lower()


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_docs_pages_load_their_assets_from_the_service_not_a_cdn(client: TestClient, page: str) -> None:
    html = client.get(page).text
    urls = re.findall(r'(?:src|href)="([^"]+)"', html) + re.findall(r"url: '([^']+)'", html)
    assert urls, html
    assert not [u for u in urls if "//" in u], f"{page} loads from another host: {urls}"
    assets = [u for u in urls if u.startswith("/docs-assets/")]
    assert assets, urls
    for url in assets:
        response = client.get(url)
        assert response.status_code == 200 and len(response.content) > 1000, url
    assert client.get("/docs/oauth2-redirect").status_code == 200


def test_page_is_served_without_external_resources(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert '<script src="/page/app.js">' in page.text
    script = client.get("/page/app.js")
    style = client.get("/page/style.css")
    assert script.status_code == style.status_code == 200
    for text in (page.text, script.text, style.text):
        urls = set(re.findall(r"https?://[^\s\"'`)]+", text))
        assert urls <= {"http://www.w3.org/2000/svg"}, urls  # the SVG namespace is a name, not a download


def test_cors_is_off_unless_configured(client: TestClient, make_client) -> None:
    headers = {"Origin": "https://example.org", "Access-Control-Request-Method": "POST"}
    assert "access-control-allow-origin" not in client.options("/v1/forecast", headers=headers).headers
    allowed = make_client(cors_origins=["https://example.org"])
    preflight = allowed.options("/v1/forecast", headers=headers)
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == "https://example.org"
    other = allowed.options("/v1/forecast", headers={**headers, "Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in other.headers


def test_loading_state_answers_503_but_health_200(tiny_model_path, series_request) -> None:
    client = TestClient(create_app(model=tiny_model_path))  # not entered: no startup, so the model never loads
    assert client.get("/health").status_code == 200
    ready = client.get("/ready")
    assert ready.status_code == 503 and ready.json()["status"] == "loading"
    response = client.post("/v1/forecast", json=series_request())
    assert response.status_code == 503 and response.headers["retry-after"] == "1"


def test_background_loading_becomes_ready(tiny_model_path) -> None:
    with TestClient(create_app(model=tiny_model_path, load_in_background=True)) as client:
        deadline = time.monotonic() + 20
        while client.get("/ready").status_code != 200:
            assert time.monotonic() < deadline, "the model did not become ready"
            time.sleep(0.01)
        assert client.get("/v1/models").json()["models"][0]["ready"]


class BrokenModel(torch.nn.Module):
    """Loads, but every forecast fails: warm-up marks the service as failed."""

    def __init__(self) -> None:
        super().__init__()
        self.config = ModelConfig(patch_size=4, context_length=64)
        self.weight = torch.nn.Parameter(torch.zeros(1))

    @property
    def quantile_levels(self) -> tuple[float, ...]:
        return self.config.quantile_levels

    def forecast(self, context: torch.Tensor, prediction_length: int) -> torch.Tensor:
        raise RuntimeError("weights are broken")


def test_failed_load_is_reported(series_request) -> None:
    with TestClient(create_app(model=BrokenModel(), load_in_background=True)) as client:
        deadline = time.monotonic() + 20
        while (ready := client.get("/ready").json())["status"] == "loading":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        # the kind of failure, not its message: messages may name the server's files (the log has them)
        assert ready["status"] == "failed" and ready["detail"].startswith("RuntimeError")
        assert "weights are broken" not in ready["detail"]
        response = client.post("/v1/forecast", json=series_request())
        assert response.status_code == 503 and "failed to load: RuntimeError" in response.json()["detail"]

    async def start_in_foreground() -> None:
        app = create_app(model=BrokenModel(), load_in_background=False)
        async with app.router.lifespan_context(app):
            pass

    with pytest.raises(RuntimeError, match="failed to load"):  # uvicorn then exits: startup failed
        asyncio.run(start_in_foreground())


def test_concurrent_requests_share_model_calls_and_match_predict(tiny_model_path) -> None:
    """Eight requests at once: fewer model calls than requests, and each answer is predict() on its own series.

    Every request has four series of one length, so every model batch holds 4 or more rows, as predict's does:
    the numbers then agree bit for bit (see serving/batching.py for batches of 1-3 rows).
    """
    app = create_app(model=tiny_model_path, load_in_background=False, batch_window_ms=100)
    rng = np.random.default_rng(0)
    bodies = [
        {"inputs": [{"target": rng.normal(size=64 + 32 * (k % 3)).cumsum().tolist()} for _ in range(4)],
         "parameters": {"prediction_length": 16 if k % 2 else 40, "quantile_levels": [0.1, 0.5, 0.8 + k / 100]}}
        for k in range(8)
    ]

    async def send_all() -> list[dict[str, Any]]:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
                responses = await asyncio.gather(*(http.post("/v1/forecast", json=b) for b in bodies))
                metrics = (await http.get("/metrics")).text
        assert all(r.status_code == 200 for r in responses), [r.text for r in responses]
        calls = float(re.search(r"tsfm_batch_requests_count (\S+)", metrics).group(1))
        assert calls < len(bodies)
        return [r.json() for r in responses]

    answers = asyncio.run(send_all())
    for body, answer in zip(bodies, answers, strict=True):
        params = body["parameters"]
        series = [np.array(s["target"]) for s in body["inputs"]]
        quantiles, median = predict(series, params["prediction_length"], model=tiny_model_path,
                                    quantile_levels=params["quantile_levels"])
        for i, prediction in enumerate(answer["predictions"]):
            np.testing.assert_array_equal(np.float32(prediction["median"]), median[i])
            for j, level in enumerate(params["quantile_levels"]):
                np.testing.assert_array_equal(np.float32(prediction[str(level)]), quantiles[i, :, j])
