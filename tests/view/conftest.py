"""Real runs for the view tests: two tiny trainings (GiGPO and GRPO, 3 iterations each, a few seconds)."""

import shutil
from pathlib import Path

import pytest

from gigpo.train.config import load_config

SMALL = [
    "model.tiny={english_words: false, hidden_size: 32, intermediate_size: 64}",
    "env.size=3", "env.max_steps=4", "rollout.groups=3", "rollout.group_size=4",
    "optim.micro_batch_size=64", "train.eval_episodes=2", "train.eval_every=0", "train.progress=false",
    "train.checkpoint_every=0", "train.sample_groups=2", "train.iterations=3",
]


def train_run(run_dir: Path, *extra: str) -> Path:
    from gigpo.train.trainer import Trainer

    Trainer(load_config(None, SMALL + [f"train.run_dir={run_dir}", *extra])).train()
    return run_dir


@pytest.fixture(scope="session")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("view_runs")
    return {"gigpo": train_run(root / "gigpo"), "grpo": train_run(root / "grpo", "algorithm=grpo")}


@pytest.fixture
def run_copy(runs, tmp_path) -> Path:
    """A copy of the GiGPO run that a test may damage."""
    return Path(shutil.copytree(runs["gigpo"], tmp_path / "copy"))


@pytest.fixture
def paired_sweep(runs, tmp_path):
    """``paired_sweep(name, *extra_b_runs)``: see :func:`make_paired_sweep` (in this test's tmp_path)."""
    return lambda name, *extra_b_runs: make_paired_sweep(runs, tmp_path, name, *extra_b_runs)


def make_paired_sweep(runs: dict[str, Path], root: Path, name: str, *extra_b_runs: str) -> Path:
    """A sweep folder of the two runs (grpo, gigpo) as seeds 0 and 1 of each cell, with ``NAME_paired.json``
    pairing grpo (A) with gigpo (B); ``extra_b_runs``: more B paths under seeds 2, 3, ... (e.g. outside the sweep)."""
    import json

    sweep = root / "sweep"
    for arm, run in runs.items():
        for seed in (0, 1):
            shutil.copytree(run, sweep / "cells" / f"{arm}-abc" / f"seed{seed}")
    b_runs = {"0": "cells/gigpo-abc/seed0", "1": "cells/gigpo-abc/seed1"}
    b_runs.update({str(2 + i): path for i, path in enumerate(extra_b_runs)})
    pair = {"label": "", "a_iterations": 3, "b_iterations": 3,
            "a_runs": {"0": "cells/grpo-abc/seed0", "1": "cells/grpo-abc/seed1"}, "b_runs": b_runs}
    (sweep / f"{name}_paired.json").write_text(json.dumps(
        {"key": "algorithm", "a": "grpo", "b": "gigpo", "pairs": [pair], "results": None}))
    return sweep


@pytest.fixture(scope="session")
def audited_branched_run(tmp_path_factory) -> Path:
    """A branched GiGPO run (rollout.branch=every) with a `gigpo audit` of its last checkpoint."""
    from gigpo.cli import main

    run = train_run(tmp_path_factory.mktemp("branched") / "run", "rollout.branch=every", "rollout.branching.every=1",
                    "train.sample_groups=3")
    assert main(["audit", str(run), "--states", "8", "--continuations", "2", "--estimators", "grpo,gigpo",
                 "--resamples", "100", "--no-progress"]) == 0
    return run
