"""The GPU training benchmark's labels (its timings need a GPU; what each row says it measured does not)."""

from benchmarks.train_gpu import has_triton_ops, ops_label


def test_every_recurrent_backbone_times_our_kernels_and_the_transformer_sdpa() -> None:
    for spec in ("xlstm[3:1]", "xlstm[3:1,conv]", "mamba2", "gdn", "gdn[neg_eigval]"):
        assert has_triton_ops(spec), spec
    assert not has_triton_ops("transformer")


def test_ops_label_names_what_runs_the_mixer_and_whether_the_step_was_compiled() -> None:
    assert ops_label("xlstm[3:1,conv]", reference=False, compile=True) == "triton + compile"
    assert ops_label("mamba2", reference=True, compile=False) == "reference"
    # the Transformer has no reference ops: its rows used to read "reference" (thirtieth session's probe)
    assert ops_label("transformer", reference=True, compile=False) == "sdpa"
    assert ops_label("transformer", reference=False, compile=True) == "sdpa + compile"
