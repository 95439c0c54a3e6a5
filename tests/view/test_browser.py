"""The report in a real browser: headless Chromium (Debian's `chromium` package; CI installs it) runs the page's
script from disk, and the rendered DOM holds the curves, the trajectories with per-step credit and a step group."""

import json
import os
import re
import shutil
import subprocess
import tempfile

import pytest

from gigpo.cli import main as cli_main

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [pytest.mark.peers("chromium"),
              pytest.mark.skipif(CHROMIUM is None, reason="needs Chromium (Debian: apt-get install chromium)")]


def chromium(*args: str, timeout: int = 90) -> str:
    profile = tempfile.mkdtemp(prefix="gigpo-chromium-")
    try:
        cmd = [CHROMIUM, "--headless", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               f"--user-data-dir={profile}", *args]
        if os.geteuid() == 0:  # Chromium refuses to run as root with its sandbox
            cmd.insert(1, "--no-sandbox")
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=True).stdout
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def test_chromium_renders_curves_trajectories_and_a_step_group(runs, tmp_path):
    out = tmp_path / "report.html"
    assert cli_main(["view", str(runs["gigpo"]), str(runs["grpo"]), "--out", str(out)]) == 0
    # the hash opens the GiGPO run's iteration 3 and its largest step group, as a shared link would

    data = json.loads(re.search(r'type="application/json">(.*?)</script>', out.read_text(), re.S).group(1))
    steps = [s for t in data["runs"][0]["samples"]["3"]["trajectories"] for s in t["steps"]]
    sg = max({s["sg"] for s in steps}, key=lambda g: sum(s["sg"] == g for s in steps))
    dom = chromium("--virtual-time-budget=5000", "--dump-dom", f"{out.as_uri()}#run=0&it=3&sg={sg}")
    assert 'data-rendered="1"' in dom  # the script ran to the end
    charts = re.findall(r'<div class="chart-box" data-title="([^"]+)"', dom)
    assert {"sampled success", "entropy", "KL", "mean step-group size", "seconds per phase"} <= set(charts)
    assert dom.count('class="series"') >= 10  # drawn polylines, both runs
    assert 'id="config-diff"' in dom and "algorithm.name" in dom
    assert dom.count('<details class="traj') == 8  # 2 task groups x 4 trajectories
    assert dom.count('<tr id="step-') == len(steps)
    assert 'id="largest-groups"' in dom
    panel = re.search(r'<div id="group-panel">(.*?)</div>\s*(<script|</body>)', dom, re.S)
    assert panel is not None, "the step group's panel is not open"
    members = sum(s["sg"] == sg for s in steps)
    assert f"step group {sg}" in panel.group(1) and f"{members} steps from" in panel.group(1)
    assert dom.count('class="step hl"') == members  # its members highlighted in the trajectories


def test_without_a_run_in_the_link_the_report_opens_on_the_run_with_step_credit(runs, tmp_path):
    out = tmp_path / "report.html"
    assert cli_main(["view", str(runs["grpo"]), str(runs["gigpo"]), "--out", str(out)]) == 0
    dom = chromium("--virtual-time-budget=5000", "--dump-dom", out.as_uri())
    assert 'data-rendered="1"' in dom and 'id="samples" data-run="1"' in dom  # the GiGPO run, listed second
    # gridgoal's score is float(won): held-out success and score are one line, labelled with both
    assert "gigpo success_rate = score" in dom


def test_screenshot_of_the_report(runs, tmp_path):
    out = tmp_path / "report.html"
    assert cli_main(["view", str(runs["gigpo"]), "--out", str(out)]) == 0
    png = tmp_path / "shot.png"
    chromium("--virtual-time-budget=5000", f"--screenshot={png}", "--window-size=1300,900", out.as_uri())
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000


def test_chromium_renders_the_live_page_served_on_loopback(runs):
    import threading

    from gigpo.view.serve import make_server

    server = make_server([str(runs["gigpo"])], port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        dom = chromium("--virtual-time-budget=3000", "--dump-dom", f"http://127.0.0.1:{server.server_address[1]}/")
    finally:
        server.shutdown()
        server.server_close()
    assert 'data-rendered="1"' in dom and 'class="live"' in dom
    assert dom.count('<details class="traj') == 8


def test_chromium_renders_a_sweep_with_its_table_and_seed_bands(paired_sweep, tmp_path):
    sweep = paired_sweep("sweep")
    out = tmp_path / "sweep.html"
    assert cli_main(["view", str(sweep), "--out", str(out)]) == 0
    dom = chromium("--virtual-time-budget=3000", "--dump-dom", out.as_uri())
    assert 'data-rendered="1"' in dom and 'id="sweep-table"' in dom
    assert 'class="paired-table"' in dom and "sampled success AUC" in dom and "grpo (A) → gigpo (B)" in dom
    assert dom.count("algorithm.name=g") >= 2  # the cells, named by the grid key
    assert "<polygon" in dom  # the ±1 std bands


def test_chromium_draws_the_branch_trees_and_the_audit_table(audited_branched_run, tmp_path):

    out = tmp_path / "report.html"
    assert cli_main(["view", str(audited_branched_run), "--out", str(out)]) == 0
    data = json.loads(re.search(r'type="application/json">(.*?)</script>', out.read_text(), re.S).group(1))
    it = max(map(int, data["runs"][0]["samples"]))
    rows = sum(len(t["rows"]) for t in data["runs"][0]["samples"][str(it)]["trees"].values())
    dom = chromium("--virtual-time-budget=5000", "--dump-dom", f"{out.as_uri()}#run=0&it={it}")
    assert 'data-rendered="1"' in dom
    assert dom.count('class="branch-tree"') == len(data["runs"][0]["samples"][str(it)]["trees"])
    assert dom.count('class="traj-line"') == rows
    assert '<div id="audit">' in dom and dom.count("<tr><td>GiGPO exact</td>") == 1
