"""`gigpo view`: the report's data and HTML from real runs, damaged runs, bad paths, the size cap, sweeps, --serve."""

import json
import re
import shutil
import threading
import urllib.request

import pytest

from gigpo.cli import main as cli_main
from gigpo.view.load import pick_iterations
from gigpo.view.report import build_data, render
from gigpo.view.serve import make_server


def page_data(html: str) -> dict:
    m = re.search(r'<script id="gigpo-data" type="application/json">(.*?)</script>', html, re.S)
    return json.loads(m.group(1))


def test_one_run_report_is_self_contained_and_holds_curves_and_credit(runs, tmp_path, capsys):
    out = tmp_path / "r.html"
    assert cli_main(["view", str(runs["gigpo"]), "--out", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    html = out.read_text()
    # nothing loaded from anywhere: no external script, stylesheet, image or font
    assert not re.search(r'(src|href)\s*=\s*["\']?(https?:)?//', html)
    assert "<link" not in html and "@import" not in html
    data = page_data(html)
    run = data["runs"][0]
    assert run["status"] == "complete" and run["iterations_done"] == 3
    assert run["metrics"]["iteration"] == [1, 2, 3] and run["metrics"]["eval/success_rate"][-1] is not None
    assert run["sample_iterations"] == [1, 2, 3] and set(run["samples"]) == {"1", "2", "3"}
    trajs = run["samples"]["3"]["trajectories"]
    assert len(trajs) == 2 * 4  # train.sample_groups=2 task groups, whole (group_size 4)
    step = trajs[0]["steps"][0]
    assert {"obs", "response", "action", "reward", "R", "A_E", "A_S", "A", "sg"} <= set(step)


def test_two_runs_overlay_and_list_their_config_differences(runs):
    data = build_data([str(runs["gigpo"]), str(runs["grpo"])])
    assert [r["name"] for r in data["runs"]] == ["gigpo", "grpo"]
    diff = {d["key"]: d["values"] for d in data["config_diff"]}
    assert diff["algorithm.name"] == ["gigpo", "grpo"]
    assert "train.run_dir" not in diff
    grpo_step = data["runs"][1]["samples"]["3"]["trajectories"][0]["steps"][0]
    assert grpo_step["A_S"] is None and grpo_step["sg"] is None  # GRPO has no step term
    # `gigpo view GRPO GIGPO` opens on the run with step credit (view.js reads this flag)
    assert [r["step_credit"] for r in data["runs"]] == [True, False]


def test_a_run_still_writing_renders_what_is_complete(run_copy):
    with (run_copy / "metrics.jsonl").open("a") as f:
        f.write('{"iteration": 4, "rollout/succ')  # a record cut mid-line
    sample = run_copy / "samples" / "iter_000003.jsonl"
    lines = sample.read_text().splitlines()
    sample.write_text("\n".join(lines[:3]) + "\n" + lines[3][: len(lines[3]) // 2])
    data = build_data([str(run_copy)])
    run = data["runs"][0]
    assert run["metrics"]["iteration"][-1] == 3
    assert any("cut or malformed" in n for n in run["notes"])
    assert len(run["samples"]["3"]["trajectories"]) == 2  # the two complete trajectory lines
    assert "gigpo-data" in render(data)


@pytest.mark.parametrize("make", ["missing", "empty", "other", "file"])
def test_a_path_that_is_no_run_is_one_line_and_exit_2(tmp_path, capsys, make):
    p = tmp_path / "x"
    if make == "empty":
        p.mkdir()
    elif make == "other":
        p.mkdir()
        (p / "notes.txt").write_text("hi")
    elif make == "file":
        p.write_text("hi")
    assert cli_main(["view", str(p)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gigpo view: error: ") and "\n" not in err and str(p) in err


def test_ten_thousand_iterations_and_large_samples_stay_under_the_cap(run_copy, tmp_path):
    """A run of 10k iterations and ~45 MB of samples: the report keeps under --max-mb by sampling iterations."""
    rec = json.loads((run_copy / "metrics.jsonl").read_text().splitlines()[-1])
    with (run_copy / "metrics.jsonl").open("w") as f:
        for i in range(1, 10_001):
            f.write(json.dumps({**rec, "iteration": i, "eval/success_rate": 0.5} if i % 100 == 0 else
                               {**{k: v for k, v in rec.items() if not k.startswith("eval/")}, "iteration": i}) + "\n")
    src = (run_copy / "samples" / "iter_000003.jsonl").read_text()
    body = src * max(1, 30_000 // len(src))  # ~30 kB a file (header lines repeat: the reader keeps the last)
    for i in range(1, 1501):
        (run_copy / "samples" / f"iter_{i:06d}.jsonl").write_text(body)
    out = tmp_path / "big.html"
    assert cli_main(["view", str(run_copy), "--out", str(out), "--max-mb", "5"]) == 0
    size = out.stat().st_size
    assert size <= 5e6, size
    run = page_data(out.read_text())["runs"][0]
    assert len(run["metrics"]["iteration"]) <= 2000 + 100 + 1  # evenly spaced + every eval record
    assert run["metrics"]["iteration"][-1] == 10_000
    embedded = sorted(int(i) for i in run["samples"])
    assert embedded[0] == 1 and embedded[-1] == 1500 and 10 < len(embedded) < 1500
    assert any("samples:" in n for n in run["notes"]) and any("curves:" in n for n in run["notes"])


def test_pick_iterations_spreads_over_the_run_and_keeps_the_ends():
    chosen = pick_iterations({i: 100 for i in range(1, 1001)}, 10_000)
    assert chosen[0] == 1 and chosen[-1] == 1000 and len(chosen) == 100
    assert pick_iterations({1: 10, 2: 10}, 100) == [1, 2]


def test_a_sweep_directory_shows_cells_with_mean_curves_and_the_table(runs, tmp_path):
    sweep = tmp_path / "sweep"
    for name, run in runs.items():
        for seed in (0, 1):  # the same run twice stands for two seeds: a zero std band, n = 2
            shutil.copytree(run, sweep / "cells" / f"{name}-abc" / f"seed{seed}")
    data = build_data([str(sweep)])
    assert data["kind"] == "sweep"
    sw = data["sweep"]
    assert "algorithm.name" in sw["grid"]
    assert sorted(c["name"] for c in sw["cells"])[0].startswith("algorithm.name=")
    row = sw["table"][0]
    assert row["seeds"] == 2 and row["complete"] == 2 and row["final_success"]["n"] == 2
    curve = sw["cells"][0]["curves"]["rollout/success_rate"]
    assert curve["iteration"] == [1, 2, 3] and curve["std"] == [0.0, 0.0, 0.0]
    assert cli_main(["view", str(sweep), str(runs["gigpo"])]) == 2  # a sweep is viewed alone


def test_a_sweeps_paired_comparison_is_recomputed_from_its_runs(paired_sweep):
    from gigpo.train.sweep.paired import compare, read_run

    sweep = paired_sweep("s", "../../etc")
    (sweep / "bad_paired.json").write_text('{"key": "algorithm", "pairs": [')
    paired = build_data([str(sweep)])["sweep"]["paired"]
    assert paired[0]["name"] == "bad" and "was not read" in paired[0]["note"]
    view = paired[1]["comparisons"][0]
    ref = compare({s: read_run(sweep / "cells" / "grpo-abc" / f"seed{s}", 3) for s in (0, 1)},
                  {s: read_run(sweep / "cells" / "gigpo-abc" / f"seed{s}", 3) for s in (0, 1)})
    assert view["metrics"]["auc"]["seeds"] == [0, 1]  # the path outside the sweep is no run of it: unpaired
    assert view["metrics"]["auc"]["diff"] == pytest.approx(ref["metrics"]["auc"]["diff"])
    assert view["metrics"]["auc"]["better"] + view["metrics"]["auc"]["worse"] + view["metrics"]["auc"]["ties"] == 2


def test_serve_answers_on_loopback_and_pages_in_any_iteration(runs):
    server = make_server([str(runs["gigpo"])], port=0)
    assert server.server_address[0] == "127.0.0.1"
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        html = urllib.request.urlopen(base + "/", timeout=10).read().decode()
        assert page_data(html)["live"] is True
        data = json.loads(urllib.request.urlopen(base + "/data.json", timeout=10).read())
        assert data["runs"][0]["iterations_done"] == 3
        s = json.loads(urllib.request.urlopen(base + "/samples.json?run=0&it=2", timeout=10).read())
        assert s["header"]["iteration"] == 2 and s["trajectories"]
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(base + "/samples.json?run=0&it=99", timeout=10)
        assert e.value.code == 404
    finally:
        server.shutdown()
        server.server_close()


def test_the_view_imports_no_torch_and_no_rollout():
    """It runs where a run directory was synced to, without the training stack. Of gigpo.rollout only the engine
    registry and the engines' declarations load (the config it reads checks rollout.engine against them); they
    import no torch, and no sampling, collector or env-worker module comes with them."""
    import ast
    import subprocess
    import sys

    code = ("import sys, gigpo.view.cli, gigpo.view.serve, gigpo.view.sweep; "
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('gigpo.rollout')))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    registry = {"gigpo.rollout", "gigpo.rollout.registry", "gigpo.rollout.engines", "gigpo.rollout.engines.hf",
                "gigpo.rollout.engines.openai", "gigpo.rollout.engines.vllm", "gigpo.rollout.engines.completions_wire"}
    assert set(ast.literal_eval(loaded)) <= registry, loaded


def test_text_from_the_env_cannot_break_out_of_the_page(run_copy):
    """Observations are data: a `</script>` in one stays inside the JSON, and the page writes text, never HTML."""
    sample = run_copy / "samples" / "iter_000001.jsonl"
    lines = sample.read_text().splitlines()
    traj = json.loads(lines[1])
    evil = "</script><script>alert(1)</script><!-- \u2028 <img src=x onerror=alert(2)>"
    traj["steps"][0]["obs"] = evil
    sample.write_text("\n".join([lines[0], json.dumps(traj), *lines[2:]]) + "\n")
    html = render(build_data([str(run_copy)]))
    assert "<script>alert" not in html and "<img src=x" not in html
    assert page_data(html)["runs"][0]["samples"]["1"]["trajectories"][0]["steps"][0]["obs"] == evil
    assert "innerHTML" not in html[html.rindex("<script>"):]  # the page builds DOM nodes and sets text only


def test_serve_on_a_taken_port_or_a_bad_cap_is_one_line(runs, capsys):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert cli_main(["view", str(runs["gigpo"]), "--serve", "--port", str(port)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"gigpo view: error: cannot serve on 127.0.0.1:{port}") and "\n" not in err
    assert cli_main(["view", str(runs["gigpo"]), "--max-mb", "0"]) == 2
    assert "--max-mb must be > 0" in capsys.readouterr().err
