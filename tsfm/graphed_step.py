"""One per-patch stream update captured in a CUDA graph (issue 15, item 5).

When a stream receives a new patch, the update is ``embed(patch_tokens(scaled patch))`` followed by one
``backbone.step`` per layer (what :meth:`tsfm.stream.Stream._advance` does for a single patch). On a GPU that is
launch-bound: dozens of tiny kernels (norms, projections, gates, the recurrent step op) per layer, each doing
microseconds of work behind a few microseconds of CPU launch overhead. A CUDA graph records the whole sequence once
and replays it with one launch, so the CPU cost no longer scales with the number of kernels.

A graph replays fixed memory addresses, so :class:`GraphedPatchStep` owns static buffers: the input patch, the state
(read by the step) and the outputs. The new state is copied back into the static state buffers *inside* the graph,
so consecutive replays advance the same stream without any copy outside it. The batch size and the state's
structure are fixed at capture; another batch size needs another ``GraphedPatchStep``.

Not for the ``transformer`` backbone: its state is a KV cache that grows by one entry per patch, which no fixed
buffer can hold (streams recompute it from the kept tail instead, see :mod:`tsfm.stream`).
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch.utils import _pytree as pytree

from tsfm.model import Forecaster
from tsfm.patching import patch_tokens

#: Eager runs on a side stream before capture: the first calls pick kernels (Triton autotuning, cuBLAS workspaces)
#: and allocate lazily, none of which may happen during capture (PyTorch CUDA-graphs docs, "whole network capture").
WARMUP_RUNS = 3


def require_cuda(device: torch.device) -> None:
    """Refuse a device other than CUDA, naming it and the way out."""
    if device.type != "cuda":
        raise ValueError(
            f"GraphedPatchStep captures a CUDA graph and needs a model on a CUDA device, got one on {device}; "
            "move it with model.to('cuda') (on CPU, use Forecaster.continue_state)"
        )


class GraphedPatchStep:
    """``hidden, state = step(patch_values, state)``: one patch update of ``B`` streams, replayed from a CUDA graph.

    Args:
        model: a :class:`~tsfm.model.Forecaster` on CUDA, in eval mode; its weights must stay where they are (the
            graph reads their addresses), so do not move or reload the model after capture.
        state_like: a state of the batch size to capture, as ``model.backbone.init_state(B, ...)`` or
            ``model.backbone(tokens, return_state=True)`` return it; only its structure, shapes and dtypes are used.
        autocast_dtype: run the update under CUDA autocast to this dtype (e.g. ``torch.bfloat16``); ``None``
            runs in the model's own dtype.

    Raises:
        ValueError: the model is not on CUDA, its backbone is the Transformer, or ``state_like`` does not match it.
    """

    def __init__(self, model: Forecaster, state_like: Any, *, autocast_dtype: torch.dtype | None = None) -> None:
        device = model.device
        require_cuda(device)
        if model.backbone.name == "transformer":
            raise ValueError("GraphedPatchStep: the transformer's state is a KV cache that grows with every patch "
                             "and cannot live in fixed graph buffers; streams recompute it instead")
        leaves, self._spec = pytree.tree_flatten(state_like)
        if not leaves or not all(isinstance(leaf, torch.Tensor) for leaf in leaves):
            raise ValueError("GraphedPatchStep: state_like must be a nest of tensors (a backbone state)")
        self.model = model
        self.batch_size = int(leaves[0].shape[0])
        self.patch_size = model.config.patch_size
        self._autocast_dtype = autocast_dtype
        embed_dtype = next(model.embed.parameters()).dtype
        with torch.no_grad():  # not inference_mode: the static buffers are written again outside it
            self._patch = torch.zeros(self.batch_size, self.patch_size, device=device, dtype=embed_dtype)
            self._leaves = [leaf.detach().to(device).clone() for leaf in leaves]
            self.state = pytree.tree_unflatten(self._leaves, self._spec)
            self._graph, self._hidden = self._capture(device)

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        if self._autocast_dtype is None:
            return contextlib.nullcontext()
        # cache_enabled=False: autocast's cache of cast weights would be freed after capture (PyTorch docs).
        return torch.autocast("cuda", dtype=self._autocast_dtype, cache_enabled=False)

    def _update(self) -> torch.Tensor:
        """The captured work: embed the static patch, step the static state, write the new state back into it."""
        with self._autocast():
            token = self.model.embed(patch_tokens(self._patch[:, None]))[:, 0]
            hidden, new_state = self.model.backbone.step(token, self.state)
        new_leaves = pytree.tree_leaves(new_state)
        if len(new_leaves) != len(self._leaves):
            raise ValueError(f"GraphedPatchStep: the backbone returned a state of {len(new_leaves)} tensors, "
                             f"state_like has {len(self._leaves)}")
        storages = {leaf.untyped_storage().data_ptr() for leaf in self._leaves}
        for static, new in zip(self._leaves, new_leaves, strict=True):
            if new is static:
                continue
            if new.untyped_storage().data_ptr() in storages:  # a view of the old state: never copy onto itself
                new = new.clone()
            static.copy_(new)
        return hidden

    def _capture(self, device: torch.device) -> tuple[torch.cuda.CUDAGraph, torch.Tensor]:
        saved = [leaf.clone() for leaf in self._leaves]  # warm-up runs advance the buffers; restore them after
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(WARMUP_RUNS):
                self._update()
        torch.cuda.current_stream(device).wait_stream(side)
        for leaf, value in zip(self._leaves, saved, strict=True):
            leaf.copy_(value)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            hidden = self._update()
        return graph, hidden

    def __call__(self, patch_values: torch.Tensor, state: Any = None) -> tuple[torch.Tensor, Any]:
        """Advance the streams by one patch.

        Args:
            patch_values: ``[B, patch_size]`` scaled values (``apply_scale`` with the stream's scale), NaN = missing.
            state: the state before the patch; ``None`` or :attr:`state` (what the previous call returned) continues
                from the static buffers without a copy; any other state is copied into them first.

        Returns:
            ``(hidden [B, d_model], state)``: ``hidden`` is a new tensor; ``state`` is :attr:`state`, the static
            buffers themselves, overwritten by the next call (``pytree.tree_map(torch.clone, state)`` keeps one).
        """
        if patch_values.dim() != 2 or patch_values.shape[0] != self.batch_size:
            raise ValueError(f"GraphedPatchStep was captured for batch size {self.batch_size}: patch_values must "
                             f"be [{self.batch_size}, {self.patch_size}], got {tuple(patch_values.shape)}")
        if patch_values.shape[1] != self.patch_size:
            raise ValueError(f"patch_values must be [{self.batch_size}, {self.patch_size}], "
                             f"got {tuple(patch_values.shape)}")
        with torch.no_grad():
            if state is not None and state is not self.state:
                self._load_state(state)
            self._patch.copy_(patch_values)
            self._graph.replay()
            return self._hidden.clone(), self.state

    def _load_state(self, state: Any) -> None:
        leaves = pytree.tree_leaves(state)
        if len(leaves) != len(self._leaves):
            raise ValueError(f"GraphedPatchStep: state has {len(leaves)} tensors, the captured state_like "
                             f"{len(self._leaves)}")
        for k, (static, leaf) in enumerate(zip(self._leaves, leaves, strict=True)):
            if leaf.shape != static.shape:
                raise ValueError(f"GraphedPatchStep was captured for batch size {self.batch_size}: state leaf {k} "
                                 f"must be {tuple(static.shape)}, got {tuple(leaf.shape)}")
            if leaf is not static:
                static.copy_(leaf)


__all__ = ["GraphedPatchStep"]
