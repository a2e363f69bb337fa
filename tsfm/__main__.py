"""``python -m tsfm ...`` is the ``tsfm`` command (where the package is on the path but not installed)."""

import sys

from tsfm.cli import main

sys.exit(main())
