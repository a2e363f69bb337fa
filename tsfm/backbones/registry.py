"""The backbone contract and the name -> class registry.

A backbone maps patch-token embeddings ``[B, T, d]`` to contextual features ``[B, T, d]``, causally, and can run
as a stream: ``init_state`` + ``step`` (or ``forward(..., state=..., return_state=True)``) give the same outputs as
one ``forward`` over the joined sequence. That is what lets a forecast prefill the context with one parallel pass
and then continue token by token.

A config names its backbone by a *spec*: a registered name with optional options in brackets, ``"xlstm[3:1]"``,
``"gdn[neg_eigval]"``, ``"mamba2"``. The registry only splits the spec; the options text belongs to the backbone
class, which parses and validates it, so adding a backbone with new options touches one module. This module knows
nothing of time series (no scaling, patching or heads).
"""

from __future__ import annotations

import abc
import re
from collections.abc import Callable
from typing import Any, TypeVar

import torch
from torch import nn

from tsfm.config import ModelConfig

State = Any
"""A backbone's streaming state: an opaque nest of tensors (tuples/lists) owned by the backbone that made it."""

_NAME = r"[A-Za-z][A-Za-z0-9_\-]*"
_SPEC_RE = re.compile(rf"^\s*({_NAME})\s*(?:\[([^\[\]]*)\])?\s*$")
_NAME_RE = re.compile(rf"^{_NAME}$")


class Backbone(nn.Module, abc.ABC):
    """Causal sequence model ``[B, T, d] -> [B, T, d]`` with a streaming form.

    Subclasses are built as ``cls(config, options)`` where ``options`` is the bracket text of the spec (``None``
    when the spec has no brackets); they must reject options they do not understand with a ``ValueError`` that
    names the spec (see :func:`format_spec`). ``name`` is set by :func:`register_backbone`.
    """

    name: str = ""
    #: Whether the backbone may read contexts longer than ``config.context_length``. Recurrent backbones carry a
    #: fixed-size state, so more history is just more steps; a backbone with positions (RoPE) has never seen the
    #: positions past its trained length and sets this to False, so the forecaster refuses such contexts.
    reads_past_trained_length: bool = True
    #: Whether ``forward`` reads a state of batch 1 as the state of every series in a larger batch, without a copy
    #: per series: the fully missing tokens before a short context are the same for all (``Forecaster.read_context``).
    shares_state_across_batch: bool = False

    def __init__(self, config: ModelConfig, options: str | None = None) -> None:
        super().__init__()
        self.config = config
        self.options = options
        self.d_model = config.d_model

    @property
    def spec(self) -> str:
        """The spec this backbone was built from, e.g. ``"xlstm[3:1]"`` (used in error messages)."""
        return format_spec(self.name or type(self).__name__, self.options)

    @abc.abstractmethod
    def forward(
        self, x: torch.Tensor, state: State | None = None, return_state: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, State]:
        """Run over a whole sequence.

        Args:
            x: ``[B, T, d]`` token features.
            state: a state from :meth:`init_state`, :meth:`step` or an earlier ``forward(..., return_state=True)``;
                ``None`` starts from the beginning of a sequence.
            return_state: also return the state after the last token.

        Returns:
            ``y [B, T, d]``, or ``(y, state)`` when ``return_state`` is true.
        """

    @abc.abstractmethod
    def init_state(
        self, batch_size: int, *, device: torch.device | str | None = None, dtype: torch.dtype | None = None
    ) -> State:
        """The state before the first token. ``dtype`` is the activation dtype (default: the parameters' dtype);
        recurrent states are kept in float32 (float64 for float64 activations) whatever it is."""

    @abc.abstractmethod
    def step(self, x_t: torch.Tensor, state: State) -> tuple[torch.Tensor, State]:
        """Advance by one token: ``x_t [B, d] -> (y_t [B, d], new state)``. The given state is not modified."""


BACKBONES: dict[str, type[Backbone]] = {}
"""Registered backbone classes by name. Filled by :func:`register_backbone` on ``import tsfm.backbones``."""

BackboneClass = TypeVar("BackboneClass", bound=type[Backbone])


def register_backbone(name: str) -> Callable[[BackboneClass], BackboneClass]:
    """Class decorator: make ``name`` (and ``name[options]``) buildable through :func:`build_backbone`.

    Registering a backbone is one decorated class::

        @register_backbone("toy")
        class Toy(BlockStack):
            def __init__(self, config, options=None):
                reject_options("toy", options)
                super().__init__(config, options, [ToyMixer(config) for _ in range(config.n_layers)])
    """
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ValueError(f"invalid backbone name {name!r}: use letters, digits, '_' or '-', starting with a letter")

    def decorator(cls: BackboneClass) -> BackboneClass:
        if not (isinstance(cls, type) and issubclass(cls, Backbone)):
            raise TypeError(f"@register_backbone({name!r}) needs a Backbone subclass, got {cls!r}")
        if name in BACKBONES and BACKBONES[name] is not cls:
            raise ValueError(f"backbone name {name!r} is already registered by {BACKBONES[name].__qualname__}")
        cls.name = name
        BACKBONES[name] = cls
        return cls

    return decorator


def available_backbones() -> list[str]:
    """Registered backbone names, sorted."""
    return sorted(BACKBONES)


def format_spec(name: str, options: str | None) -> str:
    """Inverse of :func:`parse_backbone_spec`: ``("xlstm", "3:1") -> "xlstm[3:1]"``."""
    return name if options is None else f"{name}[{options}]"


def parse_backbone_spec(spec: str) -> tuple[str, str | None]:
    """Split a spec into ``(name, options)``: ``"xlstm[3:1]" -> ("xlstm", "3:1")``, ``"mamba2" -> ("mamba2", None)``.

    Only the syntax is checked here (one name, at most one bracket group, non-empty options); whether the name is
    registered and the options make sense is decided by :func:`build_backbone` and the backbone class.
    """
    if not isinstance(spec, str):
        raise ValueError(f"backbone spec must be a string like 'xlstm[3:1]', got {spec!r}")
    match = _SPEC_RE.match(spec)
    if match is None:
        raise ValueError(f"malformed backbone spec {spec!r}: expected 'name' or 'name[options]', e.g. 'xlstm[3:1]'")
    name, options = match.group(1), match.group(2)
    if options is not None:
        options = options.strip()
        if not options:
            raise ValueError(f"malformed backbone spec {spec!r}: empty brackets (drop them for the default)")
    return name, options


def build_backbone(config: ModelConfig) -> Backbone:
    """Build the backbone named by ``config.backbone`` (randomly initialised, float32)."""
    name, options = parse_backbone_spec(config.backbone)
    cls = BACKBONES.get(name)
    if cls is None:
        known = ", ".join(available_backbones()) or "(none: import tsfm.backbones)"
        raise ValueError(f"unknown backbone {name!r} in spec {config.backbone!r}; registered backbones: {known}")
    return cls(config, options)


def reject_options(name: str, options: str | None) -> None:
    """For backbones without options: raise a ``ValueError`` naming the spec when options were given."""
    if options is not None:
        raise ValueError(f"backbone spec {format_spec(name, options)!r}: {name!r} takes no options in brackets")

