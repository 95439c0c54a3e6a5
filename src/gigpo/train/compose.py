"""The composition root: how a config becomes the parts of a run — the env factory (and the one env built up front
by :func:`preflight`), the prompt builder and the :class:`gigpo.rollout.Collector` over an engine, and the task seeds
of each iteration and of evaluation. The trainer, evaluation, scripted agents and serve's API evaluation all build
their rollouts here, so every path collects the same way."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import numpy as np

from gigpo.agent.prompt import PromptBuilder
from gigpo.envs.guard import registered_factory
from gigpo.envs.registry import get_spec
from gigpo.rollout import Collector
from gigpo.rollout.branching import BranchSpec
from gigpo.train import heldout, rng_streams
from gigpo.train.config import Config, ConfigError, env_option_error
from gigpo.train.config_bounds import check_token_caps, context_from_dir

#: Train task seeds live in [0, 2^30); held-out evaluation seeds in [2^30, 2^31) — disjoint by construction.
EVAL_SEED_BASE = 2**30


def train_seeds(seed: int, iteration: int, n: int) -> list[int]:
    """Task seeds of one iteration, a pure function of (run seed, iteration) so resumes replay them."""
    rng = np.random.default_rng([seed, iteration, rng_streams.TRAIN_TASKS])
    return rng.integers(0, EVAL_SEED_BASE, size=n).tolist()


def eval_seeds(seed: int, n: int) -> list[int]:
    """``n`` held-out seeds; the first k of ``eval_seeds(s, n)`` are the same for every n ≥ k."""
    rng = np.random.default_rng([seed, rng_streams.EVAL_TASKS])
    return (EVAL_SEED_BASE + rng.integers(0, EVAL_SEED_BASE, size=n)).tolist()


def env_factory(cfg: Config, split: str | None = None):
    """A zero-argument env constructor; ``split`` is passed only to envs that have one (e.g. held-out goals)."""
    options = dict(cfg.env.options)
    if split is not None and "split" not in options:
        params = inspect.signature(get_spec(cfg.env.name).load()).parameters
        if "split" in params:
            options["split"] = split
    # picklable (not a lambda), so rollout.env_workers=process can send it to worker processes
    return registered_factory(cfg.env.name, **options)


def probe_env(cfg: Config) -> bool:
    """Build (and close) one env of ``cfg`` so that a missing data file or a bad option fails before any model
    loads. Envs share their heavy data per process (catalogs, corpora), so the real run reuses what this loads.
    Returns whether the env starts the same for every seed (:mod:`gigpo.train.heldout`, one warning then).

    The constructor's TypeError/ValueError (``env.size=0``) becomes a ConfigError naming the ``env.*`` keys.
    With ``rollout.decoding=constrained`` the env is also reset once: it must list ``admissible_actions`` in its
    reset info, else a ConfigError naming the env."""
    factory = env_factory(cfg)
    if cfg.rollout.env_workers == "process":  # the factory travels to spawned worker processes by pickle
        import pickle

        try:
            pickle.dumps(factory)
        except Exception as err:  # noqa: BLE001 - PicklingError, AttributeError (local object), TypeError
            raise ConfigError(f"rollout.env_workers=process sends env {cfg.env.name!r}'s factory to worker "
                              f"processes, but it cannot be pickled ({' '.join(str(err).split())[:200]}); register a "
                              "module-level class or function, or use rollout.env_workers=inline") from None
    try:
        env = factory()
    except (ConfigError, FileNotFoundError):
        raise
    except (TypeError, ValueError) as err:
        raise env_option_error(cfg, err) from None
    except Exception as err:  # noqa: BLE001 - a user env's constructor: one line naming it, not a traceback
        raise ConfigError(f"env {cfg.env.name!r}: building it raised {type(err).__name__}: "
                          f"{' '.join(str(err).split())[:300]}") from None
    missing = [m for m in ("reset", "step", "close") if not callable(getattr(env, m, None))]
    if missing:
        raise ConfigError(f"env {cfg.env.name!r} ({type(env).__module__}.{type(env).__qualname__}) has no "
                          f"{', '.join(missing)} method; subclass gigpo.envs.base.Env (which provides close) or "
                          "define them")
    try:
        if cfg.rollout.branch != "off":
            check_branching_env(cfg, env, factory)
        if cfg.rollout.decoding == "constrained":
            _, info = env.reset(EVAL_SEED_BASE)
            if not (isinstance(info, dict) and info.get("admissible_actions")):
                raise ConfigError(f"rollout.decoding=constrained: env {cfg.env.name!r} lists no admissible actions "
                                  "(info['admissible_actions'] at reset); use rollout.decoding=free")
        fixed = heldout.same_start(env)
    finally:
        env.close()
    if fixed:
        heldout.warn_same_start(cfg.env.name)
    return fixed


def branch_spec(cfg: Config) -> BranchSpec | None:
    """``rollout.branch`` and its options as the collector's :class:`BranchSpec` (None when off)."""
    r = cfg.rollout
    if r.branch == "off":
        return None
    return BranchSpec(r.branch, r.branching.siblings, r.branching.every)


def check_branching_env(cfg: Config, env: Any, factory: Any) -> None:
    """What ``rollout.branch`` needs of the env, each a ConfigError: one game per trajectory (not multi-seat),
    one branch within the group's budget at its episode cap, and replay determinism given seed and actions
    (:func:`gigpo.envs.restore.determinism_problem`: a short random episode replayed twice)."""
    from gigpo.envs.multiseat import is_multiseat
    from gigpo.envs.restore import determinism_problem
    from gigpo.rollout.branching import budget_problem

    _, info = env.reset(EVAL_SEED_BASE)
    if isinstance(info, dict) and is_multiseat(info):
        raise ConfigError(f"rollout.branch: env {cfg.env.name!r} is a multi-seat (self-play) game, which branch "
                          "rollouts do not support; use rollout.branch=off")
    cap = int(getattr(env, "max_steps", 0) or 0)
    cap = (min(cap, cfg.rollout.max_steps) if cap else cfg.rollout.max_steps) if cfg.rollout.max_steps else cap
    problem = budget_problem(branch_spec(cfg), cfg.rollout.group_size, cap or 50)  # the collector's cap rule
    problem = problem or determinism_problem(factory, cfg.env.name)
    if problem:
        raise ConfigError(problem)


def check_model_options(cfg: Config, model_name: str | None = None) -> None:
    """Device, dtype, LoRA and tiny-model options of ``cfg`` checked without loading weights (a CUDA device on a
    machine without one, an unknown ``model.tiny.*`` key), each a ConfigError naming its key. A missing model
    is a FileNotFoundError. ``model_name``: what will be loaded instead of ``cfg.model.name`` (a checkpoint)."""
    from gigpo.models.devices import resolve_device, resolve_dtype
    from gigpo.models.loader import resolve_model_source
    from gigpo.models.lora import validate_lora
    from gigpo.models.tiny import tiny_config

    m = cfg.model
    checks = [("model.device", lambda: resolve_device(m.device)),
              ("model.dtype", lambda: resolve_dtype(m.dtype, resolve_device(m.device))),
              ("model.name", lambda: resolve_model_source(model_name or m.name))]
    if cfg.lora.enabled:
        checks.append(("lora", lambda: validate_lora(
            {k: getattr(cfg.lora, k) for k in ("r", "alpha", "dropout", "target_modules")})))
    if (model_name or m.name) == "tiny":
        checks.append(("model.tiny", lambda: tiny_config(m.tiny)))
    for key, check in checks:
        try:
            check()
        except (TypeError, ValueError) as err:
            raise ConfigError(f"{key}: {' '.join(str(err).split())}") from None
    source = resolve_model_source(model_name or m.name)
    if Path(source).is_dir():  # a local or cached model: its context bounds the token caps (config_bounds)
        check_token_caps(cfg, context_from_dir(source), model_name or m.name)


def preflight(cfg: Config, model_name: str | None = None) -> bool:
    """Everything that can be checked before a model loads or a run directory is made: one env is built and
    the model options are checked (the config itself was validated when loaded). Returns :func:`probe_env`'s
    answer: whether held-out episodes start as the training ones do."""
    fixed = probe_env(cfg)
    check_model_options(cfg, model_name)
    from gigpo.train.remote import preflight_engine

    preflight_engine(cfg)  # an unreachable server: one error now, not a failure at the first rollout
    return fixed


def build_collector(cfg: Config, engine: Any, tokenizer: Any, split: str | None = None,
                    branch: bool = False) -> Collector:
    """The collector of ``cfg`` over ``engine``; ``branch``: grow groups as trees per ``rollout.branch`` (the
    training collector; evaluation plays plain episodes)."""
    r = cfg.rollout
    max_prompt = cfg.prompt.max_prompt_tokens
    context = getattr(getattr(getattr(engine, "model", None), "config", None), "max_position_embeddings", None)
    if isinstance(context, int) and context > r.max_response_tokens:
        # prompt + response must fit the model's context: clamp rather than run past the position table
        max_prompt = min(max_prompt, context - r.max_response_tokens)
    builder = PromptBuilder(tokenizer, max_prompt, cfg.prompt.format, cfg.prompt.show_admissible,
                            include_instructions=cfg.prompt.instructions)
    collector = Collector(
        env_factory(cfg, split), engine, builder, max_steps=r.max_steps, max_response_tokens=r.max_response_tokens,
        temperature=r.temperature, top_p=r.top_p, invalid_penalty=r.invalid_penalty,
        history_length=cfg.prompt.history_length, require_think=cfg.prompt.require_think,
        env_timeout_s=r.env_timeout_s, env_name=cfg.env.name, env_workers=r.env_workers,
        env_worker_options={"num_workers": r.ray.num_actors, "ray_address": r.ray.address} if r.env_workers == "ray"
        else None, decoding=r.decoding, branch=branch_spec(cfg) if branch else None,
    )
    if r.mode == "concat":  # one growing sequence per trajectory (RAGEN-style), in training and evaluation alike
        from gigpo.train.algorithms import context_limit

        collector.set_mode("concat", context_limit(cfg, engine.model), r.concat.limit_policy)
    return collector
