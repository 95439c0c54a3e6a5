"""`POST /v1/completions` of `gigpo serve`: token-id (or text) prompts in; text, token ids and per-token log-probs out.

This is the endpoint a learner samples from (``rollout.engine=openai``): the prompt goes in as token ids so no
chat template or re-tokenisation sits between what the learner built and what the model reads, and the sampled
tokens come back as ids (vLLM's ``return_tokens_as_token_ids`` spelling ``"token_id:123"`` in
``logprobs.tokens``, and ``choices[i].token_ids`` when ``return_token_ids`` is set), each with the log-probability
of the distribution it was sampled from (after temperature and top-p; greedy at temperature 0), exactly as the
in-process :class:`gigpo.rollout.engines.hf.HFEngine` records it. ``weights_version`` (not OpenAI) says which pushed
weights produced the choices (the oldest, should a reload land between two slices of one request).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from gigpo.httputil import HTTPError, as_int
from gigpo.serve.batcher import Job
from gigpo.serve.protocol import (  # noqa: F401 - wait_jobs, usage_of, ...: shared with streaming.py
    Limits,
    _error_body,
    _optional,
    check_body_and_model,
    choice_logprobs,
    parse_chat_request,
    usage_of,
    wait_jobs,
    weights_version_of,
)

#: Most prompts one request may carry (each becomes ``n`` rows of the batcher).
MAX_PROMPTS = 256
#: OpenAI's default ``max_tokens`` for completions.
DEFAULT_MAX_TOKENS = 16


def _prompts(raw: Any) -> list[list[int] | str]:
    """The ``prompt`` field as a list of prompts: a string, a list of ints, a list of strings or of int lists."""
    def is_ids(x: Any) -> bool:
        return isinstance(x, list) and bool(x) and all(type(t) is int for t in x)

    if isinstance(raw, str) or is_ids(raw):
        out: list[Any] = [raw]
    elif isinstance(raw, list) and raw and all(isinstance(p, str) or is_ids(p) for p in raw):
        out = list(raw)
    else:
        raise ValueError("'prompt' must be a string, a non-empty list of token ids, or a non-empty list of either")
    if len(out) > MAX_PROMPTS:
        raise ValueError(f"at most {MAX_PROMPTS} prompts per request, got {len(out)}")
    return out


def parse_completion_request(body: Any, models: set[str], limits: Limits | None = None) -> tuple[list[Job], dict]:
    """Validate a completions request into one :class:`Job` per prompt, plus the response options.

    Sampling parameters follow the chat rules (:func:`gigpo.serve.protocol.parse_chat_request`: ``temperature``
    ∈ [0, 2], ``top_p`` ∈ (0, 1], ``n``, ``stop``, ``max_tokens`` ∈ [1, cap], default 16). ``logprobs``: null or
    an integer in [0, 5]; any integer returns the sampled token's log-prob per token (``top_logprobs`` is null:
    alternatives are not computed). ``guided_choice`` as in chat (default ``max_tokens``: the longest choice's
    token count). ``echo``, ``suffix`` and ``best_of`` > 1 are refused; ``seed`` is ignored."""
    limits = check_body_and_model(body, models, limits)
    for key in ("echo", "suffix"):
        if body.get(key):
            raise ValueError(f"'{key}' is not supported by gigpo serve")
    if _optional(body, "best_of", 1) != 1:
        raise ValueError("'best_of' other than 1 is not supported by gigpo serve")
    prompts = _prompts(body.get("prompt"))
    chars = sum(len(p) for p in prompts if isinstance(p, str))
    if limits.max_prompt_chars is not None and chars > limits.max_prompt_chars:
        raise HTTPError(413, f"prompt of {chars} characters is over this server's limit of "
                             f"{limits.max_prompt_chars} (--max-prompt-chars)")
    # The chat parser checks temperature, top_p, n, stop and max_tokens with the same bounds and messages.
    probe = {k: body[k] for k in body
             if k in ("temperature", "top_p", "n", "stop", "max_tokens", "structured_outputs", "stream_options")
             or k.startswith("guided_")}
    params = parse_chat_request({**probe, "messages": [{"role": "user", "content": ""}]}, models, limits)
    logprobs = body.get("logprobs")
    if logprobs is not None and logprobs is not False:
        logprobs = as_int(logprobs, "logprobs", 0, 5)
    opts = {
        "logprobs": logprobs is not None and logprobs is not False,
        "token_ids_as_strings": bool(body.get("return_tokens_as_token_ids")),
        "return_token_ids": bool(body.get("return_token_ids")),
        "stream": bool(body.get("stream")),
        "include_usage": bool((body.get("stream_options") or {}).get("include_usage")),
    }
    max_tokens = params.max_tokens
    if max_tokens is None and params.guided_choice is None:  # guided: the longest choice's length (the batcher)
        max_tokens = min(DEFAULT_MAX_TOKENS, limits.max_tokens_cap)
    jobs = []
    for p in prompts:
        job = Job([], max_tokens, params.temperature, params.top_p, n=params.n, stop=list(params.stop),
                  guided_choice=params.guided_choice)
        if isinstance(p, str):
            job.prompt_text = p
        else:
            job.prompt_token_ids = list(p)
        jobs.append(job)
    return jobs, opts


def completion_choices(jobs: list[Job], opts: dict, tokenizer: Any) -> list[dict[str, Any]]:
    """Choices in OpenAI order: index = prompt index × n + sample index."""
    out = []
    for j in jobs:
        for g, c in zip(j.outputs, j.choices):
            choice: dict[str, Any] = {"index": len(out), "text": g.text, "finish_reason": c["finish_reason"],
                                      "logprobs": None}
            if opts["logprobs"]:
                choice["logprobs"] = choice_logprobs(tokenizer, g.token_ids, g.logprobs, opts["token_ids_as_strings"])
            if opts["return_token_ids"]:
                choice["token_ids"] = list(g.token_ids)
            out.append(choice)
    return out


def handle_completions(handler: Any, raw: bytes) -> None:
    """The route: parse, submit every prompt's job to the batcher, answer JSON (or SSE when ``stream``)."""
    from gigpo.httputil import loads_strict

    server = handler.server
    try:
        jobs, opts = parse_completion_request(loads_strict(raw), server.aliases, server.limits)
    except HTTPError as e:
        return handler.reply_error(e)
    except LookupError as e:
        return handler.send_json(404, _error_body(404, str(e), "model_not_found"))
    except (ValueError, TypeError) as e:
        return handler.send_json(400, _error_body(400, str(e)))
    if opts["stream"]:
        from gigpo.serve.streaming import stream_completions

        return stream_completions(handler, jobs, opts)
    for job in jobs:
        server.batcher.submit(job)
    failure = wait_jobs(jobs)
    if failure is not None:
        status, message, kind = failure
        return handler.send_json(status, _error_body(status, message, kind))
    handler.send_json(200, {
        "id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion", "created": int(time.time()),
        "model": server.model_id, "choices": completion_choices(jobs, opts, server.batcher.tokenizer),
        "usage": usage_of(jobs), "weights_version": weights_version_of(jobs),
    })
