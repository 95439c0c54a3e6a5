"""`gigpo view` draws branch rollouts' trees and shows `gigpo audit`'s tables (issue 41): the tree layout on a
hand-made tree, then a real branched run, audited (the run: tests/view/conftest.py; in Chromium: test_browser.py)."""

from __future__ import annotations

import shutil

from gigpo.view.report import build_data
from gigpo.view.trees import group_trees


def _traj(tid, parent=-1, branch=-1, length=5, won=False, group=0):
    first = max(branch, 0)
    return {"traj": tid, "group": group, "parent": parent, "branch_step": branch, "length": length, "won": won,
            "steps": [{"t": t} for t in range(first, length)]}


def test_a_group_tree_puts_each_branch_below_its_parent_from_its_branch_step():
    trajs = [_traj(0, length=6), _traj(1, length=4, won=True), _traj(2, 0, 2, length=5), _traj(3, 2, 3, 6, True),
             _traj(4, 0, 1, length=3), _traj(5, group=1)]
    trees = group_trees(trajs)
    assert list(trees) == ["0"]  # group 1 has no branch: no tree
    rows = trees["0"]["rows"]
    assert [r["traj"] for r in rows] == [0, 4, 2, 3, 1]  # depth first, branches in branch-step order
    assert [r["row"] for r in rows] == [0, 1, 2, 3, 4]
    by = {r["traj"]: r for r in rows}
    assert (by[2]["x0"], by[2]["x1"], by[2]["parent"]) == (2, 5, 0)
    assert (by[3]["x0"], by[3]["x1"], by[3]["won"]) == (3, 6, True)
    assert (by[0]["x0"], by[1]["parent"]) == (0, -1) and trees["0"]["steps"] == 6
    orphan = group_trees([_traj(7, parent=9, branch=2)])["0"]["rows"]  # its parent not written: drawn as a root
    assert orphan == [{"traj": 7, "row": 0, "parent": 9, "x0": 2, "x1": 5, "won": False}]


def test_the_report_of_a_branched_audited_run_has_its_trees_and_its_audit(audited_branched_run):
    data = build_data([str(audited_branched_run)])
    run = data["runs"][0]
    samples = run["samples"][str(max(map(int, run["samples"])))]
    trees = samples["trees"]
    assert trees, "a branched run's samples have trees"
    parents = {t["traj"]: t["parent"] for t in samples["trajectories"]}
    for tree in trees.values():
        drawn = {r["traj"]: r for r in tree["rows"]}
        assert any(r["parent"] >= 0 for r in tree["rows"])
        for tid, r in drawn.items():
            assert r["parent"] == parents[tid] and r["x0"] < r["x1"] <= tree["steps"]
            if r["parent"] in drawn:
                assert drawn[r["parent"]]["row"] < r["row"]  # a branch is drawn below its parent
    (audit,) = run["audits"]
    assert audit["iteration"] == 3 and [e["label"] for e in audit["estimators"]] == ["GRPO", "GiGPO exact"]


def test_a_damaged_audit_file_is_left_out_with_a_note(audited_branched_run, tmp_path):
    run = shutil.copytree(audited_branched_run, tmp_path / "copy")
    (run / "audit" / "audit_000001.json").write_text("{not json")
    data = build_data([str(run)])["runs"][0]
    assert len(data["audits"]) == 1 and any("audit_000001.json left out" in n for n in data["notes"])
