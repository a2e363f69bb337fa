"""Synthetic state-tracking and counting tasks with a label at every position (the seed study's length suite).

Each task draws token sequences and labels them position by position; a model must carry some state along the
sequence to get the labels right, and the kind of state differs per task:

============  ===============================  =========================  ====================================
task          tokens                           label at position t        needs
============  ===============================  =========================  ====================================
``parity``    bits 0/1                         XOR of x_0 .. x_t          a 2-state automaton (Z2)
``z5``        digits 0..4                      x_0 + ... + x_t mod 5      a 5-state automaton (Z5, abelian)
``s3``        the 6 permutations of {0,1,2}    their running product      a non-abelian group (S3)
``majority``  bits 0/1                         more 0s / more 1s / tie    an unbounded counter
``anbn``      BOS a..a b..b END                prefix still valid?        a counter (context-free a^n b^n)
``anbncn``    BOS a..a b..b c..c END           prefix still valid?        two counters (context-sensitive)
============  ===============================  =========================  ====================================

Parity and Z5 are the "modular arithmetic" tasks of Grazzi et al. 2024 (a linear RNN needs negative or complex
eigenvalues for them); S3, the smallest non-abelian group, gives their word problem whose transitions do not
commute (non-diagonal, as the delta rule's ``I - beta k k^T``); a^n b^n and a^n b^n c^n are Delétang et al. 2023's
(Chomsky hierarchy) counting languages, scored here per position: is the prefix seen so far still a prefix of some
word of the language, and, at the END token, is the whole string a word.

A sequence of length ``l`` fills positions ``0 .. l-1``; later positions hold :attr:`Task.pad_token` and the label
:data:`IGNORE_INDEX`, so batches of ragged lengths are plain ``[B, T]`` tensors. Everything is vectorised torch and
seeded by a ``torch.Generator`` (CPU), so a seed gives the same data on any machine. Labels are a pure function of
the tokens (:meth:`Task.labels`), which is what the tests check against a brute-force loop.

**Chance level.** Accuracy is reported raw and chance-normalised, ``(acc - chance) / (1 - chance)``. For tasks whose
labels are uniform by construction (parity, Z5, S3) chance is ``1 / classes``. For the others the label shares depend
on the sampler and the length, so chance is the accuracy of the best *constant* guess on the evaluated labels
(:func:`chance_level`): a model must beat always answering the most frequent label.
"""

from __future__ import annotations

import abc
import itertools
from dataclasses import dataclass

import torch
from torch import Tensor

IGNORE_INDEX = -100
"""Label of padding positions; ``torch.nn.functional.cross_entropy`` skips it by default."""


@dataclass(frozen=True)
class TaskBatch:
    """A batch of sequences: ``tokens [B, T]`` (int64), ``labels [B, T]`` (int64, :data:`IGNORE_INDEX` on padding)
    and ``lengths [B]`` (tokens before the padding)."""

    tokens: Tensor
    labels: Tensor
    lengths: Tensor

    def to(self, device: torch.device | str) -> TaskBatch:
        return TaskBatch(self.tokens.to(device), self.labels.to(device), self.lengths.to(device))


class Task(abc.ABC):
    """A sequence task: a vocabulary, a sampler of token sequences and a per-position labelling rule.

    Subclasses set the class attributes and implement :meth:`_draw` (tokens for given lengths) and :meth:`_label`
    (labels from tokens). The padding token is always the last id of the vocabulary.
    """

    name: str = ""
    vocab_size: int = 0
    """Token ids ``0 .. vocab_size - 1``, padding included."""
    num_classes: int = 0
    chance: float | None = None
    """``1 / num_classes`` where labels are uniform by construction, else ``None`` (computed from the labels)."""
    min_length: int = 1
    """The shortest sequence the task can form (a^n b^n needs BOS, one a, one b and END)."""

    @property
    def pad_token(self) -> int:
        return self.vocab_size - 1

    def valid_length(self, length: Tensor) -> Tensor:
        """The longest length ``<= length`` that a sequence of this task can have (identity for most tasks)."""
        return length

    def sample(
        self, batch_size: int, max_length: int, *, min_length: int | None = None,
        generator: torch.Generator | None = None,
    ) -> TaskBatch:
        """Draw ``batch_size`` sequences with lengths uniform in ``[min_length, max_length]`` (rounded down to a
        length the task can form), padded to ``max_length``.

        ``min_length`` defaults to ``max_length``: every sequence fills the whole window (the evaluation setting).
        """
        min_length = max_length if min_length is None else min_length
        if batch_size < 1:
            raise ValueError(f"{self.name}: batch_size must be positive, got {batch_size}")
        if not self.min_length <= min_length <= max_length:
            raise ValueError(f"{self.name}: need {self.min_length} <= min_length <= max_length, got "
                             f"min_length={min_length}, max_length={max_length}")
        lengths = torch.randint(min_length, max_length + 1, (batch_size,), generator=generator)
        lengths = self.valid_length(lengths)
        tokens = self._draw(lengths, max_length, generator)
        positions = torch.arange(max_length)
        padding = positions >= lengths[:, None]
        tokens = tokens.masked_fill(padding, self.pad_token)
        labels = self.labels(tokens, lengths)
        return TaskBatch(tokens, labels, lengths)

    def labels(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        """Per-position labels ``[B, T]`` of ``tokens [B, T]``; :data:`IGNORE_INDEX` at and after ``lengths``."""
        if tokens.dim() != 2 or lengths.shape != tokens.shape[:1]:
            raise ValueError(f"{self.name}: tokens must be [B, T] and lengths [B], got {tuple(tokens.shape)} and "
                             f"{tuple(lengths.shape)}")
        labels = self._label(tokens)
        padding = torch.arange(tokens.shape[1], device=tokens.device) >= lengths[:, None]
        return labels.masked_fill(padding, IGNORE_INDEX)

    @abc.abstractmethod
    def _draw(self, lengths: Tensor, max_length: int, generator: torch.Generator | None) -> Tensor:
        """Tokens ``[B, max_length]`` for sequences of the given lengths (anything may stand after a length)."""

    @abc.abstractmethod
    def _label(self, tokens: Tensor) -> Tensor:
        """Labels ``[B, T]`` of every position, as if every sequence filled the whole window."""


def chance_level(task: Task, labels: Tensor) -> float:
    """The accuracy of guessing without looking: ``task.chance``, or the share of the most frequent label among
    the scored positions of ``labels`` (the best constant guess)."""
    if task.chance is not None:
        return task.chance
    scored = labels[labels != IGNORE_INDEX]
    if scored.numel() == 0:
        raise ValueError(f"{task.name}: no scored positions to compute a chance level from")
    return float(torch.bincount(scored, minlength=task.num_classes).max()) / scored.numel()


# ---------------------------------------------------------------------------------------------------------------
# Group word problems: parity (Z2), Z5, S3


class _UniformSymbols(Task):
    """Tasks whose tokens are i.i.d. uniform over ``vocab_size - 1`` symbols."""

    def _draw(self, lengths: Tensor, max_length: int, generator: torch.Generator | None) -> Tensor:
        return torch.randint(0, self.vocab_size - 1, (len(lengths), max_length), generator=generator)


class Parity(_UniformSymbols):
    """Running parity. Vocabulary: ``0``, ``1`` (bits), ``2`` pad. Label at ``t``: ``(x_0 + ... + x_t) mod 2``.
    Chance: 1/2 (labels are uniform). A diagonal linear recurrence with non-negative eigenvalues cannot
    represent it at arbitrary length (Grazzi et al. 2024)."""

    name, vocab_size, num_classes, chance = "parity", 3, 2, 0.5

    def _label(self, tokens: Tensor) -> Tensor:
        return tokens.cumsum(dim=1) % 2


class ModularSum(_UniformSymbols):
    """Modular arithmetic in Z5 (Grazzi et al. 2024, as in Delétang et al. 2023 without operators): running sum
    mod 5. Vocabulary: ``0 .. 4`` (digits), ``5`` pad. Label at ``t``: ``(x_0 + ... + x_t) mod 5``. Chance: 1/5."""

    name, vocab_size, num_classes, chance = "z5", 6, 5, 0.2

    def _label(self, tokens: Tensor) -> Tensor:
        return tokens.cumsum(dim=1) % 5


S3_ELEMENTS: tuple[tuple[int, int, int], ...] = tuple(itertools.permutations(range(3)))
"""The six permutations of ``{0, 1, 2}`` in lexicographic order; token ``i`` is ``S3_ELEMENTS[i]`` (0: identity).
A permutation ``p`` maps ``x -> p[x]``."""


def _cayley_table(elements: tuple[tuple[int, ...], ...]) -> Tensor:
    """``table[g, h]`` = index of ``g o h`` (apply ``h`` first, then ``g``)."""
    index = {p: i for i, p in enumerate(elements)}
    return torch.tensor([[index[tuple(g[h[x]] for x in range(len(h)))] for h in elements] for g in elements])


class S3WordProblem(_UniformSymbols):
    """The S3 word problem (Grazzi et al. 2024; Merrill et al. 2024): tokens are permutations of three elements,
    the label is the product of all permutations so far. Vocabulary: ``0 .. 5`` (:data:`S3_ELEMENTS`), ``6`` pad.
    Label at ``t``: the index of ``x_t o x_{t-1} o ... o x_0`` (the permutation that applies ``x_0`` first).
    Chance: 1/6. S3 is not abelian, so the state update must be a non-diagonal (non-commuting) transition."""

    name, vocab_size, num_classes, chance = "s3", 7, 6, 1 / 6

    def __init__(self) -> None:
        self.table = _cayley_table(S3_ELEMENTS)

    def _label(self, tokens: Tensor) -> Tensor:
        """Inclusive prefix product by doubling (Hillis-Steele): after the round with offset ``s``, entry ``t``
        is the product of tokens ``max(0, t - 2s + 1) .. t``; ``log2 T`` rounds, each a table lookup."""
        table = self.table.to(tokens.device)
        product, offset = torch.where(tokens < len(S3_ELEMENTS), tokens, 0), 1  # padding acts as the identity
        while offset < tokens.shape[1]:
            later, earlier = product[:, offset:], product[:, :-offset]
            product = torch.cat([product[:, :offset], table[later, earlier]], dim=1)
            offset *= 2
        return product


# ---------------------------------------------------------------------------------------------------------------
# Counting: majority


class Majority(_UniformSymbols):
    """Running majority of fair bits. Vocabulary: ``0``, ``1``, ``2`` pad. Label at ``t``: ``1`` if more ones than
    zeros were seen in ``x_0 .. x_t``, ``0`` if more zeros, ``2`` on a tie. Ties are their own class so that the
    task asks for the exact count difference (a random walk that keeps returning to zero), not only its sign.
    Chance: the best constant guess (about 0.47 at length 128: ties take some positions from the two majorities)."""

    name, vocab_size, num_classes, chance = "majority", 3, 3, None

    def _label(self, tokens: Tensor) -> Tensor:
        balance = (2 * tokens - 1).cumsum(dim=1)
        return torch.where(balance > 0, 1, torch.where(balance < 0, 0, 2))


# ---------------------------------------------------------------------------------------------------------------
# Formal languages: a^n b^n and a^n b^n c^n


class _CountingLanguage(Task):
    """The language ``{s_0^n s_1^n ... s_{k-1}^n : n >= 1}`` over ``k`` symbols, framed as ``BOS word END``.

    Vocabulary: symbols ``0 .. k-1`` (a, b, c), ``k`` BOS, ``k + 1`` END, ``k + 2`` pad. A sequence of length ``l``
    is BOS, a body of ``l - 2`` symbols, END; ``l - 2`` is a multiple of ``k`` so that words exist at every length
    the sampler draws (otherwise length alone would give the answer).

    Label at ``t`` (1 = yes, 0 = no): is ``x_0 .. x_t`` a prefix of ``BOS w END`` for some word ``w``? Before END
    that means "the prefix can still be completed"; at END it is "the body is a word". Once 0 it stays 0.

    Sampler, per sequence with ``n = (l - 2) / k``: a word with probability 1/2; with 1/4 a count shift that moves
    ``m`` symbols from one block to another (``m`` uniform in ``1 .. ceil(n / 4)``, same length, blocks in order,
    only counting tells it apart); with 1/4 a word with one position changed to another symbol (an order
    violation a finite automaton sees). Chance: the best constant guess (most positions are "yes").
    """

    num_classes, chance = 2, None
    symbols: int = 2

    @property
    def bos(self) -> int:
        return self.symbols

    @property
    def end(self) -> int:
        return self.symbols + 1

    @property
    def min_length(self) -> int:  # type: ignore[override]
        return self.symbols + 2

    def valid_length(self, length: Tensor) -> Tensor:
        k = self.symbols
        return ((length - 2) // k) * k + 2

    def _draw(self, lengths: Tensor, max_length: int, generator: torch.Generator | None) -> Tensor:
        k, batch = self.symbols, len(lengths)
        n = (lengths - 2) // k
        counts = n[:, None].repeat(1, k)  # symbols per block [B, k]
        kind = torch.randint(0, 4, (batch,), generator=generator)  # 0, 1: word; 2: count shift; 3: one change
        shift = kind == 2
        moved = 1 + (torch.rand(batch, generator=generator) * ((n + 3) // 4)).long()  # 1 .. ceil(n/4)
        pairs = torch.tensor([(i, j) for i in range(k) for j in range(k) if i != j])
        pair = pairs[torch.randint(0, len(pairs), (batch,), generator=generator)]
        rows = torch.arange(batch)
        counts[rows, pair[:, 0]] += torch.where(shift, moved, 0)
        counts[rows, pair[:, 1]] -= torch.where(shift, moved, 0)
        # body position p holds symbol s where the block bounds cumsum(counts) first exceed p
        bounds = counts.cumsum(dim=1)  # [B, k]
        body_pos = torch.arange(max_length)[None, :] - 1  # position 0 is BOS
        body = (body_pos[:, :, None] >= bounds[:, None, :]).sum(dim=-1).clamp(max=k - 1)
        change = kind == 3
        where = 1 + (torch.rand(batch, generator=generator) * (lengths - 2)).long()  # a body position
        other = (body[rows, where] + torch.randint(1, k, (batch,), generator=generator)) % k
        body[rows[change], where[change]] = other[change]
        positions = torch.arange(max_length)[None, :]
        tokens = torch.where(positions == 0, self.bos, body)
        return torch.where(positions == lengths[:, None] - 1, self.end, tokens)

    def _label(self, tokens: Tensor) -> Tensor:
        k, (_, length) = self.symbols, tokens.shape
        symbol = torch.stack([tokens == s for s in range(k)], dim=-1)  # [B, T, k]
        counts = symbol.long().cumsum(dim=1)  # symbols of each kind in x_0 .. x_t
        positions = torch.arange(length, device=tokens.device)[None, :]
        is_end = tokens == self.end
        bad = (positions == 0) != (tokens == self.bos)  # BOS exactly at position 0
        bad |= torch.cat([torch.zeros_like(is_end[:, :1]), is_end[:, :-1]], dim=1)  # anything after END
        bad |= tokens > self.end  # padding or an unknown id is never part of a word
        for s in range(k):
            later = counts[..., s + 1:].sum(dim=-1) if s + 1 < k else torch.zeros_like(counts[..., 0])
            bad |= symbol[..., s] & (later > 0)  # a symbol after a later block began
            if s > 0:
                bad |= counts[..., s] > counts[..., s - 1]  # a block longer than the one before
                bad |= symbol[..., s] & (counts[..., :s] != counts[..., :s][..., :1]).any(dim=-1)  # earlier unequal
        equal = (counts == counts[..., :1]).all(dim=-1) & (counts[..., 0] > 0)
        bad |= is_end & ~equal  # END only after a complete word
        return (~(bad.long().cummax(dim=1).values.bool())).long()


class AnBn(_CountingLanguage):
    """a^n b^n (n >= 1), Delétang et al. 2023's context-free counting language. Vocabulary: ``0`` a, ``1`` b,
    ``2`` BOS, ``3`` END, ``4`` pad; sequence lengths ``2n + 2``. See :class:`_CountingLanguage` for the labels."""

    name, vocab_size, symbols = "anbn", 5, 2


class AnBnCn(_CountingLanguage):
    """a^n b^n c^n (n >= 1), context-sensitive (needs two counters). Vocabulary: ``0`` a, ``1`` b, ``2`` c,
    ``3`` BOS, ``4`` END, ``5`` pad; sequence lengths ``3n + 2``. See :class:`_CountingLanguage` for the labels."""

    name, vocab_size, symbols = "anbncn", 6, 3


TASKS: dict[str, Task] = {task.name: task for task in (Parity(), ModularSum(), S3WordProblem(), Majority(), AnBn(),
                                                       AnBnCn())}
"""Every task by name, in the report's order."""


def get_task(name: str) -> Task:
    """The task called ``name``; a ``ValueError`` lists the known names."""
    try:
        return TASKS[name]
    except KeyError:
        raise ValueError(f"unknown task {name!r}; choose from {', '.join(TASKS)}") from None
