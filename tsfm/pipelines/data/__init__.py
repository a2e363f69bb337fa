"""The data layer: GIFT-Eval format I/O, GIFT-Eval's dataset logic, converters from raw sources, and builders.

- :mod:`.frequency`: legacy pandas aliases (``H``, ``15T``, ``A-DEC``) under pandas 2 and 3.
- :mod:`.gift_format`: read/write GIFT-Eval dataset folders with pyarrow (``datasets`` 2.17 and >= 4 load ours).
- :mod:`.gift_eval`: terms, prediction lengths, windows, gluonts test instances; the 97 official configurations.
- :mod:`.regular`: put irregular sources on a regular grid.
- :mod:`.sources`: one converter module per raw source family; :mod:`.build`: the benchmark and pretraining corpus.
- :mod:`.baseline_check`: Naive / Seasonal-Naive scored GIFT-Eval's way (the golden check).

Importing this package stays light (numpy, pandas, pyarrow); gluonts, ``rdata`` and the wheel data are loaded only
by the functions that need them. Nothing here knows about models.
"""

from .frequency import UnknownFrequencyError, normalise_freq, to_pandas_freq, to_period_freq
from .gift_format import (
    DatasetFieldError,
    GiftFormatError,
    NotADatasetError,
    iter_entries,
    list_datasets,
    read_dataset,
    write_dataset,
)

__all__ = [
    "DatasetFieldError",
    "GiftFormatError",
    "NotADatasetError",
    "UnknownFrequencyError",
    "iter_entries",
    "list_datasets",
    "normalise_freq",
    "read_dataset",
    "to_pandas_freq",
    "to_period_freq",
    "write_dataset",
]
