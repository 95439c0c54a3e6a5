"""The serving batcher: one worker thread gathers requests arriving within a few ms into one padded generate call."""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from gigpo.agent.prompt import PromptBuilder
from gigpo.rollout.engine import Generation, HFEngine


class RequestError(ValueError):
    """A request the model cannot serve (bad messages for the chat template, context too long): HTTP 400."""


@dataclass
class Job:
    """One chat request: its messages and sampling parameters in; ``prompt_ids``, ``choices`` and
    ``completion_tokens`` (or ``error``) out; ``done`` is set when either is there."""

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


@dataclass
class BatchStats:
    requests: int = 0
    rows: int = 0
    generate_calls: int = 0
    largest_batch: int = 0


class Batcher:
    """Owns the model: only its worker thread touches the tokenizer and calls ``generate``.

    The worker takes the first queued job, then keeps collecting for ``wait_ms`` (or until ``max_batch`` rows),
    renders every job's messages to token ids (the tokenizer's chat template if it has one, else the plain text
    rendering of :class:`PromptBuilder` — exactly what training feeds the model), groups rows by
    ``(temperature, top_p)`` and runs one :class:`HFEngine` call per group (left padding, greedy at temperature 0)
    with ``max_new_tokens`` = the group's largest ``max_tokens``; each row is then cut to its own ``max_tokens``.
    Rows are independent under left padding + attention mask, so batching changes no result beyond float rounding.
    """

    def __init__(self, model: Any, tokenizer: Any, device: Any, *, max_batch: int = 32, wait_ms: float = 5.0,
                 context_length: int | None = None, default_max_tokens: int = 256):
        self.engine = HFEngine(model, tokenizer, device)
        self.renderer = PromptBuilder(tokenizer)
        self.tokenizer = tokenizer
        self.max_batch = max(1, int(max_batch))
        self.wait_s = max(0.0, wait_ms / 1000.0)
        cfg = getattr(model, "config", None)
        self.context_length = context_length or int(getattr(cfg, "max_position_embeddings", 0) or 0) or None
        self.default_max_tokens = default_max_tokens
        self.stats = BatchStats()
        self._queue: queue.Queue[Job | None] = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="gigpo-serve-batcher", daemon=True)
        self._thread.start()

    def submit(self, job: Job) -> Job:
        self._queue.put(job)
        return job

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=10)

    def _gather(self, first: Job) -> tuple[list[Job], bool]:
        jobs, rows = [first], first.n
        deadline = time.monotonic() + self.wait_s
        while rows < self.max_batch:
            left = deadline - time.monotonic()
            try:
                job = self._queue.get(timeout=left) if left > 0 else self._queue.get_nowait()
            except queue.Empty:
                break
            if job is None:
                return jobs, True
            jobs.append(job)
            rows += job.n
        return jobs, False

    def _loop(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            jobs, stop = self._gather(first)
            try:
                self._run(jobs)
            except BaseException as e:  # noqa: BLE001 - report to the waiting requests, keep serving
                for j in jobs:
                    if not j.done.is_set():
                        j.error = e
                        j.done.set()
            if stop:
                return

    def _prepare(self, job: Job) -> None:
        try:
            ids = self.renderer.render(job.messages)
        except Exception as e:  # noqa: BLE001 - template errors are the request's fault
            raise RequestError(f"cannot apply the chat template to these messages: {e}") from None
        if job.max_tokens is None:
            room = (self.context_length - len(ids)) if self.context_length else self.default_max_tokens
            job.max_tokens = max(1, min(self.default_max_tokens, room))
        if self.context_length and len(ids) + job.max_tokens > self.context_length:
            raise RequestError(f"prompt ({len(ids)} tokens) + max_tokens ({job.max_tokens}) exceeds the model's "
                               f"context length ({self.context_length})")
        job.prompt_ids = list(ids)

    def _run(self, jobs: list[Job]) -> None:
        ready: list[Job] = []
        for j in jobs:
            try:
                self._prepare(j)
                ready.append(j)
            except RequestError as e:
                j.error = e
                j.done.set()
        self.stats.requests += len(jobs)
        groups: dict[tuple[float, float], list[Job]] = {}
        for j in ready:
            groups.setdefault((j.temperature, j.top_p), []).append(j)
        for (temperature, top_p), group in groups.items():
            prompts = [j.prompt_ids for j in group for _ in range(j.n)]
            width = max(j.max_tokens or 1 for j in group)
            gens = self.engine.generate(prompts, max_new_tokens=width, temperature=temperature, top_p=top_p)
            self.stats.generate_calls += 1
            self.stats.rows += len(prompts)
            self.stats.largest_batch = max(self.stats.largest_batch, len(prompts))
            at = 0
            for j in group:
                picked = [self._finish(g, j) for g in gens[at:at + j.n]]
                at += j.n
                j.choices = [dict(c, index=k) for k, (c, _) in enumerate(picked)]
                j.completion_tokens = sum(n for _, n in picked)
                j.done.set()

    def _finish(self, g: Generation, job: Job) -> tuple[dict[str, Any], int]:
        """One choice: cut to the job's ``max_tokens`` (the batch may have generated more), then at the first stop
        string (counted up to the token where the stop string begins). EOS is never in the text."""
        toks, lps = g.token_ids[:job.max_tokens or 1], g.logprobs[:job.max_tokens or 1]
        reason = "stop" if toks and toks[-1] in self.engine.eos_ids else "length"
        text = g.text if len(toks) == len(g.token_ids) else self.tokenizer.decode(toks, skip_special_tokens=True)
        cut = min((i for i in (text.find(s) for s in job.stop if s) if i >= 0), default=-1)
        if cut >= 0:
            text, reason = text[:cut], "stop"
            n = next((k for k in range(1, len(toks) + 1)
                      if len(self.tokenizer.decode(toks[:k], skip_special_tokens=True)) > cut), len(toks))
            toks, lps = toks[:n], lps[:n]
        choice: dict[str, Any] = {"message": {"role": "assistant", "content": text}, "finish_reason": reason,
                                  "logprobs": None}
        if job.logprobs:
            pieces = [self.tokenizer.decode([t]) for t in toks]
            choice["logprobs"] = {"content": [{"token": p, "logprob": float(lp), "bytes": list(p.encode())}
                                              for p, lp in zip(pieces, lps)]}
        return choice, len(toks)
