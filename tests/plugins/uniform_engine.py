"""A one-file rollout engine, loaded with ``--import uniform_engine`` (tests/train/test_user_plugins.py): every
response token drawn uniformly from the model's vocabulary, so each token's sampling log-prob is −log V exactly.
It reads no weights (a behaviour policy the learner learns from off-policy), so nothing is pushed; its own
option, ``rollout.uniform.seed``, seeds its draws."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gigpo.algo.registry import option
from gigpo.rollout.engines import Capabilities, Generation, register_engine


@dataclass
class UniformOptions:
    seed: int = option(0, "seed of the uniform draws (>= 0)")

    def check(self) -> None:
        if self.seed < 0:
            raise ValueError(f"rollout.uniform.seed must be >= 0, got {self.seed}")


@register_engine("uniform", description="every token uniform over the vocabulary (a test plug-in)")
class UniformEngine:
    options = UniformOptions
    capabilities = Capabilities(data_parallel=True)  # no weights to push: one per rank is sound
    shares_learner_weights = False

    def __init__(self, model, tokenizer, seed: int):
        self.model, self.tokenizer = model, tokenizer
        self.vocab = int(model.config.vocab_size)
        eos = tokenizer.eos_token_id
        self.eos_ids = [int(eos)] if eos is not None else []
        self.rng = np.random.default_rng(seed)
        self.tokens = 0

    @classmethod
    def from_config(cls, cfg, bundle, run_dir):
        return cls(bundle.model, bundle.tokenizer, cfg.rollout.uniform.seed)

    def probe(self) -> None:
        return None

    def generate(self, prompts, *, max_new_tokens, temperature, top_p, constraints=None):
        if constraints is not None and any(c is not None for c in constraints):
            raise ValueError("the uniform engine samples free text (rollout.decoding=free)")
        draws = self.rng.integers(0, self.vocab, size=(len(prompts), max_new_tokens))
        is_eos = np.isin(draws, self.eos_ids)
        lengths = np.where(is_eos.any(1), is_eos.argmax(1) + 1, max_new_tokens)  # up to the first EOS, kept
        toks = [row[:n] for row, n in zip(draws.tolist(), lengths.tolist())]
        texts = self.tokenizer.batch_decode(toks, skip_special_tokens=True)
        self.tokens += int(lengths.sum())
        logp = -float(np.log(self.vocab))
        return [Generation(t, [logp] * len(t), text) for t, text in zip(toks, texts)]

    def push_weights(self, model, version, *, required=False):
        return {}

    def stats(self):
        return {"rollout/uniform_tokens": float(self.tokens)}

    def close(self) -> None:
        return None
