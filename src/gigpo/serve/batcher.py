"""The serving batcher: one worker thread decodes every admitted request in bounded slices, round-robin.

Scheduling rule (docs/serving.md "Scheduling"): a *pass* takes requests from the front of the run queue until
``max_batch`` rows (the first request always fits), decodes at most ``slice_tokens`` new tokens for each of their
rows, and puts the unfinished ones back at the *end* of the queue, behind requests that arrived during the pass.
So a request waits for at most one slice of the passes ahead of it, never for a long request to finish, and a
pass never decodes past the smallest remaining ``max_tokens`` among its rows (a 1-token request batched with a
long one is answered after one step). Measured (``python benchmarks/serve_latency.py``, tiny model, shared
2-core CPU): a 1-token request sent 0.2 s after a 900-token one waited 1.45-1.51 s before this rule and
0.027-0.044 s after. The price: each slice after the first re-reads its row's prompt plus the tokens generated
so far (no KV cache survives between slices); the 900-token request itself went from 1.64-1.70 s to 1.80-1.98 s.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from gigpo.agent.constrained import ActionEncodingError, ConstraintCache, encode_action
from gigpo.agent.prompt import PromptBuilder
from gigpo.rollout.engines.hf import HFEngine
from gigpo.rollout.registry import Generation


class RequestError(ValueError):
    """A request the model cannot serve (bad messages for the chat template, context too long): HTTP ``status``
    (400, or 413 for a prompt over ``--max-prompt-tokens``)."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


class ShuttingDown(RuntimeError):
    """The server closed before the request was answered: HTTP 503."""


@dataclass
class _Row:
    """One of a job's ``n`` samples: the tokens and log-probs generated so far."""

    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    done: bool = False
    #: guided_choice: where this row is in the choice trie (a DecodeState, carried from slice to slice)
    state: Any = None


@dataclass
class Job:
    """One chat request: its messages and sampling parameters in; ``prompt_ids``, ``choices`` and
    ``completion_tokens`` (or ``error``) out; ``done`` is set when either is there. ``cancelled``: the client
    gave up (the handler timed out); the worker drops the job at its next pass instead of decoding for nobody."""

    messages: list[dict[str, str]]
    max_tokens: int | None
    temperature: float
    top_p: float
    n: int = 1
    stop: list[str] = field(default_factory=list)
    logprobs: bool = False
    prompt_ids: list[int] = field(default_factory=list)
    #: OpenAI ``choices`` entries: index, message, finish_reason, logprobs
    choices: list[dict[str, Any]] = field(default_factory=list)
    completion_tokens: int = 0
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)
    cancelled: bool = False
    rows: list[_Row] = field(default_factory=list)
    #: /v1/completions: the prompt as token ids (``messages`` unused, no chat template applied)
    prompt_token_ids: list[int] | None = None
    prompt_text: str | None = None  #: /v1/completions with a text prompt: tokenised as is (no template)
    #: per choice, what was kept after the max_tokens / stop cuts: token ids (EOS included) and log-probs
    outputs: list[Generation] = field(default_factory=list)
    #: the oldest weights version any slice of this job was decoded with (gigpo.serve.weights)
    weights_version: int | None = None
    #: streaming (gigpo.serve.streaming): called by the worker after every pass that left the job unfinished
    on_progress: Any = None
    stream: bool = False  #: chat: answer with server-sent events
    stream_usage: bool = False  #: chat stream: a last chunk with usage (stream_options.include_usage)
    #: the reply must be one of these strings (vLLM's ``guided_choice``); the worker builds ``constraint``
    guided_choice: list[str] | None = None
    constraint: Any = None

    def fail(self, error: BaseException) -> None:
        if not self.done.is_set():
            self.error = error
            self.done.set()


@dataclass
class _Resume:
    """A job's choice constraint continuing one row's automaton state: the sampler calls ``start()`` every
    slice, and a slice must continue the row where the previous one left it, not restart the trie."""

    def __init__(self, constraint: Any, state: Any):
        self.constraint, self.state = constraint, state

    def start(self) -> Any:
        return self.state

    def allowed(self, s: Any, remaining: int | None = None) -> list[int] | None:
        # a slice's budget is not the job's: the job's max_tokens ≥ the trie's depth already guarantees completion
        return self.constraint.allowed(s)

    def advance(self, s: Any, token: int) -> None:
        self.constraint.advance(s, token)

    def finish(self, s: Any) -> str | None:
        return s.action  # the end of a slice is not the end of the row: the job's end calls the real finish


class BatchStats:
    requests: int = 0
    rows: int = 0
    generate_calls: int = 0
    largest_batch: int = 0
    passes: int = 0


class Batcher:
    """Owns the model: only its worker thread touches the tokenizer and calls ``generate``.

    When idle, the worker takes the first queued job, then keeps collecting for ``wait_ms`` (or until
    ``max_batch`` rows); while busy, it admits whatever arrived between passes without waiting. Admitting renders
    a job's messages to token ids (the tokenizer's chat template if it has one, else the plain text rendering of
    :class:`PromptBuilder` — exactly what training feeds the model) and checks them against
    ``max_prompt_tokens`` and the context length. Each pass (module docstring) groups its rows by
    ``(temperature, top_p, guided)`` and runs one :class:`HFEngine` call per group (left padding, greedy at temperature
    0) for ``min(slice_tokens, the group's largest remaining budget)`` tokens; a row is done at EOS, at its
    ``max_tokens``, at a stop string or, with ``guided_choice``, when a choice is complete (the engine's
    masked sampling loop over the choices' token trie, each row's trie state carried across slices). Rows are independent under left padding + attention mask, and a slice
    continues a row from exactly its tokens so far, so batching and slicing change no result beyond float
    rounding.
    """

    def __init__(self, model: Any, tokenizer: Any, device: Any, *, max_batch: int = 32, wait_ms: float = 5.0,
                 context_length: int | None = None, default_max_tokens: int = 256, slice_tokens: int = 32,
                 max_prompt_tokens: int | None = None):
        self.engine = HFEngine(model, tokenizer, device)
        self.renderer = PromptBuilder(tokenizer)
        self.tokenizer = tokenizer
        self.max_batch = max(1, int(max_batch))
        self.wait_s = max(0.0, wait_ms / 1000.0)
        self.slice_tokens = max(1, int(slice_tokens))
        cfg = getattr(model, "config", None)
        self.context_length = context_length or int(getattr(cfg, "max_position_embeddings", 0) or 0) or None
        self.max_prompt_tokens = max_prompt_tokens or self.context_length
        self.default_max_tokens = default_max_tokens
        self.stats = BatchStats()
        #: guided_choice tries, reused for repeated choice lists (an agent's step after step)
        self.choice_tries = ConstraintCache(tokenizer, self.engine.eos_ids, "plain", env_name="guided_choice",
                                            size=64)
        #: held by every decoding pass; a weight reload (gigpo.serve.weights) takes it between passes
        self.model_lock = threading.Lock()
        self.weights_version = 0
        self._queue: queue.Queue[Job | None] = queue.Queue()
        self._runq: deque[Job] = deque()  # admitted jobs, worker thread only
        self._closing = False
        self._thread = threading.Thread(target=self._loop, name="gigpo-serve-batcher", daemon=True)
        self._thread.start()

    def submit(self, job: Job) -> Job:
        if self._closing:
            job.fail(ShuttingDown("the server is shutting down"))
        else:
            self._queue.put(job)
        return job

    def close(self) -> None:
        self._closing = True
        self._queue.put(None)
        self._thread.join(timeout=10)

    # --- the worker ---------------------------------------------------------------------------------------------

    def _loop(self) -> None:
        try:
            while True:
                if not self._runq:
                    first = self._queue.get()
                    if first is None:
                        return
                    self._admit(first)
                    if self._collect(wait=True):
                        return
                elif self._collect(wait=False):
                    return
                batch = self._take()
                if not batch:
                    continue
                try:
                    with self.model_lock:
                        self._pass(batch)
                except BaseException as e:  # noqa: BLE001 - report to the waiting requests, keep serving
                    for j in batch:
                        j.fail(e)
                # Arrivals of this pass queue up before the unfinished jobs: round-robin, not run-to-completion.
                stop = self._collect(wait=False)
                self._runq.extend(j for j in batch if not j.done.is_set())
                if stop:
                    return
        finally:
            self._closing = True
            err = ShuttingDown("the server is shutting down")
            for j in self._runq:
                j.fail(err)
            while True:
                try:
                    j = self._queue.get_nowait()
                except queue.Empty:
                    break
                if j is not None:
                    j.fail(err)

    def _collect(self, *, wait: bool) -> bool:
        """Admit queued jobs: with ``wait``, for up to ``wait_ms`` or until ``max_batch`` rows are queued; else
        only those already there. True when the close sentinel was seen."""
        deadline = time.monotonic() + (self.wait_s if wait else 0.0)
        while not wait or sum(j.n for j in self._runq) < self.max_batch:
            left = deadline - time.monotonic()
            try:
                job = self._queue.get(timeout=left) if left > 0 else self._queue.get_nowait()
            except queue.Empty:
                return False
            if job is None:
                return True
            self._admit(job)
        return False

    def _admit(self, job: Job) -> None:
        """Tokenise ``job`` into the run queue, or answer it with its RequestError."""
        self.stats.requests += 1
        try:
            self._prepare(job)
        except RequestError as e:
            job.fail(e)
            return
        job.rows = [_Row(state=job.constraint.start() if job.constraint else None) for _ in range(job.n)]
        self.stats.rows += job.n
        self._runq.append(job)

    def _take(self) -> list[Job]:
        """The jobs of the next pass: from the front of the run queue until ``max_batch`` rows (at least one)."""
        batch: list[Job] = []
        rows = 0
        while self._runq:
            job = self._runq[0]
            if job.cancelled:
                self._runq.popleft()
                job.fail(TimeoutError("cancelled by the server: the request timed out"))
                continue
            need = sum(not r.done for r in job.rows)
            if batch and rows + need > self.max_batch:
                break
            batch.append(self._runq.popleft())
            rows += need
        return batch

    def _prepare(self, job: Job) -> None:
        if job.prompt_token_ids is not None:
            ids = job.prompt_token_ids
            vocab = int(getattr(getattr(self.engine.model, "config", None), "vocab_size", 0) or len(self.tokenizer))
            if any(not 0 <= t < vocab for t in ids):
                raise RequestError(f"prompt token ids must be in [0, {vocab}) for this model's vocabulary")
        elif job.prompt_text is not None:
            ids = self.tokenizer.encode(job.prompt_text, add_special_tokens=False)
        else:
            try:
                ids = self.renderer.render(job.messages)
            except Exception as e:  # noqa: BLE001 - template errors are the request's fault
                raise RequestError(f"cannot apply the chat template to these messages: {e}") from None
        if not ids:  # a model cannot continue nothing (torch: "cannot reshape tensor of 0 elements")
            raise RequestError("the prompt is empty (0 tokens); give at least one token or character")
        if job.guided_choice is not None:
            job.constraint = self._choice_constraint(job.guided_choice)
            need = job.constraint.trie.max_depth()
            if job.max_tokens is None:
                job.max_tokens = need
            elif job.max_tokens < need:
                raise RequestError(f"max_tokens ({job.max_tokens}) is less than the {need} tokens the longest "
                                   "guided_choice may take; raise it or leave it unset (then it is that length)")
        if job.max_tokens is None:
            room = (self.context_length - len(ids)) if self.context_length else self.default_max_tokens
            job.max_tokens = max(1, min(self.default_max_tokens, room))
        if self.context_length and len(ids) + job.max_tokens > self.context_length:
            raise RequestError(f"prompt ({len(ids)} tokens) + max_tokens ({job.max_tokens}) exceeds the model's "
                               f"context length ({self.context_length})")
        if self.max_prompt_tokens and len(ids) > self.max_prompt_tokens:
            raise RequestError(f"prompt has {len(ids)} tokens; this server accepts at most {self.max_prompt_tokens} "
                               "(--max-prompt-tokens)", status=413)
        job.prompt_ids = list(ids)

    def _choice_constraint(self, choices: list[str]) -> Any:
        """The token-trie constraint of ``choices`` (:mod:`gigpo.agent.constrained`, as in training's
        ``rollout.decoding=constrained``); a choice the tokenizer cannot encode is a 400 naming it."""
        try:
            return self.choice_tries.get(choices)
        except ActionEncodingError:
            for c in choices:
                try:
                    encode_action(self.tokenizer, c)
                except ActionEncodingError:
                    raise RequestError(f"guided_choice {c!r} cannot be encoded by this model's tokenizer (empty, "
                                       "unknown token or lossy round trip)") from None
            raise

    def _pass(self, batch: list[Job]) -> None:
        self.stats.passes += 1
        for j in batch:
            if j.weights_version is None or self.weights_version < j.weights_version:
                j.weights_version = self.weights_version
        # guided_choice rows decode in their own call (the masked sampling loop), so an unconstrained request
        # batched with them runs exactly the generate call it would run without them.
        groups: dict[tuple[float, float, bool], list[tuple[Job, _Row]]] = {}
        for j in batch:
            for r in j.rows:
                if not r.done:
                    groups.setdefault((j.temperature, j.top_p, j.constraint is not None), []).append((j, r))
        for (temperature, top_p, guided), rows in groups.items():
            # The smallest remaining budget, not the largest: a 1-token request batched with a long one is
            # answered after 1 step instead of a whole slice, and no row decodes past its max_tokens.
            budget = min((j.max_tokens or 1) - len(r.tokens) for j, r in rows)
            width = max(1, min(self.slice_tokens, budget))
            prompts = [j.prompt_ids + r.tokens for j, r in rows]
            constraints = [_Resume(j.constraint, r.state) for j, r in rows] if guided else None
            gens = self.engine.generate(prompts, max_new_tokens=width, temperature=temperature, top_p=top_p,
                                        constraints=constraints)
            self.stats.generate_calls += 1
            self.stats.largest_batch = max(self.stats.largest_batch, len(prompts))
            for (j, r), g in zip(rows, gens, strict=True):
                r.tokens += g.token_ids
                r.logprobs += g.logprobs
                # Short of the slice without EOS only happens if generate stopped early; never loop on it.
                r.done = (len(r.tokens) >= (j.max_tokens or 1) or len(g.token_ids) < width
                          or (r.state is not None and r.state.done)
                          or (bool(g.token_ids) and g.token_ids[-1] in self.engine.eos_ids)
                          or (bool(j.stop) and self._hits_stop(r.tokens, j.stop)))
        for j in batch:
            if j.on_progress is not None and not all(r.done for r in j.rows):
                j.on_progress(j)
        for j in batch:
            if all(r.done for r in j.rows):
                picked = [self._finish(Generation(r.tokens, r.logprobs, self._decode(r.tokens),
                                                  action=j.constraint.finish(r.state) if j.constraint else None), j)
                          for r in j.rows]
                j.choices = [dict(c, index=k) for k, (c, _) in enumerate(picked)]
                j.completion_tokens = sum(n for _, n in picked)
                j.done.set()

    def _decode(self, toks: list[int]) -> str:
        return self.tokenizer.decode(toks, skip_special_tokens=True)

    def _hits_stop(self, toks: list[int], stop: list[str]) -> bool:
        text = self._decode(toks)
        return any(s and s in text for s in stop)

    def _finish(self, g: Generation, job: Job) -> tuple[dict[str, Any], int]:
        """One choice: cut to the job's ``max_tokens`` (the batch may have generated more), then at the first stop
        string (counted up to the token where the stop string begins). EOS is never in the text. guided_choice:
        the text is the chosen string exactly as the request spelled it (the tokens may carry a leading space
        or differ in case, as the trie allows) and ``finish_reason`` is "stop"; stop strings are refused."""
        toks, lps = g.token_ids[:job.max_tokens or 1], g.logprobs[:job.max_tokens or 1]
        reason = "stop" if toks and toks[-1] in self.engine.eos_ids else "length"
        text = g.text if len(toks) == len(g.token_ids) else self._decode(toks)
        if job.constraint is not None and g.action is not None:
            text, reason = g.action, "stop"
        cut = min((i for i in (text.find(s) for s in job.stop if s) if i >= 0), default=-1)
        if cut >= 0:
            text, reason = text[:cut], "stop"
            n = next((k for k in range(1, len(toks) + 1) if len(self._decode(toks[:k])) > cut), len(toks))
            toks, lps = toks[:n], lps[:n]
        job.outputs.append(Generation(list(toks), list(lps), text))
        choice: dict[str, Any] = {"message": {"role": "assistant", "content": text}, "finish_reason": reason,
                                  "logprobs": None}
        if job.logprobs:
            pieces = [self.tokenizer.decode([t]) for t in toks]
            choice["logprobs"] = {"content": [{"token": p, "logprob": float(lp), "bytes": list(p.encode())}
                                              for p, lp in zip(pieces, lps)]}
        return choice, len(toks)
