"""End to end: ``tsfm serve`` as a real process on loopback, called over HTTP; and its argument errors."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tsfm.cli import load_commands, main

STARTUP_TIMEOUT_S = 90  # importing torch on a busy 2-core CI machine can take a while


def tsfm_command() -> list[str]:
    """The installed ``tsfm`` script of this interpreter's environment, else ``python -m tsfm.cli``."""
    script = Path(sys.executable).with_name("tsfm")
    if script.exists():
        return [str(script)]
    found = shutil.which("tsfm")
    return [found] if found else [sys.executable, "-m", "tsfm.cli"]


@pytest.fixture
def server(tiny_model_path: Path, tmp_path: Path, unused_port: int) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    port = unused_port
    env = {**os.environ, "TSFM_API_KEY": "e2e-key", "TSFM_MAX_BODY_BYTES": "100000", "TSFM_BATCH_WINDOW_MS": "2"}
    log = (tmp_path / "server.log").open("w+")
    process = subprocess.Popen(
        [*tsfm_command(), "serve", "--model", str(tiny_model_path), "--port", str(port), "--log-level", "info"],
        stdout=log, stderr=subprocess.STDOUT, text=True, env=env,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if process.poll() is not None:
                log.seek(0)
                pytest.fail(f"tsfm serve exited with {process.returncode}:\n{log.read()}")
            try:
                if httpx.get(f"{base}/ready", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("tsfm serve did not become ready")
            time.sleep(0.1)
        yield base, process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        log.close()


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


def test_serve_with_a_bad_model_is_one_line_of_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TSFM_MODEL", raising=False)
    assert main(["serve", "--model", str(tmp_path / "nowhere"), "--port", "1"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: ") and "nowhere" in error and "Traceback" not in error
    assert main(["serve", "--workers", "0"]) == 2
