from tsfm.kernels import ops


def test_reference_kernels_switch_sets_and_restores():
    assert ops._force_reference is False
    with ops.reference_kernels():
        assert ops._force_reference is True
        with ops.reference_kernels():
            assert ops._force_reference is True
        assert ops._force_reference is True
    assert ops._force_reference is False
