"""The evaluator's errors: each is a ``ValueError`` whose message says what is wrong and how to fix it."""

from __future__ import annotations


class EvaluationError(ValueError):
    """Bad input to the evaluator: the message says what and how to fix it."""


class BenchmarkError(EvaluationError):
    """The folder is not a benchmark root (no ``benchmark.json`` and no GIFT-Eval dataset folder)."""


class UnknownConfigError(EvaluationError):
    """A requested configuration is not in the benchmark."""


class UnknownModelError(EvaluationError):
    """A model name is neither a baseline, a built-in model nor a checkpoint folder."""
