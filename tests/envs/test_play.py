"""play(): a scripted "person" plays envs through input_fn / print_fn."""

from __future__ import annotations

from gigpo.envs import make
from gigpo.envs.gridgoal import GridGoalEnv
from gigpo.envs.play import play


class Script:
    """input_fn returning the given lines in order, then raising EOFError (like a closed stdin)."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = list(lines)
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        if not self.lines:
            raise EOFError
        return self.lines.pop(0)


def winning_moves(env: GridGoalEnv, seed: int) -> list[str]:
    (ar, ac), (gr, gc) = env.reset(seed)[1]["state_key"]
    vert = ["down" if gr > ar else "up"] * abs(gr - ar)
    return vert + ["right" if gc > ac else "left"] * abs(gc - ac)


def test_scripted_win_shows_everything():
    env = GridGoalEnv()
    moves = winning_moves(env, 3)
    out: list[str] = []
    script = Script(["dance", *moves])
    result = play(env, 3, input_fn=script, print_fn=lambda *a: out.append(" ".join(map(str, a))))
    text = "\n".join(out)
    assert result.won and result.done and result.steps == len(moves) + 1 and result.total_reward == 1.0
    assert env.instructions in text and "Task: Move P to G." in text
    assert "Actions: up, down, left, right" in text and "invalid action" in text and "You won!" in text
    assert text.count("--- step") == len(moves) + 1 and len(script.prompts) == len(moves) + 1


def test_quit_and_end_of_input_stop_early():
    out: list[str] = []
    result = play(GridGoalEnv(), 0, input_fn=Script(["QUIT"]), print_fn=out.append)
    assert (result.steps, result.done, result.won) == (0, False, False) and "Stopped after 0 steps" in out[-1]
    result = play(make("sokoban"), 0, input_fn=Script(["left", "up"]), print_fn=lambda *a: None)
    assert result.steps == 2 and not result.done


def test_noisy_env_episode_runs_to_the_step_cap():
    out: list[str] = []
    env = make("gridgoal-noisy", ad_rate=1.0, max_steps=3)
    result = play(env, 1, input_fn=Script(["nope"] * 5), print_fn=out.append)
    assert result.done and not result.won and result.steps == 3 and "Episode over." in out[-1]
