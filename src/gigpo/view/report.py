"""``gigpo view``: one self-contained HTML file (data, script and styles inline; no network) for runs or a sweep.

``build_data(paths)`` reads the directories (:mod:`gigpo.view.load`, :mod:`gigpo.view.sweep`);
``render(data)`` puts the JSON and ``assets/view.js``/``view.css`` into one page. The page draws everything
itself (SVG curves, trajectory tables), so it opens from disk, from a mail attachment or behind a firewall.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path

from gigpo.safefiles import read_regular, replace_text
from gigpo.view.load import ViewError, config_diff, is_run, is_sweep, load_run

DEFAULT_MAX_MB = 20.0
#: the start of every report this module writes: an existing file without it is not replaced
REPORT_HEAD = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"


def _asset(name: str) -> str:
    return resources.files("gigpo.view").joinpath("assets", name).read_text(encoding="utf-8")


def resolve(paths: list[str]) -> tuple[str, list[Path]]:
    """``("runs" | "sweep", directories)``, or a one-line :class:`ViewError`."""
    if not paths:
        raise ViewError("give at least one run directory (or one sweep directory)")
    dirs = []
    for p in paths:
        d = Path(p)
        if not d.exists():
            raise ViewError(f"{p}: no such directory")
        if not d.is_dir():
            raise ViewError(f"{p}: not a directory (give a run directory, RUN_DIR, not a file in it)")
        dirs.append(d)
    sweeps = [d for d in dirs if is_sweep(d)]
    if sweeps:
        if len(dirs) > 1:
            raise ViewError(f"{sweeps[0]} is a sweep directory: view it alone (or give its runs, "
                            f"{sweeps[0]}/cells/*/seed*)")
        return "sweep", dirs
    for d in dirs:
        if not is_run(d):
            what = "is empty" if not any(d.iterdir()) else "holds no metrics.jsonl or samples/"
            raise ViewError(f"{d} is not a gigpo run directory ({what}) nor a sweep directory (no cells/)")
    return "runs", dirs


def build_data(paths: list[str], max_mb: float = DEFAULT_MAX_MB, live: bool = False) -> dict:
    """Everything the page shows, as one JSON-ready dict, sized to stay under about ``max_mb`` megabytes."""
    kind, dirs = resolve(paths)
    data: dict = {"kind": kind, "live": live, "max_mb": max_mb,
                  "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")}
    if kind == "sweep":
        from gigpo.view.sweep import load_sweep

        data["sweep"] = load_sweep(dirs[0])
        data["title"] = f"gigpo sweep {dirs[0].name}"
        return data
    budget = int(max_mb * 1e6)
    # curves and configs first (~1 MB a run at 2,000 points), then the runs share what is left for samples;
    # 100 kB a run stay free for the page itself and the JSON around the samples
    first = [load_run(d, samples_budget=0) for d in dirs]
    used = sum(len(json.dumps(r, separators=(",", ":"))) for r in first) + len(_asset("view.js"))
    per_run = max(0, (budget - used) // len(dirs) - 100_000)
    runs = [load_run(d, samples_budget=per_run) for d in dirs]
    data["runs"] = runs
    data["config_diff"] = config_diff(runs)
    data["title"] = "gigpo " + " vs ".join(d.name for d in dirs)
    return data


def data_json(data: dict) -> str:
    """JSON safe inside a <script> element (no ``</script>`` or ``<!--`` can end it early)."""
    s = json.dumps(data, separators=(",", ":"), ensure_ascii=False, default=str)
    return s.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def render(data: dict) -> str:
    title = str(data.get("title", "gigpo view")).replace("&", "&amp;").replace("<", "&lt;")
    return (
        f"{REPORT_HEAD}<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>{title}</title><style>{_asset('view.css')}</style></head>\n"
        "<body><div id=\"app\"><p id=\"loading\">Loading the report… (it needs JavaScript)</p></div>\n"
        f"<script id=\"gigpo-data\" type=\"application/json\">{data_json(data)}</script>\n"
        f"<script>{_asset('view.js')}</script></body></html>\n"
    )


def check_out(out: Path) -> None:
    """ViewError unless ``out`` may be (re)written: not a directory, and no existing file other than a report
    this command wrote (``--out RUN/metrics.jsonl`` must not overwrite a run's own files)."""
    if out.is_dir():
        raise ViewError(f"--out {out} is a directory: give the HTML file to write, e.g. {out / 'report.html'}")
    if out.exists() or out.is_symlink():
        try:
            head, _ = read_regular(out, len(REPORT_HEAD.encode()))
        except OSError:
            head = b""
        if out.is_symlink() or head.decode("utf-8", "replace") != REPORT_HEAD:
            raise ViewError(f"--out {out} exists and is not a gigpo report: it would be overwritten; choose a new "
                            "file (e.g. report.html)")


def write_report(paths: list[str], out: Path, max_mb: float = DEFAULT_MAX_MB) -> tuple[Path, int]:
    """Write the report of ``paths`` to ``out`` (via ``out.tmp``, never through a symlink, removed if the write
    fails); ``(out, size in bytes)``. ``out`` is checked first (:func:`check_out`)."""
    check_out(out)
    html = render(build_data(paths, max_mb))
    out.parent.mkdir(parents=True, exist_ok=True)
    replace_text(out, html)
    return out, len(html.encode("utf-8"))
