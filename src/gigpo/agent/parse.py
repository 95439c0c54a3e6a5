"""Response -> env action: the plain and <think>/<action> formats, and admissibility."""

from __future__ import annotations

import re
from dataclasses import dataclass

_ACTION_RE = re.compile(r"<action>(.*?)</action>", re.DOTALL | re.IGNORECASE)
_THINK_RE = re.compile(r"<think>(.*?)</think>", re.DOTALL | re.IGNORECASE)


@dataclass(frozen=True)
class ParsedAction:
    """``action`` is the text handed to the env (``None`` when the response is invalid); ``error`` says why not."""

    action: str | None
    error: str = ""

    @property
    def valid(self) -> bool:
        return self.action is not None


def parse_response(
    text: str,
    fmt: str = "plain",
    admissible: list[str] | None = None,
    require_think: bool = False,
    raw: bool = False,
) -> ParsedAction:
    """Extract the env action from a model response.

    * ``raw=True``: the env parses responses itself (e.g. Search-R1's tags); the whole text is passed on.
    * ``fmt="plain"``: the first non-empty line, stripped.
    * ``fmt="think-action"``: the content of the last ``<action>…</action>`` (exactly one is required; with
      ``require_think`` a ``<think>…</think>`` before it is required too).

    When ``admissible`` is given, the action must equal one of them (case-insensitive, surrounding whitespace
    ignored); it is returned in the env's own spelling.
    """
    if raw:
        return ParsedAction(text)
    if fmt == "plain":
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        if not lines:
            return ParsedAction(None, "empty response")
        action = lines[0]
    elif fmt == "think-action":
        found = _ACTION_RE.findall(text)
        if len(found) != 1:
            return ParsedAction(None, "expected exactly one <action>…</action>" if found else "no <action>…</action>")
        if require_think:
            think = _THINK_RE.search(text)
            if think is None or think.end() > text.lower().find("<action>"):
                return ParsedAction(None, "no <think>…</think> before the action")
        action = found[0].strip()
        if not action:
            return ParsedAction(None, "empty <action></action>")
    else:
        raise ValueError(f"unknown response format {fmt!r}")
    if admissible is not None:
        lookup = {a.strip().lower(): a for a in admissible}
        hit = lookup.get(action.lower())
        if hit is None:
            return ParsedAction(None, f"inadmissible action {action[:80]!r}")
        action = hit
    return ParsedAction(action)
