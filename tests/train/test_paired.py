"""Paired-seed statistics (gigpo.train.sweep.paired_stats) against a plain reference, and `gigpo sweep --paired`'s arms,
per-run values and bad input."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gigpo.train.sweep import Cell, sweep_main
from gigpo.train.sweep.paired import compare, resolve_paired, seed_values
from gigpo.train.sweep.paired_stats import (
    APART,
    HELPS,
    HURTS,
    bootstrap_ci,
    paired_stat,
    sign_test_p,
    verdict,
)


# ---------------------------------------------------------------- the plain reference
def ref_sign_p(diffs: list[float]) -> float:
    """Two-sided exact sign test, ties dropped: 2 × P(X >= max(better, worse)), X ~ Binomial(m, 1/2), at most 1."""
    better = sum(1 for d in diffs if d > 0)
    worse = sum(1 for d in diffs if d < 0)
    m = better + worse
    if m == 0:
        return 1.0
    tail = 0
    for j in range(max(better, worse), m + 1):
        tail += math.comb(m, j)
    return min(1.0, 2 * tail / 2**m)


def ref_percentile(xs: list[float], q: float) -> float:
    """Linear interpolation between order statistics at rank q/100 · (N − 1)."""
    xs = sorted(xs)
    h = (len(xs) - 1) * q / 100
    lo = int(math.floor(h))
    if lo + 1 >= len(xs):
        return xs[lo]
    return xs[lo] + (h - lo) * (xs[lo + 1] - xs[lo])


def ref_bootstrap(diffs: list[float], resamples: int, seed: int = 0) -> tuple[float, float]:
    """Resample r takes the indices drawn for it (the documented draw: default_rng(seed).integers(0, n, (R, n)))
    and averages those differences in a loop; the CI is the 2.5th and 97.5th percentile of the R means."""
    n = len(diffs)
    idx = np.random.default_rng(seed).integers(0, n, size=(resamples, n)).tolist()
    means = []
    for r in range(resamples):
        total = 0.0
        for j in range(n):
            total += diffs[idx[r][j]]
        means.append(total / n)
    return ref_percentile(means, 2.5), ref_percentile(means, 97.5)


def ref_paired(a: dict[int, float], b: dict[int, float], resamples: int) -> dict:
    seeds = [s for s in sorted(a) if s in b and math.isfinite(a[s]) and math.isfinite(b[s])]
    diffs = [b[s] - a[s] for s in seeds]
    lo, hi = ref_bootstrap(diffs, resamples)
    p = ref_sign_p(diffs)
    if p < 0.05 and lo > 0:
        v = HELPS
    elif p < 0.05 and hi < 0:
        v = HURTS
    else:
        v = APART
    return {"seeds": seeds, "diff": diffs, "mean_a": sum(a[s] for s in seeds) / len(seeds),
            "mean_b": sum(b[s] for s in seeds) / len(seeds), "mean_diff": sum(diffs) / len(diffs), "lo": lo,
            "hi": hi, "better": sum(d > 0 for d in diffs), "worse": sum(d < 0 for d in diffs),
            "ties": sum(d == 0 for d in diffs), "p": p, "verdict": v}


def assert_matches_reference(got, ref: dict) -> None:
    for k, v in ref.items():
        g = getattr(got, k)
        if isinstance(v, float):
            assert g == pytest.approx(v, abs=1e-12), k
        elif isinstance(v, list) and v and isinstance(v[0], float):
            assert g == pytest.approx(v, abs=1e-12), k
        else:
            assert g == v, k


# success rates of a few episodes: many ties, as in real paired runs
rates = st.sampled_from([0.0, 0.125, 0.25, 0.5, 0.625, 0.75, 1.0]) | st.floats(0, 1)


@st.composite
def paired_data(draw):
    n = draw(st.integers(1, 12))
    seeds = draw(st.lists(st.integers(0, 200), min_size=n, max_size=n, unique=True))
    a = {s: draw(rates) for s in seeds}
    shift = draw(st.sampled_from([0.0, 0.2, -0.2]))
    b = {s: min(1.0, max(0.0, a[s] + shift + draw(st.sampled_from([0.0, 0.0, 0.125, -0.125])))) for s in seeds}
    if draw(st.booleans()) and n > 2:  # one seed only one arm finished, one with a value the run did not log (n > 2:
        # at least one seed stays paired; none paired is its own case, tested below)
        b.pop(seeds[0])
        a[seeds[-1]] = math.nan
    return a, b


@settings(max_examples=40, deadline=None)
@given(paired_data())
def test_paired_stat_equals_the_plain_reference(data):
    a, b = data
    ref = ref_paired(a, b, resamples=500)
    assert_matches_reference(paired_stat(a, b, resamples=500), ref)


def test_paired_stat_default_resamples_on_a_fixed_study():
    a = {s: 0.5 for s in range(8)}
    b = {0: 0.875, 1: 0.75, 2: 0.625, 3: 0.75, 4: 0.5, 5: 0.375, 6: 0.875, 7: 1.0}
    got = paired_stat(a, b)
    assert_matches_reference(got, ref_paired(a, b, resamples=10_000))
    assert (got.better, got.worse, got.ties) == (6, 1, 1)
    assert got.p == pytest.approx(2 * (7 + 1) / 2**7)  # C(7,6) + C(7,7) = 8
    assert got.verdict == APART  # p = 0.125


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 30), st.integers(0, 30))
def test_sign_test_equals_the_reference(better, worse):
    assert sign_test_p(better, worse) == pytest.approx(ref_sign_p([1.0] * better + [-1.0] * worse), abs=1e-15)


def test_sign_test_known_values_of_docs_results_credit_md():
    assert sign_test_p(16, 0) == pytest.approx(3.05e-5, rel=1e-2)
    assert sign_test_p(13, 3) == pytest.approx(0.0213, rel=1e-2)
    assert sign_test_p(5, 0) == 0.0625  # 5 untied seeds cannot go lower
    assert sign_test_p(8, 0) == sign_test_p(0, 8) == 2 / 256
    assert sign_test_p(0, 0) == 1.0 and sign_test_p(4, 4) == 1.0


def test_verdict_rule():
    assert verdict(0.01, 0.02, 0.3) == HELPS
    assert verdict(0.01, -0.3, -0.01) == HURTS
    assert verdict(0.01, -0.01, 0.3) == APART  # CI touches 0
    assert verdict(0.06, 0.1, 0.3) == APART  # the sign test decides too
    assert verdict(0.05, 0.1, 0.3) == APART  # strictly below 0.05


def test_bootstrap_of_no_values_and_of_constant_differences():
    assert all(math.isnan(x) for x in bootstrap_ci(np.array([])))
    assert bootstrap_ci(np.full(5, 0.25)) == (pytest.approx(0.25), pytest.approx(0.25))


# ---------------------------------------------------------------- per-run values
def _records(success: list[float], evals: dict[int, float]) -> list[dict]:
    recs = [{"iteration": 0, "eval/success_rate": evals[0]}] if 0 in evals else []
    for i, s in enumerate(success, start=1):
        recs.append({"iteration": i, "rollout/success_rate": s, **(
            {"eval/success_rate": evals[i]} if i in evals else {})})
    return recs


def test_seed_values_auc_final_and_untrained_evaluation():
    v = seed_values(_records([0.0, 0.5, 1.0, 0.5], {0: 0.125, 2: 0.25, 4: 0.75}), 4)
    assert v == {"auc": 0.5, "final_eval": 0.75, "initial_eval": 0.125}
    assert seed_values(_records([0.0, 0.5], {2: 0.25}), 4) is None  # unfinished: not paired
    v = seed_values(_records([0.5, 0.5], {}), 2)
    assert v["auc"] == 0.5 and math.isnan(v["final_eval"]) and math.isnan(v["initial_eval"])
    # a resumed run logs an iteration twice: the later record counts, the AUC still has one value per iteration
    recs = _records([0.0, 0.5, 1.0], {3: 1.0})
    recs.insert(2, {"iteration": 1, "rollout/success_rate": 0.25})
    assert seed_values(recs, 3)["auc"] == pytest.approx((0.25 + 0.5 + 1.0) / 3)


def test_compare_pairs_only_seeds_both_arms_finished():
    a = {0: {"auc": 0.2, "final_eval": 0.0, "initial_eval": 0.1}, 1: None, 2: {"auc": 0.4, "final_eval": 0.5,
                                                                             "initial_eval": math.nan}}
    b = {0: {"auc": 0.3, "final_eval": 0.5, "initial_eval": 0.1}, 1: {"auc": 0.9, "final_eval": 1.0,
                                                                     "initial_eval": 0.1}, 2: None}
    r = compare(a, b)
    assert r["metrics"]["auc"]["seeds"] == [0] and r["metrics"]["auc"]["diff"] == [pytest.approx(0.1)]
    assert r["initial_eval"] == {"a": {0: 0.1}, "b": {0: 0.1, 1: 0.1}}


# ---------------------------------------------------------------- arms and bad input
def _cells(grid: dict[str, list[str]]) -> list[Cell]:
    import itertools

    keys = list(grid)
    return [Cell(dict(zip(keys, combo)), [], 2, "k") for combo in itertools.product(*grid.values())]


def test_resolve_paired_pairs_cells_within_each_combination_of_the_other_keys():
    grid = {"algorithm": ["grpo", "gigpo", "rloo"], "algorithm.normalize": ["mean", "mean_std"]}
    spec = resolve_paired(["grpo", "algorithm=gigpo"], grid, _cells(grid), seeds=3)
    assert (spec.key, spec.a, spec.b) == ("algorithm", "grpo", "gigpo")
    assert [p.label for p in spec.pairs] == ["algorithm.normalize=mean", "algorithm.normalize=mean_std"]
    for p in spec.pairs:
        assert (p.a.grid["algorithm"], p.b.grid["algorithm"]) == ("grpo", "gigpo")
        assert p.a.grid["algorithm.normalize"] == p.b.grid["algorithm.normalize"]


@pytest.mark.parametrize("arms, grid, seeds, says", [
    (["grpo", "ppo"], {"algorithm": ["grpo", "gigpo"]}, 3, "'ppo' is not in the sweep's grid"),
    (["grpo", "algorithm=ppo"], {"algorithm": ["grpo", "gigpo"]}, 3, "not in the sweep's grid"),
    (["grpo", "gigpo"], {"algorithm": ["grpo", "gigpo"]}, 1, "--seeds 2 or more"),
    (["grpo", "grpo"], {"algorithm": ["grpo", "gigpo"]}, 3, "the same"),
    (["grpo"], {"algorithm": ["grpo", "gigpo"]}, 3, "two arms A,B"),
    (["grpo", "gigpo", "rloo"], {"algorithm": ["grpo", "gigpo", "rloo"]}, 3, "two arms A,B"),
    (["grpo", "gigpo"], {}, 3, "needs arms on the grid"),
    (["1", "2"], {"a": ["1", "2"], "b": ["1", "2"]}, 3, "write key=value"),
    (["grpo", "2"], {"algorithm": ["grpo", "gigpo"], "b": ["1", "2"]}, 3, "different grid keys"),
])
def test_resolve_paired_rejects_bad_arms(arms, grid, seeds, says):
    with pytest.raises(ValueError, match=None) as e:
        resolve_paired(arms, grid, _cells(grid), seeds)
    assert says in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("args, says", [
    (["--seeds", "2", "--paired", "grpo,ppo", "algorithm=grpo,gigpo"], "'ppo' is not in the sweep's grid"),
    (["--seeds", "1", "--paired", "grpo,gigpo", "algorithm=grpo,gigpo"], "--seeds 2 or more"),
    (["--seeds", "2", "--paired", "grpo,gigpo", "algorithm=gigpo"], "needs arms on the grid"),
])
def test_sweep_paired_bad_input_is_one_line_and_exit_2_before_any_run(tmp_path, capsys, args, says):
    assert sweep_main(["--out", str(tmp_path), *args[:-1], "train.iterations=2", args[-1]]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1 and err.startswith("gigpo sweep: error:")
    assert not (tmp_path / "cells").exists()


def test_paired_json_has_no_nan(tmp_path):
    from gigpo.train.sweep.paired import write_json

    write_json(tmp_path / "x.json", {"v": math.nan, "l": [1.0, math.inf], "d": {1: -math.inf}})
    assert json.loads((tmp_path / "x.json").read_text()) == {"v": None, "l": [1.0, None], "d": {"1": None}}


# ---------------------------------------------------------------- end to end
PAIRED_TINY = ["rollout.groups=2", "rollout.group_size=4", "rollout.decoding=constrained", "train.iterations=2",
               "train.eval_every=2", "train.eval_episodes=8", "train.checkpoint_every=0",
               "train.sample_trajectories=0", "optim.micro_batch_size=8"]


def _ref_from_run(run) -> tuple[float, float, float]:
    """(AUC, final held-out, untrained held-out) of a 2-iteration run, read plainly from its metrics.jsonl."""
    recs = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
    sampled = [r["rollout/success_rate"] for r in recs if "rollout/success_rate" in r]
    assert len(sampled) == 2
    final = [r["eval/success_rate"] for r in recs if r["iteration"] == 2 and "eval/success_rate" in r]
    first = [r["eval/success_rate"] for r in recs if r["iteration"] == 0]
    return sum(sampled) / 2, final[0], first[0]


@pytest.mark.slow
def test_sweep_paired_end_to_end_equals_the_reference(tmp_path, capsys):
    out = tmp_path / "sw"
    args = ["--config", "quickstart", "--seeds", "2", "--out", str(out), "--paired", "grpo,gigpo", *PAIRED_TINY,
            "algorithm=grpo,gigpo"]
    assert sweep_main(args) == 0
    printed = capsys.readouterr().out
    saved = json.loads((out / "sweep_paired.json").read_text())
    (res,) = saved["results"]
    runs = {arm: {s: out / saved["pairs"][0][f"{arm}_runs"][str(s)] for s in (0, 1)} for arm in ("a", "b")}
    assert "algorithm=grpo-" in str(runs["a"][0]) and "algorithm=gigpo-" in str(runs["b"][0])
    vals = {arm: {s: _ref_from_run(runs[arm][s]) for s in (0, 1)} for arm in ("a", "b")}
    for j, m in enumerate(("auc", "final_eval")):
        ref = ref_paired({s: vals["a"][s][j] for s in (0, 1)}, {s: vals["b"][s][j] for s in (0, 1)}, 10_000)
        got = res["metrics"][m]
        for k, v in ref.items():
            assert got[k] == (pytest.approx(v, abs=1e-12) if isinstance(v, (float, list)) else v), (m, k)
        row = (f"| {ref['better']}/{ref['worse']}/{ref['ties']} | {ref['p']:.3g} | "
               f"{ref['verdict'].replace('B helps', 'gigpo helps').replace('B hurts', 'gigpo hurts')} |")
        assert row in printed
        assert f"{ref['mean_diff']:+.3f} [{ref['lo']:+.3f}, {ref['hi']:+.3f}]" in printed
    assert res["initial_eval"] == {arm: {str(s): vals[arm][s][2] for s in (0, 1)} for arm in ("a", "b")}
    md = (out / "sweep.md").read_text()
    assert "## Paired comparison: algorithm grpo (A) → gigpo (B)" in md and "final held-out success" in md

    # gigpo view's sweep table recomputes the same comparison from the runs
    from gigpo.view.report import build_data

    (view,) = build_data([str(out)])["sweep"]["paired"]
    assert (view["key"], view["a"], view["b"]) == ("algorithm", "grpo", "gigpo")
    assert json.loads(json.dumps(view["comparisons"][0]["metrics"])) == res["metrics"]


def test_no_paired_seed_is_nan_and_no_verdict():
    """Seeds that no two arms share (one unfinished, one unlogged) give NaN means and no verdict, not an error."""
    got = paired_stat({0: 0.0, 1: math.nan}, {1: 0.0})
    assert got.seeds == [] and math.isnan(got.mean_diff) and math.isnan(got.lo) and got.p == 1.0
    assert got.verdict == APART
