"""Does a policy's move depend on the grid at all? (issue 42's diagnosis.) For every start state of a gridgoal grid
(P and G on distinct cells: 16 × 15 = 240 on 4 × 4), the policy's distribution over the four moves under
constrained decoding at temperature 1 — the softmax of the first-token logits restricted to the four words' first
tokens, exactly the sampler's first choice — built with the run's own prompt settings. Printed per model:

* I(S; A): the mutual information between state and move, in nats (0 = the same distribution on every grid;
  ln 4 = 1.386 = a deterministic move that differs across states as much as it can);
* H(A | S): the mean per-state entropy (the sampler's spread);
* P(closer): the mean probability of a move that brings P closer to G (1.0 = an optimal policy, 0.5 roughly for a
  uniform one on a 4 × 4 grid);
* argmax closer: the share of states whose most likely move is a closer one — what greedy evaluation plays;
* argmax moves: how often each move is the most likely one.

    python benchmarks/gridgoal_policy_map.py smollm2-135m RUN/checkpoints/iter_000060 ... [--config smollm2-gridgoal]

About 20 CPU-s per model (240 prompts of ~100 tokens, one forward each, in batches of 48).
"""

from __future__ import annotations

import argparse
import math

import torch
from gridgoal_moves import move_effect  # this folder is on sys.path when run as a script

from gigpo.envs.gridgoal import ACTIONS, GridGoalEnv
from gigpo.models import load_model
from gigpo.train.compose import build_prompt_builder, env_factory
from gigpo.train.config import load_config


def states(size: int) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    cells = [divmod(i, size) for i in range(size * size)]
    return [(p, g) for p in cells for g in cells if p != g]


def closer_moves(p: tuple[int, int], g: tuple[int, int], size: int) -> list[bool]:
    """Per move of ``ACTIONS``: does it bring P closer to G."""
    return [move_effect(p, g, a, size) < 0 for a in ACTIONS]


@torch.no_grad()
def move_probs(model_name: str, cfg, batch: int = 48) -> tuple[torch.Tensor, list, int]:
    """(states × 4) move probabilities, the states in ``states(size)`` order, and the grid size."""
    path = model_name
    if "/checkpoints/" in model_name or model_name.rstrip("/").split("/")[-1].startswith("iter_"):
        path = model_name.rstrip("/") + "/model"
    bundle = load_model(path, device="cpu", dtype="float32", seed=cfg.train.seed)
    tok, model = bundle.tokenizer, bundle.model.eval()
    builder = build_prompt_builder(cfg, None, tok)
    first = [tok(a, add_special_tokens=False)["input_ids"][0] for a in ACTIONS]
    assert len(set(first)) == len(first), "the four moves must start with distinct tokens"
    env = env_factory(cfg)()
    assert isinstance(env, GridGoalEnv), f"a gridgoal config is needed, got {cfg.env.name}"
    all_states = states(env.size)
    prompts = []
    for p, g in all_states:
        env._agent, env._goal = p, g  # the state itself; render() is a pure function of it
        prompts.append(builder.build(env.instructions, env.task, [], env.render(), list(ACTIONS)))
    probs = []
    for i in range(0, len(prompts), batch):
        chunk = prompts[i:i + batch]
        width = max(map(len, chunk))
        pad = tok.pad_token_id if tok.pad_token_id is not None else 0
        ids = torch.tensor([[pad] * (width - len(c)) + c for c in chunk])  # left-padded: the last position is real
        mask = torch.tensor([[0] * (width - len(c)) + [1] * len(c) for c in chunk])
        pos = (mask.cumsum(1) - 1).clamp(min=0)
        logits = model(input_ids=ids, attention_mask=mask, position_ids=pos).logits[:, -1, :]
        probs.append(torch.softmax(logits[:, first].float(), dim=-1))
    return torch.cat(probs), all_states, env.size


def report(name: str, probs: torch.Tensor, all_states: list, size: int) -> str:
    closer = torch.tensor([closer_moves(p, g, size) for p, g in all_states], dtype=torch.float32)
    marginal = probs.mean(0)
    h_cond = -(probs * probs.clamp_min(1e-12).log()).sum(1).mean().item()
    h_marg = -(marginal * marginal.clamp_min(1e-12).log()).sum().item()
    best = probs.argmax(1)
    argmax_closer = closer[torch.arange(len(best)), best].mean().item()
    counts = torch.bincount(best, minlength=len(ACTIONS)).tolist()
    moves = ", ".join(f"{a} {c / len(best):.2f}" for a, c in zip(ACTIONS, counts))
    return (f"| {name} | {h_marg - h_cond:.3f} | {h_cond:.3f} | {(probs * closer).sum(1).mean().item():.3f} | "
            f"{argmax_closer:.3f} | {moves} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+", help="model names or checkpoint dirs")
    ap.add_argument("--config", default="smollm2-gridgoal", help="the prompt and grid settings (default: %(default)s)")
    args = ap.parse_args()
    cfg = load_config(args.config, None)
    torch.manual_seed(0)
    print("| model | I(S; A) nats | H(A given S) | P(closer) | argmax closer | argmax moves |")
    print("|---|---|---|---|---|---|")
    for name in args.models:
        probs, all_states, size = move_probs(name, cfg)
        print(report(name, probs, all_states, size), flush=True)
    print(f"({len(all_states)} states; ln 4 = {math.log(4):.3f})")


if __name__ == "__main__":
    main()
