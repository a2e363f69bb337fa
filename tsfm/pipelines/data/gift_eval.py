"""GIFT-Eval's dataset logic: terms, prediction lengths, rolling windows and the test instances they make.

This follows GIFT-Eval's ``gift_eval/data.py`` rule for rule (DESIGN §5), so a model scored here on a real GIFT-Eval
download is scored as on the leaderboard:

- ``prediction_length = multiplier(term) x base(freq)``; multiplier short 1, medium 10, long 15; ``base`` from the
  M4 table for datasets whose name contains ``"m4"``, else from the general table, keyed by the normalised
  frequency (``15T -> T``, ``W-SUN -> W``).
- ``windows = 1`` for M4, else ``min(max(1, ceil(0.1 x min_series_length / prediction_length)), 20)``.
- test data: gluonts ``split(offset=-prediction_length x windows)`` then ``generate_instances(prediction_length,
  windows, distance=prediction_length)``; the context of each instance is the full history before it.
- validation cut at ``-prediction_length x windows``, training cut one more prediction length back.
- multivariate data is evaluated per variate, item ids ``item_id + "_dim{i}"``.

Our additions, for data GIFT-Eval does not hold: yearly/quarterly bases ``A: 6, Q: 8`` for non-M4 data, business
days counted as days, and per-dataset *competition overrides* (the competition's own horizon, one window) for M3
(yearly 6, quarterly 8, monthly 18, other 8), NN3 (18) and tourism (yearly 4, quarterly 8, monthly 24). The overrides
key on the dataset's base name (``m3_*``, ``nn3``, ``tourism*``), never on a GIFT-Eval name, so the 97 official
configurations are untouched.

gluonts is imported only where instances are made; lengths and windows work without it.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Iterator
from enum import Enum
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from .frequency import freq_key, normalise_freq, seasonality, to_period_freq
from .gift_format import Entry, is_dataset_dir, iter_entries, read_table

__all__ = [
    "GIFT_EVAL_CONFIGS",
    "MED_LONG_DATASETS",
    "SHORT_DATASETS",
    "GiftEvalDataset",
    "SeriesTooShortError",
    "Term",
    "base_prediction_length",
    "config_key",
    "configurations",
    "num_windows",
    "prediction_length",
    "to_univariate",
]

BENCHMARK_FILE = "benchmark.json"
"""Written by :func:`tsfm.pipelines.data.build.build_benchmark`: the configurations of an offline benchmark root."""

TEST_SPLIT = 0.1
MAX_WINDOW = 20
GIFT_EVAL_ENV = "GIFT_EVAL"

M4_PRED_LENGTH_MAP = {"A": 6, "Q": 8, "M": 18, "W": 13, "D": 14, "H": 48}
PRED_LENGTH_MAP = {"M": 12, "W": 8, "D": 30, "H": 48, "T": 48, "S": 60}
NON_M4_EXTRA_PRED_LENGTH_MAP = {"A": 6, "Q": 8}
"""Ours: GIFT-Eval's general table has no yearly/quarterly entry (its only such data is M4)."""

COMPETITION_HORIZONS: dict[str, dict[str, int]] = {
    "m3": {"A": 6, "Q": 8, "M": 18, "other": 8},
    "nn3": {"M": 18},
    "tourism": {"A": 4, "Q": 8, "M": 24},
}
"""Ours: competitions scored on their own horizon with a single window (the last ``h`` points of each series)."""

# The official GIFT-Eval configuration lists, as in GIFT-Eval's notebooks: every dataset is scored on the short
# term, the med/long list also on the medium and long terms; 55 + 2 x 21 = 97 (dataset, term) pairs.
SHORT_DATASETS: tuple[str, ...] = (
    "m4_yearly",
    "m4_quarterly",
    "m4_monthly",
    "m4_weekly",
    "m4_daily",
    "m4_hourly",
    "electricity/15T",
    "electricity/H",
    "electricity/D",
    "electricity/W",
    "solar/10T",
    "solar/H",
    "solar/D",
    "solar/W",
    "hospital",
    "covid_deaths",
    "us_births/D",
    "us_births/M",
    "us_births/W",
    "saugeenday/D",
    "saugeenday/M",
    "saugeenday/W",
    "temperature_rain_with_missing",
    "kdd_cup_2018_with_missing/H",
    "kdd_cup_2018_with_missing/D",
    "car_parts_with_missing",
    "restaurant",
    "hierarchical_sales/D",
    "hierarchical_sales/W",
    "LOOP_SEATTLE/5T",
    "LOOP_SEATTLE/H",
    "LOOP_SEATTLE/D",
    "SZ_TAXI/15T",
    "SZ_TAXI/H",
    "M_DENSE/H",
    "M_DENSE/D",
    "ett1/15T",
    "ett1/H",
    "ett1/D",
    "ett1/W",
    "ett2/15T",
    "ett2/H",
    "ett2/D",
    "ett2/W",
    "jena_weather/10T",
    "jena_weather/H",
    "jena_weather/D",
    "bitbrains_fast_storage/5T",
    "bitbrains_fast_storage/H",
    "bitbrains_rnd/5T",
    "bitbrains_rnd/H",
    "bizitobs_application",
    "bizitobs_service",
    "bizitobs_l2c/5T",
    "bizitobs_l2c/H",
)
MED_LONG_DATASETS: tuple[str, ...] = (
    "electricity/15T",
    "electricity/H",
    "solar/10T",
    "solar/H",
    "kdd_cup_2018_with_missing/H",
    "LOOP_SEATTLE/5T",
    "LOOP_SEATTLE/H",
    "SZ_TAXI/15T",
    "M_DENSE/H",
    "ett1/15T",
    "ett1/H",
    "ett2/15T",
    "ett2/H",
    "jena_weather/10T",
    "jena_weather/H",
    "bitbrains_fast_storage/5T",
    "bitbrains_rnd/5T",
    "bizitobs_application",
    "bizitobs_service",
    "bizitobs_l2c/5T",
    "bizitobs_l2c/H",
)
GIFT_EVAL_CONFIGS: tuple[tuple[str, str], ...] = (
    *((name, "short") for name in SHORT_DATASETS),
    *((name, term) for name in MED_LONG_DATASETS for term in ("medium", "long")),
)

PRETTY_NAMES = {
    "saugeenday": "saugeen",
    "temperature_rain_with_missing": "temperature_rain",
    "kdd_cup_2018_with_missing": "kdd_cup_2018",
    "car_parts_with_missing": "car_parts",
}
"""GIFT-Eval's renames for result keys (after lower-casing)."""

DATASET_FREQUENCIES = {
    "m4_yearly": "A",
    "m4_quarterly": "Q",
    "m4_monthly": "M",
    "m4_weekly": "W",
    "m4_daily": "D",
    "m4_hourly": "H",
    "hospital": "M",
    "covid_deaths": "D",
    "temperature_rain": "D",
    "car_parts": "M",
    "restaurant": "D",
    "bizitobs_application": "10S",
    "bizitobs_service": "10S",
}
"""Result-key frequency of GIFT-Eval datasets whose folder name carries none (GIFT-Eval's dataset_properties)."""


class Term(str, Enum):
    """Forecast horizon class; the prediction length is ``multiplier x`` the frequency's base length."""

    SHORT = "short"
    MEDIUM = "medium"
    LONG = "long"

    @property
    def multiplier(self) -> int:
        return {"short": 1, "medium": 10, "long": 15}[self.value]


class SeriesTooShortError(ValueError):
    """A series has no history left before its test windows (``length <= prediction_length x windows``)."""


def _base_name(name: str) -> str:
    return name.split("/")[0].lower()


def competition_family(name: str) -> str | None:
    """``"m3"``, ``"nn3"`` or ``"tourism"`` when the dataset takes a competition override, else None."""
    base = _base_name(name)
    if base == "m3" or base.startswith("m3_"):
        return "m3"
    if base == "nn3" or base.startswith("nn3_"):
        return "nn3"
    if base.startswith("tourism"):
        return "tourism"
    return None


def base_prediction_length(name: str, freq: str) -> int:
    """The short-term prediction length of dataset ``name`` at frequency ``freq`` (see the module docstring).

    Raises:
        UnknownFrequencyError: ``freq`` is not a pandas alias.
        ValueError: no table has this frequency (e.g. yearly data in a dataset named ``m4`` would work, milliseconds
            never do).
    """
    base = normalise_freq(freq)
    family = competition_family(name)
    if family is not None:
        table = COMPETITION_HORIZONS[family]
        if family == "m3" and "other" in _base_name(name):
            return table["other"]
        if family == "nn3":
            return table["M"]
        if base in table:
            return table[base]
    # GIFT-Eval's own test for M4 is a substring of the name
    table = M4_PRED_LENGTH_MAP if "m4" in name else {**PRED_LENGTH_MAP, **NON_M4_EXTRA_PRED_LENGTH_MAP}
    if base not in table:
        raise ValueError(f"dataset {name!r}: no prediction length for frequency {freq!r} (base {base!r})")
    return table[base]


def prediction_length(name: str, freq: str, term: Term | str = Term.SHORT) -> int:
    """``Term(term).multiplier x base_prediction_length(name, freq)``."""
    return Term(term).multiplier * base_prediction_length(name, freq)


def num_windows(name: str, min_series_length: int, pred_length: int) -> int:
    """Rolling test windows: 1 for M4 and competition overrides, else ``clip(ceil(0.1 x min_len / pl), 1, 20)``."""
    if "m4" in name or competition_family(name) is not None:
        return 1
    w = math.ceil(TEST_SPLIT * min_series_length / pred_length)
    return min(max(1, w), MAX_WINDOW)


def config_key(name: str, term: Term | str, freq: str | None = None) -> str:
    """The result key ``"{dataset}/{freq}/{term}"`` as in GIFT-Eval's ``all_results.csv``.

    The dataset part is the folder's base name lower-cased with GIFT-Eval's renames (``saugeenday -> saugeen``,
    ``*_with_missing`` dropped); the frequency part is the folder's suffix (``ett1/H``), else GIFT-Eval's listed
    frequency, else the data's alias without anchor (``A-DEC -> A``).
    """
    base = _base_name(name)
    pretty = PRETTY_NAMES.get(base, base)
    if "/" in name:
        f = name.split("/", 1)[1]
    elif pretty in DATASET_FREQUENCIES:
        f = DATASET_FREQUENCIES[pretty]
    elif freq is not None:
        f = freq_key(freq)
    else:
        raise ValueError(f"config_key({name!r}): the folder name has no frequency; pass the data's freq")
    return f"{pretty}/{f}/{Term(term).value}"


def to_univariate(entries: Iterable[Entry]) -> Iterator[Entry]:
    """Split ``[V, T]`` entries into V univariate entries named ``item_id + "_dim{i}"`` (GIFT-Eval's naming);
    univariate entries pass through unchanged."""
    for entry in entries:
        target = np.asarray(entry["target"])
        if target.ndim == 1:
            yield entry
            continue
        for i, row in enumerate(target):
            uni = dict(entry)
            uni["target"] = row
            uni["item_id"] = f"{entry['item_id']}_dim{i}"
            yield uni


def configurations(root: str | os.PathLike[str] | None = None, *, skip_missing: bool = False) -> list[tuple[str, str]]:
    """The (dataset, term) pairs to evaluate under a root.

    A root built by ``build_benchmark`` lists its own in ``benchmark.json``; any other root is taken to be a GIFT-Eval
    download and gets the 97 official configurations.

    Raises:
        FileNotFoundError: a configuration's dataset folder is missing (unless ``skip_missing``).
    """
    r = _gift_eval_root(root)
    listing = r / BENCHMARK_FILE
    if listing.is_file():
        configs = [(c["dataset"], c["term"]) for c in json.loads(listing.read_text())["configurations"]]
    else:
        configs = list(GIFT_EVAL_CONFIGS)
    missing = sorted({name for name, _ in configs if not is_dataset_dir(r / name)})
    if missing and not skip_missing:
        n = sum(name in missing for name, _ in configs)
        raise FileNotFoundError(f"{r}: dataset folders missing for {n} configurations: {missing}")
    return [(name, term) for name, term in configs if name not in missing]


def _gift_eval_root(root: str | os.PathLike[str] | None) -> Path:
    if root is not None:
        return Path(root)
    env = os.environ.get(GIFT_EVAL_ENV)
    if not env:
        raise ValueError(f"no GIFT-Eval root: pass root= or set ${GIFT_EVAL_ENV}")
    return Path(env)


class GiftEvalDataset:
    """One (dataset, term) configuration: its lengths, windows and gluonts train/validation/test views.

    Args:
        name: folder name under the root, ``"m4_hourly"`` or ``"ett1/H"``; it decides M4 and override rules.
        term: ``"short"``, ``"medium"`` or ``"long"``.
        to_univariate: evaluate ``[V, T]`` data per variate (what GIFT-Eval does for univariate models).
        root: the folder holding the datasets; defaults to ``$GIFT_EVAL``.

    Example:
        >>> ds = GiftEvalDataset("m4_hourly", "short", root="benchmark")  # doctest: +SKIP
        >>> ds.prediction_length, ds.windows, ds.config_key  # doctest: +SKIP
        (48, 1, 'm4_hourly/H/short')
    """

    def __init__(
        self,
        name: str,
        term: Term | str = Term.SHORT,
        *,
        to_univariate: bool = False,
        root: str | os.PathLike[str] | None = None,
    ) -> None:
        self.name = name
        self.term = Term(term)
        self.to_univariate = to_univariate
        self.path = _gift_eval_root(root) / name
        self._table: pa.Table = read_table(self.path)
        if self._table.num_rows == 0:
            raise ValueError(f"{self.path}: the dataset has no series")

    @classmethod
    def per_variate(
        cls, name: str, term: Term | str = Term.SHORT, *, root: str | os.PathLike[str] | None = None
    ) -> GiftEvalDataset:
        """Open a configuration as a univariate model sees it: multivariate data split per variate (as GIFT-Eval's
        notebooks do for every univariate model)."""
        probe = cls(name, term, root=root)
        if probe.target_dim == 1:
            return probe
        return cls(name, term, to_univariate=True, root=root)

    # -- properties read from the Arrow table (no numpy conversion of the targets)

    @cached_property
    def freq(self) -> str:
        """The dataset's frequency alias as stored (legacy pandas spelling)."""
        return self._table.column("freq")[0].as_py()

    @cached_property
    def target_dim(self) -> int:
        """Number of variates: 1 for ``list<float>`` targets, else the first series' variate count."""
        col = self._table.column("target")
        if pa.types.is_floating(col.type.value_type):
            return 1
        return len(col[0])

    @cached_property
    def _lengths(self) -> np.ndarray:
        """Series lengths; for ``[V, T]`` data the first variate's, as GIFT-Eval measures them."""
        col = self._table.column("target")
        if not pa.types.is_floating(col.type.value_type):
            col = pc.list_element(col, 0)
        return pc.list_value_length(col).to_numpy(zero_copy_only=False)

    @cached_property
    def min_series_length(self) -> int:
        return int(self._lengths.min())

    @cached_property
    def sum_series_length(self) -> int:
        return int(self._lengths.sum()) * self.target_dim

    @property
    def num_series(self) -> int:
        """Series in the file (rows), before any per-variate split."""
        return self._table.num_rows

    @cached_property
    def prediction_length(self) -> int:
        return prediction_length(self.name, self.freq, self.term)

    @cached_property
    def windows(self) -> int:
        return num_windows(self.name, self.min_series_length, self.prediction_length)

    @cached_property
    def season_length(self) -> int:
        """The MASE seasonality, gluonts' ``get_seasonality(freq)``."""
        return seasonality(self.freq)

    @cached_property
    def config_key(self) -> str:
        return config_key(self.name, self.term, self.freq)

    # -- entries

    def entries(self) -> Iterator[Entry]:
        """Our entries (``start`` a Timestamp), split per variate when ``to_univariate``."""
        it = iter_entries(self.path)
        return to_univariate(it) if self.to_univariate else it

    @cached_property
    def gluonts_dataset(self) -> list[dict[str, Any]]:
        """The series as gluonts data entries: ``start`` a ``pd.Period`` at the period alias of ``freq``."""
        period_freq = to_period_freq(self.freq)
        out = []
        for e in self.entries():
            out.append(
                {
                    "item_id": e["item_id"],
                    "start": pd.Period(e["start"], freq=period_freq),
                    "target": np.asarray(e["target"], dtype=np.float32),
                }
            )
        return out

    def check_horizon(self, spans_back: int = 1) -> None:
        """Raise :class:`SeriesTooShortError` unless every series keeps history before its test windows (or before the
        windows ``spans_back`` test spans from its end: :meth:`rolling_windows`), without building any window."""
        self._check_lengths(self._windows_offset(spans_back))

    def _windows_offset(self, spans_back: int) -> int:
        """Steps cut from each series' end by the windows ``spans_back`` test spans back."""
        if spans_back < 1:
            raise ValueError(f"spans_back must be at least 1 (1: the test windows), got {spans_back}")
        return spans_back * self.prediction_length * self.windows

    def _check_lengths(self, offset: int) -> None:
        """Every series must be longer than ``offset``, the steps the requested windows cut from its end (the test
        windows, and the validation or before-test windows before them)."""
        if self.min_series_length > offset:
            return
        col = self._table.column("item_id").to_pylist()
        shortest = col[int(np.argmin(self._lengths))]
        raise SeriesTooShortError(
            f"{self.name} ({self.term.value}): series {shortest!r} has {self.min_series_length} steps, but these "
            f"windows cut its last {offset} (prediction_length {self.prediction_length}, {self.windows} test "
            f"window(s), {offset // self.prediction_length} windows in all); at least one step of history must "
            "precede them"
        )

    # -- gluonts views (GIFT-Eval's cuts)

    @property
    def training_dataset(self) -> Any:
        """Everything before the validation window (``split(offset=-pl x (windows + 1))``)."""
        from gluonts.dataset.split import split

        offset = self.prediction_length * (self.windows + 1)
        self._check_lengths(offset)
        training, _ = split(self.gluonts_dataset, offset=-offset)
        return training

    @property
    def validation_dataset(self) -> Any:
        """Everything before the test windows (``split(offset=-pl x windows)``)."""
        from gluonts.dataset.split import split

        offset = self.prediction_length * self.windows
        self._check_lengths(offset)
        validation, _ = split(self.gluonts_dataset, offset=-offset)
        return validation

    @property
    def test_data(self) -> Any:
        """gluonts ``TestData``: ``windows`` rolling (input, label) pairs per series, ``prediction_length`` apart."""
        return self.rolling_windows(spans_back=1)

    @property
    def windows_before_test(self) -> Any:
        """gluonts ``TestData`` like :attr:`test_data`, but of the ``windows`` windows that end where the test span
        begins: the same shape of task on steps no test window scores, to choose inference settings on the
        benchmark's own series without reading its test windows (GIFT-Eval's validation part)."""
        return self.rolling_windows(spans_back=2)

    def rolling_windows(self, spans_back: int) -> Any:
        """``windows`` rolling (input, label) pairs, ``prediction_length`` apart, the first starting
        ``spans_back`` test spans (``prediction_length x windows``) before the series' end: 1 is the test windows, 2
        the windows before them, 3 the span before those (a second set on which no test window is scored, where one
        set of before-test windows cannot tell two checkpoints apart).

        Raises:
            SeriesTooShortError: a series has no step of history before the first window.
        """
        from gluonts.dataset.split import split

        offset = self._windows_offset(spans_back)
        self._check_lengths(offset)
        _, template = split(self.gluonts_dataset, offset=-offset)
        return template.generate_instances(
            prediction_length=self.prediction_length, windows=self.windows, distance=self.prediction_length
        )

    def __repr__(self) -> str:
        return (
            f"GiftEvalDataset({self.name!r}, {self.term.value!r}, freq={self.freq!r}, series={self.num_series}, "
            f"variates={self.target_dim}, prediction_length={self.prediction_length}, windows={self.windows})"
        )
