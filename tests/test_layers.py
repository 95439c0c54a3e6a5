"""Layers and import cycles of src/gigpo (issue 30): every import — module level and inside functions — is
resolved to the file it loads. Arrows point one way: a room imports only rooms below it, and no set of files
imports itself round a circle."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PKG = SRC / "gigpo"

#: Rooms from the bottom up (docs/design.md "Rooms and arrows"). A room may import rooms of a lower rank only.
#: ``algo`` and the stdlib-only HTTP helpers import nothing of gigpo; envs know nothing of models or rollout.
RANK = {
    "__init__": 0,  # gigpo/__init__.py holds __version__ only (imports nothing)
    "algo": 0, "apiclient": 0, "httputil": 0, "safefiles": 0,
    "envs": 1,
    "agent": 2, "models": 2,
    "rollout": 3,
    "train": 4,
    "serve": 5, "view": 5, "audit": 5,
    "cli": 6,
    "__main__": 7,
}
#: The rooms of ``train/`` from the bottom up (docs/design.md, issue 40): a room may import rooms of its own floor or
#: lower. Floor 0 is the run's contract and the math it reads — config with the checks it runs before any model
#: loads (preflight), the reporting it validates (the tracker registry, the health keys) and the update's passes,
#: which the step records recompute; those four lean on each other, everything above them points down.
TRAIN_FLOOR = {
    "config": 0, "preflight": 0, "reporting": 0, "update": 0,
    "parallel": 1, "rundir": 1, "sweep": 1, "collect": 1,
    "async_rollout": 2,
    "compose": 3,
    "evaluate": 4,
    "trainer": 5,
    "__init__": 0,
}
#: Cycles another change is removing right now, each with who removes it; a cycle not listed here fails the test.
#: (Delete an entry once its cycle is gone.)
KNOWN_CYCLES = {
}


def _module_file(mod: str) -> Path | None:
    p = SRC.joinpath(*mod.split("."))
    if (p / "__init__.py").is_file():
        return p / "__init__.py"
    return p.with_suffix(".py") if p.with_suffix(".py").is_file() else None


def import_edges() -> dict[Path, set[Path]]:
    """File -> the gigpo files it imports (``import a.b``, ``from a.b import c`` where c may be a module,
    relative imports), anywhere in the file: module level, functions, TYPE_CHECKING blocks."""
    edges: dict[Path, set[Path]] = {}
    for f in sorted(PKG.rglob("*.py")):
        rel = f.relative_to(SRC).with_suffix("")
        parts = list(rel.parts)[:-1] if f.name == "__init__.py" else list(rel.parts)
        here = parts if f.name == "__init__.py" else parts[:-1]
        out: set[Path] = set()
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(here[: len(here) - node.level + 1] + ([base] if base else []))
                subs = [t for t in (f"{base}.{a.name}" for a in node.names) if _module_file(t) is not None]
                names = subs or [base]
            else:
                continue
            for name in names:
                if name.split(".")[0] == "gigpo" and (target := _module_file(name)) is not None and target != f:
                    out.add(target)
        edges[f] = out
    return edges


def room(f: Path) -> str:
    parts = f.relative_to(PKG).parts
    return parts[0].removesuffix(".py")


def cycles(edges: dict[Path, set[Path]]) -> list[set[Path]]:
    """Strongly connected components with more than one file (Tarjan, iterative)."""
    index: dict[Path, int] = {}
    low: dict[Path, int] = {}
    stack: list[Path] = []
    on: set[Path] = set()
    out = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(comp)
    return out


def test_no_upward_arrows():
    assert not import_edges()[PKG / "__init__.py"], "gigpo/__init__.py must import nothing (it ranks lowest)"
    bad = []
    for f, targets in import_edges().items():
        for t in targets:
            a, b = room(f), room(t)
            assert a in RANK and b in RANK, f"room of {f} or {t} has no rank: add it to RANK"
            if a != b and RANK[b] >= RANK[a] and b != "__init__":
                bad.append(f"{f.relative_to(PKG)} ({a}) -> {t.relative_to(PKG)} ({b})")
    assert not bad, "imports that point up or sideways:\n" + "\n".join(sorted(bad))


def train_room(f: Path) -> str:
    return f.relative_to(PKG / "train").parts[0].removesuffix(".py")


def test_train_rooms_point_down():
    """Inside train/: the loop (trainer) on top, the composition root below it, the parts below that."""
    bad = []
    for f, targets in import_edges().items():
        if room(f) != "train":
            continue
        for t in targets:
            if room(t) != "train":
                continue
            a, b = train_room(f), train_room(t)
            assert a in TRAIN_FLOOR and b in TRAIN_FLOOR, f"train room of {f} or {t} has no floor: add it"
            if TRAIN_FLOOR[b] > TRAIN_FLOOR[a]:
                bad.append(f"{f.relative_to(PKG)} ({a}) -> {t.relative_to(PKG)} ({b})")
    assert not bad, "train/ imports that point up:\n" + "\n".join(sorted(bad))
    assert len(list((PKG / "train").glob("*.py"))) <= 4, "train/ keeps only the loop and its root at the top"


def test_no_import_cycles():
    found = [frozenset(str(f.relative_to(PKG)) for f in c) for c in cycles(import_edges())]
    new = [sorted(c) for c in found if c not in KNOWN_CYCLES]
    assert not new, f"import cycles: {new}"


def test_the_walk_sees_function_level_imports_and_cycles():
    """The walker itself: a function-level import is an edge, and a two-file circle is found."""
    edges = import_edges()
    assert PKG / "train" / "evaluate" / "scripted.py" in edges[PKG / "cli.py"]  # cli imports it inside a function
    a, b = Path("a.py"), Path("b.py")
    assert [sorted(map(str, c)) for c in cycles({a: {b}, b: {a}})] == [["a.py", "b.py"]]
    assert cycles({a: {b}, b: set()}) == []
