"""``infer_nonnegative`` in both forecast routes: the model's setting by default, a request's choice otherwise, and
a clear 422 for anything but true, false or null."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from tsfm.checkpoint import load_model
from tsfm.stream import open_stream

LEVELS = [0.1, 0.5, 0.9]


@pytest.fixture(scope="module")
def clamping_model_path(tiny_model_with: Callable[..., Path]) -> Path:
    """The tiny model with ``infer_nonnegative`` on, as the shipped models have it."""
    return tiny_model_with(infer_nonnegative=True)


@pytest.fixture(scope="module")
def client(open_client: Callable[..., Any], clamping_model_path: Path) -> Iterator[TestClient]:
    with open_client(clamping_model_path) as client:
        yield client


def never_negative(n: int, length: int, seed: int) -> list[list[float]]:
    rng = np.random.default_rng(seed)
    return [np.abs(rng.normal(0.0, 5.0, size=length)).round(3).tolist() for _ in range(n)]


def quantiles_of(answer: dict[str, Any]) -> np.ndarray:
    return np.array([[p[str(q)] for q in LEVELS] for p in answer["predictions"]])  # [N, Q, H]


def test_forecast_follows_the_model_unless_the_request_says(client: TestClient, clamping_model_path: Path,
                                                            answers_per_setting: Callable[..., Any]) -> None:
    assert client.get("/v1/models").json()["models"][0]["infer_nonnegative"] is True  # what null means here
    answers = answers_per_setting(client, clamping_model_path, never_negative(3, 120, seed=0), 24, LEVELS,
                                  "infer_nonnegative", (None, False, True))
    assert (answers[False] < 0).any(), "the tiny model must give negative quantiles for the test to mean much"
    assert (answers[None] >= 0).all()
    np.testing.assert_array_equal(answers[None], answers[True])


@pytest.mark.parametrize("value", ["yes", 1, 0, "false", [True]])
def test_anything_but_a_boolean_or_null_is_refused_with_the_field_named(client: TestClient, value: Any) -> None:
    body = {"inputs": [{"target": [1.0, 2.0, 3.0]}], "parameters": {"prediction_length": 2,
                                                                     "infer_nonnegative": value}}
    response = client.post("/v1/forecast", json=body)
    assert response.status_code == 422
    assert ["body", "parameters", "infer_nonnegative"] in [e["loc"] for e in response.json()["detail"]]


def test_stream_forecast_follows_the_model_unless_the_request_says(client: TestClient,
                                                                    clamping_model_path: Path) -> None:
    targets = never_negative(2, 100, seed=1)
    opened = client.post("/v1/streams", json={"inputs": [{"target": t} for t in targets]})
    assert opened.status_code == 201, opened.text
    stream_id = opened.json()["stream_id"]
    reference = open_stream(load_model(clamping_model_path), [np.array(t) for t in targets])
    answers = {}
    for flag in (None, False):
        body = {"prediction_length": 24, "quantile_levels": LEVELS}
        if flag is not None:
            body["infer_nonnegative"] = flag
        response = client.post(f"/v1/streams/{stream_id}/forecast", json=body)
        assert response.status_code == 200, response.text
        answers[flag] = quantiles_of(response.json())
        expected, _ = reference.forecast(24, LEVELS, infer_nonnegative=flag)
        np.testing.assert_allclose(answers[flag], np.moveaxis(expected, 2, 1), rtol=1e-5, atol=1e-5)
    assert (answers[False] < 0).any() and (answers[None] >= 0).all()
    refused = client.post(f"/v1/streams/{stream_id}/forecast", json={"prediction_length": 3, "infer_nonnegative": "no"})
    assert refused.status_code == 422
    assert ["body", "infer_nonnegative"] in [e["loc"] for e in refused.json()["detail"]]
