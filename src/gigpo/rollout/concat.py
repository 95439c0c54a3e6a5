"""Concatenated-history rollouts (RAGEN / StarPO style): env turn tokens, context limits, step rows → one sequence.

In ``rollout.mode=concat`` the collector's prompt for turn t is the whole interaction so far,
``prompt_1 + response_1 + env_2 + response_2 + … + env_t``, built from token ids (never re-tokenised text), so
the sequence trained on is exactly the one sampled. The collector still records one row per step (with that
growing prompt); :func:`to_concat_batch` then folds each trajectory's rows into one row whose "response" is
everything after ``prompt_1`` and whose ``loss_mask`` is 1 on agent tokens and 0 on env tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gigpo.agent.prompt import build_messages
from gigpo.rollout.batch import COLUMNS, RolloutBatch

MODES = ("step", "concat")
CONTEXT_POLICIES = ("stop", "truncate")


@dataclass
class ConcatBatch(RolloutBatch):
    """A :class:`RolloutBatch` with one row per trajectory *segment* and a per-token ``loss_mask`` over its
    ``response_ids`` (1 = the agent produced this token, 0 = env/template token). ``sampling_logprobs`` hold 0
    at env tokens. A trajectory has several segments only when ``context_limit_policy=truncate`` dropped old
    turns; each segment's reward is the sum of its turns' rewards, so R(τ) = Σ_rows reward still holds."""

    loss_mask: list[list[int]] = field(default_factory=list)
    agent_tokens: int = 0

    def drop_trajectories(self, traj_ids: set[int]) -> ConcatBatch:
        keep = [i for i, t in enumerate(self.traj_id) if t not in traj_ids]
        out = ConcatBatch(trajectories=self.trajectories)
        for name in (*COLUMNS, "loss_mask"):
            col = getattr(self, name)
            setattr(out, name, [col[i] for i in keep])
        out.agent_tokens = sum(sum(m) for m in out.loss_mask)
        return out


def turn_suffix_ids(builder: Any, observation: str, admissible: list[str] | None) -> list[int]:
    """Env tokens that follow an agent response and precede the next one: the new observation as a user turn.

    With a chat template: the tokens the template adds for ``[user(obs), <generation prompt>]`` after an
    assistant turn, read as the difference of two renderings around a fixed dummy exchange (so templates that
    inject a default system message do not leak it mid-sequence). Without one (the tiny model): the plain-text
    layout of :class:`gigpo.agent.prompt.PromptBuilder`, ``"\\n\\n" + content + "\\nAction:"``.
    """
    adm = admissible if builder.show_admissible else None
    user = build_messages("", "", [], observation, adm, builder.fmt)[-1]
    tok = builder.tokenizer
    if not builder.has_chat_template:
        return tok("\n\n" + user["content"] + "\nAction:", add_special_tokens=False)["input_ids"]
    head = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]
    base = _ids(tok.apply_chat_template(head, add_generation_prompt=False, tokenize=True))
    full = _ids(tok.apply_chat_template([*head, user], add_generation_prompt=True, tokenize=True))
    if full[:len(base)] != base:
        raise ValueError("the chat template does not render a conversation as a prefix of its continuation; "
                         "rollout.mode=concat cannot be used with this tokenizer")
    return full[len(base):]


def _ids(x: Any) -> list[int]:
    if isinstance(x, dict) or hasattr(x, "keys"):
        x = x["input_ids"]
    return list(x)


def fit_context(first: list[int], turns: list[list[int]], tail: list[int], budget: int) -> tuple[list[int], int] | None:
    """``(first + turns[k:] + tail, k)`` for the smallest k that fits in ``budget`` tokens (drop the oldest turns
    first; ``first`` — instructions, task, first observation — always stays), or None when even
    ``first + tail`` does not fit."""
    size = len(first) + len(tail) + sum(len(t) for t in turns)
    k = 0
    while size > budget and k < len(turns):
        size -= len(turns[k])
        k += 1
    if size > budget:
        return None
    return [*first, *(i for t in turns[k:] for i in t), *tail], k


def to_concat_batch(batch: RolloutBatch) -> ConcatBatch:
    """Fold step rows (collected in concat mode) into one row per trajectory segment.

    Consecutive steps t−1, t of a trajectory belong to one segment when prompt_t extends
    prompt_{t−1} + response_{t−1}; the tokens in between are env tokens (mask 0). The segment's row: prompt =
    the first step's prompt, response = the rest of the final sequence, loss_mask marking the responses,
    reward = Σ of its steps' rewards, step = segment index, done = the last step's, action_valid = all steps
    valid, observation/state_key = the first step's (the anchor of a trajectory-level row).
    """
    out = ConcatBatch(trajectories=batch.trajectories)
    rows_of: dict[int, list[int]] = {}
    for i, t in enumerate(batch.traj_id):
        rows_of.setdefault(t, []).append(i)
    for rows in rows_of.values():
        rows.sort(key=lambda i: batch.step[i])
        seg: list[int] = []
        seg_idx = 0
        for i in rows:
            if seg:
                prev = seg[-1]
                head = batch.prompt_ids[prev] + batch.response_ids[prev]
                if batch.prompt_ids[i][:len(head)] != head:
                    _emit(out, batch, seg, seg_idx)
                    seg_idx += 1
                    seg = []
            seg.append(i)
        _emit(out, batch, seg, seg_idx)
    out.agent_tokens = sum(sum(m) for m in out.loss_mask)
    return out


def _emit(out: ConcatBatch, batch: RolloutBatch, seg: list[int], seg_idx: int) -> None:
    first, last = seg[0], seg[-1]
    prompt = batch.prompt_ids[first]
    resp: list[int] = []
    mask: list[int] = []
    lps: list[float] = []
    allowed: list[list[int] | None] = []
    constrained = any(batch.allowed_tokens[i] is not None for i in seg)
    for j, i in enumerate(seg):
        if j:  # env tokens between the previous response and this one
            env = batch.prompt_ids[i][len(prompt) + len(resp):]
            resp += env
            mask += [0] * len(env)
            lps += [0.0] * len(env)
            allowed += [None] * len(env)
        allowed += batch.allowed_tokens[i] or [None] * len(batch.response_ids[i])
        resp += batch.response_ids[i]
        mask += [1] * len(batch.response_ids[i])
        lps += list(batch.sampling_logprobs[i])
    out.add_row(
        group_id=batch.group_id[first], traj_id=batch.traj_id[first], step=seg_idx,
        reward=float(sum(batch.reward[i] for i in seg)), done=batch.done[last],
        action_valid=all(batch.action_valid[i] for i in seg), observation=batch.observation[first],
        state_key=batch.state_key[first], prompt_ids=list(prompt), response_ids=resp, sampling_logprobs=lps,
        loss_mask=mask, allowed_tokens=allowed if constrained else None,
    )
