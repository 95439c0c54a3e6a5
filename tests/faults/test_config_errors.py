"""Every configuration mistake is one line on stderr, exit status 2, before any model loads and before the run
directory exists (issue 13, item 5)."""

from __future__ import annotations

import pytest

from gigpo.cli import main


@pytest.fixture
def no_model(monkeypatch):
    """Fail the test if anything loads a model (the trainer and eval import load_model from gigpo.models)."""

    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded before the configuration error was reported")

    monkeypatch.setattr("gigpo.models.load_model", refuse)


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code: int, err: str, fragment: str, command: str = "train") -> None:
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"gigpo {command}: error: "), err
    assert fragment in lines[0], err


def write(path, data: bytes):
    path.write_bytes(data)
    return str(path)


CONFIG_FILES = {
    "malformed": (b"env: [unclosed\n  size: 1\n", "is not valid YAML"),
    "not-utf8": (b"\xff\xfeoptim:\n  lr: 1\n", "is not UTF-8"),
    "top-level-list": (b"- a\n- b\n", "expected a mapping at the top level"),
    "unknown-key": (b"optim:\n  lr_typo: 1\n", "unknown config key 'optim.lr_typo'"),
}


@pytest.mark.parametrize("case", sorted(CONFIG_FILES))
def test_bad_config_file(case, tmp_path, capsys, no_model):
    data, fragment = CONFIG_FILES[case]
    run_dir = tmp_path / "run"
    cfg_file = write(tmp_path / "cfg.yaml", data)
    code, _, err = run_cli(["train", "--config", cfg_file, f"train.run_dir={run_dir}"], capsys)
    assert_one_line_error(code, err, fragment)
    assert not run_dir.exists()


def test_directory_as_config(tmp_path, capsys, no_model):
    run_dir = tmp_path / "run"
    code, _, err = run_cli(["train", "--config", str(tmp_path), f"train.run_dir={run_dir}"], capsys)
    assert_one_line_error(code, err, "is a directory")
    assert not run_dir.exists()


OVERRIDES = [
    ("train.iterations=1e400", "train.iterations: '1e400' is out of range"),
    ("train.seed=99999999999999999999999", "train.seed"),
    ("rollout.groups=2.5", "rollout.groups: expected an integer"),
    ("env.size=abc", "env.size: expected an integer, got 'abc'"),
    ("env.size=3.5", "env.size: expected an integer"),
    ("env.size=0", "env.size=0: gridgoal size must be >= 2"),  # the constructor's own ValueError, keyed
    ("env.shaping=lots", "env.shaping: expected a number"),
    ("train.seed=-1", "train.seed must be >= 0"),
    ("optim.betas=[2,3]", "optim.betas must each be in [0, 1)"),
    ("optim.betas=[0.9", "optim.betas: '[0.9' is not valid YAML"),
    ("optim.betas=[a,b]", "optim.betas[0]: expected a number"),
    ("optim.betas=[0.9]", "optim.betas must have two values"),
    ("model.device=tpu", "model.device: 'tpu' is not a device"),
    ("model.dtype=foo", "model.dtype: 'foo' is not one of"),
    ("model.tiny.bogus=1", "model.tiny: unknown tiny model option"),
    ("optim.lr=inf", "optim.lr: expected a finite number"),
    ("optim.lr=-inf", "optim.lr: expected a finite number"),
    ("optim.lr=nan", "optim.lr: expected a finite number"),
    ("optim.lr=0", "optim.lr must be a finite number > 0"),
    ("optim.lr=-1e-5", "optim.lr must be a finite number > 0"),
    ("rollout.temperature=nan", "rollout.temperature: expected a finite number"),
    ("algorithm.gamma=1e400", "algorithm.gamma: expected a finite number"),
    ("rollout.env_timeout_s=0", "rollout.env_timeout_s must be > 0"),
    ("algorithm=nope", "algorithm.name: 'nope' is not one of gigpo, grpo"),
]


@pytest.mark.parametrize("override, fragment", OVERRIDES, ids=[o for o, _ in OVERRIDES])
def test_bad_override(override, fragment, tmp_path, capsys, no_model):
    run_dir = tmp_path / "run"
    code, _, err = run_cli(["train", override, f"train.run_dir={run_dir}"], capsys)
    assert_one_line_error(code, err, fragment)
    assert not run_dir.exists()


def test_cuda_device_without_cuda(tmp_path, capsys, no_model):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    run_dir = tmp_path / "run"
    code, _, err = run_cli(["train", "model.device=cuda:0", f"train.run_dir={run_dir}"], capsys)
    assert_one_line_error(code, err, "model.device: device 'cuda:0' requested but CUDA is not available")
    assert not run_dir.exists()


def test_env_constructor_type_error_names_the_options(tmp_path, capsys, no_model, monkeypatch):
    """An unannotated option the constructor rejects with a TypeError is reported with the env.* keys given."""
    from gigpo.envs import register, registry
    from gigpo.envs.gridgoal import GridGoalEnv

    monkeypatch.setattr(registry, "_REGISTRY", dict(registry.list_envs()))  # the test env goes away afterwards

    def untyped(size=4, **rest):  # no annotation: only the constructor can tell that "abc" is wrong
        return GridGoalEnv(size=size, **rest)

    register("untyped-grid", untyped, "test only")
    run_dir = tmp_path / "run"
    code, _, err = run_cli(["train", "env=untyped-grid", "env.size=abc", f"train.run_dir={run_dir}"], capsys)
    assert_one_line_error(code, err, "env.size='abc': '<' not supported")
    assert not run_dir.exists()


def test_eval_config_error_before_the_model(tmp_path, capsys, no_model):
    code, _, err = run_cli(["eval", "--model", "tiny", "env.size=0"], capsys)
    assert_one_line_error(code, err, "env.size=0: gridgoal size must be >= 2", command="eval")


def test_play_options_checked_like_train(capsys):
    code, _, err = run_cli(["play", "--env", "sokoban", "size=abc"], capsys)
    assert_one_line_error(code, err, "env.size: expected an integer", command="play")
    code, _, err = run_cli(["play", "--env", "sokoban", "size=1"], capsys)
    assert_one_line_error(code, err, "env.size=1: sokoban size must be >= 4", command="play")


def test_print_config_shows_the_resolved_config_and_loads_nothing(tmp_path, capsys, no_model):
    import yaml

    run_dir = tmp_path / "run"
    code, out, err = run_cli(["train", "--print-config", "algorithm=dapo", "optim.lr=3e-4",
                              f"train.run_dir={run_dir}"], capsys)
    assert code == 0, err
    data = yaml.safe_load(out)
    assert data["algorithm"]["name"] == "dapo" and data["optim"]["lr"] == 3e-4
    assert data["optim"]["clip_high"] == 0.28 and data["rollout"]["dapo"]["dynamic_sampling"] is True  # dapo preset
    assert data["env"]["options"]["size"] == 3  # the quickstart preset
    assert not run_dir.exists()
    from gigpo.train.config import config_from_dict, load_config

    assert config_from_dict(data) == load_config(None, ["algorithm=dapo", "optim.lr=3e-4",
                                                        f"train.run_dir={run_dir}"])


def test_print_config_reports_errors_too(capsys, no_model):
    code, _, err = run_cli(["train", "--print-config", "optim.lr=inf"], capsys)
    assert_one_line_error(code, err, "optim.lr")


def test_another_model_drops_the_tiny_options(capsys):
    """The quickstart's model.tiny.* belong to the tiny model: `model=smollm2-135m` must not inherit them."""
    import yaml

    code, out, err = run_cli(["train", "--print-config", "model=smollm2-135m"], capsys)
    assert code == 0, err
    model = yaml.safe_load(out)["model"]
    assert model["name"] == "smollm2-135m" and model["tiny"] == {}
    code, _, err = run_cli(["train", "--print-config", "model=smollm2-135m", "model.tiny.hidden_size=8"], capsys)
    assert_one_line_error(code, err, "model.tiny: options of the tiny model given")


def test_programmatic_non_finite_values_are_caught_by_validate():
    from gigpo.train.config import Config, ConfigError, validate

    cfg = Config()
    cfg.optim.lr = float("inf")
    with pytest.raises(ConfigError, match="optim.lr: expected a finite number"):
        validate(cfg)
    cfg = Config()
    cfg.optim.betas = (0.9, float("nan"))
    with pytest.raises(ConfigError, match="optim.betas: expected finite numbers"):
        validate(cfg)
    cfg = Config()
    cfg.train.seed = 2**70
    with pytest.raises(ConfigError, match="train.seed: .* out of range"):
        validate(cfg)
