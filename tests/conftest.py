"""Session-wide test set-up that must happen before any test module is imported.

Triton fixes its mode (compiled or interpreted) at its first import, and importing ``tsfm`` already imports it
(``torch.compiler.disable`` around the sequence ops loads ``torch._dynamo``, which loads Triton). The CPU test
machine has no GPU, so every in-process test runs Triton's interpreter; tests that compile for a GPU target
(``test_kernel_resources``) do so in a subprocess with the variable removed.
"""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")
