"""The served model: where it comes from, its config, loading and warm-up, and whether it is ready.

The config is read when the app is built (cheap, and it fails fast on a bad ``--model``), because the request
schema needs the model's name and context length. The weights load later, on the model thread, so the server
answers ``/health`` (and ``/ready`` with 503) while a large model loads. This module knows nothing of HTTP.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Literal

import numpy as np

from tsfm.checkpoint import BUILTIN_MODELS, read_checkpoint_config, resolve_model_path
from tsfm.config import ModelConfig
from tsfm.forecast import SupportsForecast, predict, resolve_model

State = Literal["loading", "ready", "failed"]
ModelSource = str | os.PathLike[str] | SupportsForecast


class ServedModel:
    """One model the service answers with; ``state`` goes ``loading`` -> ``ready`` (or ``failed``) once.

    Args:
        source: a built-in name (``"default"``), a checkpoint folder, or an already loaded model (tests).
        device: torch device for loading by name or path.
    """

    def __init__(self, source: ModelSource, *, device: str = "cpu") -> None:
        self.source = source
        self.device = device
        self.name = model_name(source)
        if isinstance(source, (str, os.PathLike)):
            self.config: ModelConfig = read_checkpoint_config(resolve_model_path(source))[0]
            self.model: SupportsForecast | None = None
        else:
            self.config = source.config
            self.model = source
        self.state: State = "loading"
        self.error: str | None = None  # for the log: may name files and folders of the server
        self.public_error: str | None = None  # for /ready and 503s, which need no key: the kind of failure only
        self.load_seconds: float | None = None
        self._lock = threading.Lock()

    @property
    def ready(self) -> bool:
        return self.state == "ready"

    @property
    def trained_horizon(self) -> int:
        return self.config.train_horizon_patches * self.config.patch_size

    @property
    def steps_per_pass(self) -> int:
        """Forecast steps one forward pass over the context yields, the batcher's unit of work. Under masked decoding
        that is the trained horizon; under autoregressive decoding the window is re-read every
        ``REANCHOR_PATCHES`` patches (the recurrent steps between are cheap), so a pass covers that many patches."""
        if getattr(self.config, "decoding", "masked") == "autoregressive":
            from tsfm.model import REANCHOR_PATCHES

            return self.config.patch_size * REANCHOR_PATCHES
        return self.trained_horizon

    def num_parameters(self) -> int | None:
        """Every parameter of a torch model (``tsfm.model.num_parameters``); None for another forecaster."""
        import torch

        from tsfm.model import num_parameters

        return num_parameters(self.model) if isinstance(self.model, torch.nn.Module) else None

    def load(self, *, warmup: bool = True) -> None:
        """Load the weights (if not given) and run one small forecast; blocking, so call it off the event loop.

        Warm-up runs the model once so the first client does not pay for lazy initialisation (allocator, kernel
        selection). Failures are recorded in ``state``/``error`` instead of raised: ``/ready`` reports them.
        """
        with self._lock:
            if self.state == "ready":
                return
            started = time.perf_counter()
            try:
                if self.model is None:
                    self.model = resolve_model(self.source, self.device)  # type: ignore[arg-type]
                if warmup:
                    patch = self.config.patch_size
                    context = np.sin(np.arange(2 * patch) / 4.0)
                    predict(context, patch, model=self.model, show_progress=False)
            except Exception as err:  # any load failure means "not ready"; /ready says what kind, the log says why
                self.state, self.error = "failed", f"{type(err).__name__}: {err}"
                self.public_error = f"{type(err).__name__} (the server log has the details)"
                return
            self.load_seconds = time.perf_counter() - started
            self.state = "ready"


def model_name(source: ModelSource) -> str:
    """The name clients use for a model: a built-in name, a checkpoint folder's name, or ``"model"``."""
    if isinstance(source, str) and source in BUILTIN_MODELS:
        return source
    if isinstance(source, (str, os.PathLike)):
        return Path(source).resolve().name or "model"
    return "model"
