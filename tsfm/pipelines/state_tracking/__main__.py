"""``python -m tsfm.pipelines.state_tracking run|report ...`` (the same commands as ``tsfm tasks``)."""

import sys

from tsfm.pipelines.state_tracking.cli import main

if __name__ == "__main__":
    sys.exit(main())
