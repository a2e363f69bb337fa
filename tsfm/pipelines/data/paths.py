"""Where the raw data lives: the project's shared folder, never the repository nor the installed package.

Raw files are large and under other licences, so they are read in place and never copied into the repository.
The raw folder is, first to last: the one given with :func:`use_raw_dir` (``tsfm data --raw DIR``), an explicit
shared folder argument (``--shared-dir``), ``$TSFM_SHARED_DIR/data/raw``, then ``../shared/data/raw`` beside the
current folder or beside a source checkout. An installed package never looks beside ``site-packages``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path

__all__ = [
    "REPO_ROOT",
    "SHARED_DIR_ENV",
    "RawDataMissingError",
    "raw_dir",
    "raw_file",
    "shared_dir",
    "use_raw_dir",
]

# The source checkout holding this package, or None when installed (no pyproject.toml above the package).
_ROOT = Path(__file__).resolve().parents[3]
REPO_ROOT: Path | None = _ROOT if (_ROOT / "pyproject.toml").is_file() else None
SHARED_DIR_ENV = "TSFM_SHARED_DIR"
_RAW_OVERRIDE: ContextVar[Path | None] = ContextVar("tsfm_raw_dir", default=None)


class RawDataMissingError(FileNotFoundError):
    """A raw file (or the raw folder) the converters need is not there."""


@contextlib.contextmanager
def use_raw_dir(path: str | os.PathLike[str] | None) -> Iterator[None]:
    """Read raw files from ``path`` inside the block (``None`` changes nothing); beats every other source."""
    token = _RAW_OVERRIDE.set(Path(path) if path is not None else _RAW_OVERRIDE.get())
    try:
        yield
    finally:
        _RAW_OVERRIDE.reset(token)


def _default_shared_dirs() -> list[Path]:
    candidates = [Path.cwd().parent / "shared", Path.cwd() / "shared"]
    if REPO_ROOT is not None:
        candidates.insert(0, REPO_ROOT.parent / "shared")
    return candidates


def shared_dir(shared: str | os.PathLike[str] | None = None) -> Path:
    """The shared folder: the argument, else ``$TSFM_SHARED_DIR``, else the first existing ``../shared``.

    When none exists the first candidate is returned (reading from it then fails with a clear error).
    """
    if shared is not None:
        return Path(shared)
    env = os.environ.get(SHARED_DIR_ENV)
    if env:
        return Path(env)
    candidates = _default_shared_dirs()
    return next((path for path in candidates if (path / "data" / "raw").is_dir()), candidates[0])


def raw_dir(shared: str | os.PathLike[str] | None = None) -> Path:
    """The raw folder (it may not exist: converters raise :class:`RawDataMissingError` when they need it)."""
    override = _RAW_OVERRIDE.get()
    if override is not None:
        return override
    return shared_dir(shared) / "data" / "raw"


def raw_file(name: str, shared: str | os.PathLike[str] | None = None) -> Path:
    """The path of one raw file, checked to exist."""
    path = raw_dir(shared) / name
    if not path.is_file():
        raise RawDataMissingError(
            f"raw file {path} is missing: pass --raw DIR (the folder holding the raw files) or set "
            f"{SHARED_DIR_ENV} to the shared folder holding data/raw"
        )
    return path
