"""No benchmark data in training: every informative 32-step chunk of every benchmark series is looked for at every
offset of every series the trainer can read (corpus, validation split, the sampler's buffer that TSMixup draws
from, the corpus' series moved onto a finer grid)."""

from __future__ import annotations

import hashlib

import numpy as np

from tsfm.pipelines.data.batches import BatchConfig, BatchSampler
from tsfm.pipelines.data.corpus import load_corpus
from tsfm.pipelines.data.gift_eval import configurations
from tsfm.pipelines.data.gift_format import read_dataset
from tsfm.pipelines.data.leakage import find_overlaps, window_hashes
from tsfm.pipelines.data.upsample import add_upsampled


def test_window_hashes_match_a_direct_hash_at_every_offset():
    values = np.random.default_rng(0).normal(size=200).astype(np.float32)
    values[50] = np.nan
    rolling = window_hashes(values, 16)
    again = {int(window_hashes(values[i : i + 16], 16)[0]) for i in range(185)}
    assert len(rolling) == 185 and set(rolling.tolist()) == again
    assert len(set(rolling.tolist())) == 185  # distinct windows, distinct hashes


def test_a_planted_chunk_is_found_where_it_was_planted_and_nowhere_else():
    rng = np.random.default_rng(1)
    benchmark = [rng.normal(size=300).astype(np.float32) for _ in range(3)]
    train = [rng.normal(size=1000).astype(np.float32) for _ in range(4)]
    train[2][517:549] = benchmark[1][64:96]
    train[3][:] = 0.0  # flat: matches flat benchmark stretches, which are not informative
    benchmark[0][:64] = 0.0
    overlaps = find_overlaps(train, benchmark)
    assert [(o.train_index, o.train_offset, o.benchmark_index, o.benchmark_offset) for o in overlaps] == \
        [(2, 517, 1, 64)]


def _benchmark_series(root) -> list[np.ndarray]:
    series = []
    for name in sorted({ds for ds, _ in configurations(root)}):
        for entry in read_dataset(root / name):
            target = np.asarray(entry["target"], dtype=np.float32)
            series += list(target.reshape(-1, target.shape[-1]))
    return series


def test_no_benchmark_window_in_anything_the_trainer_reads(built):
    bench_root, pretrain_root = built
    benchmark = _benchmark_series(bench_root)
    assert len(benchmark) > 3000
    train, validation = load_corpus(pretrain_root)
    assert len(validation) > 50
    assert find_overlaps(train.series, benchmark) == []
    assert find_overlaps(validation.series, benchmark) == []
    config = BatchConfig(batch_size=4, context_length=64, prediction_length=32, synthetic_share=0.0, pool_size=0,
                         mixup_prob=1.0)
    sampler = BatchSampler(config, train, seed=0)
    buffer = sampler.values.numpy()
    assert hashlib.sha1(buffer.tobytes()).digest() == hashlib.sha1(np.concatenate(train.series).tobytes()).digest()
    assert find_overlaps([buffer], benchmark) == []
    real = len(train)
    assert add_upsampled(train, {"H": 12, "30T": 6, "10T": 2}) > 50  # as the shipped default trained
    assert find_overlaps(train.series[real:], benchmark) == []
