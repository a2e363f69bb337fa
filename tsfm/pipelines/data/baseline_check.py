"""Naive and Seasonal-Naive scored exactly as GIFT-Eval scores a model: the golden check of the data pipeline.

If conversion, prediction lengths, windows and test instances are right, ``m4_hourly/H/short`` gives Seasonal-Naive
MASE 1.193210 and Naive MASE 11.607688 (DESIGN §5). The baselines are gluonts' ``SeasonalNaivePredictor`` (Naive is
season length 1; gluonts has no separate Naive outside its statsforecast wrapper), scored by
:func:`tsfm.pipelines.evaluate.evaluate_predictor` (``gluonts.model.evaluate_model`` with GIFT-Eval's arguments). This
is a check of the data layer with the simplest predictors; the statsforecast baselines with quantiles (whose Seasonal
Naive is the leaderboard's normaliser) are :mod:`tsfm.pipelines.baselines`.

gluonts is imported inside the functions.
"""

from __future__ import annotations

import os
from typing import Any

from .gift_eval import GiftEvalDataset, Term

__all__ = ["evaluate_baselines", "evaluate_predictor", "naive", "seasonal_naive"]


def evaluate_predictor(predictor: Any, dataset: GiftEvalDataset) -> dict[str, float]:
    """GIFT-Eval's metrics of a gluonts predictor on one configuration (see :mod:`tsfm.pipelines.evaluate`)."""
    from tsfm.pipelines.evaluate import evaluate_predictor as evaluate

    return evaluate(predictor, dataset)


def naive(prediction_length: int) -> Any:
    """Repeat the last observed value (gluonts ``SeasonalNaivePredictor`` with season length 1)."""
    from gluonts.model.seasonal_naive import SeasonalNaivePredictor

    return SeasonalNaivePredictor(prediction_length=prediction_length, season_length=1)


def seasonal_naive(prediction_length: int, season_length: int) -> Any:
    """Repeat the last observed season (gluonts ``SeasonalNaivePredictor``)."""
    from gluonts.model.seasonal_naive import SeasonalNaivePredictor

    return SeasonalNaivePredictor(prediction_length=prediction_length, season_length=season_length)


def evaluate_baselines(
    name: str, term: Term | str = Term.SHORT, *, root: str | os.PathLike[str] | None = None
) -> dict[str, dict[str, float]]:
    """Naive and Seasonal-Naive metrics for one configuration (multivariate data scored per variate).

    Example:
        >>> evaluate_baselines("m4_hourly", "short", root="benchmark")["seasonal_naive"]["MASE[0.5]"]  # doctest: +SKIP
        1.1932101877276544
    """
    ds = GiftEvalDataset.per_variate(name, term, root=root)
    return {
        "seasonal_naive": evaluate_predictor(seasonal_naive(ds.prediction_length, ds.season_length), ds),
        "naive": evaluate_predictor(naive(ds.prediction_length), ds),
    }
