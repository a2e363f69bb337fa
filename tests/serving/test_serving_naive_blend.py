"""``naive_blend`` in ``/v1/forecast``: the model's setting by default, a request's choice otherwise, and a clear
422 for anything but off, inverse_mae, inverse_mse, switch or null."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from tsfm.checkpoint import load_model
from tsfm.config import NAIVE_BLENDS
from tsfm.serving.schemas import ParametersBase
from tsfm.stream import open_stream

LEVELS = [0.1, 0.5, 0.9]


@pytest.fixture(scope="module")
def blending_model_path(tiny_model_with: Callable[..., Path]) -> Path:
    """The tiny model with the shipped default's blend on."""
    return tiny_model_with(naive_blend="inverse_mse")


@pytest.fixture(scope="module")
def client(open_client: Callable[..., Any], blending_model_path: Path) -> Iterator[TestClient]:
    with open_client(blending_model_path) as client:
        yield client


def seasonal(n: int, length: int) -> list[list[float]]:
    t = np.arange(length)
    return [(10 + (i + 1) * np.sin(2 * np.pi * t / 12)).round(4).tolist() for i in range(n)]


def test_forecast_follows_the_model_unless_the_request_says(client: TestClient, blending_model_path: Path,
                                                            answers_per_setting: Callable[..., Any]) -> None:
    assert client.get("/v1/models").json()["models"][0]["naive_blend"] == "inverse_mse"  # what null means here
    answers = answers_per_setting(client, blending_model_path, seasonal(3, 120), 24, LEVELS, "naive_blend",
                                  (None, "off", "inverse_mae", "switch"), rtol=1e-5, atol=1e-5)
    assert not np.allclose(answers[None], answers["off"], atol=1e-3)  # the model's blend acted


@pytest.mark.parametrize("value", ["on", 1, True, ["off"]])
def test_anything_else_is_refused_with_the_field_named(client: TestClient, value: Any) -> None:
    body = {"inputs": [{"target": [1.0, 2.0, 3.0]}], "parameters": {"prediction_length": 2, "naive_blend": value}}
    response = client.post("/v1/forecast", json=body)
    assert response.status_code == 422
    assert ["body", "parameters", "naive_blend"] in [e["loc"] for e in response.json()["detail"]]


def test_the_schema_offers_the_models_settings() -> None:
    schema = ParametersBase.model_json_schema()["properties"]["naive_blend"]
    offered = {v for option in schema["anyOf"] for v in option.get("enum", [])}
    assert offered == set(NAIVE_BLENDS)


def test_stream_forecast_follows_the_model_unless_the_request_says(client: TestClient,
                                                                    blending_model_path: Path) -> None:
    targets = seasonal(2, 120)
    opened = client.post("/v1/streams", json={"inputs": [{"target": t} for t in targets]})
    assert opened.status_code == 201, opened.text
    stream_id = opened.json()["stream_id"]
    reference = open_stream(load_model(blending_model_path), [np.array(t) for t in targets])
    answers = {}
    for blend in (None, "off", "switch"):
        body: dict[str, Any] = {"prediction_length": 24, "quantile_levels": LEVELS}
        if blend is not None:
            body["naive_blend"] = blend
        response = client.post(f"/v1/streams/{stream_id}/forecast", json=body)
        assert response.status_code == 200, response.text
        answers[blend] = np.array([[p[str(q)] for q in LEVELS] for p in response.json()["predictions"]])
        expected, _ = reference.forecast(24, LEVELS, naive_blend=blend)
        np.testing.assert_allclose(np.float32(answers[blend]), np.moveaxis(expected, 2, 1), rtol=1e-5, atol=1e-5)
    assert not np.allclose(answers[None], answers["off"], atol=1e-3)  # the model's blend acted
    refused = client.post(f"/v1/streams/{stream_id}/forecast", json={"prediction_length": 3, "naive_blend": "on"})
    assert refused.status_code == 422
    assert ["body", "naive_blend"] in [e["loc"] for e in refused.json()["detail"]]
