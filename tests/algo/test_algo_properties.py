"""Property tests: the vectorised advantages equal the row-by-row reference on random batches, in any row order."""

from __future__ import annotations

import numpy as np
import pytest
from algo_batches import Batch, advantages, batches, make_batch, same_partition
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference import ref_compute_advantages, ref_discounted_returns

from gigpo.algo import GroupingSpec, discounted_returns

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TOL = {"rtol": 1e-9, "atol": 1e-9}
FIELDS = ("advantages", "episode_advantages", "step_advantages", "returns", "episode_returns")

options = st.fixed_dictionaries(
    {
        "estimator": st.sampled_from(["gigpo", "grpo", "rloo"]),
        "episode_estimator": st.sampled_from(["grpo", "rloo"]),
        "normalize": st.sampled_from(["mean_std", "mean"]),
        "compat": st.sampled_from([None, "verl-agent"]),
        "gamma": st.sampled_from([0.0, 0.5, 0.95, 1.0]),
        "step_weight": st.sampled_from([0.0, 1.0, 0.3]),
        "similarity": st.sampled_from([None, None, 0.3, 0.6, 0.8, 1.0]),
        "eps": st.sampled_from([1e-6, 0.0, 0.1]),
        "std_ddof": st.sampled_from([0, 1]),
    }
)


def _with_compat_ddof(opts: dict) -> dict:
    """compat="verl-agent" is torch.std (ddof 1) by definition; other ddofs are rejected there."""
    return {**opts, "std_ddof": 1} if opts["compat"] == "verl-agent" else opts


def _library(opts: dict) -> dict:
    """The options as the library takes them: the reference's ``similarity`` threshold as a GroupingSpec."""
    lib = {k: v for k, v in opts.items() if k != "similarity"}
    return {**lib, "grouping": None if opts["similarity"] is None else GroupingSpec("ro", opts["similarity"])}


def _check_against_reference(b: Batch, opts: dict, row_penalty=None) -> None:
    opts = _with_compat_ddof(opts)
    out = advantages(*b.columns(), **_library(opts), **({"row_penalty": row_penalty} if row_penalty is not None else {}))
    ref = ref_compute_advantages(*b.columns(), **opts, row_penalty=row_penalty)
    for name in FIELDS:
        got = getattr(out, name)
        assert got.dtype == np.float64 and got.shape == (len(b.rewards),)
        assert np.isfinite(got).all(), name
        np.testing.assert_allclose(got, ref[name], **TOL, err_msg=name)
    if opts["estimator"] == "gigpo":
        assert same_partition(out.step_group_ids.tolist(), ref["step_labels"])
        stats = out.stats
        assert stats["step_group/num_groups"] == len(set(ref["step_labels"]))
    else:
        assert (out.step_group_ids == -1).all() and not out.step_advantages.any()


@SETTINGS
@given(b=batches(), opts=options)
def test_fast_equals_reference(b: Batch, opts: dict) -> None:
    _check_against_reference(b, opts)


@SETTINGS
@given(b=batches(), opts=options, seed=st.integers(0, 2**31 - 1))
def test_fast_equals_reference_on_shuffled_rows(b: Batch, opts: dict, seed: int) -> None:
    """Same check after shuffling rows (the reference walks rows in the order given, the fast path sorts)."""
    _check_against_reference(b.shuffled(seed), opts)


@SETTINGS
@given(b=batches(), opts=options, seed=st.integers(0, 2**31 - 1))
def test_compat_row_penalty_equals_reference(b: Batch, opts: dict, seed: int) -> None:
    penalty = (np.random.default_rng(seed).random(len(b.rewards)) < 0.3) * 0.1
    _check_against_reference(b, {**opts, "compat": "verl-agent"}, row_penalty=penalty.tolist())


@SETTINGS
@given(b=batches(), opts=options, seed=st.integers(0, 2**31 - 1))
def test_row_order_never_matters(b: Batch, opts: dict, seed: int) -> None:
    """Shuffling rows permutes the outputs and nothing else (step-group ids included: they are canonical).

    Except in compat similarity grouping, which walks rows in batch order as the official code does.
    """
    opts = _with_compat_ddof(opts)
    if opts["compat"] == "verl-agent" and opts["similarity"] is not None:
        opts = {**opts, "similarity": None}
    perm = np.random.default_rng(seed).permutation(len(b.rewards))
    shuffled = Batch(*[[col[i] for i in perm] for col in b.columns()])
    out = advantages(*b.columns(), **_library(opts))
    out_s = advantages(*shuffled.columns(), **_library(opts))
    for name in FIELDS:
        np.testing.assert_allclose(getattr(out_s, name), getattr(out, name)[perm], **TOL, err_msg=name)
    np.testing.assert_array_equal(out_s.step_group_ids, out.step_group_ids[perm])


@SETTINGS
@given(b=batches(max_len=12), gamma=st.floats(0.0, 1.0))
def test_discounted_returns_equal_reference(b: Batch, gamma: float) -> None:
    got = discounted_returns(b.traj_ids, b.steps, b.rewards, gamma)
    np.testing.assert_allclose(got, ref_discounted_returns(b.traj_ids, b.steps, b.rewards, gamma), **TOL)


@pytest.mark.parametrize("as_type", ["numpy", "torch"])
def test_array_inputs_match_lists(as_type: str) -> None:
    import torch

    b = make_batch(3, 3, 4, 6, "dense", 3, False, True)

    def conv(x):
        # float64 rewards: torch.tensor(list of floats) would silently round them to float32
        arr = np.asarray(x)
        return arr if as_type == "numpy" else torch.from_numpy(arr)

    arrays = [conv(c) for c in b.columns()[:4]]
    out = advantages(*arrays, np.asarray(b.anchors))
    ref = advantages(*b.columns())
    for name in FIELDS:
        np.testing.assert_array_equal(getattr(out, name), getattr(ref, name))
