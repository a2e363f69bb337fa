"""Bad input to the service: every case is refused with FastAPI's 422 body naming the field (413 for the body size,
401 for the API key, 504 for the timeout), never a 500, and the service answers normally afterwards."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import torch
from fastapi.testclient import TestClient

from tsfm.config import ModelConfig

LIMITS = {"max_series_per_request": 5, "max_points_per_series": 600, "max_prediction_length": 200,
          "max_quantile_levels": 4, "max_body_bytes": 20_000}


def body(target: Any = None, **parameters: Any) -> dict[str, Any]:
    series = {"target": [1.0, 2.0, 3.0, 4.0] if target is None else target}
    return {"inputs": [series], "parameters": {"prediction_length": 4, **parameters}}


def with_series(**fields: Any) -> dict[str, Any]:
    request = body()
    request["inputs"][0].update(fields)
    return request


# (case id, request body as JSON-able object or raw bytes, the loc FastAPI must report, a phrase of the message)
CASES: list[tuple[str, Any, list[Any], str]] = [
    ("empty target", body([]), ["body", "inputs", 0, "target"], "at least 1 item"),
    ("all-null target", body([None, None, None]), ["body", "inputs", 0, "target"], "no observed values"),
    ("all-NaN target", b'{"inputs": [{"target": [NaN, NaN]}], "parameters": {"prediction_length": 4}}',
     ["body", "inputs", 0, "target"], "no observed values"),
    ("no observed value in the context window", body([1.0] + [None] * 599), ["body", "inputs", 0, "target"],
     "last 512 values"),
    ("infinity", b'{"inputs": [{"target": [1.0, Infinity]}], "parameters": {"prediction_length": 4}}',
     ["body", "inputs", 0, "target"], "infinite"),
    ("negative infinity", b'{"inputs": [{"target": [-Infinity, 1.0]}], "parameters": {"prediction_length": 4}}',
     ["body", "inputs", 0, "target"], "infinite"),
    ("overflowing number", b'{"inputs": [{"target": [1e999, 1.0]}], "parameters": {"prediction_length": 4}}',
     ["body", "inputs", 0, "target"], "infinite"),
    ("value too large for float32", body([1.0, 3e20]), ["body", "inputs", 0, "target"], "beyond"),
    ("text value", body([1.0, "abc"]), ["body", "inputs", 0, "target", 1], "valid number"),
    ("numeric string", body(["1.5", 2.0]), ["body", "inputs", 0, "target", 0], "valid number"),
    ("boolean value", body([1.0, True]), ["body", "inputs", 0, "target", 1], "valid number"),
    ("nested list", body([[1.0, 2.0]]), ["body", "inputs", 0, "target", 0], "valid number"),
    ("target not a list", body("1,2,3"), ["body", "inputs", 0, "target"], "valid array"),
    ("missing target", {"inputs": [{"item_id": "a"}], "parameters": {"prediction_length": 4}},
     ["body", "inputs", 0, "target"], "required"),
    ("too many points", body([1.0] * 601), ["body", "inputs", 0, "target"], "at most 600"),
    ("prediction_length zero", body(prediction_length=0), ["body", "parameters", "prediction_length"],
     "greater than 0"),
    ("prediction_length negative", body(prediction_length=-3), ["body", "parameters", "prediction_length"],
     "greater than 0"),
    ("prediction_length over the limit", body(prediction_length=201), ["body", "parameters", "prediction_length"],
     "less than or equal to 200"),
    ("prediction_length fractional", body(prediction_length=2.5), ["body", "parameters", "prediction_length"],
     "valid integer"),
    ("prediction_length as text", body(prediction_length="12"), ["body", "parameters", "prediction_length"],
     "valid integer"),
    ("prediction_length missing", {"inputs": [{"target": [1.0]}], "parameters": {}},
     ["body", "parameters", "prediction_length"], "required"),
    ("quantile level 0", body(quantile_levels=[0.0, 0.5]), ["body", "parameters", "quantile_levels", 0],
     "greater than 0"),
    ("quantile level 1", body(quantile_levels=[0.5, 1.0]), ["body", "parameters", "quantile_levels", 1], "less than 1"),
    ("quantile level above 1", body(quantile_levels=[1.5]), ["body", "parameters", "quantile_levels", 0],
     "less than 1"),
    ("quantile level negative", body(quantile_levels=[-0.1]), ["body", "parameters", "quantile_levels", 0],
     "greater than 0"),
    ("repeated quantile levels", body(quantile_levels=[0.1, 0.5, 0.1]), ["body", "parameters", "quantile_levels"],
     "repeated"),
    ("no quantile levels", body(quantile_levels=[]), ["body", "parameters", "quantile_levels"], "at least 1"),
    ("too many quantile levels", body(quantile_levels=[0.1, 0.2, 0.3, 0.4, 0.5]),
     ["body", "parameters", "quantile_levels"], "at most 4"),
    ("unknown model", body(model="chronos-xl"), ["body", "parameters", "model"], "'tiny'"),
    ("malformed JSON", b'{"inputs": [{"target": [1, 2,', ["body"], "Invalid JSON: EOF while parsing a value at line 1 "
     "column 29"),
    ("JSON that is not an object", b"[1, 2, 3]", ["body"], "should be an object"),
    ("empty body", b"", ["body"], "required"),
    ("no series", {"inputs": [], "parameters": {"prediction_length": 4}}, ["body", "inputs"], "at least 1"),
    ("too many series", {"inputs": [{"target": [1.0]}] * 6, "parameters": {"prediction_length": 4}},
     ["body", "inputs"], "at most 5"),
    ("unknown field", with_series(targets=[1.0]), ["body", "inputs", 0, "targets"], "not permitted"),
    ("unknown parameter", body(horizon=3), ["body", "parameters", "horizon"], "not permitted"),
    ("unknown freq", with_series(freq="fortnightly"), ["body", "inputs", 0, "freq"], "unknown freq"),
    ("backward freq", with_series(freq="-1h"), ["body", "inputs", 0, "freq"], "forward"),
    ("start not a date", with_series(start="yesterday", freq="h"), ["body", "inputs", 0, "start"], "ISO 8601"),
    ("start as a number", with_series(start=1700000000, freq="h"), ["body", "inputs", 0, "start"], "ISO 8601"),
    # a start off its grid and timestamps past 9999 are answered with warnings: see test_serving_abuse.py
    ("item_id of the wrong type", with_series(item_id=[1]), ["body", "inputs", 0, "item_id"], "valid"),
    ("item_id past 64 bits", with_series(item_id=2**70), ["body", "inputs", 0, "item_id"], "less than"),
    # JSON may escape unpaired surrogates, which no UTF-8 answer can carry back: the parser refuses them
    ("unpaired surrogate in item_id", b'{"inputs": [{"target": [1.0], "item_id": "a\\ud800"}], '
     b'"parameters": {"prediction_length": 4}}', ["body"], "Invalid JSON"),
    ("unpaired surrogate in freq", b'{"inputs": [{"target": [1.0], "freq": "\\udfff"}], '
     b'"parameters": {"prediction_length": 4}}', ["body"], "surrogate"),
    ("unpaired surrogate in model", b'{"inputs": [{"target": [1.0]}], '
     b'"parameters": {"prediction_length": 4, "model": "\\ud800"}}', ["body"], "Invalid JSON"),
]


@pytest.fixture(scope="module")
def limited(open_client, tiny_model_path) -> Any:
    with open_client(tiny_model_path, **LIMITS) as client:
        yield client


def post(client: TestClient, payload: Any, **headers: str) -> Any:
    if isinstance(payload, bytes):
        return client.post("/v1/forecast", content=payload, headers={"content-type": "application/json", **headers})
    return client.post("/v1/forecast", json=payload, headers=headers)


@pytest.mark.parametrize(("payload", "loc", "phrase"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_422_naming_the_field(limited: TestClient, payload: Any, loc: list[Any], phrase: str) -> None:
    response = post(limited, payload)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert isinstance(detail, list) and {"type", "loc", "msg"} <= set(detail[0])
    matching = [d for d in detail if d["loc"][: len(loc)] == loc]  # a union type adds its branch: [..., "str"]
    assert matching, f"no error at {loc}: {detail}"
    assert any(phrase in d["msg"] for d in matching), matching


def test_the_422_body_is_strict_json_even_for_infinite_input(limited: TestClient) -> None:
    response = post(limited, CASES[4][1])
    json.loads(response.text, parse_constant=lambda name: pytest.fail(f"non-standard JSON constant {name}"))
    assert response.json()["detail"][0]["input"] == [1.0, "Infinity"]


def test_oversized_body_is_413(limited: TestClient) -> None:
    big = body([0.123456789] * 500)
    big["inputs"] *= 5  # about 35 kB, over the 20 kB limit
    response = post(limited, big)
    assert response.status_code == 413
    assert "limit of 20000 bytes" in response.json()["detail"]


def test_oversized_chunked_body_is_413(limited: TestClient) -> None:
    """No Content-Length: the bytes are counted as they arrive."""
    chunk = b" " * 4096

    def stream():
        yield b'{"inputs": ['
        for _ in range(10):
            yield chunk

    response = limited.post("/v1/forecast", content=stream(), headers={"content-type": "application/json"})
    assert response.status_code == 413


def test_body_within_limit_still_works_when_chunked(limited: TestClient) -> None:
    payload = json.dumps(body([1.0, 2.0, 3.0, 2.0, 1.0])).encode()
    response = limited.post("/v1/forecast", content=iter([payload[:10], payload[10:]]),
                            headers={"content-type": "application/json"})
    assert response.status_code == 200, response.text


@pytest.fixture(scope="module")
def locked(open_client, tiny_model_path) -> Any:
    with open_client(tiny_model_path, api_key="s3cret") as client:
        yield client


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}, {"Authorization": "Basic czNjcmV0"},
     {"Authorization": "Bearer s3cret-and-more"}, {"Authorization": "Bearer "}],
    ids=["missing", "wrong", "no scheme", "basic", "longer", "empty"],
)
def test_missing_or_wrong_api_key_is_401(locked: TestClient, headers: dict[str, str]) -> None:
    for response in (post(locked, body(), **headers), locked.get("/v1/models", headers=headers)):
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == "Bearer"
        assert "Authorization: Bearer" in response.json()["detail"]


def test_right_api_key_passes_and_probes_stay_open(locked: TestClient) -> None:
    assert post(locked, body(), Authorization="Bearer s3cret").status_code == 200
    assert locked.get("/v1/models", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    for path in ("/health", "/ready", "/", "/openapi.json", "/docs"):
        assert locked.get(path).status_code == 200, path
    assert locked.get("/metrics").status_code == 401  # traffic and error rates are not for everyone
    assert locked.get("/metrics", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    security = locked.get("/openapi.json").json()["components"]["securitySchemes"]
    assert security["HTTPBearer"]["scheme"] == "bearer"


class SlowModel(torch.nn.Module):
    """Repeats the last value after ``delay`` seconds: makes the request timeout reachable in a test."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.config = ModelConfig(patch_size=4, context_length=64)
        self.delay = delay
        self.weight = torch.nn.Parameter(torch.zeros(1))

    @property
    def quantile_levels(self) -> tuple[float, ...]:
        return self.config.quantile_levels

    def forecast(self, context: torch.Tensor, prediction_length: int) -> torch.Tensor:
        time.sleep(self.delay)
        last = torch.nan_to_num(context[:, -1], nan=0.0)
        return last[:, None, None].expand(-1, len(self.quantile_levels), prediction_length).clone()


def test_request_timeout_is_504_and_the_service_recovers(make_client) -> None:
    model = SlowModel(delay=0.6)
    client = make_client(model=model, warmup=False, request_timeout_s=0.2)
    response = post(client, body())
    assert response.status_code == 504 and "within 0.2 s" in response.json()["detail"]
    assert client.get("/health").status_code == 200
    model.delay = 0.0
    time.sleep(0.6)  # the abandoned call finishes on the model thread; its result is dropped
    assert post(client, body()).status_code == 200


def test_service_keeps_answering_after_bad_input(limited: TestClient) -> None:
    """Runs after the cases above (same module-scoped app): nothing they sent broke it."""
    assert limited.get("/health").status_code == 200
    assert limited.get("/ready").status_code == 200
    response = post(limited, body([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0], prediction_length=6))
    assert response.status_code == 200 and len(response.json()["predictions"][0]["median"]) == 6
    metrics = limited.get("/metrics").text
    assert 'status="500"' not in metrics
