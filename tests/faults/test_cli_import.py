"""User envs from the command line: ``--import MODULE`` and the ``gigpo.envs`` entry-point group (issue 13,
item 6); a failing import is one line, exit 2."""

from __future__ import annotations

import sys
import textwrap

import pytest
import yaml

from gigpo.cli import main
from gigpo.envs import registry

# The README's "Adding an environment" example, as a user would save it next to their command line.
COINFLIP = '''
from gigpo.envs import Env, register


class CoinFlipEnv(Env):
    instructions = "Guess the coin. Answer heads or tails."
    max_steps = 3

    def __init__(self, *, bias: float = 0.5):
        if not 0 <= bias <= 1:
            raise ValueError(f"bias must be in [0, 1], got {bias}")
        self.bias = bias

    def reset(self, seed):
        import random
        self.coin = "heads" if random.Random(seed).random() < self.bias else "tails"
        return "A coin was flipped.", {"task": "Guess the coin.", "state_key": 0,
                                       "admissible_actions": ["heads", "tails"]}

    def step(self, action):
        won = action == self.coin
        return ("Right!" if won else "Wrong."), float(won), True, {
            "won": won, "action_valid": True, "state_key": 1, "admissible_actions": ["heads", "tails"]}


register("{name}", CoinFlipEnv, "Guess a coin flip.")
'''


@pytest.fixture
def fresh_registry(monkeypatch):
    """The built-in envs only, entry points loaded again on first use; the real registry is restored after."""
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry.list_envs()))
    monkeypatch.setattr(registry, "_PLUGIN_ERRORS", {})
    monkeypatch.setattr(registry, "_BUILTINS_LOADED", False)
    monkeypatch.setattr(sys, "path", list(sys.path))
    modules = set(sys.modules)
    yield
    for name in set(sys.modules) - modules:
        if name.startswith("user_") or name.startswith("plug_"):
            del sys.modules[name]


def one_line_error(code: int, err: str, fragment: str, command: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"gigpo {command}: error: ") and fragment in err, err


def test_import_registers_a_user_env_for_train_eval_play_envs(tmp_path, monkeypatch, capsys, fresh_registry):
    (tmp_path / "user_coinflip.py").write_text(COINFLIP.replace("{name}", "coinflip"))
    monkeypatch.chdir(tmp_path)  # found in the current directory, as from the installed `gigpo` script
    assert main(["train", "--print-config", "env=coinflip"]) == 2  # without --import: unknown env
    assert "unknown env 'coinflip'" in capsys.readouterr().err

    assert main(["train", "--import", "user_coinflip", "--print-config", "env=coinflip", "env.bias=0.25"]) == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["env"] == {"name": "coinflip", "options": {"bias": 0.25}}

    assert main(["envs", "--import", "user_coinflip"]) == 0
    assert "coinflip" in capsys.readouterr().out
    code = main(["train", "--import", "user_coinflip", "env=coinflip", "env.bias=2",
                 f"train.run_dir={tmp_path / 'run'}"])
    one_line_error(code, capsys.readouterr().err, "env.bias=2.0: bias must be in [0, 1]", "train")
    assert not (tmp_path / "run").exists()
    code = main(["play", "--import", "user_coinflip", "--env", "coinflip", "bias=x"])
    one_line_error(code, capsys.readouterr().err, "env.bias: expected a number", "play")


def test_eval_takes_import(tmp_path, monkeypatch, capsys, fresh_registry):
    monkeypatch.chdir(tmp_path)
    code = main(["eval", "--import", "user_nothing_here", "--model", "tiny"])
    one_line_error(code, capsys.readouterr().err, "--import user_nothing_here: no module named", "eval")


def test_import_is_repeatable(tmp_path, monkeypatch, capsys, fresh_registry):
    (tmp_path / "user_one.py").write_text(COINFLIP.replace("{name}", "coin-one"))
    (tmp_path / "user_two.py").write_text(COINFLIP.replace("{name}", "coin-two"))
    monkeypatch.chdir(tmp_path)
    assert main(["envs", "--import", "user_one", "--import", "user_two"]) == 0
    out = capsys.readouterr().out
    assert "coin-one" in out and "coin-two" in out


@pytest.mark.parametrize(
    "source, fragment",
    [
        (None, "--import user_missing: no module named 'user_missing'"),
        ("raise RuntimeError('no\\ndata here')", "--import user_missing: importing it raised RuntimeError: no data here"),
        ("import user_not_installed_dep", "--import user_missing: it imports 'user_not_installed_dep', which is not"),
        ("def broken(:\n    pass", "--import user_missing: importing it raised SyntaxError"),
    ],
    ids=["not-found", "raises", "missing-dependency", "syntax-error"],
)
@pytest.mark.parametrize("command", ["train", "play", "envs"])
def test_failing_import_is_one_line_exit_2(source, fragment, command, tmp_path, monkeypatch, capsys,
                                           fresh_registry):
    if source is not None:
        (tmp_path / "user_missing.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    code = main([command, "--import", "user_missing"])
    one_line_error(code, capsys.readouterr().err, fragment, command)


def make_plugin(root, entry_points: str, modules: dict[str, str]) -> None:
    """An installed distribution on sys.path: a .dist-info with entry_points.txt, plus its modules."""
    info = root / "plug_envs_pkg-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: plug-envs-pkg\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))
    for name, text in modules.items():
        (root / f"{name}.py").write_text(text)


def test_entry_points_register_installed_envs(tmp_path, monkeypatch, capsys, fresh_registry):
    make_plugin(tmp_path, """
        [gigpo.envs]
        coin-class = plug_classes:CoinFlipEnv
        plug_registers = plug_registers
        broken = plug_broken
        """, {
        # a module:attr entry point: the class is registered under the entry point's name, imported lazily
        "plug_classes": COINFLIP.replace('register("{name}", CoinFlipEnv, "Guess a coin flip.")', ""),
        # a module entry point: imported at once, it registers its own envs
        "plug_registers": COINFLIP.replace("{name}", "coin-module"),
        "plug_broken": "raise ImportError('needs a GPU driver')",
    })
    monkeypatch.syspath_prepend(str(tmp_path))
    envs = registry.list_envs()
    assert "plug_classes" not in sys.modules  # lazy: nothing imported until the env is made
    assert {"coin-class", "coin-module", "gridgoal"} <= set(envs)
    assert envs["coin-class"].description == "(from plug-envs-pkg)"
    env = registry.make("coin-class", bias=1.0)
    assert env.reset(0)[0] == "A coin was flipped."
    assert main(["train", "--print-config", "env=coin-module", "env.bias=0.5"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["env"]["name"] == "coin-module"
    # the broken plugin does not stop the others, and asking for an unknown env says why it is missing
    with pytest.raises(ValueError, match="plugin 'broken' failed to load: ImportError: needs a GPU driver"):
        registry.get_spec("broken")


def test_the_readme_example_works_with_import(tmp_path, monkeypatch, capsys, fresh_registry):
    """README "Adding an environment": its class plus its one-line register, saved as a module, imported."""
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("### Adding an environment", 1)[1].split("\n## ", 1)[0]
    blocks = [textwrap.dedent(b) for b in re.findall(r"```python\n(.*?)```", section, re.S)]
    env_class = next(b for b in blocks if "class CoinFlipEnv" in b)
    register_line = next(b for b in blocks if "register(\"coinflip\", CoinFlipEnv" in b)
    (tmp_path / "user_readme_envs.py").write_text(env_class + "\n" + register_line)
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--import", "user_readme_envs", "--print-config", "env=coinflip", "env.bias=0.7"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["env"]["options"] == {"bias": 0.7}
    code = main(["play", "--import", "user_readme_envs", "--env", "coinflip", "bias=2"])
    one_line_error(code, capsys.readouterr().err, "env.bias=2.0: bias must be in [0, 1]", "play")
