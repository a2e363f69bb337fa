"""The service's helper process (large request bodies are parsed there) ends with the server, however the server ends.

Why: a ``ProcessPoolExecutor`` worker waits on its task queue, and it holds both ends of that queue's pipe itself, so
it never sees the queue close: when the server is killed (SIGKILL, the out-of-memory killer, a crash), nothing stops
the worker, and each such restart left one orphan holding about 440 MB (found in the tests: one per run of
``test_a_restarted_server_forecasts_what_it_acknowledged``). :func:`exit_with_parent`, the pool's initializer, watches
the parent's sentinel (the pipe ``multiprocessing`` keeps to a spawned child's parent, which reads as closed once the
parent is gone) from a daemon thread and exits the worker then. A light module: the helper imports it, and nothing
heavy.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from multiprocessing.connection import wait


def exit_with_parent() -> None:
    """Start watching the parent process; exit this process the moment it is gone (no cleanup left to do: the
    helper holds no state of its own)."""
    parent = multiprocessing.parent_process()
    if parent is None:  # not a child of multiprocessing: nothing to watch
        return

    def watch() -> None:
        wait([parent.sentinel])
        os._exit(0)

    threading.Thread(target=watch, name="tsfm-exit-with-parent", daemon=True).start()
