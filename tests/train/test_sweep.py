"""`gigpo sweep`: parsing, grid, resumability, failure reporting and aggregation (tiny runs)."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from gigpo.train import sweep
from gigpo.train.sweep import Cell, build_cells, parse_params, run_finished, split_values, sweep_main
from gigpo.train.sweep.aggregation import aggregate, markdown_table, run_final, write_outputs


def test_split_values_respects_brackets_and_quotes():
    assert split_values("0,0.2,1") == ["0", "0.2", "1"]
    assert split_values("{a: 1, b: 2}") == ["{a: 1, b: 2}"]
    assert split_values("[1,2],[3]") == ["[1,2]", "[3]"]
    assert split_values("'x,y',z") == ["'x,y'", "z"]


def test_grid_keys_on_both_sides_of_an_option(tmp_path, capsys):
    # `a=1,2 --seeds 1 b=3` is the sweep of `a=1,2 b=3 --seeds 1` (argparse's plain parse exited 2 on b=3)
    def listed(argv: list[str]) -> str:
        rc = sweep_main([*argv, "--aggregate-only", "--out", str(tmp_path)])
        assert rc == 1  # nothing trained: every cell listed as not finished, under its config hash
        return "\n".join(line for line in capsys.readouterr().out.splitlines() if "FAILED" in line)

    after = listed(["train.iterations=1,2", "--seeds", "1", "train.eval_every=0"])
    before = listed(["train.iterations=1,2", "train.eval_every=0", "--seeds", "1"])
    assert after == before and "train.iterations=2 seed=0" in after


def test_parse_params_grid_and_fixed():
    grid, fixed = parse_params(["algorithm=grpo,rloo", "optim.lr=0.001", "model.tiny={english_words: false}"])
    assert grid == {"algorithm": ["grpo", "rloo"]}
    assert fixed == ["optim.lr=0.001", "model.tiny={english_words: false}"]
    with pytest.raises(ValueError):
        parse_params(["train.seed=1,2"])  # the seed axis belongs to --seeds
    with pytest.raises(ValueError):
        parse_params(["algorithm=grpo,grpo"])
    with pytest.raises(ValueError):
        parse_params(["novalue"])


def test_build_cells_cartesian_and_hash_identifies_configs():
    grid, fixed = parse_params(["algorithm=grpo,gigpo", "algorithm.step_weight=0.5,1.0", "train.iterations=3"])
    cells = build_cells("quickstart", grid, fixed)
    assert [c.grid for c in cells] == [
        {"algorithm": a, "algorithm.step_weight": w} for a in ("grpo", "gigpo") for w in ("0.5", "1.0")]
    assert all(c.iterations == 3 for c in cells)
    assert len({c.key for c in cells}) == 4
    # The same resolved config from a different grid gets the same hash (runs are shared between sweeps).
    same = build_cells("quickstart", {}, ["algorithm=gigpo", "algorithm.step_weight=1.0", "train.iterations=3"])[0]
    assert same.key.rsplit("-", 1)[1] == cells[3].key.rsplit("-", 1)[1]
    assert same.key.rsplit("-", 1)[1] != cells[2].key.rsplit("-", 1)[1]


def test_bad_config_value_is_rejected_before_running(tmp_path, capsys):
    assert sweep_main(["--out", str(tmp_path), "algorithm=grpo,nonsense"]) == 2
    assert "nonsense" in capsys.readouterr().err
    assert not (tmp_path / "cells").exists()


def _write_run(run: Path, success: list[float], eval_at: dict[int, float]) -> None:
    run.mkdir(parents=True)
    recs = [{"iteration": 0, "eval/success_rate": 0.0}]
    for i, s in enumerate(success, start=1):
        r = {"iteration": i, "rollout/success_rate": s, "rollout/episode_return": 10 * s, "rollout/steps": 100.0,
             "rollout/valid_action_rate": 1.0, "grouping/step_group/singleton_frac": 0.5, "time/rollout": 1.0,
             "time/update": 2.0, "time/tokens_per_s_update": 99.0}
        if i in eval_at:
            r["eval/success_rate"] = eval_at[i]
        recs.append(r)
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))


def test_run_final_definitions():
    recs = [{"iteration": 0, "eval/success_rate": 0.0}] + [
        {"iteration": i, "rollout/success_rate": i / 10, "rollout/steps": 10.0, "time/rollout": 1.0,
         "time/tokens_per_s_rollout": 5.0} for i in range(1, 6)]
    recs[-1]["eval/success_rate"] = 0.75
    f = run_final(recs, last_k=2)
    assert f["final_success"] == pytest.approx(0.45)  # mean of iterations 4 and 5
    assert f["final_eval_success"] == 0.75
    assert f["env_steps"] == 50.0
    assert f["seconds"] == 5.0  # time/* phases only, not throughputs
    assert math.isnan(f["singleton_frac"])


def test_aggregate_mean_std_over_seeds_and_outputs(tmp_path):
    cells = [Cell({"algorithm.step_weight": w}, [], 4, f"w{w}-0000000{i}") for i, w in enumerate(("0", "1"))]
    data = {("0", 0): [0, 0, 0.2, 0.4], ("0", 1): [0, 0, 0.4, 0.6], ("1", 0): [0, 0.5, 1, 1]}
    for c in cells:
        for s in (0, 1):
            run = tmp_path / "cells" / c.key / f"seed{s}"
            c.runs[s] = run
            if (c.grid["algorithm.step_weight"], s) in data:
                _write_run(run, data[(c.grid["algorithm.step_weight"], s)], {4: 0.5 + 0.25 * s})
    agg = aggregate(cells, [0, 1], last_k=2)
    m, sd, n = agg[0]["final"]["final_success"]
    assert (n, m) == (2, pytest.approx(0.4)) and sd == pytest.approx(math.sqrt(0.02))  # 0.3 and 0.5, ddof 1
    assert agg[0]["final"]["final_eval_success"][0] == pytest.approx(0.625)
    assert agg[1]["final"]["final_success"][2] == 1 and agg[1]["final"]["final_success"][1] == 0.0
    its, mean, std, ns = agg[0]["curves"]["rollout/success_rate"]
    assert its == [1, 2, 3, 4] and mean[2] == pytest.approx(0.3) and ns == [2, 2, 2, 2]
    assert agg[0]["curves"]["eval/success_rate"][0] == [0, 4]

    table = markdown_table(agg, ["algorithm.step_weight"])
    assert "| 0 | 2 | 0.400 ± 0.141 |" in table
    files = write_outputs(tmp_path, "t", agg, {"algorithm.step_weight": ["0", "1"]}, [], "cmd", 2, smooth=2)
    names = {f.name for f in files}
    assert {"t.csv", "t.md", "t_curves.png", "t_final_algorithm_step_weight.png"} <= names
    rows = list(csv.DictReader((tmp_path / "t.csv").open()))
    r = next(r for r in rows if r["algorithm.step_weight"] == "0" and r["iteration"] == "3")
    assert float(r["rollout/success_rate_mean"]) == pytest.approx(0.3)
    assert r["rollout/success_rate_n"] == "2"


def test_run_finished(tmp_path):
    assert not run_finished(tmp_path / "nope", 2)
    _write_run(tmp_path / "a", [0.0], {})
    assert not run_finished(tmp_path / "a", 2)
    assert run_finished(tmp_path / "a", 1)


TINY = ["rollout.groups=2", "rollout.group_size=2", "train.iterations=2", "train.eval_every=0",
        "train.eval_episodes=2", "train.checkpoint_every=0", "train.sample_trajectories=0", "env.max_steps=3",
        "optim.micro_batch_size=8"]


@pytest.mark.slow
def test_sweep_end_to_end_resume_and_failure(tmp_path, capsys, monkeypatch):
    out = tmp_path / "sw"
    args = ["--config", "quickstart", "--seeds", "1", "--workers", "2", "--out", str(out), "--last-k", "1",
            *TINY, "algorithm=grpo,gigpo"]
    assert sweep_main(args) == 0
    cells = sorted((out / "cells").iterdir())
    assert len(cells) == 2
    for c in cells:
        recs = [json.loads(x) for x in (c / "seed0" / "metrics.jsonl").read_text().splitlines()]
        assert recs[-1]["iteration"] == 2 and "eval/success_rate" in recs[-1]
        assert "train.seed=0" in (c / "seed0" / "sweep_cmd.txt").read_text()
    table = (out / "sweep.md").read_text()
    assert "| grpo | 1 |" in table and "| gigpo | 1 |" in table
    assert (out / "sweep_curves.png").stat().st_size > 0

    # Resumable: a second invocation trains nothing (no subprocess is started).
    calls = []
    monkeypatch.setattr(sweep.subprocess, "run", lambda *a, **k: calls.append(a))
    capsys.readouterr()
    assert sweep_main(args) == 0
    assert calls == [] and "0 to run" in capsys.readouterr().out
    monkeypatch.undo()

    # A failing cell is reported (exit 1, listed in the table file, stderr tail saved), the others still aggregate.
    bad = ["--config", "quickstart", "--seeds", "1", "--out", str(out), "--name", "bad", *TINY,
           "algorithm=grpo", "model.name=tiny,/nonexistent/model"]
    assert sweep_main(bad) == 1
    md = (out / "bad.md").read_text()
    assert "Failed runs (1)" in md and "/nonexistent/model" in md
    err = next((out / "cells").glob("name=_nonexistent_model-*/seed0/sweep_error.txt")).read_text()
    assert "exit code" in err and "nonexistent" in err
    assert "| tiny | 1 |" in md  # the grpo/tiny cell was reused from the first sweep (same config hash)


def test_hash_ignores_default_valued_keys_and_finds_runs_by_saved_config(tmp_path):
    import yaml

    from gigpo.train.config import load_config
    from gigpo.train.sweep import _find_existing, config_hash

    cfg = load_config("quickstart", ["algorithm=grpo", "train.iterations=1"]).to_dict()
    older = json.loads(json.dumps(cfg, default=str))
    # A config saved by a version without some key is the same config when that key holds its default now.
    older["rollout"].pop("top_p")  # quickstart leaves top_p at its default 1.0
    assert config_hash(older) == config_hash(cfg)
    changed = json.loads(json.dumps(cfg, default=str))
    changed["optim"]["lr"] = 0.5
    assert config_hash(changed) != config_hash(cfg)

    cell = build_cells("quickstart", {}, ["algorithm=grpo", "train.iterations=1"])[0]
    run = tmp_path / "cells" / "renamed-deadbeef" / "seed0"
    _write_run(run, [0.5], {})
    (run / "config.yaml").write_text(yaml.safe_dump(older))
    assert _find_existing(tmp_path, cell, 0) == run
    assert _find_existing(tmp_path, cell, 1) is None
