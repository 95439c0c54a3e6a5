"""The ``openai`` rollout engine: sampling on OpenAI-compatible *completions* servers (vLLM, SGLang, `gigpo serve`).

What is trained must be exactly what was sampled, so the engine never round-trips through text: prompts go out
as token ids (``"prompt": [[ids], ...]``), and each response comes back as token ids with the log-probability of
every sampled token — vLLM's ``return_token_ids`` (``choices[i].token_ids``), else its
``return_tokens_as_token_ids`` spelling ``"token_id:123"`` in ``logprobs.tokens``. A server that returns
neither is an error, never a silent re-tokenisation.

The prompts of one ``generate`` call are split into ``len(urls)`` contiguous chunks (sizes differ by at most
one), one batched request per server, sent concurrently. Failed requests are retried by
:class:`gigpo.apiclient.ChatClient` (connection errors, timeouts, 408/409/429/5xx; exponential backoff with
jitter); when the retries are spent :class:`RemoteEngineError` says which server and why.

**Weights versions.** The learner pushes its weights after each update (:mod:`gigpo.train.weight_sync`) and
sets :attr:`learner_version`; each server's version is what it reports (``weights_version`` in the body, as
`gigpo serve` does) or else the last version pushed to it successfully (:attr:`server_versions`). A response
``lag = learner_version − server_version`` behind is counted in :attr:`stale_generations` when
``0 < lag ≤ max_staleness`` and refused with :class:`StaleWeightsError` beyond.

Log-probs: `gigpo serve` returns those of the distribution sampled from (after temperature / top-p), like
:class:`gigpo.rollout.engine.HFEngine`; vLLM returns the raw model's unless started with
``--logprobs-mode processed_logprobs``. Either way the learner recomputes old log-probs by default
(``optim.recompute_old_logprobs``) and logs the gap.
"""

from __future__ import annotations

import threading
from concurrent.futures import FIRST_EXCEPTION, wait
from dataclasses import dataclass
from typing import Any

from gigpo.apiclient import APIError, ChatClient
from gigpo.rollout.engine import Generation


class RemoteEngineError(RuntimeError):
    """A generation request that failed for good (server unreachable, retries spent, a malformed answer)."""


class StaleWeightsError(RemoteEngineError):
    """A server answered with weights more than ``max_staleness`` versions behind the learner's."""


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


class CompletionsEngine:
    """``generate(prompts, ...)`` over ``POST {url}/completions`` on each of ``urls`` (OpenAI base URLs, ``…/v1``).

    ``model``: the served model id (``--served-model-name``); ``eos_ids``: the tokenizer's end tokens (what the
    collector closes a concat turn with); ``model_config``: the HF config of the served model, for context-length
    clamps. ``extra_body`` is merged into every request (e.g. vLLM's ``{"skip_special_tokens": false}``).
    """

    def __init__(self, urls: list[str], model: str, *, eos_ids: list[int], model_config: Any = None,
                 timeout_s: float = 300.0, max_retries: int = 5, backoff_base_s: float = 0.5,
                 backoff_max_s: float = 30.0, max_staleness: int = 0, extra_body: dict[str, Any] | None = None,
                 seed: int = 0):
        if not urls:
            raise ValueError("the openai engine needs at least one URL (rollout.engine_urls)")
        self.urls = [u.rstrip("/") for u in urls]
        self.clients = [ChatClient(u, timeout=timeout_s, max_retries=max_retries, backoff_base=backoff_base_s,
                                   backoff_max=backoff_max_s, concurrency=2, seed=seed + k)
                        for k, u in enumerate(self.urls)]
        self.served_model = model
        self.eos_ids = list(eos_ids)
        self.model = ModelShape(model_config)
        self.max_staleness = int(max_staleness)
        self.extra_body = dict(extra_body or {})
        self.learner_version = 0
        self.server_versions = [0] * len(self.urls)
        self.stats = EngineStats()
        self._lock = threading.Lock()

    def probe(self) -> None:
        """Every URL must answer ``GET /models`` (connection errors not retried): called before the first rollout,
        so an unreachable server is one clear error, not a failure mid-run."""
        bad = []
        for c in self.clients:
            try:
                c.request_json("GET", "/models", retry_connect=False, max_retries=1)
            except APIError as e:
                bad.append(f"{c.base_url} ({e})")
        if bad:
            raise RemoteEngineError(f"rollout engine server(s) not reachable: {'; '.join(bad)}")

    def generate(self, prompts: list[list[int]], *, max_new_tokens: int, temperature: float = 1.0,
                 top_p: float = 1.0, constraints: list[Any] | None = None) -> list[Generation]:
        if constraints is not None and any(c is not None for c in constraints):
            raise RemoteEngineError("constrained decoding (rollout.decoding=constrained) needs the in-process hf "
                                    "engine: remote servers do not return the per-token allowed sets the learner "
                                    "re-applies")
        if not prompts:
            return []
        k = len(self.clients)
        bounds = [len(prompts) * i // k for i in range(k + 1)]
        futures = [self.clients[i].executor.submit(self._request, i, prompts[bounds[i]:bounds[i + 1]],
                                                   max_new_tokens, temperature, top_p)
                   for i in range(k) if bounds[i + 1] > bounds[i]]
        done, pending = wait(futures, return_when=FIRST_EXCEPTION)
        for f in pending:
            f.cancel()
        wait(pending)
        return [g for f in futures for g in f.result()]

    def _request(self, i: int, prompts: list[list[int]], max_new_tokens: int, temperature: float,
                 top_p: float) -> list[Generation]:
        body = {"model": self.served_model, "prompt": [list(map(int, p)) for p in prompts],
                "max_tokens": int(max_new_tokens), "temperature": float(temperature), "top_p": float(top_p),
                "n": 1, "logprobs": 1, "return_tokens_as_token_ids": True, "return_token_ids": True,
                **self.extra_body}
        client = self.clients[i]
        try:
            res = client.request_json("POST", "/completions", body)
        except APIError as e:
            raise RemoteEngineError(f"rollout engine {client.base_url}: {e}") from e
        gens = parse_completions(res.data, len(prompts), client.base_url)
        version = res.data.get("weights_version")
        version = int(version) if isinstance(version, int) else self.server_versions[i]
        lag = self.learner_version - version
        if lag > self.max_staleness:
            raise StaleWeightsError(
                f"rollout engine {client.base_url} sampled with weights version {version}, {lag} behind the "
                f"learner's {self.learner_version} (rollout.max_staleness={self.max_staleness})")
        with self._lock:
            s = self.stats
            s.requests += 1
            s.retries += res.retries
            s.generations += len(gens)
            if lag > 0:
                s.stale_generations += len(gens)
            s.max_lag = max(s.max_lag, lag)
        return gens

    def close(self) -> None:
        for c in self.clients:
            c.close()


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
