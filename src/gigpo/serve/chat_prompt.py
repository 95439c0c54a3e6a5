"""Per-step chat messages for API models: training's build_messages, the same history window, a character budget."""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass

from gigpo.agent.prompt import PromptBuilder, build_messages, fit_history

#: PromptBuilder fields with no API counterpart (the budget is ``max_chars`` here; no tokenizer, so no chat
#: template whose default system prompt would need suppressing).
TOKEN_ONLY_FIELDS = frozenset({"tokenizer", "max_tokens", "_warned", "_no_default_system"})


@dataclass
class ChatPromptBuilder:
    """The API-side twin of :class:`gigpo.agent.prompt.PromptBuilder`: ``build`` returns the chat messages of
    :func:`build_messages` instead of token ids (the server applies its own chat template).

    Same fields and semantics, except that the budget is ``max_chars`` characters of message content (no tokenizer
    here): too long → drop the oldest history entries first, then keep the end of the observation (prefixed with
    ``…``), warning once per builder. The collector passes the same last-k history window as in training.
    """

    max_chars: int = 8192
    fmt: str = "plain"
    show_admissible: bool = True
    include_instructions: bool = True
    _warned: bool = False

    @classmethod
    def like(cls, builder: PromptBuilder, max_chars: int) -> ChatPromptBuilder:
        """The API twin of a training builder: every semantic field copied (format, admissible list, whether the
        env's instructions are included, ...). A PromptBuilder field this class does not know is an error, so the
        two paths cannot silently drift apart when training prompts gain an option."""
        mine = {f.name for f in dataclasses.fields(cls)}
        theirs = {f.name for f in dataclasses.fields(builder)} - TOKEN_ONLY_FIELDS
        unknown = sorted(theirs - mine)
        if unknown:
            raise TypeError(f"PromptBuilder option(s) {unknown} have no ChatPromptBuilder counterpart")
        return cls(max_chars=max_chars, **{k: getattr(builder, k) for k in theirs})

    def build(
        self,
        instructions: str,
        task: str,
        history: list[tuple[str, str]],
        observation: str,
        admissible: list[str] | None,
    ) -> list[dict[str, str]]:
        adm = admissible if self.show_admissible else None
        if not self.include_instructions:
            instructions = ""
        msgs, fits = fit_history(
            lambda h: build_messages(instructions, task, h, observation, adm, self.fmt), _chars, self.max_chars, history
        )
        if fits:
            return msgs
        size = _chars(msgs)
        if not self._warned:
            warnings.warn(f"prompt longer than {self.max_chars} characters even without history; truncating the "
                          "observation", stacklevel=2)
            self._warned = True
        keep = max(0, len(observation) - (size - self.max_chars) - 1)
        return build_messages(instructions, task, [], "…" + observation[len(observation) - keep:], adm, self.fmt)


def _chars(messages: list[dict[str, str]]) -> int:
    return sum(len(m["content"]) for m in messages)
