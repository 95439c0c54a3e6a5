"""The ``openai`` rollout engine: sampling on OpenAI-compatible *completions* servers (vLLM, `gigpo serve`).

What is trained must be exactly what was sampled, so the engine never round-trips through text: prompts go out
as token ids (``"prompt": [[ids], ...]``), and each response comes back as token ids with the log-probability of
every sampled token — vLLM's ``return_token_ids`` (``choices[i].token_ids``), else its
``return_tokens_as_token_ids`` spelling ``"token_id:123"`` in ``logprobs.tokens``. A server that returns
neither is an error, never a silent re-tokenisation.

The prompts of one ``generate`` call are split into ``len(urls)`` contiguous chunks (sizes differ by at most
one), one batched request per server, sent concurrently. Failed requests are retried by
:class:`gigpo.apiclient.ChatClient` (connection errors, timeouts, 408/409/429/5xx; exponential backoff with
jitter); when the retries are spent :class:`RemoteEngineError` says which server and why. ``api_key`` is sent
as ``Authorization: Bearer KEY`` on every request, weight pushes included.

**Server kinds and weight sync** (:meth:`probe` reads ``GET /v1/models``: ``owned_by`` is ``"gigpo"`` or
``"vllm"``; :mod:`gigpo.rollout.engines.weight_push` does the pushing):

* `gigpo serve`: full weights, a safetensors file + ``POST /v1/reload_weights``.
* vLLM, ``weight_sync="full"``: a HF safetensors directory + ``POST /collective_rpc`` ``reload_weights`` (the
  server needs ``VLLM_SERVER_DEV_MODE=1``).
* vLLM, ``weight_sync="lora"`` (a LoRA learner): a PEFT adapter directory per version, loaded with
  ``POST /v1/load_lora_adapter`` under the name ``<model>-gigpo-<run tag>-v<N>``; requests name that adapter,
  the previous one is unloaded, and :meth:`close` unloads the last (the server needs ``--enable-lora --max-lora-rank R`` and
  ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``).

A server that cannot receive weights the chosen way is a one-line :class:`RemoteEngineError` from :meth:`probe`
naming the flag to add — before any model loads (``gigpo train``'s preflight) and again before the first rollout.

**Weights versions.** Each server's version is what it reports (``weights_version`` in the body, as `gigpo
serve` does) or else the last version pushed to it successfully (:attr:`server_versions`). A response ``lag =
learner_version − server_version`` behind is counted in ``stale_generations`` when ``0 < lag ≤ max_staleness``
and refused with :class:`StaleWeightsError` beyond. ``rollout.async`` *pins* the engine
(:attr:`CompletionsEngine.pinned_version`): its rollout thread pushes each batch's version before the batch and
nobody else pushes while it runs, so a response reporting any other version is a :class:`RemoteEngineError`
(another client changed the server's weights), never a silently mixed batch. A server that reports no version
(vLLM) is taken to hold the last version pushed to it.

Log-probs: `gigpo serve` returns those of the distribution sampled from (after temperature / top-p), like
:class:`gigpo.rollout.engines.hf.HFEngine`; vLLM does so when started with ``--logprobs-mode processed_logprobs``
(else the raw model's). Either way the learner recomputes old log-probs by default
(``optim.recompute_old_logprobs``) and logs the gap (``rollout/logprob_gap_*``).

**Constrained decoding** (vLLM only): each prompt's admissible actions go out as ``structured_outputs.choice``
(one request per distinct action list); the allowed set of every returned token is rebuilt here
(:mod:`gigpo.rollout.engines.vllm_choice`) as vLLM's grammar applies it, for the learner to re-apply.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import FIRST_EXCEPTION, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from gigpo.algo.registry import option
from gigpo.apiclient import APIConnectionError, APIError, ChatClient
from gigpo.rollout.engines.completions_wire import EngineStats, ModelShape, parse_completions, server_root
from gigpo.rollout.registry import (
    Capabilities,
    Generation,
    RemoteEngineError,
    StaleWeightsError,
    register_engine,
)

log = logging.getLogger(__name__)


@dataclass
class OpenAIOptions:
    """``rollout.engine=openai``: OpenAI-compatible completions servers (gigpo serve or vLLM), weights pushed
    after each update (docs/serving.md)."""

    urls: str = option(
        "", "comma-separated base URLs (http://host:port/v1); each turn's prompts are split over them")
    model: str = option("", 'the served model id sent as "model"; empty = model.name')
    timeout_s: float = option(300.0, "socket timeout of one generation request (> 0)")
    max_retries: int = option(5, "retries of a failed request (exponential backoff), then the run stops (>= 0)")
    api_key: str = option(
        "", "API key sent as 'Authorization: Bearer KEY' (generation and weight pushes); empty = the "
        "GIGPO_API_KEY environment variable, else none. Prefer the variable: config.yaml is saved in the run "
        "(reports, trackers and --print-config show it masked)", secret=True)
    weights_dir: str = option(
        "", "directory the learner writes pushed weights to, readable by the servers (pass the same directory "
        "to gigpo serve --weights-dir); empty = RUN_DIR/pushed_weights")
    weight_sync: Literal["auto", "full", "lora"] = option(
        "auto", 'how servers receive weights: "full" (every weight: gigpo serve /v1/reload_weights, vLLM '
        '/collective_rpc reload_weights), "lora" (a LoRA learner\'s adapter per version: vLLM '
        '/v1/load_lora_adapter) or "auto" (lora for a LoRA learner on vLLM, else full)')

    def url_list(self) -> list[str]:
        """``urls`` split on commas, blanks dropped."""
        return [u.strip() for u in self.urls.split(",") if u.strip()]

    def check(self) -> None:
        if not self.url_list():
            raise ValueError("rollout.engine=openai needs rollout.openai.urls (comma-separated http://host:port/v1)")
        for u in self.url_list():
            parts = urlsplit(u)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"rollout.openai.urls: {u!r} is not an http(s)://host:port/v1 URL")
        if not self.timeout_s > 0:
            raise ValueError("rollout.openai.timeout_s must be > 0")
        if self.max_retries < 0:
            raise ValueError("rollout.openai.max_retries must be >= 0")


def check_constrained_replay(cfg: Any, engine: str) -> None:
    """Constrained decoding on a vLLM backend (:mod:`gigpo.rollout.engines.vllm_choice`) rebuilds its allowed
    token sets with xgrammar; a gigpo serve URL is refused at the probe (the server kind is known only then)."""
    import importlib.util

    if cfg.rollout.decoding == "constrained" and importlib.util.find_spec("xgrammar") is None:
        raise ValueError(f"rollout.decoding=constrained with rollout.engine={engine} rebuilds vLLM's allowed token "
                         "sets with xgrammar: pip install xgrammar (it comes with vLLM), or use rollout.engine=hf")


@register_engine("openai", description="OpenAI-compatible completions servers (gigpo serve, vLLM) at rollout.openai.urls; "
                 "weights pushed after each update")
class CompletionsEngine:
    """``generate(prompts, ...)`` over ``POST {url}/completions`` on each of ``urls`` (OpenAI base URLs, ``…/v1``).

    ``model``: the served model id (``--served-model-name``); ``eos_ids``: the tokenizer's end tokens (what the
    collector closes a concat turn with); ``model_config``: the HF config of the served model, for context-length
    clamps. ``extra_body`` is merged into every request (e.g. vLLM's ``{"skip_special_tokens": false}``).
    ``weight_sync``: "auto" (LoRA adapters for a LoRA learner on vLLM, else full weights), "full" or "lora";
    ``weights_dir``: where pushed weights are written (readable by the servers); ``tokenizer``: the learner's
    (needed for constrained decoding only).
    """

    shares_learner_weights = False
    options = OpenAIOptions
    #: the servers are probed before any model loads (:meth:`preflight`); rollout.async pins them to each batch's
    #: weights version; one learner process only (every rank would push); a failed probe blames the URLs
    capabilities = Capabilities(early_probe=True, async_rollout="pinned", blame_key="rollout.openai.urls")

    def __init__(self, urls: list[str], model: str, *, eos_ids: list[int], model_config: Any = None,
                 timeout_s: float = 300.0, max_retries: int = 5, backoff_base_s: float = 0.5,
                 backoff_max_s: float = 30.0, max_staleness: int = 0, extra_body: dict[str, Any] | None = None,
                 seed: int = 0, api_key: str = "", weights_dir: str | Path | None = None, weight_sync: str = "auto",
                 lora: bool = False, tokenizer: Any = None, constrained: bool = False):
        if not urls:
            raise ValueError("the openai engine needs at least one URL (rollout.openai.urls)")
        if weight_sync not in ("auto", "full", "lora"):
            raise ValueError(f"weight_sync must be auto, full or lora, got {weight_sync!r}")
        self.urls = [u.rstrip("/") for u in urls]
        kw = dict(api_key=api_key or None, timeout=timeout_s, max_retries=max_retries, backoff_base=backoff_base_s,
                  backoff_max=backoff_max_s)
        self.clients = [ChatClient(u, concurrency=4, seed=seed + k, **kw) for k, u in enumerate(self.urls)]
        self.admin = [ChatClient(server_root(u), concurrency=1, seed=seed + k, **kw) for k, u in enumerate(self.urls)]
        self.served_model = model
        self.eos_ids = list(eos_ids)
        self.model = ModelShape(model_config)
        self.tokenizer = tokenizer
        self.max_staleness = int(max_staleness)
        self.extra_body = dict(extra_body or {})
        self.weight_sync, self.lora, self.constrained = weight_sync, bool(lora), bool(constrained)
        self.weights_dir = Path(weights_dir) if weights_dir else None
        self.kinds: list[str] = []  #: per server, after probe(): "gigpo", "vllm" or "other"
        self.learner_version = 0
        self.server_versions = [0] * len(self.urls)
        #: rollout.async: the one weights version every response must report (None: versions are only held to
        #: max_staleness). Whoever pins the engine owns its pushes (gigpo.train.collect.remote.after_update skips its own)
        self.pinned_version: int | None = None
        self.request_model = [model] * len(self.urls)  #: per server: the base model, or the current LoRA adapter
        self.counters = EngineStats()
        self._lock = threading.Lock()
        self._pusher: Any = None

    @classmethod
    def check_config(cls, cfg: Any) -> None:
        """Rules across sections (ValueError, one line): a LoRA push needs a LoRA learner; constrained decoding
        needs xgrammar."""
        if cfg.rollout.openai.weight_sync == "lora" and not cfg.lora.enabled:
            raise ValueError("rollout.openai.weight_sync=lora pushes a LoRA adapter: it needs lora.enabled=true")
        check_constrained_replay(cfg, "openai")

    @classmethod
    def preflight(cls, cfg: Any) -> None:
        """Before any model loads: every URL answers and can take weights as configured (EngineError)."""
        o = cfg.rollout.openai
        engine = cls(o.url_list(), "?", eos_ids=[], max_retries=0, api_key=api_key_of(cfg), timeout_s=o.timeout_s,
                     weight_sync=o.weight_sync, lora=bool(cfg.lora.enabled),
                     constrained=cfg.rollout.decoding == "constrained")
        try:
            engine.probe()
        finally:
            engine.close()

    @classmethod
    def from_config(cls, cfg: Any, bundle: Any, run_dir: Path) -> CompletionsEngine:
        from gigpo.rollout.sampling import eos_ids

        r = cfg.rollout
        o = r.openai
        return cls(o.url_list(), o.model or cfg.model.name, eos_ids=eos_ids(bundle.model, bundle.tokenizer),
                   model_config=getattr(bundle.model, "config", None), max_staleness=r.max_staleness,
                   seed=cfg.train.seed, timeout_s=o.timeout_s, max_retries=o.max_retries,
                   api_key=api_key_of(cfg), weights_dir=Path(o.weights_dir) if o.weights_dir else
                   run_dir / "pushed_weights", weight_sync=o.weight_sync, lora=bool(cfg.lora.enabled),
                   tokenizer=bundle.tokenizer, constrained=r.decoding == "constrained")

    # -- contract --------------------------------------------------------------------------------------------

    def probe(self) -> None:
        """Every URL answers ``GET /models`` (connection errors not retried) and can receive weights the way
        :meth:`push_weights` will send them; RemoteEngineError (one line naming the fix) otherwise."""
        from gigpo.rollout.engines.weight_push import check_receiver

        kinds, bad = self._detect_kinds()
        if bad:
            raise RemoteEngineError(f"rollout engine server(s) not reachable: {'; '.join(bad)}")
        self.kinds = kinds
        for i in range(len(self.urls)):
            check_receiver(self, i)
            if self.constrained and kinds[i] != "vllm":
                raise RemoteEngineError(
                    f"{self.urls[i]} is {'gigpo serve' if kinds[i] == 'gigpo' else 'not vLLM'}: "
                    "rollout.decoding=constrained over rollout.engine=openai needs vLLM servers "
                    "(structured_outputs.choice); use rollout.engine=hf with gigpo serve's model instead")

    def _detect_kinds(self) -> tuple[list[str], list[str]]:
        """Per server its kind from ``GET /models`` (``owned_by``; "other" when it did not answer), and the
        problems of those that did not."""
        bad, kinds = [], []
        for c in self.clients:
            try:
                res = c.request_json("GET", "/models", retry_connect=False, max_retries=1)
            except APIError as e:
                kinds.append("other")
                if e.status in (401, 403):
                    bad.append(f"{c.base_url} refused the API key (HTTP {e.status}): set rollout.openai.api_key "
                               "or GIGPO_API_KEY to the server's key")
                else:
                    bad.append(f"{c.base_url} ({e})")
                continue
            owners = {m.get("owned_by") for m in res.data.get("data", []) if isinstance(m, dict)}
            kinds.append("gigpo" if "gigpo" in owners else "vllm" if "vllm" in owners else "other")
        return kinds, bad

    def sync_mode(self, i: int) -> str:
        """How server ``i`` receives weights: "full" or "lora" (``weight_sync=auto``: lora for a LoRA learner on
        vLLM)."""
        if self.weight_sync != "auto":
            return self.weight_sync
        return "lora" if self.lora and self.kinds and self.kinds[i] == "vllm" else "full"

    def push_weights(self, model: Any, version: int, *, required: bool = False) -> dict[str, float]:
        """Write ``model``'s weights and have every server load them (:class:`gigpo.rollout.engines.weight_push.
        WeightPusher`); ``required``: any failure raises (the push before the first rollout)."""
        from gigpo.rollout.engines.weight_push import WeightPusher

        if not self.kinds:  # not probed (a caller outside the trainer): a server that is down gets file pushes
            self.kinds = self._detect_kinds()[0]
        if self._pusher is None:
            self._pusher = WeightPusher(self)
        return self._pusher.push(model, version, required=required)

    def stats(self) -> dict[str, float]:
        return self.counters.metrics()

    def generate(self, prompts: list[list[int]], *, max_new_tokens: int, temperature: float = 1.0,
                 top_p: float = 1.0, constraints: list[Any] | None = None) -> list[Generation]:
        if not prompts:
            return []
        if constraints is not None and any(c is not None for c in constraints):
            if not self.kinds or any(k != "vllm" for k in self.kinds):
                raise RemoteEngineError("constrained decoding (rollout.decoding=constrained) over rollout.engine="
                                        "openai needs vLLM servers (structured_outputs.choice); with gigpo serve "
                                        "use rollout.engine=hf")
            from gigpo.rollout.engines.vllm_choice import generate_constrained

            return generate_constrained(self, prompts, constraints, max_new_tokens, temperature, top_p)
        return self.generate_split(prompts, max_new_tokens, temperature, top_p, {})

    def generate_split(self, prompts: list[list[int]], max_new_tokens: int, temperature: float, top_p: float,
                       extra: dict[str, Any]) -> list[Generation]:
        """``prompts`` split over the servers, one concurrent request each (``extra`` merged into the bodies)."""
        return self._send([(list(range(len(prompts))), extra)], prompts, max_new_tokens, temperature, top_p)

    def sample_with_choices(self, prompts: list[list[int]], choice_lists: list[list[str] | None],
                            max_new_tokens: int, temperature: float, top_p: float) -> list[Generation]:
        """Prompt i constrained to ``choice_lists[i]`` (None: free) through ``structured_outputs.choice``: one
        request per distinct list (and server), all in flight at once."""
        groups: dict[tuple[str, ...] | None, list[int]] = {}
        for i, ch in enumerate(choice_lists):
            groups.setdefault(tuple(ch) if ch is not None else None, []).append(i)
        jobs = [(rows, {"structured_outputs": {"choice": list(key)}} if key is not None else {})
                for key, rows in groups.items()]
        return self._send(jobs, prompts, max_new_tokens, temperature, top_p)

    def _send(self, jobs: list[tuple[list[int], dict[str, Any]]], prompts: list[list[int]], max_new_tokens: int,
              temperature: float, top_p: float) -> list[Generation]:
        """Each job ``(rows, extra)``: those prompts split over the servers in contiguous chunks, one request per
        chunk, all concurrent; the generations back in prompt order."""
        k = len(self.clients)
        futures, where = [], []
        for rows, extra in jobs:
            bounds = [len(rows) * i // k for i in range(k + 1)]
            for i in range(k):
                part = rows[bounds[i]:bounds[i + 1]]
                if part:
                    futures.append(self.clients[i].executor.submit(
                        self._request, i, [prompts[r] for r in part], max_new_tokens, temperature, top_p, extra))
                    where.append(part)
        done, pending = wait(futures, return_when=FIRST_EXCEPTION)
        for f in pending:
            f.cancel()
        wait(pending)
        out: list[Generation | None] = [None] * len(prompts)
        for part, f in zip(where, futures):
            for r, g in zip(part, f.result(), strict=True):
                out[r] = g
        return out  # type: ignore[return-value]

    def _request(self, i: int, prompts: list[list[int]], max_new_tokens: int, temperature: float,
                 top_p: float, extra: dict[str, Any]) -> list[Generation]:
        body = {"model": self.request_model[i], "prompt": [list(map(int, p)) for p in prompts],
                "max_tokens": int(max_new_tokens), "temperature": float(temperature), "top_p": float(top_p),
                "n": 1, "logprobs": 1, "return_tokens_as_token_ids": True, "return_token_ids": True,
                **self.extra_body, **extra}
        client = self.clients[i]
        try:
            res = client.request_json("POST", "/completions", body)
        except APIError as e:
            raise RemoteEngineError(f"rollout engine {client.base_url}: {e}") from e
        gens = parse_completions(res.data, len(prompts), client.base_url)
        version = res.data.get("weights_version")
        version = int(version) if isinstance(version, int) else self.server_versions[i]
        pinned = self.pinned_version
        if pinned is not None and version != pinned:
            raise RemoteEngineError(
                f"rollout engine {client.base_url} sampled with weights version {version}, but this batch is "
                f"sampled by version {pinned} (rollout.async: one version per batch); did another client push "
                "weights to this server?")
        lag = self.learner_version - version
        if lag > self.max_staleness:
            raise StaleWeightsError(
                f"rollout engine {client.base_url} sampled with weights version {version}, {lag} behind the "
                f"learner's {self.learner_version} (rollout.max_staleness={self.max_staleness})")
        with self._lock:
            s = self.counters
            s.requests += 1
            s.retries += res.retries
            s.generations += len(gens)
            if lag > 0:
                s.stale_generations += len(gens)
            s.max_lag = max(s.max_lag, lag)
        return gens

    def close(self) -> None:
        if self._pusher is not None:
            self._pusher.unload_adapters()
        for c in self.clients + self.admin:
            c.close()


def api_key_of(cfg: Any) -> str:
    """``rollout.openai.api_key``, else the ``GIGPO_API_KEY`` environment variable (keeps the key out of the run
    directory's config.yaml), else "" (no Authorization header)."""
    import os

    return cfg.rollout.openai.api_key or os.environ.get("GIGPO_API_KEY", "")


__all__ = ["APIConnectionError", "CompletionsEngine", "EngineStats", "ModelShape", "RemoteEngineError",
           "StaleWeightsError", "api_key_of", "parse_completions", "server_root"]
