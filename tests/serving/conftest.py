"""Shared fixtures of the serving tests: a tiny real checkpoint, in-process clients and a live server.

The tests never use the shipped default model: a tiny random model saved with ``tsfm.checkpoint.save_model``
exercises the real loading path in milliseconds. Fixtures rather than importable helpers, so the tests run under
any pytest import mode (this folder has no ``__init__.py``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient

from tsfm.checkpoint import save_model
from tsfm.config import ModelConfig
from tsfm.forecast import predict
from tsfm.model import Forecaster
from tsfm.serving.app import create_app
from tsfm.serving.settings import Settings

TINY_CONFIG = ModelConfig(
    backbone="xlstm[1:1]", d_model=32, n_layers=2, n_heads=2, chunk_size=4, patch_size=32, context_length=512
)


@pytest.fixture(scope="session", autouse=True)
def _no_serving_environment() -> Iterator[None]:
    """A developer's own ``TSFM_API_KEY`` (or any other service setting) must not change what the tests see."""
    with pytest.MonkeyPatch.context() as patch:
        for name in Settings.model_fields:
            patch.delenv(f"TSFM_{name.upper()}", raising=False)
        yield


@pytest.fixture(scope="session")
def tiny_model() -> Forecaster:
    torch.manual_seed(0)
    return Forecaster(TINY_CONFIG).eval()


@pytest.fixture(scope="session")
def tiny_model_path(tmp_path_factory: pytest.TempPathFactory, tiny_model: Forecaster) -> Path:
    """A checkpoint folder named ``tiny``: the service calls the model ``"tiny"``."""
    return save_model(tiny_model, tmp_path_factory.mktemp("models") / "tiny")


@pytest.fixture(scope="session")
def tiny_model_with(tmp_path_factory: pytest.TempPathFactory, tiny_model: Forecaster) -> Callable[..., Path]:
    """``tiny_model_with(**settings)``: the tiny model's weights saved with other inference settings (a checkpoint
    folder named ``tiny``), as the shipped models set ``infer_nonnegative`` and ``naive_blend``."""

    def save(**settings: Any) -> Path:
        model = Forecaster(tiny_model.config.replace(**settings)).eval()
        model.load_state_dict(tiny_model.state_dict())
        return save_model(model, tmp_path_factory.mktemp("models") / "tiny")

    return save


@pytest.fixture(scope="session")
def answers_per_setting() -> Callable[..., dict[Any, np.ndarray]]:
    """``answers_per_setting(client, model_path, targets, horizon, levels, field, values, rtol=0, atol=0)``: one
    ``/v1/forecast`` request per value of the inference setting ``field`` (``None``: left out, the model's own), each
    answer checked against ``tsfm.predict`` of the same checkpoint with the same setting; the answers ``[N, Q, H]``
    by value. The three per-request settings (``infer_nonnegative``, ``naive_blend``, ``flip_equivariant``) are
    tested through it."""

    def answers(client: TestClient, model_path: Path, targets: list[list[float]], horizon: int, levels: list[float],
                field: str, values: tuple[Any, ...], rtol: float = 0.0, atol: float = 0.0) -> dict[Any, np.ndarray]:
        out = {}
        for value in values:
            parameters: dict[str, Any] = {"prediction_length": horizon, "quantile_levels": levels}
            if value is not None:
                parameters[field] = value
            response = client.post("/v1/forecast", json={"inputs": [{"target": t} for t in targets],
                                                         "parameters": parameters})
            assert response.status_code == 200, response.text
            out[value] = np.array([[p[str(q)] for q in levels] for p in response.json()["predictions"]])
            expected, _ = predict([np.array(t) for t in targets], horizon, model=model_path, quantile_levels=levels,
                                  **{field: value})
            np.testing.assert_allclose(np.float32(out[value]), np.moveaxis(expected, 2, 1), rtol=rtol, atol=atol)
        return out

    return answers


@contextlib.contextmanager
def serving_client(model: Any, **settings: Any) -> Iterator[TestClient]:
    """A started app (model loaded: startup waits for it) behind a TestClient that returns 500s as responses."""
    settings.setdefault("load_in_background", False)
    app = create_app(model=model, **settings)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


@pytest.fixture(scope="session")
def open_client() -> Callable[..., contextlib.AbstractContextManager[TestClient]]:
    """``with open_client(model, **settings) as client``: for module-scoped apps with their own settings."""
    return serving_client


@pytest.fixture
def make_client(tiny_model_path: Path) -> Iterator[Callable[..., TestClient]]:
    """``make_client(**settings)``: a fresh app on the tiny model, closed after the test."""
    with contextlib.ExitStack() as stack:

        def make(**settings: Any) -> TestClient:
            settings.setdefault("model", tiny_model_path)
            return stack.enter_context(serving_client(**settings))

        yield make


@pytest.fixture(scope="module")
def client(tiny_model_path: Path) -> Iterator[TestClient]:
    """One app with default settings shared by a test module (loading once keeps the suite fast)."""
    with serving_client(tiny_model_path) as shared:
        yield shared


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def unused_port() -> int:
    """A loopback port that was free a moment ago."""
    return free_port()


@pytest.fixture
def live_server(tiny_model_path: Path) -> Iterator[Callable[..., str]]:
    """``live_server(**settings) -> base URL``: uvicorn on a free loopback port in a thread, stopped after the test."""
    import uvicorn

    servers: list[tuple[uvicorn.Server, threading.Thread]] = []

    def start(**settings: Any) -> str:
        settings.setdefault("model", tiny_model_path)
        settings.setdefault("load_in_background", False)
        port = free_port()
        config = uvicorn.Config(create_app(**settings), host="127.0.0.1", port=port, log_level="warning")
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, name="uvicorn-test", daemon=True)
        thread.start()
        deadline = time.monotonic() + 30
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.02)
        servers.append((server, thread))
        return f"http://127.0.0.1:{port}"

    yield start
    for server, thread in servers:
        server.should_exit = True
        thread.join(timeout=10)


STARTUP_TIMEOUT_S = 90  # importing torch on a busy 2-core CI machine can take a while


def tsfm_command() -> list[str]:
    """The installed ``tsfm`` script of this interpreter's environment, else ``python -m tsfm.cli``."""
    script = Path(sys.executable).with_name("tsfm")
    if script.exists():
        return [str(script)]
    found = shutil.which("tsfm")
    return [found] if found else [sys.executable, "-m", "tsfm.cli"]


@pytest.fixture
def serve_process(tmp_path: Path) -> Iterator[Callable[..., tuple[str, subprocess.Popen[str]]]]:
    """``serve_process(*args, env={...}) -> (base URL, process)``: ``tsfm serve *args`` as a real process on a free
    loopback port, returned once ``/ready`` says 200; every process started is stopped after the test (SIGINT, then
    SIGKILL). The process imports the same ``tsfm`` as the tests (its folder first on ``PYTHONPATH``), whichever
    checkout the environment's script was installed from."""
    import httpx

    import tsfm

    source = str(Path(tsfm.__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (source, os.environ.get("PYTHONPATH", "")) if p)

    started: list[tuple[subprocess.Popen[str], Any]] = []

    def start(*args: str, env: dict[str, str] | None = None) -> tuple[str, subprocess.Popen[str]]:
        port = free_port()
        log = (tmp_path / f"server-{len(started)}.log").open("w+")
        process = subprocess.Popen(
            [*tsfm_command(), "serve", *args, "--port", str(port), "--log-level", "info"],
            stdout=log, stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONPATH": path, **(env or {})},
        )
        started.append((process, log))
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if process.poll() is not None:
                log.seek(0)
                pytest.fail(f"tsfm serve exited with {process.returncode}:\n{log.read()}")
            try:
                if httpx.get(f"{base}/ready", timeout=2).status_code == 200:
                    return base, process
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("tsfm serve did not become ready")
            time.sleep(0.1)

    yield start
    for process, log in started:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        log.close()


@pytest.fixture
def series_request() -> Callable[..., dict[str, Any]]:
    """``series_request(n_series, length, horizon, **parameters)``: a valid forecast body of smooth series."""

    def make(n_series: int = 2, length: int = 96, horizon: int = 12, **parameters: Any) -> dict[str, Any]:
        import math

        inputs = [
            {"item_id": f"s{i}", "target": [10 + i + 3 * math.sin((t + 5 * i) / 4) for t in range(length)]}
            for i in range(n_series)
        ]
        return {"inputs": inputs, "parameters": {"prediction_length": horizon, **parameters}}

    return make

