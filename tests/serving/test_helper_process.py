"""The service's helper process ends with the server, even when the server is killed (no shutdown hook runs)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

STARTS_A_HELPER = """
import multiprocessing, time
from concurrent.futures import ProcessPoolExecutor
from tsfm.serving.helper_process import exit_with_parent
if __name__ == "__main__":
    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"), initializer=exit_with_parent)
    pool.submit(abs, -1).result()  # the worker is up and has run its initializer
    print(next(iter(pool._processes)), flush=True)
    time.sleep(600)
"""


def running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie left for a parent that does not reap it counts as ended)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.is_file() and stat.read_text().rsplit(")", 1)[1].split()[0] == "Z")


def test_the_helper_exits_when_the_server_is_killed(tmp_path):
    script = tmp_path / "server.py"
    script.write_text(STARTS_A_HELPER)
    root = Path(__file__).resolve().parents[2]
    server = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, cwd=root,
                              env={**os.environ, "PYTHONPATH": str(root)})
    worker = int(server.stdout.readline())
    assert running(worker)
    server.kill()  # SIGKILL: the executor's shutdown never runs
    server.wait(timeout=20)
    deadline = time.monotonic() + 20
    while running(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = running(worker)
    if alive:
        os.kill(worker, signal.SIGKILL)  # leave no orphan behind even when the check fails
    assert not alive, "the helper outlived the server"
