"""Prompting baselines: evaluate an OpenAI-compatible model as the agent, one resumable unit per episode seed."""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from gigpo.apiclient import APIError, ChatClient, Usage
from gigpo.rollout.batch import Trajectory
from gigpo.safefiles import json_lines
from gigpo.serve.chat_prompt import ChatPromptBuilder
from gigpo.serve.engine import OpenAIEngine
from gigpo.train.compose import build_collector, build_prompt_builder, eval_seeds
from gigpo.train.config import Config, ConfigError, load_config

RESULTS = "results.jsonl"
META = "meta.json"
SUMMARY = "summary.json"
#: Characters per token assumed when turning ``prompt.max_prompt_tokens`` into the API's character budget.
CHARS_PER_TOKEN = 4


#: The keys of a ``results.jsonl`` record, in order: the :class:`Trajectory` fields an episode result reports,
#: plus its API bookkeeping (``traj_id``/``group_id``/``task``/``final_info`` stay out, as they always have).
RECORD_FIELDS = ("index", "seed", "won", "score", "episode_return", "length", "invalid_steps", "failed", "error",
                 "data_source", "usage", "seconds", "transcript")


@dataclass
class EpisodeResult(Trajectory):
    """One episode seed's outcome: the collector's own :class:`Trajectory` record (one definition of what an
    episode reports) plus ``index`` (position in the evaluation), the API ``usage`` and wall ``seconds``.
    ``failed`` episodes (API gave up, or the env raised) are rerun on resume. ``transcript`` holds (observation,
    response text, action or error, reward) per step, as the collector records them. Stored as the flat record
    :data:`RECORD_FIELDS` (:meth:`to_record` / :meth:`from_record`)."""

    index: int = 0
    usage: dict = field(default_factory=dict)
    seconds: float = 0.0

    @classmethod
    def pending(cls, index: int, seed: int) -> EpisodeResult:
        """The result of an episode not yet run (nothing won, nothing failed)."""
        return cls(traj_id=index, group_id=index, seed=int(seed), index=index)

    def take(self, t: Trajectory) -> None:
        """Copy the recorded outcome fields of the collector's trajectory ``t`` (JSON-safe types), so that a
        result equals itself read back from ``results.jsonl``."""
        for f in fields(Trajectory):
            if f.name in RECORD_FIELDS and f.name != "seed":
                setattr(self, f.name, getattr(t, f.name))
        self.won, self.failed = bool(t.won), bool(t.failed)
        self.score, self.episode_return = float(t.score), float(t.episode_return)
        self.length, self.invalid_steps = int(t.length), int(t.invalid_steps)
        self.transcript = [list(x) for x in t.transcript]

    def to_record(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in RECORD_FIELDS}

    @classmethod
    def from_record(cls, rec: Any) -> EpisodeResult:
        """Inverse of :meth:`to_record`; TypeError for a record without ``index``/``seed`` or with unknown keys."""
        if not isinstance(rec, dict) or not {"index", "seed"} <= rec.keys() or not rec.keys() <= set(RECORD_FIELDS):
            raise TypeError(f"not an episode record: {str(rec)[:100]}")
        res = cls.pending(rec["index"], rec["seed"])
        for k, v in rec.items():
            setattr(res, k, v)
        return res


def run_episode(cfg: Config, client: ChatClient, model: str, seed: int, index: int, *, temperature: float,
                max_prompt_chars: int, engine_options: dict | None = None) -> EpisodeResult:
    """Run one episode with the training collector (same env wiring, history window, parsing and step cap).

    Any exception — the API giving up after retries, an env crash — ends this episode as ``failed`` with the
    error text; it never propagates, so the other episodes continue.
    """
    engine = OpenAIEngine(client, model, **(engine_options or {}))
    # build_collector is the trainer's own wiring (max_steps, invalid penalty, history length, ...); only the
    # prompt builder differs: messages for the server's chat template instead of token ids.
    prompts = ChatPromptBuilder.like(build_prompt_builder(cfg, engine, None), max_prompt_chars)
    collector = build_collector(cfg, engine, tokenizer=None, split="test", prompts=prompts)
    started = time.monotonic()
    res = EpisodeResult.pending(index, seed)
    try:
        batch = collector.collect([int(seed)], 1, temperature=temperature)
        res.take(batch.trajectories[0])
    except APIError as e:
        res.failed, res.error = True, f"API: {e}"
    except Exception as e:  # noqa: BLE001 - one broken episode must not stop the evaluation
        res.failed, res.error = True, f"{type(e).__name__}: {e}"
    finally:
        collector.close()
    res.usage = engine.usage.to_dict()
    res.seconds = round(time.monotonic() - started, 3)
    return res


def load_results(out_dir: Path) -> dict[int, EpisodeResult]:
    """The newest record per seed in ``results.jsonl`` (a torn last line from a crash is ignored)."""
    path = out_dir / RESULTS
    out: dict[int, EpisodeResult] = {}
    if not path.exists():
        return out
    for line in json_lines(path.read_text(encoding="utf-8")):
        try:
            rec = EpisodeResult.from_record(json.loads(line))
        except (ValueError, TypeError):
            continue
        out[rec.seed] = rec
    return out


def summarize(results: list[EpisodeResult]) -> dict[str, Any]:
    """Means over finished (non-failed) episodes; invalid-action rate = Σ invalid steps / Σ steps; usage summed
    over every attempt, failed ones included (they cost tokens too)."""
    ok = [r for r in results if not r.failed]
    n = max(len(ok), 1)
    steps = max(sum(r.length for r in ok), 1)
    usage = Usage()
    for r in results:
        usage.add(Usage(**r.usage))
    out: dict[str, Any] = {
        "episodes": len(results),
        "failed": len(results) - len(ok),
        "success_rate": sum(r.won for r in ok) / n,
        "score": sum(r.score for r in ok) / n,
        "episode_return": sum(r.episode_return for r in ok) / n,
        "steps": sum(r.length for r in ok) / n,
        "invalid_action_rate": sum(r.invalid_steps for r in ok) / steps,
        **{f"usage/{k}": v for k, v in usage.to_dict().items()},
    }
    for src in sorted({r.data_source for r in ok if r.data_source}):
        rs = [r for r in ok if r.data_source == src]
        out[f"{src}/episodes"] = len(rs)
        out[f"{src}/success_rate"] = sum(r.won for r in rs) / len(rs)
        out[f"{src}/score"] = sum(r.score for r in rs) / len(rs)
    return out


def format_results(summary: dict[str, Any]) -> str:
    """A markdown table of :func:`summarize` (counts as integers, rates with 4 decimals)."""
    lines = ["| metric | value |", "|---|---|"]
    for k, v in summary.items():
        if "/" in k and not k.startswith("usage/"):
            continue
        lines.append(f"| {k} | {v} |" if isinstance(v, int) else f"| {k} | {v:.4f} |")
    sources = sorted({k.split("/")[0] for k in summary if "/" in k and not k.startswith("usage/")})
    if sources:
        lines += ["", "| data source | episodes | success | score |", "|---|---|---|---|"]
        lines += [f"| {s} | {summary[f'{s}/episodes']} | {summary[f'{s}/success_rate']:.4f} | "
                  f"{summary[f'{s}/score']:.4f} |" for s in sources]
    return "\n".join(lines)


#: The rollout keys that shape an API agent's episodes. Named, not "all of rollout": the engine keys (URLs, an API
#: key) do not belong in the identity file, and an output folder written before the rollout section was split
#: into sub-sections still resumes (these names did not change).
IDENTITY_ROLLOUT_KEYS = ("max_steps", "max_response_tokens", "top_p", "invalid_penalty", "decoding", "mode")


def _identity(cfg: Config, model: str, seed: int, temperature: float) -> dict[str, Any]:
    """What must not change between a run and its resumption (URL, concurrency and episode count may)."""
    c = cfg.to_dict()
    return {"agent": f"openai:{model}", "seed": seed, "temperature": temperature, "env": c["env"],
            "prompt": c["prompt"], "rollout": {k: c["rollout"][k] for k in IDENTITY_ROLLOUT_KEYS}}


def _same_evaluation(stored: Any, ident: dict[str, Any]) -> bool:
    """``stored`` (an output folder's identity, possibly written by an older gigpo with every rollout key) is
    the evaluation ``ident`` describes."""
    if not isinstance(stored, dict) or not isinstance(stored.get("rollout"), dict):
        return False
    rollout = {k: stored["rollout"].get(k, "<missing>") for k in IDENTITY_ROLLOUT_KEYS}
    return {**stored, "rollout": rollout} == ident


def _write_transcript(out_dir: Path, r: EpisodeResult) -> None:
    lines = [f"seed {r.seed} (episode {r.index}): won={r.won} score={r.score} return={r.episode_return:.3f} "
             f"steps={r.length} invalid={r.invalid_steps} failed={r.failed} {r.error}".rstrip(),
             f"usage: {r.usage}", ""]
    for t, (obs, text, action, reward) in enumerate(r.transcript):
        lines += [f"--- step {t} (reward {reward:+.3f})", obs, f">>> response: {text!r}", f">>> action: {action}", ""]
    (out_dir / "trajectories").mkdir(exist_ok=True)
    (out_dir / "trajectories" / f"{r.index:05d}-seed{r.seed}.txt").write_text("\n".join(lines))


def run_api_evaluation(
    cfg: Config,
    client: ChatClient,
    model: str,
    *,
    episodes: int,
    concurrency: int,
    output_dir: str | Path,
    seed: int | None = None,
    temperature: float = 0.0,
    max_prompt_chars: int | None = None,
    engine_options: dict | None = None,
    progress: Callable[[str], None] | None = None,
) -> tuple[dict[str, Any], list[EpisodeResult]]:
    """Evaluate ``model`` on the held-out seeds ``eval_seeds(seed, episodes)`` (the same as ``gigpo eval
    --checkpoint``), ``concurrency`` episodes at a time, each its own unit.

    Every finished episode is appended to ``output_dir/results.jsonl`` at once (and its transcript written to
    ``trajectories/``); a rerun skips seeds that finished without failure and retries the failed ones.
    Returns the summary over all ``episodes`` seeds and their results in seed order.
    """
    if cfg.rollout.mode != "step":
        raise ConfigError("rollout.mode=concat feeds the model one growing token sequence; an API agent gets "
                          "per-step chat messages — evaluate it with rollout.mode=step")
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    seed = cfg.train.seed if seed is None else seed
    ident = _identity(cfg, model, seed, temperature)
    meta = out / META
    if meta.exists():
        old = json.loads(meta.read_text())
        if not _same_evaluation(old.get("identity"), ident):
            raise ConfigError(f"{out} holds results of a different evaluation (agent, env, prompt, rollout, seed or "
                              "temperature differ); choose another --output")
    else:
        meta.write_text(json.dumps({"identity": ident, "base_url": client.base_url}, indent=1))
    chars = max_prompt_chars or CHARS_PER_TOKEN * cfg.prompt.max_prompt_tokens
    seeds = eval_seeds(seed, episodes)
    previous = load_results(out)
    todo = [(i, s) for i, s in enumerate(seeds) if s not in previous or previous[s].failed]
    say = progress or (lambda _msg: None)
    if len(todo) < len(seeds):
        say(f"resuming: {len(seeds) - len(todo)} of {len(seeds)} episodes already done in {out}")
    results = {s: previous[s] for s in seeds if s in previous}
    lock = threading.Lock()
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="gigpo-episode")
    futures = [pool.submit(run_episode, cfg, client, model, s, i, temperature=temperature,
                           max_prompt_chars=chars, engine_options=engine_options) for i, s in todo]
    try:
        for n, fut in enumerate(as_completed(futures), 1):
            r = fut.result()
            with lock:
                results[r.seed] = r
                with open(out / RESULTS, "a") as f:
                    f.write(json.dumps(r.to_record()) + "\n")
                    f.flush()
                    os.fsync(f.fileno())
                _write_transcript(out, r)
            status = "FAILED " + r.error[:160] if r.failed else ("won" if r.won else "lost")
            say(f"[{n}/{len(todo)}] seed {r.seed}: {status} steps={r.length} invalid={r.invalid_steps} "
                f"tokens={r.usage.get('prompt_tokens', 0)}+{r.usage.get('completion_tokens', 0)} "
                f"retries={r.usage.get('retries', 0)}")
    except KeyboardInterrupt:
        # Queued episodes are dropped; running ones finish in the background (their results are not recorded).
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    ordered = [results[s] for s in seeds]
    summary = summarize(ordered)
    (out / SUMMARY).write_text(json.dumps(summary, indent=1))
    return summary, ordered


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gigpo eval", description="Evaluate an OpenAI-compatible model as the agent (prompting baseline), with "
        "the same prompts and action parsing as training. Resumable: rerun with the same --output.")
    p.add_argument("--agent", required=True, metavar="openai:MODEL", help="the model name the API expects")
    p.add_argument("--base-url", required=True, help="e.g. https://api.openai.com/v1 or http://127.0.0.1:8000/v1")
    p.add_argument("--api-key-env", default=None, metavar="VAR",
                   help="environment variable holding the API key (default: OPENAI_API_KEY if set, else no key)")
    p.add_argument("--env", help="env name (default: the config's)")
    p.add_argument("--episodes", type=int, default=64)
    p.add_argument("--concurrency", type=int, default=8, help="episodes (and requests) in flight at once")
    p.add_argument("--output", help="results directory (default: eval-api/<env>-<model>)")
    p.add_argument("--config", help="YAML file, preset, or a run directory (its config.yaml); default quickstart")
    p.add_argument("--seed", type=int, default=None, help="seed of the held-out set (default: train.seed)")
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per socket operation of a request")
    p.add_argument("--max-retries", type=int, default=5)
    p.add_argument("--max-prompt-chars", type=int, default=None,
                   help=f"prompt budget in characters (default: {CHARS_PER_TOKEN} x prompt.max_prompt_tokens)")
    p.add_argument("--max-tokens-field", default="max_tokens", choices=("max_tokens", "max_completion_tokens"))
    p.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides, e.g. "
                   "rollout.max_response_tokens=256 prompt.format=think-action")
    return p


def _config_path(path: str | None) -> str | None:
    if path and Path(path).is_dir() and (Path(path) / "config.yaml").exists():
        return str(Path(path) / "config.yaml")
    return path


def _default_output(env: str, model: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-._" else "_" for c in model)
    return str(Path("eval-api") / f"{env}-{safe}")


def eval_api_main(argv: list[str]) -> int:
    """``gigpo eval --agent openai:MODEL --base-url URL ...`` (``argv``: the arguments after ``eval``).

    Order: parse → config → API key → probe the server (unreachable / rejected key → exit 2 before any episode)
    → episodes → results table on stdout. Returns 0, 1 when some episodes failed, 2 on bad input.
    """
    args = build_parser().parse_args(argv)

    def fail(msg: str) -> int:
        print(f"gigpo eval: error: {msg}", file=sys.stderr)
        return 2

    provider, _, model = args.agent.partition(":")
    if provider != "openai" or not model:
        return fail(f"--agent must be openai:MODEL, got {args.agent!r}")
    if args.episodes < 1 or args.concurrency < 1:
        return fail("--episodes and --concurrency must be >= 1")
    overrides = list(args.overrides or [])
    if args.env:
        overrides.append(f"env.name={args.env}")
    try:
        cfg = load_config(_config_path(args.config), overrides)
    except ConfigError as e:
        return fail(str(e))
    key_var = args.api_key_env or "OPENAI_API_KEY"
    api_key = os.environ.get(key_var)
    if args.api_key_env and not api_key:
        return fail(f"--api-key-env {key_var}: the environment variable {key_var} is not set (or empty)")
    try:
        client = ChatClient(args.base_url, api_key, timeout=args.timeout, max_retries=args.max_retries,
                            concurrency=args.concurrency, seed=cfg.train.seed)
    except ValueError as e:
        return fail(str(e))
    try:
        try:
            note = client.probe(model)
        except APIError as e:
            hint = "" if api_key or e.status not in (401, 403) else f" (no key was sent: set {key_var})"
            return fail(f"{e}{hint}")
        print(f"gigpo eval: {note}", file=sys.stderr)
        if not cfg.prompt.instructions or cfg.rollout.max_response_tokens < 16:
            print("gigpo eval: note: this config is tuned for the tiny model (prompt.instructions="
                  f"{cfg.prompt.instructions}, rollout.max_response_tokens={cfg.rollout.max_response_tokens}); for "
                  "an API model pass e.g. prompt.instructions=true rollout.max_response_tokens=512 "
                  "prompt.format=think-action (docs/serving.md)", file=sys.stderr)
        out = args.output or _default_output(cfg.env.name, model)
        try:
            summary, _ = run_api_evaluation(
                cfg, client, model, episodes=args.episodes, concurrency=args.concurrency, output_dir=out,
                seed=args.seed, temperature=args.temperature, max_prompt_chars=args.max_prompt_chars,
                engine_options={"max_tokens_field": args.max_tokens_field},
                progress=lambda m: print(m, file=sys.stderr, flush=True),
            )
        except ConfigError as e:
            return fail(str(e))
    except KeyboardInterrupt:
        print("gigpo eval: interrupted; finished episodes are saved, rerun to resume", file=sys.stderr)
        return 130
    finally:
        client.close()
    print(format_results(summary))
    print(f"results: {out}/{RESULTS}  transcripts: {out}/trajectories/")
    if summary["failed"]:
        print(f"gigpo eval: {summary['failed']} of {summary['episodes']} episodes failed (see results.jsonl; a rerun "
              "retries them)", file=sys.stderr)
        return 1
    return 0
