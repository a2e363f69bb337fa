"""``flip_equivariant`` in ``/v1/forecast``: the model's setting by default (said by ``/v1/models``), a request's
choice otherwise, and a clear 422 for anything but true, false or null."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

LEVELS = [0.1, 0.5, 0.9]


@pytest.fixture(scope="module")
def flipping_model_path(tiny_model_with: Callable[..., Path]) -> Path:
    """The tiny model with the shipped default's sign-flip average on."""
    return tiny_model_with(flip_equivariant=True)


@pytest.fixture(scope="module")
def client(open_client: Callable[..., Any], flipping_model_path: Path) -> Iterator[TestClient]:
    with open_client(flipping_model_path) as client:
        yield client


def trending(n: int, length: int) -> list[list[float]]:
    t = np.arange(length)
    return [(5 + 0.1 * (i + 1) * t + np.sin(2 * np.pi * t / 12)).round(4).tolist() for i in range(n)]


def test_forecast_follows_the_model_unless_the_request_says(client: TestClient, flipping_model_path: Path,
                                                            answers_per_setting: Callable[..., Any]) -> None:
    assert client.get("/v1/models").json()["models"][0]["flip_equivariant"] is True  # what null means here
    answers = answers_per_setting(client, flipping_model_path, trending(3, 100), 16, LEVELS, "flip_equivariant",
                                  (None, True, False), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(answers[None], answers[True])
    assert not np.allclose(answers[True], answers[False], atol=1e-3)  # the average acted


@pytest.mark.parametrize("value", ["on", 1, "true", [True]])
def test_anything_else_is_refused_with_the_field_named(client: TestClient, value: Any) -> None:
    body = {"inputs": [{"target": [1.0, 2.0, 3.0]}],
            "parameters": {"prediction_length": 2, "flip_equivariant": value}}
    response = client.post("/v1/forecast", json=body)
    assert response.status_code == 422
    assert ["body", "parameters", "flip_equivariant"] in [e["loc"] for e in response.json()["detail"]]
