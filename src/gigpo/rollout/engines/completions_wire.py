r"""What the ``openai`` engine (and the in-process ``vllm`` one) share on the wire: the served model's shape, the
engines' counters, a server's root URL, and the parsing of a completions answer into :class:`Generation`\ s —
vLLM's and gigpo serve's spellings of token ids and log-probs, every malformed answer a one-line
:class:`RemoteEngineError` naming the server."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from gigpo.rollout.registry import Generation, RemoteEngineError


@dataclass(frozen=True)
class ModelShape:
    """Stands where the collector reads ``engine.model.config`` (context length): the served model's HF config.
    Generation itself happens on the servers."""

    config: Any


@dataclass
class EngineStats:
    requests: int = 0
    retries: int = 0
    generations: int = 0
    stale_generations: int = 0  #: generations sampled with weights behind the learner's (within max_staleness)
    max_lag: int = 0

    def metrics(self) -> dict[str, float]:
        return {"rollout/stale_generations": float(self.stale_generations),
                "rollout/max_weights_lag": float(self.max_lag), "rollout/engine_retries": float(self.retries)}


def server_root(base_url: str) -> str:
    """``http://h:p/v1`` → ``http://h:p`` (vLLM's admin routes such as ``/collective_rpc`` sit at the root)."""
    parts = urlsplit(base_url.rstrip("/"))
    path = parts.path[:-3] if parts.path.endswith("/v1") else parts.path
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def _token_ids(choice: dict[str, Any], where: str) -> list[int]:
    """``choices[i].token_ids``, else the ``"token_id:N"`` strings of ``logprobs.tokens``."""
    ids = choice.get("token_ids")
    if isinstance(ids, list) and all(type(t) is int for t in ids):
        return ids
    tokens = (choice.get("logprobs") or {}).get("tokens")
    if isinstance(tokens, list) and all(isinstance(t, str) and t.startswith("token_id:") for t in tokens):
        try:
            return [int(t[len("token_id:"):]) for t in tokens]
        except ValueError:
            pass
    raise RemoteEngineError(f"{where} returned no token ids: the server must support return_token_ids or "
                            "return_tokens_as_token_ids (vLLM does; so does gigpo serve)")


def parse_completions(data: Any, n: int, where: str) -> list[Generation]:
    """``n`` :class:`Generation` objects from a completions body (choices ordered by ``index``)."""
    try:
        choices = sorted(data["choices"], key=lambda c: c["index"])
    except (KeyError, TypeError):
        raise RemoteEngineError(f"{where} answered without choices: {str(data)[:200]}") from None
    if len(choices) != n:
        raise RemoteEngineError(f"{where} returned {len(choices)} choices for {n} prompts")
    out = []
    for c in choices:
        ids = _token_ids(c, where)
        lps = (c.get("logprobs") or {}).get("token_logprobs")
        if not isinstance(lps, list) or len(lps) != len(ids) or any(not isinstance(x, (int, float)) for x in lps):
            raise RemoteEngineError(f"{where} returned {len(ids)} token ids but log-probs {str(lps)[:100]}")
        out.append(Generation(ids, [float(x) for x in lps], str(c.get("text") or "")))
    return out
