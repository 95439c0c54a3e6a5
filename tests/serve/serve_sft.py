"""A real (briefly trained) gridgoal checkpoint for the serving tests: supervised steps towards the oracle move."""

from __future__ import annotations

import random
from pathlib import Path

import torch

from gigpo.agent.prompt import PromptBuilder
from gigpo.envs import make


def oracle_move(agent: tuple[int, int], goal: tuple[int, int]) -> str:
    """Rows first, then columns: a shortest path to the goal."""
    if agent[0] != goal[0]:
        return "down" if goal[0] > agent[0] else "up"
    return "right" if goal[1] > agent[1] else "left"


def train_gridgoal_checkpoint(out_dir: Path, *, steps: int, seed: int = 0, batch: int = 32, lr: float = 3e-3) -> Path:
    """Teach the tiny model the oracle move on the quickstart prompt for ``steps`` Adam steps; save it in HF format.

    Few steps leave a partly trained policy (some seeds won, some not), which makes success comparisons informative.
    """
    from gigpo.models import load_model, save_pretrained

    bundle = load_model("tiny", device="cpu", seed=seed)
    model, tok = bundle.model, bundle.tokenizer
    builder = PromptBuilder(tok, 2048, "plain", False)
    env = make("gridgoal", size=4, max_steps=8)
    rng = random.Random(seed)
    examples: list[tuple[list[int], int]] = []
    for _ in range(256):
        obs, info = env.reset(rng.randrange(2**30))
        agent, goal = info["state_key"]
        ids = builder.build(env.instructions, info["task"], [], obs, None)
        target = tok(oracle_move(agent, goal), add_special_tokens=False)["input_ids"][0]
        examples.append((ids, target))
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        pick = torch.randint(len(examples), (batch,), generator=gen).tolist()
        rows = [examples[i] for i in pick]
        width = max(len(r[0]) for r in rows)
        ids = torch.full((batch, width), tok.pad_token_id)
        mask = torch.zeros((batch, width), dtype=torch.long)
        for r, (p, _) in enumerate(rows):
            ids[r, width - len(p):] = torch.tensor(p)
            mask[r, width - len(p):] = 1
        logits = model(input_ids=ids, attention_mask=mask).logits[:, -1]
        loss = torch.nn.functional.cross_entropy(logits, torch.tensor([t for _, t in rows]))
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    return save_pretrained(bundle, out_dir)
