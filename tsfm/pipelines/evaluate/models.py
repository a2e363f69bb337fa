"""The models an evaluation scores, named by what the user types: a baseline of
:data:`tsfm.pipelines.baselines.BASELINES`, a built-in tsfm model (``default``) or a checkpoint folder.

:func:`eval_model` turns such a name into an :class:`EvalModel`: its result name, its settings for ``run.json``
(with the checkpoint's provenance) and how to build its gluonts predictor for a configuration. tsfm models are
loaded once, through :func:`tsfm.forecast.resolve_model`, the one place that turns a name into a model.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..data.gift_eval import GiftEvalDataset
from .errors import UnknownModelError


@dataclass
class EvalModel:
    """A model to evaluate: its result name and how to build its predictor for a configuration."""

    name: str
    kind: str
    settings: dict[str, Any]
    make_predictor: Callable[[GiftEvalDataset], Any] = field(repr=False)


def eval_model(spec: str, *, batch_size: int = 256, n_jobs: int = 1, device: str | None = None) -> EvalModel:
    """A baseline name, ``"default"`` or a checkpoint folder -> :class:`EvalModel` (tsfm models are loaded once).

    Raises:
        UnknownModelError: ``spec`` is none of those, or the checkpoint cannot be loaded.
    """
    from ..baselines import BASELINES, describe, make_baseline

    if spec in BASELINES:

        def baseline(ds: GiftEvalDataset) -> Any:
            return make_baseline(spec, ds.prediction_length, ds.season_length, n_jobs=n_jobs)

        return EvalModel(spec, "baseline", describe(spec), baseline)

    from tsfm.checkpoint import BUILTIN_MODELS, RETIRED_MODELS
    from tsfm.forecast import resolve_model
    from tsfm.model import num_parameters

    if spec not in (*BUILTIN_MODELS, *RETIRED_MODELS) and not Path(spec).is_dir():  # a retired name: load says why
        raise UnknownModelError(
            f"unknown model {spec!r}: use a baseline ({', '.join(BASELINES)}), a built-in model "
            f"({', '.join(BUILTIN_MODELS)}) or a tsfm checkpoint folder"
        )
    try:
        model = resolve_model(spec, device=device or "cpu")
    except (OSError, ValueError) as err:
        raise UnknownModelError(f"cannot load model {spec!r}: {err}") from None

    from ..predictor import TsfmPredictor

    def tsfm_predictor(ds: GiftEvalDataset) -> Any:
        return TsfmPredictor(model, ds.prediction_length, batch_size=batch_size)

    name = f"tsfm-{spec}" if spec in BUILTIN_MODELS else Path(spec).resolve().name
    settings = {"checkpoint": spec, "parameters": num_parameters(model), **_provenance(spec), **model.config.to_dict()}
    return EvalModel(name, "tsfm", settings, tsfm_predictor)


def _provenance(spec: str) -> dict[str, Any]:
    """Which weights were scored: the checkpoint's SHA-256 and its training command (a checkpoint named ``default``
    changes whenever the shipped model is retrained)."""
    import hashlib

    from tsfm.checkpoint import read_checkpoint_config, resolve_model_path, weight_files

    path = resolve_model_path(spec)
    sha = hashlib.sha256()
    for file in weight_files(path):
        sha.update(file.read_bytes())
    digest = sha.hexdigest()
    _, training = read_checkpoint_config(path)
    return {"weights_sha256": digest, "training_command": training.get("command")}


def with_inference(spec: str | Path, folder: Path, **settings: Any) -> Path:
    """A copy of checkpoint ``spec`` whose config.json sets the inference-only ``settings`` (``decoding``,
    ``infer_nonnegative``; weights linked, not copied), in the new ``folder``: scoring one set of weights with each
    decoding, or with the non-negative clamp on and off, since a checkpoint's config chooses both."""
    from tsfm.checkpoint import resolve_model_path
    from tsfm.config import INFERENCE_FIELDS, ModelConfig

    unknown = sorted(set(settings) - set(INFERENCE_FIELDS))
    if unknown:
        raise ValueError(f"with_inference sets only {', '.join(INFERENCE_FIELDS)}, not {', '.join(unknown)}")
    source = resolve_model_path(spec)
    config = json.loads((source / "config.json").read_text())
    config["model"].update(settings)
    ModelConfig.from_dict(config["model"])  # a bad value fails here, before the folder exists
    folder.mkdir(parents=True)
    for file in source.iterdir():
        if file.name != "config.json":
            (folder / file.name).symlink_to(file.resolve())
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return folder
