"""samples/iter_N.jsonl: whole task groups, every step's R_t, A_E, A_S, A and step group, within the size cap."""

import json

import numpy as np
import pytest

from gigpo.rollout.batch import RolloutBatch, Trajectory
from gigpo.train.config import Config
from gigpo.train.reporting.step_records import choose_groups, read_step_records, write_step_records


def batch_of(groups: dict[int, list[list[float]]], obs_len: int = 5) -> RolloutBatch:
    """Task groups of trajectories given by their rewards; each step's observation names its step."""
    b = RolloutBatch()
    tid = 0
    for g, trajs in groups.items():
        for rewards in trajs:
            t = Trajectory(traj_id=tid, group_id=g, seed=g, won=rewards[-1] > 0, episode_return=sum(rewards),
                           length=len(rewards))
            for s, r in enumerate(rewards):
                obs = f"state {s} " + "x" * obs_len
                b.add_row(group_id=g, traj_id=tid, step=s, reward=r, done=s == len(rewards) - 1, action_valid=True,
                          observation=obs, state_key=s, prompt_ids=[1], response_ids=[2], sampling_logprobs=[0.0])
                t.transcript.append((obs, f"resp {s}", f"act {s}", r))
            b.trajectories.append(t)
            tid += 1
    return b


def test_groups_with_signal_are_chosen_first():
    b = batch_of({0: [[0, 0], [0, 0]], 1: [[0, 1], [0, 0]], 2: [[1], [1]], 3: [[1], [0]]})
    assert choose_groups(b, 2).tolist() == [1, 3]
    assert choose_groups(b, 10).tolist() == [1, 3, 0, 2]


def test_the_file_holds_whole_groups_and_its_parts_add_up(tmp_path):
    cfg = Config()
    cfg.train.sample_groups = 1
    cfg.algorithm.step_weight = 0.5
    b = batch_of({0: [[0, 0, 0], [0, 1]], 1: [[0, 1], [0, 0, 1], [0, 0]]})
    adv = np.arange(len(b), dtype=float)  # A is the trainer's array, written as given
    path = write_step_records(tmp_path / "iter_000001.jsonl", cfg, 1, b, adv)
    header, trajs = read_step_records(path)
    assert header["groups_written"] == [0] and header["groups_total"] == 2 and not header["truncated"]
    assert [t["traj"] for t in trajs] == [0, 1]
    steps = [s for t in trajs for s in t["steps"]]
    assert [s["A"] for s in steps] == adv[:5].tolist()
    # step 0 of both trajectories shares the anchor "state 0 ...": one step group; R_t with gamma 0.95
    assert steps[0]["sg"] == steps[3]["sg"] and steps[1]["sg"] == steps[4]["sg"]
    assert steps[3]["R"] == 0.95 and steps[4]["R"] == 1.0
    assert steps[0]["A_E"] < 0 < steps[3]["A_E"]
    assert steps[0]["A_S"] == -steps[3]["A_S"] != 0
    # exact keys: the largest step groups are the whole batch's, the unwritten task group 1 included
    top = header["largest_groups"]
    assert header["largest_groups_of"] == "the whole batch"
    assert (top[0]["size"], top[0]["trajectories"], top[0]["task_group"]) == (3, 3, 1)
    assert top[0]["anchor"].startswith("state 0") and top[0]["R_std"] > 0
    assert sorted(g["size"] for g in top) == [1, 1, 2, 2, 3, 3]  # states 0, 1, 2 in each task group


def test_the_size_cap_cuts_long_texts_and_leaves_groups_out(tmp_path):
    cfg = Config()
    cfg.train.sample_groups = 8
    cfg.train.sample_max_bytes = 20_000
    b = batch_of({g: [[0, 1], [0, 0]] for g in range(8)}, obs_len=9000)
    path = write_step_records(tmp_path / "iter_000001.jsonl", cfg, 1, b, np.zeros(len(b)))
    assert path.stat().st_size <= 20_000
    header, trajs = read_step_records(path)
    assert header["truncated"] and 0 < len(trajs) < 16
    obs = trajs[0]["steps"][0]["obs"]
    assert len(obs) < 4100 and obs.endswith("more characters]")


def test_a_cut_last_line_reads_as_what_is_complete(tmp_path):
    p = tmp_path / "iter_000001.jsonl"
    p.write_text(json.dumps({"kind": "header", "iteration": 1}) + "\n" +
                 json.dumps({"kind": "trajectory", "traj": 0, "steps": []}) + "\n" + '{"kind": "traj')
    header, trajs = read_step_records(p)
    assert header["iteration"] == 1 and len(trajs) == 1


def test_a_trained_run_writes_consistent_records(tmp_path):
    """A real (tiny) training: for GiGPO the update's A equals A_E + ω·A_S recomputed on the written groups."""
    from tests.view.conftest import train_run

    run = train_run(tmp_path / "run", "train.iterations=2", "algorithm.step_weight=0.7", "train.eval_episodes=0")
    for it in (1, 2):
        header, trajs = read_step_records(run / "samples" / f"iter_{it:06d}.jsonl")
        assert header["algorithm"] == "gigpo" and len(trajs) == 2 * 4
        steps = [s for t in trajs for s in t["steps"] if "A" in s]
        assert steps
        a = np.array([s["A"] for s in steps])
        parts = np.array([s["A_E"] + 0.7 * s["A_S"] for s in steps])
        np.testing.assert_allclose(a, parts, atol=2e-4)


@pytest.mark.parametrize("name,has", [("gigpo", "E S sg"), ("grpo", "E"), ("rloo+step", "E S sg"),
                                      ("ppo+step", "S sg"), ("reinforce++", ""), ("hgpo", "E S")])
def test_each_estimator_writes_the_parts_it_has(name, has):
    from gigpo.train.reporting.step_records import credit_parts

    cfg = Config()
    cfg.algorithm.name = name
    parts = credit_parts(cfg, batch_of({0: [[0, 1], [0, 0, 0]], 1: [[1]]}))
    np.testing.assert_allclose(parts["R"], [0.95, 1.0, 0.0, 0.0, 0.0, 1.0])
    got = {"E": parts["A_E"] is not None, "S": parts["A_S"] is not None, "sg": parts["sg"] is not None}
    assert got == {k: k in has.split() for k in got}
