"""Every task's labels against an independent brute force: plain Python loops over one sequence at a time, written
from the task's definition (not from the vectorised code), on sampled batches and on arbitrary token strings."""

from __future__ import annotations

import itertools

import pytest
import torch

from tsfm.pipelines.state_tracking.tasks import IGNORE_INDEX, TASKS, chance_level, get_task

# ------------------------------------------------------------------------------------------------------------------
# Brute force, one sequence (a list of ints) at a time


def brute_parity(seq: list[int]) -> list[int]:
    out, ones = [], 0
    for x in seq:
        ones += x == 1
        out.append(ones % 2)
    return out


def brute_z5(seq: list[int]) -> list[int]:
    return [sum(seq[: t + 1]) % 5 for t in range(len(seq))]


PERMUTATIONS = list(itertools.permutations(range(3)))


def brute_s3(seq: list[int]) -> list[int]:
    """Follow where each of the three objects goes when the permutations are applied one after the other."""
    out, where = [], [0, 1, 2]  # where[i]: the image of object i under everything applied so far
    for x in seq:
        where = [PERMUTATIONS[x][image] for image in where]
        out.append(PERMUTATIONS.index(tuple(where)))
    return out


def brute_majority(seq: list[int]) -> list[int]:
    out = []
    for t in range(len(seq)):
        ones = seq[: t + 1].count(1)
        zeros = seq[: t + 1].count(0)
        out.append(1 if ones > zeros else 0 if zeros > ones else 2)
    return out


def brute_language(symbols: int):
    """Label t = 1 iff seq[:t+1] is a prefix of BOS s0^n ... s_{k-1}^n END for some n >= 1."""
    bos, end = symbols, symbols + 1

    def label(seq: list[int]) -> list[int]:
        out = []
        for t in range(len(seq)):
            prefix = seq[: t + 1]
            words = ([bos] + [s for s in range(symbols) for _ in range(n)] + [end] for n in range(1, len(seq) + 1))
            out.append(int(any(word[: len(prefix)] == prefix for word in words)))
        return out

    return label


BRUTE = {"parity": brute_parity, "z5": brute_z5, "s3": brute_s3, "majority": brute_majority,
         "anbn": brute_language(2), "anbncn": brute_language(3)}


def check_against_brute(name: str, tokens: torch.Tensor, lengths: torch.Tensor, labels: torch.Tensor) -> None:
    for row in range(tokens.shape[0]):
        length = int(lengths[row])
        expected = BRUTE[name](tokens[row, :length].tolist())
        assert labels[row, :length].tolist() == expected, (name, tokens[row, :length].tolist())
        assert (labels[row, length:] == IGNORE_INDEX).all()


# ------------------------------------------------------------------------------------------------------------------


def test_every_task_has_a_brute_force() -> None:
    assert set(BRUTE) == set(TASKS)


@pytest.mark.parametrize("name", list(TASKS))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sampled_labels_match_brute_force(name: str, seed: int) -> None:
    task = get_task(name)
    batch = task.sample(48, 40, min_length=task.min_length, generator=torch.Generator().manual_seed(seed))
    assert batch.tokens.shape == batch.labels.shape == (48, 40)
    assert batch.tokens.dtype == batch.labels.dtype == torch.int64
    assert (batch.lengths >= task.min_length).all() and (batch.lengths <= 40).all()
    padding = torch.arange(40) >= batch.lengths[:, None]
    assert (batch.tokens[padding] == task.pad_token).all()
    assert (batch.tokens[~padding] < task.pad_token).all()
    assert batch.labels[~padding].max() < task.num_classes
    check_against_brute(name, batch.tokens, batch.lengths, batch.labels)


@pytest.mark.parametrize("name", list(TASKS))
def test_long_sequences_match_brute_force(name: str) -> None:
    """One length well past a power of two, so the doubling scan of S3 runs several rounds with ragged tails."""
    task = get_task(name)
    batch = task.sample(4, 300, generator=torch.Generator().manual_seed(7))
    check_against_brute(name, batch.tokens, batch.lengths, batch.labels)


@pytest.mark.parametrize("name", ["anbn", "anbncn"])
def test_language_labels_of_arbitrary_strings(name: str) -> None:
    """The rule, not only the sampler: strings with BOS or END anywhere, symbols in any order, padding inside."""
    task = get_task(name)
    generator = torch.Generator().manual_seed(3)
    tokens = torch.randint(0, task.vocab_size, (400, 12), generator=generator)
    tokens[:300, 0] = task.bos  # most start well, so later positions are tested too
    ordered = torch.sort(torch.randint(0, task.symbols, (100, 10), generator=generator), dim=1).values
    tokens[300:, 1:11] = ordered  # blocks in order, counts random: the counting cases
    tokens[300:, 11] = task.end
    lengths = torch.randint(1, 13, (400,), generator=generator)
    check_against_brute(name, tokens, lengths, task.labels(tokens, lengths))


@pytest.mark.parametrize("name", ["anbn", "anbncn"])
def test_language_sampler_mixes_words_and_near_misses(name: str) -> None:
    """Half words, the rest non-words of the same length: the END label is not given away by length or END."""
    task = get_task(name)
    batch = task.sample(2000, 128, min_length=task.min_length, generator=torch.Generator().manual_seed(0))
    assert ((batch.lengths - 2) % task.symbols == 0).all()
    final = batch.labels[torch.arange(2000), batch.lengths - 1]
    assert 0.45 < final.float().mean() < 0.55
    for length in batch.lengths.unique()[:5]:  # at a given length both answers occur
        at = batch.lengths == length
        assert set(final[at].tolist()) <= {0, 1}
    # near misses that only counting reveals: blocks in order (no symbol after a later one), yet not a word
    rows = zip(batch.tokens.tolist(), batch.lengths.tolist(), final.tolist(), strict=True)
    assert any(row[1: n - 1] == sorted(row[1: n - 1]) and f == 0 for row, n, f in rows)


def test_evaluation_lengths_are_exact() -> None:
    """128, 512 and 2,048 are lengths every task can form, so the evaluation scores exactly that many tokens."""
    for task in TASKS.values():
        for length in (128, 512, 2048):
            batch = task.sample(2, length, generator=torch.Generator().manual_seed(0))
            assert batch.lengths.tolist() == [length, length], task.name


@pytest.mark.parametrize("name", list(TASKS))
def test_sampling_is_seeded(name: str) -> None:
    task = get_task(name)
    a = task.sample(8, 30, min_length=task.min_length, generator=torch.Generator().manual_seed(5))
    b = task.sample(8, 30, min_length=task.min_length, generator=torch.Generator().manual_seed(5))
    c = task.sample(8, 30, min_length=task.min_length, generator=torch.Generator().manual_seed(6))
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.labels, b.labels)
    assert not torch.equal(a.tokens, c.tokens)


def test_chance_levels() -> None:
    labels = torch.tensor([[0, 0, 0, 1, IGNORE_INDEX], [2, 0, 1, IGNORE_INDEX, IGNORE_INDEX]])
    assert chance_level(get_task("majority"), labels) == pytest.approx(4 / 7)  # the best constant guess: 0
    assert chance_level(get_task("parity"), labels) == 0.5  # uniform by construction: 1 / classes
    assert chance_level(get_task("s3"), labels) == pytest.approx(1 / 6)
    with pytest.raises(ValueError, match="no scored positions"):
        chance_level(get_task("anbn"), torch.full((1, 3), IGNORE_INDEX))


def test_uniform_tasks_have_uniform_labels() -> None:
    """What justifies chance = 1 / classes for parity, Z5 and S3."""
    for name in ("parity", "z5", "s3"):
        task = get_task(name)
        labels = task.sample(512, 64, generator=torch.Generator().manual_seed(0)).labels
        shares = torch.bincount(labels.flatten(), minlength=task.num_classes) / labels.numel()
        assert (shares - 1 / task.num_classes).abs().max() < 0.01, name


def test_bad_requests_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown task 'dyck'"):
        get_task("dyck")
    with pytest.raises(ValueError, match="min_length"):
        get_task("anbn").sample(4, 16, min_length=2)
    with pytest.raises(ValueError, match="min_length"):
        get_task("parity").sample(4, 8, min_length=9)
    with pytest.raises(ValueError, match="batch_size"):
        get_task("parity").sample(0, 8)
    with pytest.raises(ValueError, match=r"\[B, T\]"):
        get_task("parity").labels(torch.zeros(3, dtype=torch.long), torch.tensor([3]))
