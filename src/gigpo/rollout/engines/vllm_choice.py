"""Constrained decoding over vLLM (both ``rollout.engine=openai`` on a vLLM server and ``rollout.engine=vllm``):
each step's admissible actions go out as vLLM's ``structured_outputs.choice``, and the allowed token set of every
returned token is rebuilt here exactly as vLLM's grammar backend applied it, for the learner to re-apply.

vLLM (0.32, default backend xgrammar) turns ``choice`` into the grammar ``root ::= "a" | "b" | ...`` and, at each
token, allows every token whose text keeps the output a prefix of some choice — *any* tokenisation of it, not
only the canonical one — and the stop tokens once the output is a complete choice; sampling then renormalises
over that set (``--logprobs-mode processed_logprobs`` reports the log-prob of that distribution). Replaying the
returned tokens through an ``xgrammar.GrammarMatcher`` compiled the same way (same tokenizer, vocabulary size
and stop tokens) gives those sets, so the learner's renormalised log-probs equal the sampler's (tested ≤ 1e-4 in
``tests/vllm/``). This needs the ``xgrammar`` package in the learner's environment, of the server's version
(it comes with vLLM).

Differences from the in-process hf engine's trie (:mod:`gigpo.agent.constrained`), which the learner does not
need to know since it re-applies whatever sets are recorded: any tokenisation of an action may be sampled; the
end is an emitted stop token (its log-prob is 0 when it is the only one allowed); no leading-space spelling; no
token-budget look-ahead (a choice cut by ``max_response_tokens`` is an invalid action). Refused with one clear
line: the ``think-action`` format and free-text slots (``name[<placeholder>]`` actions), which a choice list
cannot express.
"""

from __future__ import annotations

from typing import Any

import torch

from gigpo.agent.constrained import TEMPLATE
from gigpo.rollout.registry import EngineError, Generation


def choice_grammar(choices: list[str]) -> str:
    """vLLM's EBNF for ``structured_outputs.choice`` (``vllm.v1.structured_output.utils.choice_as_grammar``)."""
    escapes = {"\\": r"\\", '"': r"\"", "\n": r"\n", "\r": r"\r", "\t": r"\t"}

    def esc(s: str) -> str:
        return "".join(escapes.get(ch, ch) for ch in s)

    return "root ::= " + " | ".join(f'"{esc(c)}"' for c in choices)


def choices_of(constraint: Any) -> list[str]:
    """The admissible actions of an :class:`gigpo.agent.constrained.ActionConstraint`, or EngineError for what a
    choice list cannot express."""
    if getattr(constraint, "fmt", "plain") != "plain":
        raise EngineError("rollout.decoding=constrained with the think-action format needs rollout.engine=hf "
                          "(vLLM's structured_outputs.choice cannot leave the thinking part free)")
    actions = list(constraint.trie.actions)
    slots = [a for a in actions if TEMPLATE.fullmatch(a)]
    if slots and constraint.trie.slot_ids is not None:
        raise EngineError(f"admissible action {slots[0]!r} is a free-text slot: rollout.decoding=constrained "
                          "with slots needs rollout.engine=hf (a vLLM choice list cannot hold a free query)")
    return actions


class ChoiceReplay:
    """xgrammar matchers built as vLLM builds them, one compiled grammar per distinct choice list (cached)."""

    def __init__(self, tokenizer: Any, vocab_size: int, stop_ids: list[int]):
        try:
            import xgrammar as xgr
        except ImportError:
            raise EngineError("constrained decoding over vLLM needs the xgrammar package in the learner's "
                              "environment (the server's version; it comes with vLLM): pip install xgrammar") from None
        self.xgr = xgr
        self.vocab_size = int(vocab_size)
        self.stop_ids = sorted(set(stop_ids))
        info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=self.vocab_size)
        self.compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=True)
        self.bits = torch.arange(32, dtype=torch.int64)

    def allowed_sets(self, choices: list[str], token_ids: list[int]) -> list[list[int]]:
        """Per token of ``token_ids``, the ids vLLM allowed there; EngineError at a token it could not have
        sampled (a server whose grammar differs, e.g. another xgrammar version)."""
        xgr = self.xgr
        matcher = xgr.GrammarMatcher(self.compiler.compile_grammar(choice_grammar(choices)),
                                     override_stop_tokens=self.stop_ids)
        mask = xgr.allocate_token_bitmask(1, self.vocab_size)
        out: list[list[int]] = []
        for tok in token_ids:
            matcher.fill_next_token_bitmask(mask)
            words = mask[0].to(torch.int64) & 0xFFFFFFFF
            keep = ((words.unsqueeze(-1) >> self.bits) & 1).flatten()[:self.vocab_size]
            ids = torch.nonzero(keep).flatten().tolist()
            if tok not in ids or not matcher.accept_token(tok):
                raise EngineError(f"vLLM sampled token {tok}, which its choice grammar does not allow here: is the "
                                  "server's tokenizer or xgrammar version the learner's?")
            out.append(ids)
        return out


def replay_of(engine: Any) -> ChoiceReplay:
    replay = getattr(engine, "_choice_replay", None)
    if replay is None:
        vocab = getattr(getattr(engine.model, "config", None), "vocab_size", None) or len(engine.tokenizer)
        replay = engine._choice_replay = ChoiceReplay(engine.tokenizer, vocab, engine.eos_ids)
    return replay


def generate_constrained(engine: Any, prompts: list[list[int]], constraints: list[Any], max_new_tokens: int,
                         temperature: float, top_p: float) -> list[Generation]:
    """Sample ``prompts`` on a vLLM engine with each prompt's actions as ``structured_outputs.choice``; free
    prompts (constraint None) are sampled unconstrained. Generations carry ``action`` and ``allowed``."""
    if engine.tokenizer is None:
        raise EngineError("constrained decoding over vLLM needs the learner's tokenizer on the engine")
    replay = replay_of(engine)
    choice_lists = [choices_of(c) if c is not None else None for c in constraints]
    gens = engine.sample_with_choices(prompts, choice_lists, max_new_tokens, temperature, top_p)
    out = []
    for g, choices in zip(gens, choice_lists, strict=True):
        if choices is None:
            out.append(g)
            continue
        allowed = replay.allowed_sets(choices, g.token_ids)
        body = [t for t in g.token_ids if t not in replay.stop_ids]
        text = engine.tokenizer.decode(body, skip_special_tokens=True)
        action = text if text in choices else None  # None: cut by the token budget before a choice completed
        out.append(Generation(g.token_ids, g.logprobs, text, action=action, allowed=allowed))
    return out
