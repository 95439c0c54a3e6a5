"""Per-step prompt: instructions + task + last-k (observation, action) history + observation (+ admissible actions)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

log = logging.getLogger(__name__)

FORMAT_HINTS = {
    "plain": "Reply with the action only.",
    "think-action": "Think step by step inside <think></think>, then give the action inside <action></action>.",
}


def build_messages(
    instructions: str,
    task: str,
    history: list[tuple[str, str]],
    observation: str,
    admissible: list[str] | None,
    fmt: str = "plain",
) -> list[dict[str, str]]:
    """Chat messages for one step: a system message with the env's rules, a user message with the rest.

    The user message is: ``Task`` (if any), ``Step i`` blocks with each past observation and the action taken,
    then ``Current observation`` and (if known) ``Admissible actions``, then the response-format hint.
    """
    parts: list[str] = []
    if task:
        parts.append(f"Task: {task}")
    for i, (obs, act) in enumerate(history):
        parts.append(f"Earlier observation {i + 1}:\n{obs}\nYour action: {act}")
    parts.append(f"Current observation:\n{observation}")
    if admissible:
        parts.append("Admissible actions: " + ", ".join(admissible))
    parts.append(FORMAT_HINTS.get(fmt, ""))
    user = {"role": "user", "content": "\n\n".join(p for p in parts if p)}
    if not instructions.strip():
        return [user]
    return [{"role": "system", "content": instructions.strip()}, user]


T = TypeVar("T")


def fit_history(
    make: Callable[[list[tuple[str, str]]], T], size: Callable[[T], int], budget: int, history: list[tuple[str, str]]
) -> tuple[T, bool]:
    """``make(h)`` for the longest suffix ``h`` of ``history`` (oldest entries dropped first) whose size fits
    ``budget``; returns ``(make(h), True)``, or ``(make([]), False)`` when even no history is too long."""
    hist = list(history)
    while True:
        out = make(hist)
        if size(out) <= budget:
            return out, True
        if not hist:
            return out, False
        hist.pop(0)


@dataclass
class PromptBuilder:
    """Turns messages into token ids for a tokenizer, within ``max_tokens``.

    With a chat template the messages go through it (``add_generation_prompt=True``); without one (the tiny model)
    they are joined as plain text ending in ``"Action:"``. Without instructions, a template's default system
    prompt (SmolLM2's "You are a helpful AI assistant named SmolLM...") is replaced by an empty system message. Too long → drop the oldest history entries first, then
    truncate the observation from the front (keeping its end, which is usually the most recent content), warning
    once per builder.

    An observation too long to fit at all (a 50 MB page) is never tokenized whole: only a tail of it that alone
    holds more than ``max_tokens`` tokens (found by trying longer tails, :meth:`_tail_of`); a history entry with
    such an observation is dropped with every older one, as shrinking the history would do. The prompt is the
    same (measured with the tiny tokenizer: a 5 MB observation took 37 CPU-s and 3.1 GB before, tokenized whole).
    """

    tokenizer: Any
    max_tokens: int = 2048
    fmt: str = "plain"
    show_admissible: bool = True
    include_instructions: bool = True
    _warned: bool = False
    _no_default_system: bool | None = None

    @property
    def has_chat_template(self) -> bool:
        return bool(getattr(self.tokenizer, "chat_template", None))

    def render(self, messages: list[dict[str, str]]) -> list[int]:
        if self.has_chat_template:
            if messages and messages[0]["role"] != "system" and self._empty_system_is_shorter(messages):
                # e.g. SmolLM2's template injects "You are a helpful AI assistant named SmolLM..." otherwise
                messages = [{"role": "system", "content": ""}, *messages]
            return self._apply(messages)
        text = "\n\n".join(m["content"] for m in messages) + "\nAction:"
        # verbose=False: over-long text is expected here (the caller shrinks it), no tokenizer warning wanted
        return self.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]

    def _apply(self, messages: list[dict[str, str]]) -> list[int]:
        ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        return list(ids)

    def _empty_system_is_shorter(self, messages: list[dict[str, str]]) -> bool:
        """Whether the chat template adds a default system prompt that an empty system message avoids (decided
        once per builder: a property of the template)."""
        if self._no_default_system is None:
            plain = self._apply(messages)
            empty = self._apply([{"role": "system", "content": ""}, *messages])
            self._no_default_system = len(empty) < len(plain)
        return self._no_default_system

    def build(
        self,
        instructions: str,
        task: str,
        history: list[tuple[str, str]],
        observation: str,
        admissible: list[str] | None,
    ) -> list[int]:
        adm = admissible if self.show_admissible else None
        if not self.include_instructions:
            instructions = ""
        tail = self._tail_of(observation)
        if tail is not None:  # it cannot fit: only its tail is ever kept (below), so only the tail is tokenized
            observation = tail
        for k in range(len(history) - 1, -1, -1):
            if self._tail_of(history[k][0]) is not None:  # it, and so every older entry, would be dropped
                history = history[k + 1:]
                break
        ids, fits = fit_history(
            lambda h: self.render(build_messages(instructions, task, h, observation, adm, self.fmt)),
            len,
            self.max_tokens,
            history,
        )
        if fits:
            return ids
        # Even without history it does not fit: keep the tail of the observation.
        self._warn(f"prompt longer than {self.max_tokens} tokens even without history; truncating the observation")
        obs_ids = self.tokenizer(observation, add_special_tokens=False, verbose=False)["input_ids"]
        # the first guess of how many tail tokens fit depends on the prompt around the observation only (not on the
        # observation's length), so a tail of the observation (see _tail_of) is cut exactly as the whole would be
        around = len(self.render(build_messages(instructions, task, [], "…", adm, self.fmt)))
        keep = max(0, min(len(obs_ids), self.max_tokens - around - 8))
        while True:
            short_obs = "…" + self.tokenizer.decode(obs_ids[len(obs_ids) - keep:]) if keep else "…"
            ids = self.render(build_messages(instructions, task, [], short_obs, adm, self.fmt))
            if len(ids) <= self.max_tokens or keep == 0:
                break
            keep = max(0, keep - max(1, (len(ids) - self.max_tokens) + 4))
        if len(ids) > self.max_tokens:
            # Instructions + task alone exceed the budget: keep the end (generation prompt must survive).
            ids = ids[-self.max_tokens:]
        return ids

    def _tail_of(self, text: str) -> str | None:
        """The shortest tail of ``text`` found (tried at 8, 32, 128, ... characters per budget token) that alone
        tokenizes to more than ``max_tokens`` (+ a margin, so the cut's own boundary never reaches what is kept);
        None when ``text`` has no such tail (it is short enough to tokenize whole)."""
        size, need = 8 * self.max_tokens, self.max_tokens + 16
        while size < len(text):
            tail = text[-size:]
            if len(self.tokenizer(tail, add_special_tokens=False, verbose=False)["input_ids"]) >= need:
                return tail
            size *= 4
        return None

    def _warn(self, msg: str) -> None:
        if not self._warned:  # a log line, not warnings.warn: that echoes a line of gigpo's source after it
            log.warning("%s (once per run; raise prompt.max_prompt_tokens or shorten the observations)", msg)
            self._warned = True
