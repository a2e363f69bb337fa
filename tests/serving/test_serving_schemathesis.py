"""A bounded schemathesis run against the service's own ``/openapi.json``: no 500, no answer outside the schema,
every request the schema calls valid is accepted, every one it calls invalid is refused.

Hypothesis generates requests from the schema, valid ones (positive) and invalid ones (negative), one operation at a
time and as stateful sequences that follow the schema's OpenAPI links (``/v1/models`` -> ``/v1/forecast`` with the
listed model). Every answer must be a documented status with a body that matches the documented schema;
``positive_data_acceptance`` holds the service to its schema: a schema-valid request must get 2xx (the schema
describes ``freq`` and ``start`` by the very patterns the validator applies, and a target needs an observed value).

Bounded for CI: at most ``MAX_EXAMPLES`` per operation and mode and ``STATEFUL_EXAMPLES`` sequences (a few hundred
requests in all, about a minute on two cores), a fixed seed (``derandomize``), small limits so generated requests
stay cheap. The points limit (300) is within the tiny model's context (512), which makes the schema's "at least one
number in target" exactly the service's rule.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.stateful import run_state_machine_as_test
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    positive_data_acceptance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tsfm.serving.app import create_app

MAX_EXAMPLES = 40
STATEFUL_EXAMPLES = 25
STREAM_UPDATE = "/v1/streams/{stream_id}/observations"


@schemathesis.check
def positive_data_acceptance_but_stream_fit(ctx: Any, response: Any, case: Any) -> bool | None:
    """``positive_data_acceptance``, except for what no schema can say about an update: that it gives as many series
    as its stream has, and timestamps (as many as the values) that continue the stream's own. Those 422s must name
    ``values`` or ``timestamps``; any other refusal of schema-valid data still fails."""
    if case.operation.path == STREAM_UPDATE and response.status_code == 422:
        locs = [error["loc"] for error in response.json()["detail"]]
        if all(loc == ["body", "values"] or loc[:2] == ["body", "timestamps"] for loc in locs):
            return None
    return positive_data_acceptance(ctx, response, case)


CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
    positive_data_acceptance_but_stream_fit,
]
SMALL_LIMITS = {
    "max_series_per_request": 4,
    "max_points_per_series": 300,
    "max_prediction_length": 64,
    "max_quantile_levels": 5,
    "max_body_bytes": 200_000,
}
HYPOTHESIS = {"derandomize": True, "deadline": None, "database": None, "suppress_health_check": list(HealthCheck)}


OPERATIONS = [
    ("POST", "/v1/forecast", GenerationMode.POSITIVE),
    ("POST", "/v1/forecast", GenerationMode.NEGATIVE),
    ("POST", "/v1/streams", GenerationMode.POSITIVE),
    ("POST", "/v1/streams", GenerationMode.NEGATIVE),
    ("POST", "/v1/streams/{stream_id}/observations", GenerationMode.POSITIVE),
    ("POST", "/v1/streams/{stream_id}/observations", GenerationMode.NEGATIVE),
    ("POST", "/v1/streams/{stream_id}/forecast", GenerationMode.POSITIVE),
    ("POST", "/v1/streams/{stream_id}/forecast", GenerationMode.NEGATIVE),
    ("DELETE", "/v1/streams/{stream_id}", GenerationMode.POSITIVE),
    ("GET", "/v1/models", GenerationMode.POSITIVE),
    ("GET", "/health", GenerationMode.POSITIVE),
    ("GET", "/ready", GenerationMode.POSITIVE),
    ("GET", "/metrics", GenerationMode.POSITIVE),
]


@pytest.fixture(scope="module")
def api_schema(tiny_model_path: Path) -> Any:
    """The schema loaded from the running app (in-process ASGI; schemathesis runs the app's startup itself)."""
    app = create_app(model=tiny_model_path, load_in_background=False, batch_window_ms=0, **SMALL_LIMITS)
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    schema.config.generation.update(modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
    return schema


def test_every_operation_is_covered(api_schema: Any) -> None:
    documented = {(op.ok().method.upper(), op.ok().path) for op in api_schema.get_all_operations()}
    assert documented == {(method, path) for method, path, _ in OPERATIONS}


@pytest.mark.parametrize(("method", "path", "mode"), OPERATIONS, ids=[f"{m} {p} {g.value}" for m, p, g in OPERATIONS])
def test_api_conforms_to_its_openapi_schema(api_schema: Any, method: str, path: str, mode: GenerationMode) -> None:
    """Driven through Hypothesis directly (``as_strategy``) rather than ``schemathesis.pytest``: its lazy-fixture
    loader relies on pytest internals that pytest 9 removed."""
    operation = api_schema[path][method]

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=MAX_EXAMPLES, **HYPOTHESIS)
    def check(case: Any) -> None:
        case.call_and_validate(checks=CHECKS)

    check()


def test_stateful_sequences_follow_the_links(api_schema: Any) -> None:
    """Sequences of calls along the OpenAPI links, positive and negative data mixed, every answer checked."""
    base = api_schema.as_state_machine()

    class Checked(base):  # type: ignore[misc, valid-type]
        def validate_response(self, response: Any, case: Any, additional_checks: Any = None, **kwargs: Any) -> None:
            case.validate_response(response, checks=CHECKS, recorder=self.recorder)

    run_state_machine_as_test(
        Checked, settings=settings(max_examples=STATEFUL_EXAMPLES, stateful_step_count=4, **HYPOTHESIS)
    )
