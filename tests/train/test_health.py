"""Training-health alerts: collapse after a solve, entropy collapse, no signal; thresholds as config keys."""

import logging

import pytest

from gigpo.train.config import ConfigError, load_config
from gigpo.train.reporting.health import HealthMonitor, HealthThresholds, replay


def recs(success, entropy=None, zero_adv=()):
    out = []
    for i, s in enumerate(success, 1):
        r = {"iteration": i, "rollout/success_rate": s, "adv/mean": 0.0 if i in zero_adv else 0.1,
             "adv/std": 0.0 if i in zero_adv else 1.0}
        if entropy is not None:
            r["loss/entropy"] = entropy[i - 1]
        out.append(r)
    return out


def test_a_collapse_after_a_solve_is_one_alert_per_solve():
    s = [0.2, 0.6, 0.95, 0.9, 0.7, 0.4, 0.3, 0.95, 0.5]
    alerts = replay(recs(s), HealthThresholds(collapse_window=10, collapse_sustain=1))
    assert [(a.kind, a.iteration) for a in alerts] == [("collapse", 6), ("collapse", 9)]
    assert "0.90 (iteration 4) to 0.40" in alerts[0].message


def test_a_dip_shorter_than_the_sustain_is_silent_and_a_lasting_fall_is_one_alert():
    # the case: a one-iteration dip that recovered in 4 (back to >= high)
    dip = [0.95, 0.95, 0.3, 0.6, 0.8, 0.85, 0.95, 0.95]
    assert replay(recs(dip), HealthThresholds(collapse_window=10)) == []
    fall = [0.95, 0.95, 0.3, 0.6, 0.8, 0.85, 0.7, 0.5]  # never back to 0.9: a collapse, raised at 3 + 5 - 1
    alerts = replay(recs(fall), HealthThresholds(collapse_window=10))
    assert [(a.kind, a.iteration) for a in alerts] == [("collapse", 7)]
    assert "to 0.30 (iteration 3) and stayed below 0.9 for 5" in alerts[0].message


def test_a_fall_outside_the_window_or_a_disabled_check_is_silent():
    s = [0.95] + [0.7] * 20 + [0.3]
    assert replay(recs(s), HealthThresholds(collapse_window=10)) == []
    assert replay(recs([0.95, 0.1]), HealthThresholds(collapse_window=0)) == []


def test_entropy_collapse_without_a_solve():
    ent = [2.0, 2.0, 2.0, 1.0, 0.15, 0.1]
    alerts = replay(recs([0.1] * 6, ent), HealthThresholds())
    assert [(a.kind, a.iteration) for a in alerts] == [("entropy", 5)]
    # a solved policy may become deterministic
    assert replay(recs([0.95] * 6, ent), HealthThresholds()) == []


def test_no_signal_streaks():
    alerts = replay(recs([0.0] * 7, zero_adv={1, 2, 3, 5, 6, 7}), HealthThresholds(no_signal_iterations=3))
    assert [(a.kind, a.iteration) for a in alerts] == [("no_signal", 3), ("no_signal", 7)]
    assert "no trajectory won" in alerts[0].message
    won = replay(recs([1.0] * 3, zero_adv={1, 2, 3}), HealthThresholds(no_signal_iterations=3))
    assert "every trajectory won" in won[0].message


def test_records_without_training_keys_are_skipped():
    mon = HealthMonitor(HealthThresholds())
    assert mon.observe({"iteration": 0, "eval/success_rate": 0.0}) == []
    assert mon.observe({"foo": 1}) == []


@pytest.mark.parametrize("bad,words", [
    ("train.health_collapse_low=0.95", "must be <"), ("train.health_collapse_high=1.5", "in [0, 1]"),
    ("train.health_entropy_ratio=1", "[0, 1)"), ("train.health_no_signal_iterations=-1", ">= 0"),
])
def test_thresholds_are_checked_up_front(bad, words):
    with pytest.raises(ConfigError, match=words.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        load_config(None, [bad])


def test_the_trainer_logs_an_alert(tmp_path, caplog):
    """A run where nothing can be won (one step, no shaping, no invalid penalty: every reward 0) has no signal."""
    from tests.view.conftest import train_run

    with caplog.at_level(logging.WARNING, logger="gigpo.health"):
        train_run(tmp_path / "run", "env.max_steps=1", "env.shaping=0", "rollout.invalid_penalty=0",
                  "train.iterations=2", "train.health_no_signal_iterations=2", "train.eval_episodes=0")
    lines = [r.getMessage() for r in caplog.records if r.name == "gigpo.health"]
    assert lines == ["iteration 2: no_signal alert: 2 iterations in a row without signal (every advantage 0: no "
                     "trajectory won); nothing is being learned"]
