"""The demo's receiver of spans and log records, run as its own process: ``python -m
tracesleuth.demo._collector``.

:func:`tracesleuth.collector.serve` on a free loopback port; it prints
``{"event": "ready", "url": ...}`` once it accepts spans and log records and
``{"event": "stopped", "stats": ...}`` after SIGTERM, when every acknowledged span and log record
is in the store's Parquet parts.
"""

from __future__ import annotations

import argparse
import sys

from ._protocol import emit, watch_parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tracesleuth.demo._collector")
    parser.add_argument("--store", required=True)
    parser.add_argument("--parent-pid", type=int, default=0)
    parser.add_argument("--flush-interval", type=float, default=1.0)
    args = parser.parse_args(argv)
    watch_parent(args.parent_pid)
    from ..collector import serve

    stats = serve(args.store, host="127.0.0.1", port=0, flush_interval_seconds=args.flush_interval,
                  on_ready=lambda url: emit("ready", url=url))
    emit("stopped", stats=stats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
