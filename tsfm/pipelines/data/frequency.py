"""Frequency aliases: the legacy pandas strings GIFT-Eval stores, translated for the pandas that is running.

GIFT-Eval files carry pandas' *legacy* aliases (``H``, ``15T``, ``10S``, ``W-SUN``, ``M``, ``Q-DEC``, ``A-DEC``),
written under pandas 1.x/2.x. Pandas 2.2 deprecated most of them and pandas 3 refuses them, and offsets and
periods now want different spellings (offset ``ME`` but period ``M``). We keep the legacy alias as the stored,
canonical form (so our files match GIFT-Eval's byte for byte in that field) and translate at the edge:

- :func:`to_pandas_freq`: an offset alias the running pandas accepts (``pd.date_range``, ``to_offset``);
- :func:`to_period_freq`: a period alias (``pd.Period``, gluonts' ``start`` field);
- :func:`normalise_freq`: the base letter GIFT-Eval looks prediction lengths up with (``15T -> T``);
- :func:`seasonality`: gluonts' ``get_seasonality`` of the alias, the MASE season GIFT-Eval uses;
- :func:`freq_key`: the frequency part of a result key (``W-SUN -> W``, ``15T -> 15T``);
- :func:`step_duration`: how long one step of the alias lasts, to order frequencies from the finest.

This module knows nothing of datasets; it must stay importable without gluonts.
"""

from __future__ import annotations

import re
import warnings
from functools import lru_cache

import pandas as pd
from pandas.tseries.frequencies import to_offset

__all__ = [
    "UnknownFrequencyError",
    "freq_key",
    "normalise_freq",
    "seasonality",
    "step_duration",
    "to_pandas_freq",
    "to_period_freq",
]


class UnknownFrequencyError(ValueError):
    """A frequency string that is neither a legacy nor a current pandas alias we understand."""


# Base code (as written, legacy or current) -> (legacy base letter for prediction lengths, current offset code).
# Anchored codes keep their anchor ("-DEC", "-SUN") when translated.
_BASES: dict[str, tuple[str, str]] = {
    # sub-daily
    "N": ("N", "ns"),
    "ns": ("N", "ns"),
    "U": ("U", "us"),
    "us": ("U", "us"),
    "L": ("L", "ms"),
    "ms": ("L", "ms"),
    "S": ("S", "s"),
    "s": ("S", "s"),
    "T": ("T", "min"),
    "min": ("T", "min"),
    "H": ("H", "h"),
    "h": ("H", "h"),
    # daily and weekly ("B": business days count as days for horizons; see normalise_freq)
    "D": ("D", "D"),
    "B": ("D", "B"),
    "W": ("W", "W"),
    # monthly
    "M": ("M", "ME"),
    "ME": ("M", "ME"),
    "MS": ("M", "MS"),
    "BM": ("M", "BME"),
    "BME": ("M", "BME"),
    "BMS": ("M", "BMS"),
    "SM": ("M", "SME"),
    "SME": ("M", "SME"),
    "SMS": ("M", "SMS"),
    # quarterly
    "Q": ("Q", "QE"),
    "QE": ("Q", "QE"),
    "QS": ("Q", "QS"),
    "BQ": ("Q", "BQE"),
    "BQE": ("Q", "BQE"),
    "BQS": ("Q", "BQS"),
    # yearly
    "A": ("A", "YE"),
    "Y": ("A", "YE"),
    "YE": ("A", "YE"),
    "AS": ("A", "YS"),
    "YS": ("A", "YS"),
    "BA": ("A", "BYE"),
    "BY": ("A", "BYE"),
    "BYE": ("A", "BYE"),
    "BAS": ("A", "BYS"),
    "BYS": ("A", "BYS"),
}

_ALIAS = re.compile(r"^\s*(?P<n>\d*)\s*(?P<base>[A-Za-z]+)(?:-(?P<anchor>[A-Za-z]+))?\s*$")

_NEW_ALIASES = tuple(int(p) for p in pd.__version__.split(".")[:2]) >= (2, 2)
"""Pandas >= 2.2 understands the new aliases (``h``, ``min``, ``ME``, ``YE``); older pandas only the legacy ones."""


def _parse(alias: str) -> tuple[int, str, str | None]:
    if not isinstance(alias, str):
        raise UnknownFrequencyError(f"frequency must be a string such as 'H', '15T' or 'W-SUN', got {alias!r}")
    m = _ALIAS.match(alias)
    if m is None or m.group("base") not in _BASES:
        raise UnknownFrequencyError(
            f"unknown frequency {alias!r}: expected a pandas alias such as 'H', '15T', '10S', 'D', 'B', 'W-SUN', "
            "'M', 'MS', 'Q-DEC', 'A-DEC' (legacy) or 'h', 'min', 'ME', 'QE-DEC', 'YE-DEC' (current)"
        )
    n = int(m.group("n")) if m.group("n") else 1
    if n <= 0:
        raise UnknownFrequencyError(f"unknown frequency {alias!r}: the multiple must be positive")
    return n, m.group("base"), m.group("anchor")


@lru_cache(maxsize=256)
def to_pandas_freq(alias: str) -> str:
    """Translate a (legacy) alias into an offset alias that the running pandas accepts.

    ``'H' -> 'h'``, ``'15T' -> '15min'``, ``'M' -> 'ME'``, ``'A-DEC' -> 'YE-DEC'``, ``'W-SUN' -> 'W-SUN'`` under
    pandas >= 2.2; under older pandas the alias is returned as written (it is what that pandas expects).

    Raises:
        UnknownFrequencyError: the alias is not a pandas frequency.
    """
    n, base, anchor = _parse(alias)
    code = _BASES[base][1] if _NEW_ALIASES else base
    out = f"{n if n != 1 else ''}{code}{'-' + anchor.upper() if anchor else ''}"
    try:
        to_offset(out)
    except ValueError as err:  # e.g. a bad anchor such as "W-XYZ"
        raise UnknownFrequencyError(f"unknown frequency {alias!r}: pandas rejects {out!r} ({err})") from err
    return out


@lru_cache(maxsize=256)
def to_period_freq(alias: str) -> str:
    """The alias for ``pd.Period`` / ``PeriodIndex`` (what gluonts' ``start`` field needs).

    Periods do not distinguish start and end anchoring: ``M``, ``MS`` and ``ME`` are all the period ``M``;
    ``A-DEC`` and ``YE-DEC`` are ``Y-DEC``. We let pandas do the mapping through a one-element index.
    """
    offset_alias = to_pandas_freq(alias)
    if _parse(alias)[1] == "B":  # business days: "B" (pandas 3 deprecates B periods; avoid them where possible)
        return offset_alias
    try:
        return pd.date_range("2000-01-01", periods=1, freq=offset_alias).to_period().freqstr
    except (ValueError, TypeError) as err:
        raise UnknownFrequencyError(f"frequency {alias!r} has no period equivalent ({err})") from err


def normalise_freq(alias: str) -> str:
    """The base letter that GIFT-Eval's prediction-length tables are keyed by, in legacy spelling.

    ``'15T' -> 'T'``, ``'W-SUN' -> 'W'``, ``'A-DEC' -> 'A'``, ``'QS' -> 'Q'``, ``'MS' -> 'M'``, ``'H'``/``'h'`` ->
    ``'H'``, ``'min' -> 'T'``, ``'YE-DEC' -> 'A'``. Business days (``'B'``) count as days (``'D'``): GIFT-Eval has
    no business-day data, and a daily horizon is the natural one for it.
    """
    to_pandas_freq(alias)  # validates (anchor included)
    _, base, _ = _parse(alias)
    return _BASES[base][0]


def freq_key(alias: str) -> str:
    """The frequency as it appears in a result key (``"{dataset}/{freq}/{term}"``): the alias without its anchor.

    ``'A-DEC' -> 'A'``, ``'W-SUN' -> 'W'``, ``'15T' -> '15T'``, ``'H' -> 'H'`` (the legacy spelling is kept, as in
    GIFT-Eval's ``all_results.csv``).
    """
    to_pandas_freq(alias)
    return alias.split("-")[0]


def step_duration(alias: str) -> pd.Timedelta:
    """How long one step of the alias lasts, measured from the first step after 2000-01-01: ``5T`` 5 minutes,
    ``W-SUN`` 7 days, ``M`` 29 days (February 2000), ``A`` 365 days. Calendar steps vary in length, so this orders
    frequencies (finest first) rather than converting between them.

    Raises:
        UnknownFrequencyError: the alias is not a pandas frequency.
    """
    offset = to_offset(to_pandas_freq(alias))
    first = pd.Timestamp("2000-01-01") + offset  # rolled onto the anchor, so the next step is a whole one
    return (first + offset) - first


def seasonality(alias: str) -> int:
    """gluonts' ``get_seasonality`` for a (legacy) alias, as GIFT-Eval computes the MASE season.

    ``H -> 24``, ``15T -> 96``, ``10S -> 360``, ``D -> 1``, ``W -> 1``, ``M -> 12``, ``Q -> 4``, ``A -> 1``.
    gluonts is imported here only, so the rest of the module works without it.
    """
    from gluonts.time_feature import get_seasonality

    with warnings.catch_warnings():  # gluonts reads offset.name, which pandas 3 deprecates; the value is unchanged
        warnings.filterwarnings("ignore", message="The 'name' property is deprecated")
        return int(get_seasonality(to_pandas_freq(alias)))
