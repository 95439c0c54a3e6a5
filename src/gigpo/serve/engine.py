"""The OpenAI-compatible chat engine: the collector's ``generate`` interface over ``/chat/completions``."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import FIRST_EXCEPTION, wait
from typing import Any

from gigpo.apiclient import APIError, ChatClient, Usage
from gigpo.rollout.registry import Generation

log = logging.getLogger(__name__)

#: An API reply is cut to max(MIN_REPLY_CHARS, CHARS_PER_TOKEN × the tokens asked for) characters: a server that
#: sends more ignored ``max_tokens`` (measured before the cap: 9 MB replies wrote 207 MB for 2 episodes).
MIN_REPLY_CHARS = 4096
CHARS_PER_TOKEN = 32


class OpenAIEngine:
    """``generate(prompts, ...)`` where each prompt is a list of chat messages (:class:`ChatPromptBuilder`).

    All prompts of a call are sent concurrently through ``client.executor`` (at most ``client.concurrency`` in
    flight across every engine sharing the client). ``temperature=0`` is sent as is (greedy on servers that honour
    it). ``max_new_tokens`` becomes ``max_tokens_field`` (``max_tokens``; some reasoning models want
    ``max_completion_tokens``). ``extra_body`` is merged into every request. ``usage`` accumulates what the server
    reported. Generations carry the text only (``token_ids``/``logprobs`` empty): an API agent is evaluated, not
    trained. A request that fails after the client's retries raises :class:`APIError` out of ``generate``.
    A reply longer than ``max(MIN_REPLY_CHARS, CHARS_PER_TOKEN × max_new_tokens)`` characters is cut there, with
    one warning per engine (``usage`` still counts what the server reported).
    """

    def __init__(
        self,
        client: ChatClient,
        model: str,
        *,
        max_tokens_field: str = "max_tokens",
        extra_body: dict[str, Any] | None = None,
    ):
        self.client = client
        self.model = model
        self.max_tokens_field = max_tokens_field
        self.extra_body = dict(extra_body or {})
        self.usage = Usage()
        self._lock = threading.Lock()
        self._warned_cut = False

    def generate(
        self, prompts: list[Any], *, max_new_tokens: int, temperature: float = 0.0, top_p: float = 1.0
    ) -> list[Generation]:
        if not prompts:
            return []
        futures = [self.client.executor.submit(self._one, p, max_new_tokens, temperature, top_p) for p in prompts]
        # Wait for all (or the first failure) so no request of this turn outlives the call unnoticed.
        done, pending = wait(futures, return_when=FIRST_EXCEPTION)
        for f in pending:
            f.cancel()
        wait(pending)
        return [f.result() for f in futures]

    def _one(self, messages: Any, max_new_tokens: int, temperature: float, top_p: float) -> Generation:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            self.max_tokens_field: int(max_new_tokens),
            "temperature": float(temperature),
            "top_p": float(top_p),
            **self.extra_body,
        }
        try:
            res = self.client.chat(body)
        except APIError as e:
            with self._lock:
                self.usage.failed_requests += 1
                self.usage.retries += max(0, e.attempts - 1)
            raise
        text, usage = _parse_completion(res.data)
        limit = max(MIN_REPLY_CHARS, CHARS_PER_TOKEN * int(max_new_tokens))
        if len(text) > limit:
            with self._lock:
                first, self._warned_cut = not self._warned_cut, True
            if first:
                log.warning("%s sent a reply of %d characters for max_tokens=%d; replies are cut to %d characters",
                            self.client.base_url, len(text), max_new_tokens, limit)
            text = text[:limit]
        with self._lock:
            self.usage.requests += 1
            self.usage.retries += res.retries
            self.usage.prompt_tokens += int(usage.get("prompt_tokens") or 0)
            self.usage.completion_tokens += int(usage.get("completion_tokens") or 0)
        return Generation([], [], text)


def _parse_completion(data: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(assistant text, usage) of a chat.completion body; a body without choices is an APIError."""
    try:
        message = data["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        raise APIError(f"response has no choices[0].message: {str(data)[:200]}") from None
    content = message.get("content") or ""
    if isinstance(content, list):  # content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content), dict(data.get("usage") or {})
