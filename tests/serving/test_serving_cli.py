"""End to end: ``tsfm serve`` as a real process on loopback, called over HTTP; and its argument errors."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tsfm.cli import load_commands, main


@pytest.fixture
def server(
    tiny_model_path: Path, serve_process: Callable[..., tuple[str, subprocess.Popen[str]]]
) -> tuple[str, subprocess.Popen[str]]:
    env = {"TSFM_API_KEY": "e2e-key", "TSFM_MAX_BODY_BYTES": "100000", "TSFM_BATCH_WINDOW_MS": "2"}
    return serve_process("--model", str(tiny_model_path), env=env)


def test_tsfm_serve_answers_over_http(server: tuple[str, subprocess.Popen[str]]) -> None:
    base, process = server
    auth = {"Authorization": "Bearer e2e-key"}
    body = {
        "inputs": [{"item_id": "room", "start": "2024-03-01T00:00:00", "freq": "h",
                    "target": [20 + (t % 24) / 4 for t in range(96)]}],
        "parameters": {"prediction_length": 6, "quantile_levels": [0.1, 0.5, 0.9]},
    }
    with httpx.Client(base_url=base, timeout=30) as http:
        assert http.get("/health").json() == {"status": "ok"}
        assert http.get("/v1/models", headers=auth).json()["models"][0]["name"] == "tiny"

        answer = http.post("/v1/forecast", json=body, headers=auth)
        assert answer.status_code == 200, answer.text
        prediction = answer.json()["predictions"][0]
        assert prediction["item_id"] == "room" and len(prediction["median"]) == 6
        assert prediction["timestamps"][0] == "2024-03-05T00:00:00"

        # bad requests over the wire: refused with the right status, and the server goes on
        assert http.post("/v1/forecast", json=body).status_code == 401
        bad = {**body, "parameters": {"prediction_length": 0}}
        refused = http.post("/v1/forecast", json=bad, headers=auth)
        assert refused.status_code == 422 and refused.json()["detail"][0]["loc"][-1] == "prediction_length"
        malformed = http.post("/v1/forecast", content=b"{", headers={**auth, "content-type": "application/json"})
        assert malformed.status_code == 422
        assert http.post("/v1/forecast", content=b"0" * 200_000, headers=auth).status_code == 413

    with httpx.Client(base_url=base, timeout=30) as http:  # a new connection after the 413 closed the old one
        assert http.post("/v1/forecast", json=body, headers=auth).status_code == 200
        assert http.get("/metrics").status_code == 401  # with a key set, /metrics needs it too
        metrics = http.get("/metrics", headers=auth).text
        assert 'tsfm_http_requests_total{method="POST",route="/v1/forecast",status="200"} 2.0' in metrics
        assert "tsfm_http_errors_total" in metrics and 'status="500"' not in metrics
        assert "<title>tsfm" in http.get("/").text

    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=20) == 0


def test_serve_is_registered_with_its_flags() -> None:
    flags = {flag for argument in load_commands()["serve"].arguments for flag in argument.flags}
    assert {"--host", "--port", "--model", "--workers"} <= flags
    assert {"--stream-dir", "--stream-idle-s", "--max-streams", "--max-stream-bytes"} <= flags


def test_serve_with_a_bad_model_is_one_line_of_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TSFM_MODEL", raising=False)
    assert main(["serve", "--model", str(tmp_path / "nowhere"), "--port", "1"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: ") and "nowhere" in error and "Traceback" not in error
    assert main(["serve", "--workers", "0"]) == 2
    assert main(["serve", "--workers", "2", "--stream-dir", str(tmp_path)]) == 2  # streams live in one process
    assert "--workers 1" in capsys.readouterr().err
