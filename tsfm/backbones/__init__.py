"""Sequence backbones: ``[B, T, d] -> [B, T, d]`` causal models with a streaming form, built by name from a config.

Importing this package registers the built-in backbones (``xlstm[a:b]``, ``xlstm[a:b,conv]``, ``mamba2``,
``gdn[neg_eigval]``, ``transformer``); ``build_backbone(config)`` builds the one ``config.backbone`` names. To add
one, write a module with a ``@register_backbone("name")`` class (usually a :class:`BlockStack` over a new
:class:`Mixer`) and import it here. Backbones know nothing of time series: scaling, patching and heads live in
``tsfm.model``.
"""

from tsfm.backbones import gdn, mamba2, transformer, xlstm
from tsfm.backbones.blocks import BlockStack, Mixer
from tsfm.backbones.registry import (
    BACKBONES,
    Backbone,
    State,
    available_backbones,
    build_backbone,
    format_spec,
    parse_backbone_spec,
    register_backbone,
    reject_options,
)

__all__ = [
    "BACKBONES",
    "Backbone",
    "BlockStack",
    "Mixer",
    "State",
    "available_backbones",
    "build_backbone",
    "format_spec",
    "gdn",
    "mamba2",
    "parse_backbone_spec",
    "register_backbone",
    "reject_options",
    "transformer",
    "xlstm",
]
