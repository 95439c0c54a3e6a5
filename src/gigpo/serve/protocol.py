"""What the routes of `gigpo serve` share: request limits, the OpenAI error body, the chat request parser (the
completions route reuses it for its sampling fields), and the job-waiting, usage and log-prob helpers of the
completions and streaming routes. Who may call the server (``--api-key``) is checked by :mod:`gigpo.httputil`,
shared with serve-retriever.

The handler modules (:mod:`gigpo.serve.completions`, :mod:`.streaming`, :mod:`.weights`) import from here, never
from :mod:`gigpo.serve.server`, which imports them: the arrows go server -> handlers -> protocol.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from gigpo.httputil import (  # noqa: F401 - who may call: stdlib-only, shared with serve-retriever
    API_KEY_ENV,
    HTTPError,
    api_key_from,
    as_float,
    as_int,
    check_bearer,
    is_loopback,
    require_key_off_loopback,
)
from gigpo.serve.batcher import Job, RequestError, ShuttingDown

#: Longest a request waits for the batcher before the server answers 504 (and drops the job).
REQUEST_TIMEOUT_S = 600.0
#: The prompt's character count is checked before tokenising, at this many characters per allowed prompt token:
#: generous enough for any real tokenizer's prompts, small enough that tokenising never stalls the batcher
#: (measured before the check: a 5 MB prompt held the batcher 12-29 s only to be refused for its length).
CHARS_PER_TOKEN_BOUND = 32
#: Characters a message costs beyond its content (role and separators) in that count, so that a body of
#: a million empty messages is refused as well.
MESSAGE_OVERHEAD_CHARS = 8
#: Longest ``guided_choice`` string in characters (its trie path, hence its token budget, grows with it).
MAX_CHOICE_CHARS = 256


@dataclass(frozen=True)
class Limits:
    """Per-request caps (CLI flags of the same names). ``max_prompt_tokens`` None: the model's context length;
    ``max_prompt_chars`` None: ``CHARS_PER_TOKEN_BOUND × max_prompt_tokens``."""

    max_body_bytes: int = 4 * 1024 * 1024
    max_tokens_cap: int = 4096
    max_n: int = 16
    max_prompt_tokens: int | None = None
    max_prompt_chars: int | None = None
    read_timeout_s: float = 30.0
    max_choices: int = 256



def error_body(status: int, message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    """OpenAI's error layout: ``{"error": {"message", "type", "code"}}``."""
    return {"error": {"message": message, "type": kind, "code": status}}


_error_body = error_body  # the name the handler modules used before this module existed


def optional(body: dict[str, Any], key: str, default: Any) -> Any:
    value = body.get(key)
    return default if value is None else value


def check_body_and_model(body: Any, models: set[str], limits: Limits | None) -> Limits:
    """What every generation route checks first: a JSON object naming (if at all) a model served here; returns
    the limits in force (the defaults when None). ValueError (400) / LookupError (404) otherwise."""
    if not isinstance(body, dict):
        raise ValueError("request body must be a JSON object")
    model = body.get("model")
    if model is not None and model not in models:
        raise LookupError(f"model {model!r} is not served here; this server serves {sorted(models)[0]!r}")
    return limits or Limits()


def parse_chat_request(body: Any, models: set[str], limits: Limits | None = None) -> Job:
    """Validate an OpenAI chat request into a :class:`Job` (ValueError/TypeError → 400, LookupError → 404,
    :class:`HTTPError` → its status: 413 for a prompt over ``max_prompt_chars``).

    Supported: ``messages`` (string content or text parts), ``temperature`` ∈ [0, 2] (0 = greedy; default 1),
    ``top_p`` ∈ (0, 1], ``max_tokens`` / ``max_completion_tokens`` ∈ [1, ``max_tokens_cap``], ``stop`` (string or
    up to 4 strings), ``n`` ∈ [1, ``max_n``], ``logprobs``. Numbers must be JSON numbers (no strings, booleans or
    non-finite values). ``stream`` (server-sent events, :mod:`gigpo.serve.streaming`) with ``stream_options``
    ``include_usage``. ``guided_choice`` (:func:`parse_guided_choice`): the reply is one of those strings
    (not with ``stop``). Tools and ``seed`` are rejected or ignored as documented.
    """
    limits = check_body_and_model(body, models, limits)
    stream = optional(body, "stream", False)
    if not isinstance(stream, bool):
        raise ValueError(f"'stream' must be true or false, got {type(stream).__name__}")
    stream_options = body.get("stream_options") or {}
    if not isinstance(stream_options, dict):
        raise ValueError("'stream_options' must be an object")
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise ValueError("'messages' must be a non-empty list")
    messages = []
    chars = 0
    for m in msgs:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise ValueError("each message needs a 'role' and a 'content'")
        content = m.get("content")
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
        if not isinstance(content, str):
            raise ValueError(f"message content must be a string or text parts, got {type(content).__name__}")
        chars += len(content) + len(m["role"]) + MESSAGE_OVERHEAD_CHARS
        messages.append({"role": m["role"], "content": content})
    if limits.max_prompt_chars is not None and chars > limits.max_prompt_chars:
        raise HTTPError(413, f"prompt of about {chars} characters is over this server's limit of "
                             f"{limits.max_prompt_chars} (--max-prompt-chars)")
    temperature = as_float(optional(body, "temperature", 1.0), "temperature", 0.0, 2.0)
    top_p = as_float(optional(body, "top_p", 1.0), "top_p", 0.0, 1.0, low_open=True)
    key = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
    max_tokens = body.get(key)
    if max_tokens is not None:
        max_tokens = as_int(max_tokens, key, 1, limits.max_tokens_cap, flag="--max-tokens-cap")
    stop = body.get("stop") or []
    stop = [stop] if isinstance(stop, str) else stop
    if not isinstance(stop, list) or len(stop) > 4 or not all(isinstance(s, str) for s in stop):
        raise ValueError("stop must be a string or a list of up to 4 strings")
    n = as_int(optional(body, "n", 1), "n", 1, limits.max_n, flag="--max-n")
    logprobs = optional(body, "logprobs", False)
    if not isinstance(logprobs, bool):
        raise ValueError(f"'logprobs' must be true or false, got {type(logprobs).__name__}")
    guided = parse_guided_choice(body, limits)
    if guided is not None and stop:
        raise ValueError("'stop' cannot be combined with 'guided_choice' (a stop string could cut a choice)")
    return Job(messages, max_tokens, temperature, top_p, n=n, stop=stop, logprobs=logprobs, stream=stream,
               stream_usage=bool(stream_options.get("include_usage")), guided_choice=guided)


def parse_guided_choice(body: dict[str, Any], limits: Limits) -> list[str] | None:
    """``guided_choice`` (vLLM's extra-body field before v0.12) or ``structured_outputs: {"choice": [...]}`` (its
    spelling since): 1..``max_choices`` distinct non-empty strings of at most ``MAX_CHOICE_CHARS`` characters, or
    None. vLLM's other guided / structured fields (json, regex, grammar, ...) are refused rather than ignored, so a
    client never gets unconstrained text it believes constrained."""
    other = sorted(k for k in body if k.startswith("guided_") and k != "guided_choice" and body[k] is not None)
    if other:
        raise ValueError(f"{', '.join(other)}: not supported by gigpo serve (only 'guided_choice' is)")
    choices = body.get("guided_choice")
    structured = body.get("structured_outputs")
    if structured is not None:
        if not isinstance(structured, dict):
            raise ValueError("'structured_outputs' must be an object such as {\"choice\": [...]}")
        unsupported = sorted(k for k, v in structured.items() if k != "choice" and v is not None)
        if unsupported:
            raise ValueError(f"structured_outputs.{', structured_outputs.'.join(unsupported)}: not supported by "
                             "gigpo serve (only structured_outputs.choice is)")
        if choices is not None and structured.get("choice") is not None:
            raise ValueError("give either 'guided_choice' or 'structured_outputs.choice', not both")
        if structured.get("choice") is not None:
            choices = structured["choice"]
    if choices is None:
        return None
    if not isinstance(choices, list) or not choices or not all(isinstance(c, str) for c in choices):
        raise ValueError("'guided_choice' must be a non-empty list of strings")
    if len(choices) > limits.max_choices:
        raise ValueError(f"'guided_choice' has {len(choices)} strings; this server accepts at most "
                         f"{limits.max_choices} (--max-choices)")
    for c in choices:
        if not c.strip():
            raise ValueError(f"'guided_choice' strings must be non-empty, got {c!r}")
        if len(c) > MAX_CHOICE_CHARS:
            raise ValueError(f"guided_choice {c[:40]!r}... has {len(c)} characters; at most {MAX_CHOICE_CHARS}")
    if len(set(choices)) < len(choices):
        dup = next(c for i, c in enumerate(choices) if c in choices[:i])
        raise ValueError(f"'guided_choice' lists {dup!r} twice")
    return list(choices)



_optional = optional


# ------------------------------------------------------------------ what the completions and streaming routes share
def wait_jobs(jobs: list[Job]) -> tuple[int, str, str] | None:
    """Wait for every job; None when all succeeded, else ``(status, message, error type)`` of the first failure
    (the others are cancelled)."""
    deadline = time.monotonic() + REQUEST_TIMEOUT_S
    for job in jobs:
        if not job.done.wait(max(0.0, deadline - time.monotonic())):
            for j in jobs:
                j.cancelled = True
            return 504, "generation timed out", "server_error"
        err = job.error
        if err is None:
            continue
        for j in jobs:
            j.cancelled = True
        if isinstance(err, RequestError):
            return err.status, str(err), "invalid_request_error"
        if isinstance(err, ShuttingDown):
            return 503, str(err), "server_error"
        return 500, f"generation failed: {type(err).__name__}: {err}", "server_error"
    return None


def choice_logprobs(tokenizer: Any, ids: list[int], lps: list[float], as_ids: bool) -> dict[str, Any]:
    """The completions ``logprobs`` object of one choice (``text_offset`` by cumulative decoded length)."""
    # decode() only reads the tokenizer (the batcher thread's rule is about encode's padding/truncation state)
    pieces = [tokenizer.decode([t]) for t in ids]
    offsets, at = [], 0
    for p in pieces:
        offsets.append(at)
        at += len(p)
    tokens = [f"token_id:{t}" for t in ids] if as_ids else pieces
    return {"tokens": tokens, "token_logprobs": [float(x) for x in lps], "top_logprobs": None,
            "text_offset": offsets}


def usage_of(jobs: list[Job]) -> dict[str, int]:
    prompt = sum(len(j.prompt_ids) for j in jobs)
    completion = sum(j.completion_tokens for j in jobs)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def weights_version_of(jobs: list[Job]) -> int:
    return min((j.weights_version for j in jobs if j.weights_version is not None), default=0)
