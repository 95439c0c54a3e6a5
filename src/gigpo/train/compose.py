"""The composition root: how a config becomes the parts of a run. :func:`build_run` builds every object of a training
run (model, reference, data-parallel wrapper, value head, optimiser, engine, collectors and prompt builder, forward
passes, trackers, async rollout, grouping spec) into a :class:`RunParts` that the trainer receives whole; the
builders it uses (:func:`build_model`, :func:`build_engine`, :func:`build_collector`, ...) are also those of
``gigpo eval``, scripted agents and serve's API evaluation, so every path collects the same way. Also here: the
env factory, :func:`preflight` (what is checked before any model loads), and the task seeds (re-exported from
:mod:`gigpo.train.config.rng_streams`)."""

from __future__ import annotations

import copy
import inspect
import logging
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gigpo.agent.prompt import PromptBuilder
from gigpo.algo.grouping import GroupingSpec
from gigpo.envs.guard import registered_factory
from gigpo.envs.registry import get_spec
from gigpo.rollout import Collector
from gigpo.rollout.branching import BranchSpec
from gigpo.train.config import Config, ConfigError, env_option_error
from gigpo.train.config.bounds import check_token_caps, context_from_dir
from gigpo.train.config.rng_streams import EVAL_SEED_BASE, eval_seeds, train_seeds  # noqa: F401 - re-exported
from gigpo.train.preflight import heldout

log = logging.getLogger(__name__)

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
    Returns whether the env starts the same for every seed (:mod:`gigpo.train.preflight.heldout`, one warning then).

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
    from gigpo.train.collect.remote import preflight_engine

    preflight_engine(cfg)  # an unreachable server: one error now, not a failure at the first rollout
    return fixed


def build_prompt_builder(cfg: Config, engine: Any, tokenizer: Any) -> PromptBuilder:
    """The prompt builder of ``cfg`` (``prompt.*``), its token budget clamped so that prompt + response fit the
    context of ``engine``'s model when it has one."""
    max_prompt = cfg.prompt.max_prompt_tokens
    context = getattr(getattr(getattr(engine, "model", None), "config", None), "max_position_embeddings", None)
    if isinstance(context, int) and context > cfg.rollout.max_response_tokens:
        # prompt + response must fit the model's context: clamp rather than run past the position table
        max_prompt = min(max_prompt, context - cfg.rollout.max_response_tokens)
    return PromptBuilder(tokenizer, max_prompt, cfg.prompt.format, cfg.prompt.show_admissible,
                         include_instructions=cfg.prompt.instructions)


def build_collector(cfg: Config, engine: Any, tokenizer: Any, split: str | None = None,
                    branch: bool = False, prompts: Any = None) -> Collector:
    """The collector of ``cfg`` over ``engine``; ``branch``: grow groups as trees per ``rollout.branch`` (the
    training collector; evaluation plays plain episodes); ``prompts``: its prompt builder, by default
    :func:`build_prompt_builder`'s (``gigpo serve``'s API evaluation passes its chat-message twin)."""
    r = cfg.rollout
    builder = prompts if prompts is not None else build_prompt_builder(cfg, engine, tokenizer)
    collector = Collector(
        env_factory(cfg, split), engine, builder, max_steps=r.max_steps, max_response_tokens=r.max_response_tokens,
        temperature=r.temperature, top_p=r.top_p, invalid_penalty=r.invalid_penalty,
        history_length=cfg.prompt.history_length, require_think=cfg.prompt.require_think,
        env_timeout_s=r.env_timeout_s, env_name=cfg.env.name, env_workers=r.env_workers,
        env_worker_options={"num_workers": r.ray.num_actors, "ray_address": r.ray.address} if r.env_workers == "ray"
        else None, decoding=r.decoding, branch=branch_spec(cfg) if branch else None,
    )
    if r.mode == "concat":  # one growing sequence per trajectory (RAGEN-style), in training and evaluation alike
        from gigpo.train.config.algorithms import context_limit

        collector.set_mode("concat", context_limit(cfg, engine.model), r.concat.limit_policy)
    return collector


# ---------------------------------------------------------------------------------------------- a training run
@dataclass
class RunParts:
    """Every object of one training run, built by :func:`build_run` and handed whole to
    :class:`gigpo.train.trainer.Trainer` (which builds none of them). ``model``/``tok``/``device`` are the
    ``bundle``'s; ``dp`` wraps ``model`` for DDP/FSDP (one process: the plain model); ``grouping`` is the
    similarity grouping of ``grouping.*`` (None: exact anchors), built once here."""

    cfg: Config
    dist: Any
    run_dir: Path
    run_id: str
    start_iteration: int
    resumed_from: Path | None
    bundle: Any
    model: Any
    tok: Any
    device: Any
    spec: Any
    use_ref: bool
    ref_model: Any
    value_head: Any
    dp: Any
    optimizer: Any
    trainable: list
    engine: Any
    collector: Any
    eval_collector: Any
    passes: Any
    metrics: Any
    reporting: Any
    async_rollout: Any
    grouping: GroupingSpec | None


def build_model(cfg: Config, device: str, checkpoint: Path | None = None) -> Any:
    """The policy's :class:`gigpo.models.ModelBundle`: ``model.name`` (LoRA and tiny options applied), or the
    ``model/`` of a checkpoint being resumed (saved already adapted)."""
    from gigpo.models import load_model

    lora = {k: getattr(cfg.lora, k) for k in ("r", "alpha", "dropout", "target_modules")} if cfg.lora.enabled else None
    bundle = load_model(str(checkpoint / "model") if checkpoint else cfg.model.name, device=device,
                        dtype=cfg.model.dtype, lora=lora if not checkpoint else None, seed=cfg.train.seed,
                        tiny=(cfg.model.tiny or None) if not checkpoint else None)
    if cfg.model.gradient_checkpointing:
        bundle.model.gradient_checkpointing_enable()
    return bundle


def build_reference(cfg: Config, model: Any, device: Any, checkpoint: Path | None = None) -> Any:
    """The frozen reference policy, when the algorithm needs one (KL): a copy of ``model`` taken before FSDP
    shards it, or the checkpoint's ``reference/``. None with LoRA (the base model, adapters disabled, is the
    reference) or without a KL term."""
    from gigpo.train.config.algorithms import needs_reference

    if not needs_reference(cfg) or cfg.lora.enabled:
        return None
    if checkpoint is not None and (checkpoint / "reference").exists():
        from gigpo.models import load_model

        return load_model(str(checkpoint / "reference"), device=str(device),
                          dtype=cfg.model.dtype).model.eval().requires_grad_(False)
    return copy.deepcopy(model).eval().requires_grad_(False)


def build_value_head(cfg: Config, model: Any, device: Any) -> Any:
    """The critic's :class:`gigpo.train.update.value.ValueHead` when the algorithm has one (zero-initialised), else None."""
    from gigpo.train.config.algorithms import spec_of
    from gigpo.train.update.value import ValueHead, hidden_size_of

    return ValueHead(hidden_size_of(model)).to(device) if spec_of(cfg.algorithm.name).critic else None


def build_optimizer(cfg: Config, model: Any, value_head: Any) -> tuple[Any, list]:
    """``(AdamW, trainable parameters)``: the policy's trainable parameters, and the value head's as their own
    group (``algorithm.ppo.value_lr``; ``lr_scale`` keeps its ratio to the scheduled lr)."""
    import torch

    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError("the model has no trainable parameters")
    o = cfg.optim
    groups: list[dict] = [{"params": params}]
    if value_head is not None:
        value_lr = cfg.algorithm.ppo.value_lr or o.lr
        groups.append({"params": list(value_head.parameters()), "lr": value_lr, "lr_scale": value_lr / o.lr})
    trainable = params + (list(value_head.parameters()) if value_head is not None else [])
    return torch.optim.AdamW(groups, lr=o.lr, betas=tuple(o.betas), weight_decay=o.weight_decay), trainable


def build_engine(cfg: Config, bundle: Any, run_dir: Path) -> Any:
    """The run's engine: ``rollout.engine`` from the engine registry (:mod:`gigpo.rollout.engines`), the same
    contract for every engine; ``run_dir``: where it may write files (pushed weights)."""
    from gigpo.rollout.engines import create_engine

    return create_engine(cfg, bundle, run_dir)


def build_async_rollout(cfg: Config, model: Any, tok: Any, engine: Any, eval_collector: Any, start_iteration: int,
                        resumed_from: Path | None) -> tuple[Any, Any]:
    """``rollout.async``: ``(AsyncRollout, eval collector)``, by the engine's ``capabilities.async_rollout``:
    "worker" (``hf``) samples in the engine class's ``async_worker`` process (its own engine and collector);
    "pinned" (``openai``'s servers) uses the run's own engine — already started on ``start_iteration`` — and the
    eval collector is wrapped so that evaluations take the engine lock (:mod:`gigpo.train.async_rollout`).
    Without ``rollout.async``: ``(None, eval_collector)``."""
    if not cfg.rollout.async_:
        return None, eval_collector
    from gigpo.rollout.engines import engine_spec
    from gigpo.train.async_rollout import AsyncRollout, LatestVersionCollector

    spec = engine_spec(cfg.rollout.engine)
    if spec.capabilities.async_rollout == "worker":  # a copy of the weights in a process of its own
        worker = spec.cls.async_worker(model, tok, max(int(cfg.train.threads or 1), 1))
        return AsyncRollout(cfg, model, worker, build_collector(cfg, worker, tok, branch=True), start_iteration,
                            resumed_from), eval_collector
    rollout = AsyncRollout(cfg, model, engine, build_collector(cfg, engine, tok, branch=True), start_iteration,
                           resumed_from, pushed_version=start_iteration, owns_engine=False)
    return rollout, LatestVersionCollector(eval_collector, rollout, model)


def build_run(cfg: Config, run_dir: str | Path | None = None, resume: Any = None) -> RunParts:
    """Every part of a training run, in the order their random draws and side effects need: the run directory
    (a fresh run refuses one that holds another run before anything loads), the model (``resume``: a
    :class:`gigpo.train.rundir.ResumePlan`'s checkpoint), reference, data-parallel wrapper, value head, optimiser,
    engine, collectors; then a resume's optimiser/RNG/value-head state, the engine started on the weights, the
    forward passes, the run records, the async rollout and the trackers."""
    import torch

    from gigpo.algo import similarity
    from gigpo.models import resolve_model_source
    from gigpo.train.collect.remote import start_engine
    from gigpo.train.config.algorithms import needs_reference, spec_of
    from gigpo.train.parallel import distributed
    from gigpo.train.parallel.data_parallel import DataParallel
    from gigpo.train.preflight.memory_estimate import warn_peak_memory
    from gigpo.train.reporting import RunReporting
    from gigpo.train.reporting.metrics import MetricsLog
    from gigpo.train.rundir import check_fresh_run_dir, create_run_dir, write_run_records
    from gigpo.train.rundir.checkpoint import restore_rng, set_aside
    from gigpo.train.update.grouping import grouping_spec
    from gigpo.train.update.passes import PolicyPasses
    from gigpo.train.update.value import VALUE_HEAD_FILE, load_value_head

    if cfg.train.threads:
        torch.set_num_threads(cfg.train.threads)
    similarity.set_threads(cfg.train.threads)  # the compiled grouping's threads follow train.threads too
    if resume is None:
        check_fresh_run_dir(cfg, run_dir)
    resolve_model_source(cfg.model.name)  # a missing model fails here, before anything heavy
    dist = distributed.current()  # rank 0 writes the run directory; every rank reads it
    if resume is None:
        # the run id tells this run's checkpoints apart: keep-last-k never deletes another run's
        made = (str(create_run_dir(cfg, run_dir)), uuid.uuid4().hex) if dist.is_main else None
        run_path, run_id = dist.broadcast_from_main(made)
        run_path = Path(run_path)
        cfg.train.run_dir = str(run_path)
        checkpoint, start = None, 0
    else:
        run_path, run_id = resume.run_dir, str(resume.state.get("run_id") or uuid.uuid4().hex)
        checkpoint, start = resume.checkpoint, resume.iteration
    bundle = build_model(cfg, dist.device(cfg.model.device), checkpoint)
    model, device = bundle.model, torch.device(bundle.device)
    ref_model = build_reference(cfg, model, device)  # copied before FSDP shards the policy
    dp = DataParallel(dist, model, device)  # DDP / FSDP2 / plain (one process)
    value_head = build_value_head(cfg, model, device)
    optimizer, trainable = build_optimizer(cfg, model, value_head)
    engine = build_engine(cfg, bundle, run_path)
    collector = build_collector(cfg, engine, bundle.tokenizer, branch=True)
    eval_collector = build_collector(cfg, engine, bundle.tokenizer, split="test")
    warn_peak_memory(cfg, model, collector.prompts, env_factory(cfg))  # the real model and prompts
    metrics = MetricsLog(run_path)
    if resume is not None:  # optimizer and RNG states were read (weights_only / JSON) and verified by plan_resume
        dp.load_optimizer_state_dict(optimizer, resume.optimizer_state)
        restore_rng(resume.rng)
        if value_head is not None:
            load_value_head(value_head, checkpoint / VALUE_HEAD_FILE)
        if ref_model is not None and (checkpoint / "reference").exists():
            ref_model = build_reference(cfg, model, device, checkpoint)
        for ckpt, _why in resume.skipped if dist.is_main else ():  # out of the way of eval and prune
            log.warning("moved skipped checkpoint %s to %s", ckpt, set_aside(ckpt).name)
        if dist.is_main:
            metrics.truncate_after(start)
    dp.add_reference(ref_model, value_head)
    start_engine(engine, model, start)  # reachable, on these weights, before the first rollout
    use_ref = needs_reference(cfg)
    passes = PolicyPasses(cfg, model, ref_model, value_head, bundle.tokenizer.pad_token_id, device, use_ref,
                          distributed=dist.active)
    if dist.is_main:
        write_run_records(run_path, cfg, start, str(device))
    async_rollout, eval_collector = build_async_rollout(cfg, model, bundle.tokenizer, engine, eval_collector,
                                                        start, checkpoint)
    # samples/iter_N.jsonl, health alerts, trackers (train.loggers): rank 0's
    reporting = RunReporting(cfg, run_path, start) if dist.is_main else None
    return RunParts(cfg, dist, run_path, run_id, start, checkpoint, bundle, model, bundle.tokenizer, device,
                    spec_of(cfg.algorithm.name), use_ref, ref_model, value_head, dp, optimizer, trainable, engine,
                    collector, eval_collector, passes, metrics, reporting, async_rollout, grouping_spec(cfg))
