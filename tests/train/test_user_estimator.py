"""A user-defined estimator in a module loaded with ``--import`` trains with ``algorithm=NAME`` (issue 30)."""

from __future__ import annotations

import json
import sys

import pytest

import gigpo.train.config  # noqa: F401 - built-in estimators registered before a test copies the registry
from gigpo.algo import registry

USER_MODULE = '''
import numpy as np
from gigpo.algo.registry import Estimate, register_estimator


@register_estimator("return-minus-mean", description="user test: episode return minus its group's mean")
def return_minus_mean(batch, common, options):
    g = np.unique(np.asarray(batch.group_id), return_inverse=True)[1].reshape(-1)
    t = np.unique(np.asarray(batch.traj_id), return_inverse=True)[1].reshape(-1)
    ret = np.bincount(t, weights=np.asarray(batch.reward, dtype=float))[t]
    mean = np.bincount(g, weights=ret) / np.bincount(g)
    return Estimate(ret - mean[g], stats={"user/rows": float(len(batch))})
'''


def test_imported_estimator_trains(tmp_path, monkeypatch):
    from gigpo.cli import main

    (tmp_path / "user_estimator_mod.py").write_text(USER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_ESTIMATORS", dict(registry._ESTIMATORS))
    monkeypatch.delitem(sys.modules, "user_estimator_mod", raising=False)
    run = tmp_path / "run"
    assert main(["train", "algorithm=return-minus-mean"]) == 2  # unknown without --import
    code = main(["train", "--import", "user_estimator_mod", "--config", "lock", "algorithm=return-minus-mean",
                 "train.iterations=2", f"train.run_dir={run}", "train.progress=false", "rollout.groups=2"])
    assert code == 0
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2
    assert all(any(k.endswith("user/rows") and v > 0 for k, v in r.items()) for r in rows)
    sys.modules.pop("user_estimator_mod", None)


OPTIONS_MODULE = '''
from dataclasses import dataclass

import numpy as np
from gigpo.algo.registry import Estimate, option, register_estimator


@dataclass(frozen=True)
class ScaledOptions:
    scale: float = option(1.0, "multiplies every advantage (> 0)")

    def check(self):
        if not self.scale > 0:
            raise ValueError(f"scale must be > 0, got {self.scale}")


@register_estimator("scaled-return", description="user test: scaled return minus its group's mean",
                    options=ScaledOptions)
def scaled_return(batch, common, options):
    g = np.unique(np.asarray(batch.group_id), return_inverse=True)[1].reshape(-1)
    t = np.unique(np.asarray(batch.traj_id), return_inverse=True)[1].reshape(-1)
    ret = np.bincount(t, weights=np.asarray(batch.reward, dtype=float))[t]
    mean = np.bincount(g, weights=ret) / np.bincount(g)
    return Estimate(options.scale * (ret - mean[g]), stats={"user/scale": options.scale})
'''


def test_imported_estimator_options_are_config_keys(tmp_path, monkeypatch, capsys):
    """Registered after the config schema was built (gigpo.train.config is imported by now), the estimator's
    options are still a sub-section: set from the command line, checked by the estimator, in --help's key list,
    saved in config.yaml and read back by a resume."""
    import yaml

    from gigpo.cli import main
    from gigpo.train.config.help import describe

    (tmp_path / "user_scaled_mod.py").write_text(OPTIONS_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_ESTIMATORS", dict(registry._ESTIMATORS))
    monkeypatch.delitem(sys.modules, "user_scaled_mod", raising=False)
    run = tmp_path / "run"
    base = ["train", "--import", "user_scaled_mod", "--config", "lock", "algorithm=scaled-return",
            "train.progress=false", "rollout.groups=2", "train.eval_episodes=0"]
    assert main([*base, "algorithm.scaled_return.scale=-1"]) == 2
    assert "algorithm.scaled_return (scaled-return): scale must be > 0, got -1.0" in capsys.readouterr().err
    assert main([*base, "algorithm.scaled_return.sclae=2"]) == 2
    assert "algorithm.scaled_return keys are: scale" in capsys.readouterr().err
    assert main([*base, "algorithm=gigpo", "algorithm.scaled_return.scale=2"]) == 2  # another algorithm runs
    assert "read by algorithm scaled-return only" in capsys.readouterr().err

    assert main([*base, "algorithm.scaled_return.scale=2.5", "train.iterations=2", f"train.run_dir={run}"]) == 0
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["algorithm"]["scaled_return"] == {"scale": 2.5}
    assert main(["train", "--import", "user_scaled_mod", "--resume", str(run), "train.iterations=3"]) == 0
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 3
    assert all(next(v for k, v in r.items() if k.endswith("user/scale")) == 2.5 for r in rows)
    assert "algorithm.scaled_return.scale = 1.0" in describe()
    sys.modules.pop("user_scaled_mod", None)


def test_an_estimator_section_cannot_shadow_a_key_or_another_estimator(monkeypatch):
    from dataclasses import dataclass

    from gigpo.train.config.schema import Config

    monkeypatch.setattr(registry, "_ESTIMATORS", dict(registry._ESTIMATORS))

    @dataclass(frozen=True)
    class Opts:
        k: int = registry.option(1, "a key")

        def check(self):
            return None

    with pytest.raises(ValueError, match="algorithm.ppo is estimator 'ppo'"):
        registry.register_estimator("mine", description="d", options=Opts, section="ppo")(lambda b, c, o: None)
    registry.register_estimator("mine", description="d", options=Opts, section="gamma")(lambda b, c, o: None)
    with pytest.raises(ValueError, match="would replace the key algorithm.gamma"):
        Config()


def test_help_lists_an_imported_estimator_and_its_options(tmp_path, monkeypatch, capsys):
    from gigpo.cli import main

    (tmp_path / "user_scaled_help_mod.py").write_text(OPTIONS_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_ESTIMATORS", dict(registry._ESTIMATORS))
    monkeypatch.delitem(sys.modules, "user_scaled_help_mod", raising=False)
    with pytest.raises(SystemExit) as done:
        main(["train", "--import", "user_scaled_help_mod", "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "algorithm.scaled_return.scale = 1.0  [float]    # multiplies every advantage (> 0)" in out
    assert "scaled-return  user test: scaled return minus its group's mean" in out
    assert main(["train", "--import", "no_such_module_xyz", "--help"]) == 2
    assert "no module named 'no_such_module_xyz'" in capsys.readouterr().err
    sys.modules.pop("user_scaled_help_mod", None)


CRITIC_KL_MODULE = '''
import numpy as np
from gigpo.algo.registry import Estimate, register_estimator


@register_estimator("user-critic", description="user test: return minus the critic's value", needs_values=True)
def user_critic(batch, common, options):
    t = np.unique(np.asarray(batch.traj_id), return_inverse=True)[1].reshape(-1)
    ret = np.bincount(t, weights=np.asarray(batch.reward, dtype=float))[t]
    return Estimate(ret - batch.values, value_targets=ret, stats={"user/values_given": float(batch.values is not None)})


@register_estimator("user-kl", description="user test: return minus a KL penalty", needs_kl=True)
def user_kl(batch, common, options):
    t = np.unique(np.asarray(batch.traj_id), return_inverse=True)[1].reshape(-1)
    ret = np.bincount(t, weights=np.asarray(batch.reward, dtype=float))[t]
    return Estimate(ret - 0.1 * batch.kl, stats={"user/kl_given": float(batch.kl is not None)})
'''


def test_imported_critic_and_kl_estimators_get_values_and_a_reference(tmp_path, monkeypatch):
    """A user's needs_values estimator trains a value head with algorithm.ppo's value keys (allowed for it); a
    needs_kl one gets per-row KL to a reference model without any REINFORCE++ key."""
    from gigpo.cli import main

    (tmp_path / "user_critic_kl_mod.py").write_text(CRITIC_KL_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_ESTIMATORS", dict(registry._ESTIMATORS))
    monkeypatch.delitem(sys.modules, "user_critic_kl_mod", raising=False)
    base = ["train", "--import", "user_critic_kl_mod", "--config", "lock", "train.iterations=2",
            "train.progress=false", "rollout.groups=2", "train.eval_episodes=0"]
    for name, extra, stat in (("user-critic", ["algorithm.ppo.value_lr=0.001"], "user/values_given"),
                              ("user-kl", [], "user/kl_given")):
        run = tmp_path / name
        assert main([*base, f"algorithm={name}", f"train.run_dir={run}", *extra]) == 0
        rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        assert len(rows) == 2
        assert all(next(v for k, v in r.items() if k.endswith(stat)) == 1.0 for r in rows)
    sys.modules.pop("user_critic_kl_mod", None)


def test_a_same_named_function_elsewhere_cannot_replace_an_estimator_and_modes_are_not_algorithms(monkeypatch):
    from gigpo.train.config import ConfigError, load_config
    from gigpo.train.config.algorithms import algorithm_names, spec_of

    monkeypatch.setattr(registry, "_ESTIMATORS", dict(registry._ESTIMATORS))
    builtin = registry.get_estimator("gigpo").fn

    def impostor(batch, common, options):
        return None

    impostor.__qualname__ = builtin.__qualname__  # same name, another module: not the built-in imported again
    with pytest.raises(ValueError, match="estimator 'gigpo' is already registered"):
        registry.register_estimator("gigpo", description="d")(impostor)
    assert registry.get_estimator("gigpo").fn is builtin
    # verl-agent's estimator is a mode of gigpo/grpo/rloo (algorithm.compat), not an algorithm of its own
    assert "verl-agent" not in algorithm_names()
    with pytest.raises(ConfigError, match="'verl-agent' is not one of"):
        spec_of("verl-agent")
    assert load_config(None, ["algorithm.compat=verl-agent"]).algorithm.compat == "verl-agent"
