"""Argument checks for the public ops: clear ``ValueError`` messages that name the argument at fault.

The reference forms assume well-formed inputs; the public ops in :mod:`tsfm.kernels.ops` run these checks first, so a
wrong shape fails with a message such as ``mlstm: v has T=8 (dim 1 of [B, T, H, V]) but q has T=7`` instead of a
broadcasting error deep inside a matmul.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


class ShapeChecker:
    """Binds named dimensions (``B``, ``T``, ``H``, ...) to sizes across the arguments of one op call.

    The first argument that uses a dimension fixes its size; every later argument must agree. Digits in a layout
    are fixed sizes (``"B T H 4 D"``).

    Args:
        op: name of the op, used as the prefix of every message.
    """

    def __init__(self, op: str) -> None:
        self.op = op
        self.sizes: dict[str, int] = {}
        self.bound_by: dict[str, str] = {}

    def tensor(self, name: str, value: object, layout: str) -> None:
        """Check one tensor argument.

        Args:
            name: the argument's name as the caller wrote it (``"q"``, ``"initial_state[0]"``).
            value: the argument; must be a floating-point tensor.
            layout: space-separated dimension names, e.g. ``"B T H K"``.
        """
        dims = layout.split()
        shape_text = f"[{', '.join(dims)}]"
        if not isinstance(value, torch.Tensor):
            raise TypeError(
                f"{self.op}: {name} must be a torch.Tensor of shape {shape_text}, got {type(value).__name__}"
            )
        if value.dim() != len(dims):
            raise ValueError(
                f"{self.op}: {name} must have {len(dims)} dimensions {shape_text}, got shape {tuple(value.shape)}"
            )
        if not value.is_floating_point():
            raise ValueError(f"{self.op}: {name} must be a floating-point tensor, got {value.dtype}")
        for axis, (dim, size) in enumerate(zip(dims, value.shape, strict=True)):
            if dim.isdigit():
                if size != int(dim):
                    raise ValueError(
                        f"{self.op}: {name} must have size {dim} at dim {axis} of {shape_text}, "
                        f"got shape {tuple(value.shape)}"
                    )
            elif dim in self.sizes:
                if size != self.sizes[dim]:
                    raise ValueError(
                        f"{self.op}: {name} has {dim}={size} (dim {axis} of {shape_text}) "
                        f"but {self.bound_by[dim]} has {dim}={self.sizes[dim]}"
                    )
            else:
                self.sizes[dim] = size
                self.bound_by[dim] = name

    def state(self, name: str, value: object, layouts: Sequence[str], *, allow_none: bool = True) -> None:
        """Check a state argument: one tensor or a tuple of tensors.

        Args:
            name: the argument's name (``"initial_state"``, ``"state"``).
            value: the state; ``None`` is accepted when ``allow_none``.
            layouts: one layout per state tensor; a single layout means the state is one tensor, not a tuple.
            allow_none: whether ``None`` (a fresh state) is allowed here.
        """
        if value is None:
            if allow_none:
                return
            raise ValueError(f"{self.op}: {name} must not be None; start from the op's *_init_state(...)")
        if len(layouts) == 1:
            self.tensor(name, value, layouts[0])
            return
        if not isinstance(value, (tuple, list)) or len(value) != len(layouts):
            expected = ", ".join(f"[{', '.join(layout.split())}]" for layout in layouts)
            raise ValueError(f"{self.op}: {name} must be a tuple of {len(layouts)} tensors ({expected})")
        for index, (tensor, layout) in enumerate(zip(value, layouts, strict=True)):
            self.tensor(f"{name}[{index}]", tensor, layout)

    def at_least_one(self, dim: str) -> None:
        """Require a bound dimension (usually ``T``) to be at least 1.

        Args:
            dim: the dimension's name.
        """
        if self.sizes.get(dim, 1) < 1:
            raise ValueError(f"{self.op}: {self.bound_by[dim]} has {dim}=0; the sequence needs at least one token")


def check_chunk_size(op: str, chunk_size: object) -> None:
    """Require ``chunk_size`` to be a positive int.

    Args:
        op: name of the op, for the message.
        chunk_size: the argument.
    """
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"{op}: chunk_size must be a positive int, got {chunk_size!r}")
