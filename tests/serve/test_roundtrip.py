"""Loopback round trip: `python -m gigpo.serve CHECKPOINT` in a real process, `gigpo eval --agent openai:...`
against it, compared seed by seed with evaluating the same checkpoint directly (Collector + HFEngine, greedy)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

from gigpo.serve import eval_api_main, make_server
from gigpo.serve.evaluate_api import load_results
from gigpo.train.evaluate import evaluate_model, locate_checkpoint


def _compare(direct_batch, results: dict) -> None:
    """Same seeds, same success, and the same transcript: every observation, response text, action and reward."""
    assert len(results) == len(direct_batch.trajectories)
    for t in direct_batch.trajectories:
        r = results[t.seed]
        assert not r.failed, r.error
        assert (r.won, r.length, r.invalid_steps) == (t.won, t.length, t.invalid_steps), t.seed
        assert [tuple(x) for x in r.transcript] == [tuple(x) for x in t.transcript], t.seed


def _start_server_process(ckpt) -> tuple[subprocess.Popen, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1")  # see conftest: a spinning thread pool would stall the 2-core box
    proc = subprocess.Popen(
        [sys.executable, "-m", "gigpo.serve", str(ckpt), "--port", "0", "--served-model-name", "ckpt"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout=90)
    if not line or " on http://" not in line[0]:
        proc.kill()
        raise AssertionError(f"server did not start: {line} {proc.stderr.read() if proc.poll() is not None else ''}")
    return proc, line[0].rsplit(" on ", 1)[1].strip()


def test_served_checkpoint_matches_direct_evaluation(trained_checkpoint, tmp_path, capsys):
    proc, url = _start_server_process(trained_checkpoint)  # loads while the direct evaluation runs
    try:
        assert locate_checkpoint(trained_checkpoint)[0] == trained_checkpoint
        summary, batch = evaluate_model(str(trained_checkpoint), episodes=16)
        assert 0 < summary["success_rate"] < 1  # a partly trained policy: the comparison has both outcomes
        rc = eval_api_main(["--agent", "openai:ckpt", "--base-url", url, "--episodes", "16", "--concurrency", "4",
                            "--output", str(tmp_path)])
        out = capsys.readouterr().out
        assert rc == 0
        _compare(batch, load_results(tmp_path))
        assert f"| success_rate | {summary['success_rate']:.4f} |" in out
        results = load_results(tmp_path).values()
        assert all(r.usage["requests"] == r.length and r.usage["completion_tokens"] >= r.length for r in results)
    finally:
        proc.terminate()
        rc = proc.wait(timeout=20)
    assert rc == 0  # SIGTERM shuts the server down cleanly


def test_prompt_sensitive_model_gives_identical_transcripts(chaotic_checkpoint, tmp_path):
    """With a history window, admissible actions and multi-token responses, a model whose every output depends on
    every prompt token answers identically through the API and directly: the prompts are token-identical."""
    overrides = ["prompt.history_length=2", "prompt.show_admissible=true", "rollout.max_response_tokens=4",
                 "env.max_steps=4"]
    _, batch = evaluate_model(str(chaotic_checkpoint), episodes=6, overrides=overrides)
    texts = {x[1] for t in batch.trajectories for x in t.transcript}
    assert len(texts) > 3  # responses vary with the prompt
    srv = make_server(str(chaotic_checkpoint), port=0, wait_ms=20.0)
    th = threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True)
    th.start()
    try:
        rc = eval_api_main(["--agent", f"openai:{chaotic_checkpoint}", "--base-url", srv.url, "--episodes", "6",
                            "--concurrency", "3", "--output", str(tmp_path), *overrides])
    finally:
        srv.close()
    assert rc == 0
    _compare(batch, load_results(tmp_path))
