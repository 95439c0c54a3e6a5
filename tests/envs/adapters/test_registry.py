"""Adapters registered by prefix: lazy resolution, one-line errors (unknown id with close matches, missing
package naming the extra), `gigpo envs` listing, and the CLI's exit 2 before any model loads."""

import pytest

from gigpo import cli
from gigpo.envs import get_spec, make
from gigpo.envs.registry import _PREFIXES, list_prefixes, register_prefix


def test_every_adapter_family_is_listed_with_its_extra():
    prefixes = list_prefixes()
    assert {"textarena", "gym", "reasoning-gym", "openenv", "verifiers"} <= set(prefixes)
    assert prefixes["textarena"].extra == "textarena" and prefixes["reasoning-gym"].extra == "reasoning-gym"


def test_a_missing_package_is_one_line_naming_the_extra():
    register_prefix("nosuchpkg", "gigpo.envs.adapters.gym:resolve", "test family", package="gigpo_no_such_package",
                    extra="nosuch")
    try:
        with pytest.raises(ValueError) as err:
            get_spec("nosuchpkg:Thing-v0")
        msg = str(err.value)
        assert "\n" not in msg and "pip install 'gigpo[nosuch]'" in msg and "gigpo_no_such_package" in msg
    finally:
        _PREFIXES.pop("nosuchpkg")


def test_an_unknown_gym_id_lists_close_matches():
    with pytest.raises(ValueError, match=r"unknown gymnasium env 'Taxii-v4'; close matches: gym:Taxi-v4"):
        make("gym:Taxii-v4")


def test_an_empty_id_says_what_to_give():
    with pytest.raises(ValueError, match=r"give an id after 'gym:' \(e.g. gym:FrozenLake-v1\)"):
        get_spec("gym:")


def test_envs_command_lists_the_adapters(capsys):
    assert cli.main(["envs"]) == 0
    out = capsys.readouterr().out
    for line in ("textarena:ID", "gym:ID", "reasoning-gym:ID", "openenv:ID", "verifiers:ID"):
        assert line in out
    assert "gigpo[textarena]" in out


def test_an_unknown_id_is_exit_2_before_any_model_loads(capsys, tmp_path):
    run_dir = tmp_path / "run"
    code = cli.main(["train", "env=gym:FrozenLakee-v1", f"train.run_dir={run_dir}", "model=no-such-model-dir"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "gym:FrozenLake-v1" in err
    assert not run_dir.exists()
