"""The ``tsfm serve`` sub-command, owned by the service.

Found by the top-level command through the ``tsfm.commands`` entry point (or its fallback list in
:mod:`tsfm.cli`); importing this module registers the command without importing FastAPI, which loads only when
the service starts (and a missing ``serve`` extra is one line naming it).
"""

from __future__ import annotations

import argparse

from tsfm.cli import EXIT_OK, CommandError, arg, command


@command(
    "serve",
    "Run the REST forecasting service (FastAPI + uvicorn); limits and the API key come from TSFM_* variables.",
    arg("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, loopback only)"),
    arg("--port", type=int, default=8000, help="port (default: 8000)"),
    arg("--model", default=None, help="'default' (shipped with tsfm) or a checkpoint folder (default: $TSFM_MODEL "
        "or 'default')"),
    arg("--workers", type=int, default=1, help="uvicorn worker processes, each with its own model (default: 1)"),
    arg("--log-level", default="info", help="uvicorn log level: debug, info, warning, error (default: info)"),
    arg("--stream-dir", default=None, help="folder for stream snapshots: acknowledged stream updates survive a "
        "restart (default: $TSFM_STREAM_DIR, or streams in memory only)"),
    arg("--stream-idle-s", type=float, default=None, help="seconds without a request before a stream is removed "
        "(default: $TSFM_STREAM_IDLE_S or 3600)"),
    arg("--max-streams", type=int, default=None, help="open streams at most, 0 = stream routes off (default: "
        "$TSFM_MAX_STREAMS or 1000)"),
    arg("--max-stream-bytes", type=int, default=None, help="memory of all open streams at most, in bytes (default: "
        "$TSFM_MAX_STREAM_BYTES or 256 MiB)"),
)
def serve_command(args: argparse.Namespace) -> int:
    """The service lives in ``serving`` (it needs the ``serve`` extra); the CLI only parses and hands over."""
    try:
        from tsfm.serving.server import run
    except ImportError as err:
        raise CommandError(f"serving needs the serve extra (pip install 'tsfm[serve]'): {err}") from None
    if args.workers < 1:
        raise CommandError(f"--workers must be at least 1, got {args.workers}")
    streams = {"stream_dir": args.stream_dir, "stream_idle_s": args.stream_idle_s, "max_streams": args.max_streams,
               "max_stream_bytes": args.max_stream_bytes}
    try:
        run(host=args.host, port=args.port, model=args.model, workers=args.workers, log_level=args.log_level,
            settings={name: value for name, value in streams.items() if value is not None})
    except ValueError as err:  # a bad checkpoint (CheckpointError) or TSFM_* variable (pydantic ValidationError)
        raise CommandError(str(err)) from None
    return EXIT_OK
