"""A bounded schemathesis run against the service's own ``/openapi.json``: no 500, no answer outside the schema.

Hypothesis generates requests from the schema (valid ones, and invalid ones to check they are refused); every
answer must be a documented status with a body that matches the documented schema. Bounded for CI: at most
``MAX_EXAMPLES`` per operation, a fixed seed (``derandomize``), small limits so generated requests stay cheap.

``positive_data_acceptance`` is left out on purpose: some schema-valid requests are meaningfully refused with 422
(a target whose values are all null, a ``start`` off its ``freq`` grid), which JSON Schema cannot express.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tsfm.serving.app import create_app

MAX_EXAMPLES = 50
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
]
SMALL_LIMITS = {
    "max_series_per_request": 4,
    "max_points_per_series": 300,
    "max_prediction_length": 64,
    "max_quantile_levels": 5,
    "max_body_bytes": 200_000,
}


OPERATIONS = [
    ("POST", "/v1/forecast", GenerationMode.POSITIVE),
    ("POST", "/v1/forecast", GenerationMode.NEGATIVE),
    ("GET", "/v1/models", GenerationMode.POSITIVE),
    ("GET", "/health", GenerationMode.POSITIVE),
    ("GET", "/ready", GenerationMode.POSITIVE),
    ("GET", "/metrics", GenerationMode.POSITIVE),
]


@pytest.fixture(scope="module")
def api_schema(tiny_model_path: Path) -> Any:
    """The schema loaded from the running app (in-process ASGI; schemathesis runs the app's startup itself)."""
    app = create_app(model=tiny_model_path, load_in_background=False, batch_window_ms=0, **SMALL_LIMITS)
    return schemathesis.openapi.from_asgi("/openapi.json", app)


def test_every_operation_is_covered(api_schema: Any) -> None:
    documented = {(op.ok().method.upper(), op.ok().path) for op in api_schema.get_all_operations()}
    assert documented == {(method, path) for method, path, _ in OPERATIONS}


@pytest.mark.parametrize(("method", "path", "mode"), OPERATIONS, ids=[f"{m} {p} {g.value}" for m, p, g in OPERATIONS])
def test_api_conforms_to_its_openapi_schema(api_schema: Any, method: str, path: str, mode: GenerationMode) -> None:
    """Driven through Hypothesis directly (``as_strategy``) rather than ``schemathesis.pytest``: its lazy-fixture
    loader relies on pytest internals that pytest 9 removed."""
    operation = api_schema[path][method]

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=MAX_EXAMPLES,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def check(case: Any) -> None:
        case.call_and_validate(checks=CHECKS)

    check()
