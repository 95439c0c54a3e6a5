"""``import gigpo.algo`` and exact-anchor advantages need numpy only; optional libraries fail with a clear message.

Each test runs a fresh interpreter in which ``sys.modules[name] = None`` makes ``import name`` raise ImportError,
as if torch / rapidfuzz / numba / cydifflib were not installed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

BLOCK = ("torch", "rapidfuzz", "numba", "cydifflib")


def run_without_optional_libraries(body: str) -> dict:
    """Run ``body`` (which must end by printing one JSON line) with BLOCK unimportable; return that JSON."""
    prelude = f"import sys\nfor _name in {BLOCK!r}:\n    sys.modules[_name] = None\n"
    proc = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(body)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_exact_anchor_advantages_with_numpy_only() -> None:
    got = run_without_optional_libraries(
        """
        import json
        import gigpo.algo
        from gigpo.algo import compute_advantages, discounted_returns
        from gigpo.algo.compat import verl_agent_advantages
        from gigpo.algo.similarity import grouping_quality

        out = compute_advantages(
            [0, 0, 0, 0, 0, 1], ["a", "a", "b", "b", "b", "c"], [0, 1, 0, 1, 2, 0],
            [0.0, 1.0, 0.0, 0.0, 0.0, 1.0], ["x", "y", "x", "z", "y", "q"],
        )
        compat = verl_agent_advantages([0, 0], [0, 1], [0, 0], [1.0, 0.0], [{"room": 1}, {"room": 1}])
        returns = discounted_returns([0, 0], [0, 1], [0.0, 1.0], 0.5)
        quality = grouping_quality([0, 0, 1], ["s", "s", "s"], [0, 0, 0])
        try:
            gigpo.algo.policy_loss
        except ImportError:
            losses = "ImportError"
        else:
            losses = "imported"
        loaded = sorted(m for m in ("torch", "rapidfuzz", "numba") if sys.modules.get(m) is not None)
        print(json.dumps({
            "advantages": out.advantages.tolist(), "step_ids": out.step_group_ids.tolist(),
            "compat_step_ids": compat.step_group_ids.tolist(), "returns": returns.tolist(),
            "recall": quality["recall"], "losses": losses, "loaded": loaded,
        }))
        """
    )
    # ddof 1: episode R = (1, 0) -> ±0.5 / (sqrt(0.5) + eps); step groups {a0, b0}, {a1, b2} likewise.
    e = 0.5 / (0.5**0.5 + 1e-6)
    sx, sy = 0.475 / (0.475 * 2**0.5 + 1e-6), e
    expect = [e + sx, e + sy, -e - sx, -e, -e - sy, 0.0]
    assert all(abs(g - x) < 1e-9 for g, x in zip(got["advantages"], expect, strict=True))
    assert got["step_ids"] == [0, 1, 0, 2, 1, 3]
    assert got["compat_step_ids"] == [0, 0]  # equal dict anchors share a step group
    assert got["returns"] == [0.5, 1.0]
    assert abs(got["recall"] - 1 / 3) < 1e-12
    assert got["losses"] == "ImportError"  # the torch losses load on first use, and only then need torch
    assert got["loaded"] == []


def test_similarity_metrics_name_the_missing_library() -> None:
    got = run_without_optional_libraries(
        """
        import json
        from gigpo.algo.compat import verl_agent_advantages
        from gigpo.algo.similarity import leader_cluster

        messages = {}
        for metric in ("indel", "ro"):
            try:
                leader_cluster(["abc", "abd"], 0.5, metric=metric)
            except ImportError as err:
                messages[metric] = str(err)
        minhash = leader_cluster(["a b c d", "a b c d"], 0.5, metric="minhash").tolist()
        from gigpo.algo.grouping import GroupingSpec
        official = verl_agent_advantages(
            [0, 0], [0, 1], [0, 0], [1.0, 0.0], ["abab", "baaab"], grouping=GroupingSpec("ro", 0.5)
        ).step_group_ids.tolist()
        print(json.dumps({"messages": messages, "minhash": minhash, "official": official}))
        """
    )
    for metric in ("indel", "ro"):  # "ro" without numba falls back to the numpy path, which needs rapidfuzz
        assert "rapidfuzz" in got["messages"][metric] and "pip install" in got["messages"][metric]
    assert got["minhash"] == [0, 0]  # numpy only
    assert got["official"] == [0, 0]  # compat's difflib grouping needs nothing optional
