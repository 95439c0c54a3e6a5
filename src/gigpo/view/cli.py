"""The ``gigpo view`` command line (its own parser; ``gigpo.cli`` delegates to :func:`view_main`)."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from gigpo.view.load import ViewError
from gigpo.view.report import DEFAULT_MAX_MB, write_report

#: the largest report --max-mb may ask for (a browser does not open much more as one page)
MAX_MB = 2000.0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gigpo view", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="A run report in the browser: one self-contained HTML file (no network), or served live.\n"
                    "  gigpo view runs/gridgoal-gigpo-...                  # report.html in the run directory\n"
                    "  gigpo view runs/grpo runs/gigpo --out cmp.html      # runs overlaid, config differences\n"
                    "  gigpo view sweeps/credit                            # a sweep: table, mean curves, bands\n"
                    "  gigpo view runs/gridgoal-gigpo-... --serve --port 8050   # live, on 127.0.0.1")
    p.add_argument("paths", nargs="+", metavar="RUN", help="run directories (or one sweep directory)")
    p.add_argument("--out", help="HTML file to write (default: RUN/report.html for one run, else report.html)")
    p.add_argument("--max-mb", type=float, default=DEFAULT_MAX_MB,
                   help=f"size cap of the report in MB; samples of more iterations than fit are sampled evenly "
                        f"(default {DEFAULT_MAX_MB:g})")
    p.add_argument("--serve", action="store_true", help="serve the report on 127.0.0.1, re-read as the run trains")
    p.add_argument("--port", type=int, default=8050, help="port for --serve (default 8050; 0 = any free port)")
    return p


def view_main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    try:
        if not (math.isfinite(args.max_mb) and 0 < args.max_mb <= MAX_MB):
            raise ViewError(f"--max-mb must be > 0 and at most {MAX_MB:g} (a finite number of MB), got {args.max_mb:g}")
        if args.serve:
            if not 0 <= args.port <= 65535:
                raise ViewError(f"--port must be in [0, 65535], got {args.port}")
            from gigpo.view.serve import serve

            try:
                return serve(args.paths, args.port, args.max_mb)
            except OSError as e:  # port taken, ...
                raise ViewError(f"cannot serve on 127.0.0.1:{args.port}: {e.strerror or e}") from None
        if args.out:
            out = Path(args.out)
        else:
            out = Path(args.paths[0]) / "report.html" if len(args.paths) == 1 else Path("report.html")
        try:
            path, size = write_report(args.paths, out, args.max_mb)
        except OSError as e:  # a read-only run directory, a full disk
            raise ViewError(f"cannot write {out}: {e.strerror or e} (choose another file with --out)") from None
    except ViewError as e:
        print(f"gigpo view: error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {path} ({size / 1e6:.2f} MB); open it in a browser")
    return 0
