"""The algorithm presets ship in the wheel: built, installed outside the source tree, ``algorithm=dapo`` still
gets clip-higher and dynamic sampling (issue 14: they were looked up next to the source checkout only)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]


def _run(cmd: list[str], cwd: Path, **kw) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, **kw)


@pytest.fixture(scope="module")
def wheel_python(tmp_path_factory) -> Path:
    """A venv (seeing this interpreter's site-packages for torch & co., a venv's included) with the freshly
    built gigpo wheel."""
    if shutil.which("git") is None and not (REPO / "pyproject.toml").exists():
        pytest.skip("needs the source tree")
    tmp = tmp_path_factory.mktemp("wheel")
    # build from a copy: an in-tree build writes build/ and *.egg-info into the shared checkout
    src = tmp / "src-copy"
    shutil.copytree(REPO, src, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", "runs", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", "benchmarks", "docs"))
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                  "-w", str(tmp / "dist"), str(src)], cwd=tmp)
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp / "dist").glob("gigpo-*.whl")
    venv.create(tmp / "venv", system_site_packages=False, with_pip=False)
    python = tmp / "venv" / "bin" / "python"
    # The venv sees *this* interpreter's packages (torch & co.): its site-packages directories, which are a
    # venv's own when the tests run in one (``system_site_packages=True`` would give the base interpreter's
    # instead, without torch). Plain path lines in a .pth are appended after the venv's own site-packages and
    # their .pth files are not run, so the source tree's editable install stays out and the wheel's gigpo wins.
    outer = [p for p in sys.path if p.endswith(("site-packages", "dist-packages")) and Path(p).is_dir()]
    (site_dir,) = (tmp / "venv" / "lib").glob("python*/site-packages")
    (site_dir / "outer-packages.pth").write_text("".join(f"{p}\n" for p in outer))
    # the editable install of the source tree is in the system site-packages; the venv's own copy must win
    installed = _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q",
                      "--force-reinstall", "--ignore-installed", str(wheel)], cwd=tmp)
    if installed.returncode != 0 and "no such option: --python" in installed.stderr:
        pytest.skip("pip too old for --python")
    assert installed.returncode == 0, installed.stderr
    return python


def test_wheel_ships_the_algorithm_presets(wheel_python, tmp_path):
    where = _run([str(wheel_python), "-c", "import json, gigpo, gigpo.train.config.presets as p; "
                  "print(json.dumps([gigpo.__file__, str(p.ALGO_PRESET_DIR)]))"], cwd=tmp_path)
    assert where.returncode == 0, where.stderr
    module_file, preset_dir = json.loads(where.stdout)
    assert not Path(module_file).resolve().is_relative_to(REPO), f"imported the source tree: {module_file}"
    assert Path(module_file).resolve().is_relative_to(wheel_python.parent.parent.resolve())
    assert {p.name for p in Path(preset_dir).glob("*.yaml")} >= {"dapo.yaml", "gspo.yaml", "ppo.yaml",
                                                                  "reinforce++.yaml"}

    shown = _run([str(wheel_python), "-m", "gigpo", "train", "--print-config", "algorithm=dapo"], cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    cfg = yaml.safe_load(shown.stdout)
    dapo = yaml.safe_load((REPO / "src/gigpo/configs/algos/dapo.yaml").read_text())
    assert cfg["algorithm"]["name"] == "dapo"
    assert cfg["optim"]["clip_high"] == dapo["optim"]["clip_high"] == 0.28
    assert cfg["rollout"]["dapo"]["dynamic_sampling"] is dapo["rollout"]["dapo"]["dynamic_sampling"] is True
    assert cfg["rollout"]["dapo"]["overlong_buffer"] == dapo["rollout"]["dapo"]["overlong_buffer"]
    # and the --config presets (quickstart is the default) come from the wheel too
    assert cfg["env"]["options"] == {"size": 3, "max_steps": 6, "shaping": 0.1}
