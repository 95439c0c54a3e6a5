"""A hostile new user's modules, model dirs and run dirs (issue 29): each case is one clear line and the right
exit code (2 for config/usage), with no traceback and no empty run directory left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from small_run import SMALL
from test_cli_import import COINFLIP, one_line_error

from gigpo.cli import main
from gigpo.envs import registry


@pytest.fixture
def fresh_registry(monkeypatch):
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry.list_envs()))
    monkeypatch.setattr(registry, "_PLUGIN_ERRORS", {})
    monkeypatch.setattr(registry, "_BUILTINS_LOADED", False)
    monkeypatch.setattr(sys, "path", list(sys.path))
    modules = set(sys.modules)
    yield
    for name in set(sys.modules) - modules:
        if name.startswith("user_"):
            del sys.modules[name]


def test_an_import_that_calls_sys_exit(tmp_path, monkeypatch, capsys, fresh_registry):
    (tmp_path / "user_exits.py").write_text("import sys\nsys.exit(7)\n")
    monkeypatch.chdir(tmp_path)
    code = main(["envs", "--import", "user_exits"])
    one_line_error(code, capsys.readouterr().err, "--import user_exits: the module called sys.exit(7)", "envs")


def test_an_import_that_hangs_says_so_and_ctrl_c_is_one_line(tmp_path):
    (tmp_path / "user_hangs.py").write_text("import time\ntime.sleep(600)\n")
    env = {**os.environ, "PYTHONPATH": ""}
    p = subprocess.Popen([sys.executable, "-c", "import sys; from gigpo.envs import registry; "
                          "registry.IMPORT_NOTE_S = 0.5; from gigpo.cli import main; "
                          "sys.exit(main(['envs', '--import', 'user_hangs']))"],
                         cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    first = p.stderr.readline()
    assert first.startswith("gigpo: --import user_hangs is still importing after 0.5 s (Ctrl-C to stop)"), first
    time.sleep(0.2)
    p.send_signal(signal.SIGINT)
    rest = p.stderr.read()
    assert p.wait(timeout=30) == 2
    assert "Traceback" not in rest and rest.startswith("gigpo envs: error: --import user_hangs: interrupted"), rest


def test_registering_over_a_builtin_replaces_it(tmp_path, monkeypatch, capsys, caplog, fresh_registry):
    (tmp_path / "user_gridgoal.py").write_text(COINFLIP.replace("{name}", "gridgoal"))
    monkeypatch.chdir(tmp_path)
    assert main(["envs", "--import", "user_gridgoal"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("gridgoal "))
    assert "Guess a coin flip." in line
    assert "env 'gridgoal' replaces the one registered before" in caplog.text
    assert registry.make("gridgoal").reset(0)[0] == "A coin was flipped."


NO_CLOSE = '''
from gigpo.envs import register

class NoClose:
    def reset(self, seed):
        return "x", {}
    def step(self, action):
        return "x", 0.0, True, {}

register("user-noclose", NoClose)
'''
RAISES = '''
from gigpo.envs import Env, register

class Raises(Env):
    def __init__(self):
        raise RuntimeError("cannot reach the game server")

    def reset(self, seed):
        return "x", {}

    def step(self, action):
        return "x", 0.0, True, {}

register("user-raises", Raises)
'''
LOCAL_FACTORY = '''
from gigpo.envs import register
from user_coin import CoinFlipEnv

def _make():
    return lambda: CoinFlipEnv()

register("user-lambda", _make())
'''


@pytest.mark.parametrize("module,source,env,extra,fragment", [
    ("user_noclose", NO_CLOSE, "user-noclose", [], "has no close method; subclass gigpo.envs.base.Env"),
    ("user_raises", RAISES, "user-raises", [], "env 'user-raises': building it raised RuntimeError: cannot reach"),
    ("user_lambda", LOCAL_FACTORY, "user-lambda", ["rollout.env_workers=process"],
     "rollout.env_workers=process sends env 'user-lambda''s factory to worker processes, but it cannot be pickled"),
], ids=["no-close", "constructor-raises", "unpicklable-factory"])
def test_bad_user_envs_are_one_line_before_the_run_dir(module, source, env, extra, fragment, tmp_path, monkeypatch,
                                                        capsys, fresh_registry):
    (tmp_path / "user_coin.py").write_text(COINFLIP.replace("{name}", "user-coin"))
    (tmp_path / f"{module}.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    code = main(["train", "--import", module, f"env={env}", *extra, "train.iterations=1",
                 f"train.run_dir={tmp_path / 'run'}"])
    one_line_error(code, capsys.readouterr().err, fragment, "train")
    assert not (tmp_path / "run").exists()


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    from gigpo.models import load_model, save_pretrained

    root = tmp_path_factory.mktemp("models")
    save_pretrained(load_model("tiny", device="cpu", tiny={"hidden_size": 16, "intermediate_size": 32}),
                    root / "good")
    out = {}
    for name, damage in [("garbage", "weights"), ("truncated", "truncate"), ("badjson", "config"),
                         ("badtype", "model_type")]:
        d = root / name
        subprocess.run(["cp", "-r", str(root / "good"), str(d)], check=True)
        weights = d / "model.safetensors"
        if damage == "weights":
            weights.write_bytes(os.urandom(4096))
        elif damage == "truncate":
            weights.write_bytes(weights.read_bytes()[:-100])
        elif damage == "config":
            (d / "config.json").write_text('{"model_type": ')
        else:
            (d / "config.json").write_text('{"model_type": "no-such-architecture"}')
        out[name] = d
    return out


@pytest.mark.parametrize("name,fragment", [
    ("garbage", "model.safetensors is not a readable safetensors file"),
    ("truncated", "model.safetensors is not a readable safetensors file"),
    ("badjson", "config.json is not a usable model config"),
    ("badtype", "config.json is not a usable model config"),
])
def test_a_damaged_model_dir_is_one_line(model_dirs, name, fragment, tmp_path, capsys):
    from gigpo.serve.server import serve_main

    assert serve_main([str(model_dirs[name]), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gigpo serve: error: ") and fragment in err and err.count("\n") == 1, err
    code = main(["train", *SMALL, f"model={model_dirs[name]}", "train.iterations=1",
                 f"train.run_dir={tmp_path / 'run'}"])
    one_line_error(code, capsys.readouterr().err, fragment, "train")
    assert not (tmp_path / "run").exists()  # no empty run directory left behind


def test_a_run_dir_that_cannot_be_written_is_one_line(capsys):
    # /sys refuses new directories even to root: a stand-in for a read-only filesystem
    code = main(["train", *SMALL, "train.iterations=1", "train.run_dir=/sys/gigpo-run"])
    one_line_error(code, capsys.readouterr().err, "cannot create the run directory /sys/gigpo-run", "train")


SEGFAULT = '''
import ctypes
import os

from gigpo.envs import Env, register


class Segfaults(Env):
    """Walks like gridgoal's smallest cousin; after CRASH_AFTER resets in this process, step() segfaults."""
    max_steps = 2

    def __init__(self):
        pass

    def reset(self, seed):
        n = int(os.environ.get("USER_SEGV_RESETS", "0")) + 1
        os.environ["USER_SEGV_RESETS"] = str(n)
        self.armed = n > int(os.environ.get("CRASH_AFTER", "1000000"))
        return "a room", {"state_key": 0}

    def step(self, action):
        if self.armed:
            ctypes.string_at(0)  # a null read in native code: SIGSEGV
        return "a room", 0.0, True, {"state_key": 1}


register("user-segv", Segfaults)
'''


def test_an_inline_env_segfault_names_env_and_seed_and_the_run_resumes(tmp_path):
    (tmp_path / "user_segv.py").write_text(SEGFAULT)
    run = tmp_path / "run"
    small = [x for x in SMALL if not x.startswith("env.")]
    cmd = [sys.executable, "-m", "gigpo", "train", "--import", "user_segv", "env=user-segv", *small,
           "train.iterations=2", "train.checkpoint_every=1", f"train.run_dir={run}"]
    # the probes before the run reset the env 3 times (its action settings once, the held-out check twice), and
    # iteration 1 resets it 4 times: those pass; the first step after the 8th reset crashes (iteration 2)
    env = {**os.environ, "PYTHONPATH": "", "CRASH_AFTER": "7"}
    crashed = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert crashed.returncode == -signal.SIGSEGV, crashed.stderr
    err = crashed.stderr  # run() returns once the watcher, which shares the captured stderr, has written and exited
    line = next((x for x in err.splitlines() if x.startswith("gigpo train: error: the training process died")), "")
    assert line, err
    assert "env 'user-segv' was in step() of seed " in line and ", step 1" in line
    assert "rollout.env_workers=process contains such crashes" in line and f"--resume {run}`" in line
    assert "Fatal Python error: Segmentation fault" in err  # faulthandler: the crashing thread's frames
    resumed = subprocess.run([sys.executable, "-m", "gigpo", "train", "--import", "user_segv", "--resume", str(run)],
                             cwd=tmp_path, env={**env, "CRASH_AFTER": "1000000"}, capture_output=True, text=True,
                             timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming" in resumed.stdout and "iteration 1 of 2" in resumed.stdout


@pytest.mark.peers("textworld", "fast_downward", "alfworld")
@pytest.mark.parametrize("damage,fragment", [
    ("no-grammar", "is malformed: no 'grammar'"),
    ("bad-grammar", "alfworld: cannot load game"),
])
def test_a_malformed_alfworld_game_names_its_file(damage, fragment, tmp_path):
    pytest.importorskip("textworld", reason="needs the [alfworld] extra")
    pytest.importorskip("fast_downward", reason="needs the [alfworld] extra")
    pytest.importorskip("alfworld.agents.utils.misc", reason="needs the [alfworld] extra")
    import json

    import numpy as np

    from gigpo.envs.alfworld.layout import generate
    from gigpo.envs.alfworld.pddl import write_game
    from gigpo.envs.alfworld.real import AlfWorldEnv
    from gigpo.envs.base import EnvError

    game = write_game(generate(np.random.default_rng(0), "Pick"),
                      tmp_path / "json_2.1.1" / "train" / "pick_and_place_simple-Pillow-None-Sofa-2" / "trial_T1")
    data = json.loads(game.read_text())
    if damage == "no-grammar":
        del data["grammar"]
    else:
        data["grammar"] = "this is { not a grammar"
    game.write_text(json.dumps(data))
    env = AlfWorldEnv(data_dir=str(tmp_path), split="train")
    with pytest.raises(EnvError, match=fragment) as err:
        env.reset(0)
    assert str(game) in str(err.value)


@pytest.mark.parametrize("extra", [["lora.enabled=true"], ["algorithm=ppo"]])
def test_fsdp_combinations_torchrun_refuses_are_refused_in_one_process_too(extra, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    code = main(["train", *SMALL, "train.parallel=fsdp", *extra, f"train.run_dir={tmp_path / 'r'}"])
    one_line_error(code, capsys.readouterr().err, "train.parallel=fsdp", "train")
    assert not (tmp_path / "r").exists()
