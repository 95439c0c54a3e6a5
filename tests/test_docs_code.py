"""Every ```python block of README.md and docs/ (nested folders included) runs as written (issue 40).

The blocks of one document run in order in one fresh interpreter, as a reader would type them (a later block may
use what an earlier one defined), with a temporary working directory (a block that writes files writes there; a
block that registers an env or estimator leaves no trace in this process). A failure names the block. Two
markers, an HTML comment on the line right before the fence, are the only exceptions, and say why:

- ``<!-- docs-test: needs PACKAGE[, PACKAGE] -->``: the block imports optional packages; it runs when they are
  installed and is skipped, naming them, otherwise;
- ``<!-- docs-test: skip REASON -->``: the block is deliberately not runnable here (a server it talks to, data
  files a user supplies). Keep these rare: the test below caps their number.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^( *)```python\n(.*?)^\1```", re.S | re.M)  # indented blocks (in a list item) too
MARKER = re.compile(r" *<!-- docs-test: (needs|skip) (.+?) -->\n$")
#: the most blocks that may be marked not runnable
MAX_SKIPS = 3
#: runs ``[(where, code), ...]`` from stdin in one namespace; a failure prints the block's place and exits 1
RUNNER = """
import json, sys, traceback
namespace = {"__name__": "__main__"}
for where, code in json.load(sys.stdin):
    try:
        exec(compile(code, where, "exec"), namespace)
    except BaseException:
        print(f"{where} failed:", file=sys.stderr)
        traceback.print_exc()
        sys.exit(1)
"""


def blocks(doc: Path) -> list[tuple[str, str, str | None, str | None]]:
    """``(where, code, marker kind, marker argument)`` of every python block of ``doc``, ``where`` =
    ``path:line`` of the fence."""
    out = []
    text = doc.read_text(encoding="utf-8")
    for m in FENCE.finditer(text):
        before = text[: m.start()]
        line = before.count("\n") + 1
        prev = before[before.rstrip("\n").rfind("\n") + 1:] if before.endswith("\n") else ""
        marker = MARKER.match(prev)
        code = textwrap.dedent("".join(ln[len(m.group(1)):] if ln.startswith(m.group(1)) else ln
                                       for ln in m.group(2).splitlines(keepends=True)))
        out.append((f"{doc.relative_to(ROOT)}:{line}", code, *(marker.groups() if marker else (None, None))))
    return out


WITH_CODE = [doc for doc in DOCS if blocks(doc)]


def test_the_blocks_are_found_and_markers_are_rare():
    every = [b for doc in DOCS for b in blocks(doc)]
    assert len(every) >= 10 and len(WITH_CODE) >= 6
    skips = [where for where, _, kind, _ in every if kind == "skip"]
    assert len(skips) <= MAX_SKIPS, f"too many blocks marked not runnable: {skips}"
    for doc in DOCS:  # a marker not right before a fence would silently do nothing
        text = doc.read_text(encoding="utf-8")
        for m in re.finditer(r"<!-- docs-test:.*-->\n(.*)\n", text):
            assert m.group(1).strip() == "```python", f"{doc.relative_to(ROOT)}: a docs-test marker must precede ```python"


@pytest.mark.parametrize("doc", WITH_CODE, ids=[str(d.relative_to(ROOT)) for d in WITH_CODE])
def test_the_documents_code_runs(doc, tmp_path):
    run, skipped = [], []
    for where, code, kind, arg in blocks(doc):
        if kind == "skip":
            skipped.append(f"{where} ({arg})")
            continue
        if kind == "needs":
            missing = [p for p in (x.strip() for x in arg.split(",")) if importlib.util.find_spec(p) is None]
            if missing:
                skipped.append(f"{where} needs {', '.join(missing)}")
                continue
        run.append((where, code))
    if not run:
        pytest.skip("; ".join(skipped))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", RUNNER], input=json.dumps(run), cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
