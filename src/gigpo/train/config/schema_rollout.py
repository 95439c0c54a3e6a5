"""The ``rollout`` section of the configuration: collection, split by concern.

The rule that shapes it: a key that *chooses* something stays flat in ``rollout`` (``mode``, ``engine``,
``env_workers``, ``async``), and the options of one choice live in a sub-section named after the choice —
``rollout.concat.*`` for ``mode=concat``, ``rollout.openai.*`` / ``rollout.vllm.*`` for those engines (each
engine's options dataclass, built from the engine registry :mod:`gigpo.rollout.engines`),
``rollout.ray.*`` for Ray env workers, ``rollout.branching.*`` for ``branch=every|uncertain`` — so reading a config tells which keys are in force, and a new engine's
options are one new sub-section. DAPO's rollout side (dynamic sampling, overlong shaping) is ``rollout.dapo.*``.

The keys these replaced (``rollout.engine_urls``, ``rollout.max_context_tokens``, ...) still load, each with a
one-line FutureWarning: :data:`gigpo.train.config.load.RENAMED_KEYS`, docs/configuration.md "Renamed keys".
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from gigpo.algo.registry import option as key
from gigpo.rollout.engines import registered_engines
from gigpo.train.config.sections import extended_section


@dataclass
class ConcatConfig:
    """``rollout.mode=concat`` (RAGEN): the whole interaction is one growing token sequence."""

    max_tokens: int = key(0, "sequence limit incl. the next response (0, or >= max_response_tokens + 16); 0 = the model's max positions")
    limit_policy: Literal["stop", "truncate"] = key(
        "stop", 'when the next turn would not fit: "stop" ends the episode, "truncate" drops the oldest turns')


@dataclass
class DapoConfig:
    """DAPO's rollout side (the ``dapo`` preset turns both on): dynamic sampling and soft overlong punishment."""

    dynamic_sampling: bool = key(
        False, "drop groups whose episode returns are all equal, collect more rounds until rollout.groups "
        "groups are kept")
    max_rounds: int = key(4, "dynamic sampling: at most this many collection rounds per iteration (>= 1)")
    overlong_buffer: float = key(
        0.0, "soft overlong punishment: buffer as a fraction of rollout.max_response_tokens, in [0, 1) (0 = off)")
    overlong_penalty: float = key(1.0, "reward added at the full length is -overlong_penalty (linear ramp; >= 0)")


@dataclass
class RayWorkersConfig:
    """``rollout.env_workers=ray``: the envs live in Ray actors (the [ray] extra)."""

    num_actors: int = key(
        0, "actors hosting the envs (>= 0), each env pinned to one (round-robin); 0 = one actor per env. A hung or "
        "dead actor fails every trajectory it hosts this turn and is replaced")
    address: str = key("", 'the cluster to join ("auto", "ray://host:10001"); empty = a local ray.init')


@dataclass
class BranchingConfig:
    """``rollout.branch=every|uncertain``: a group's trajectories grown as a tree from restored states
    (gigpo.rollout.branching; docs/design.md "Branch rollouts")."""

    siblings: int = key(
        2, "M: members of one branch state, the parent included (M - 1 restored copies continue from it), in "
        "[2, 64]; a group starts ceil(rollout.group_size / M) trajectories from its seed")
    every: int = key(
        1, "K (rollout.branch=every): branch at steps K, 2K, ... (>= 1 and below the episode cap)")


@dataclass
class RolloutKeys:
    """Collection: ``groups`` tasks × ``group_size`` trajectories per iteration. Choices are flat keys; the options
    of one choice are its sub-section (``rollout.openai.*`` for ``engine=openai``, ...)."""

    groups: int = key(8, "B: distinct tasks (initial states) per iteration (>= 1)")
    group_size: int = key(4, "N: trajectories per task, all reset with the same seed (>= 1)")
    max_steps: int = key(0, "per-episode step cap (>= 0); 0 = the env's own cap")
    max_response_tokens: int = key(64, "tokens one response (one agent turn) may have (>= 1)")
    temperature: float = key(1.0, "sampling temperature of the rollout (>= 0; 0 = greedy)")
    top_p: float = key(
        1.0, "nucleus sampling: sample from the smallest token set with this much probability, in (0, 1]")
    invalid_penalty: float = key(-0.1, "reward of an unparseable or inadmissible response (state unchanged)")
    decoding: Literal["free", "constrained"] = key(
        "free", '"free": the model writes any text, parsed into an action; "constrained": at each token only '
        "continuations of an admissible action (the env's info[\"admissible_actions\"]) may be emitted, so "
        "every action is valid (gigpo.agent.constrained); the learner re-applies the same masks")
    mode: Literal["step", "concat"] = key(
        "step",
        '"step": a fresh prompt per turn (history window); "concat": the whole interaction is one sequence '
        "(RAGEN; options in rollout.concat)")
    concat: ConcatConfig = key(factory=ConcatConfig, doc="options of rollout.mode=concat")
    dapo: DapoConfig = key(factory=DapoConfig, doc="DAPO's dynamic sampling and overlong shaping")
    engine: str = key(
        "hf",
        "generation, a registered engine (the list at the end of --help; `--import MODULE` adds a user's): \"hf\" "
        "(HF generate on the learner's model), \"openai\" (OpenAI-compatible completions servers at "
        'rollout.openai.urls: gigpo serve or vLLM, weights pushed after each update) or "vllm" (in-process '
        "vllm.LLM, CPU or CUDA; [vllm] extra). An engine's options are its sub-section rollout.<name>")
    env_workers: Literal["inline", "process", "ray"] = key(
        "inline",
        'where env calls run: "inline" (a watchdog thread; a hung env is abandoned), "process" (one worker '
        "process per env; a hung env is killed and a turn's steps run in parallel — for slow or crash-prone "
        'envs) or "ray" (Ray actors, options in rollout.ray; needs the [ray] extra)')
    ray: RayWorkersConfig = key(factory=RayWorkersConfig, doc="options of rollout.env_workers=ray")
    branch: Literal["off", "every", "uncertain"] = key(
        "off", 'grow each group as a tree: at chosen steps a trajectory\'s state is restored (the env\'s '
        'snapshot()/restore(), else verified replay) into siblings that continue with their own samples, one step group by construction; "every": at steps K, '
        '2K, ...; "uncertain": where the sampled action had the lowest log-probability. The group spends the '
        "env steps of an unbranched group of rollout.group_size (options in rollout.branching; the env must "
        "restore exactly, checked before training)")
    branching: BranchingConfig = key(factory=BranchingConfig, doc="options of rollout.branch=every|uncertain")
    env_timeout_s: float = key(
        60.0, "seconds one env reset/step may take (> 0); a slower (hung) env ends its trajectory as failed and is "
        "replaced")
    async_: bool = key(
        False,
        "rollout.async (spelled async or async_): true overlaps rollout and update — the next iterations' "
        "batches are collected (engine hf: in a worker process with its own CPU copy of the policy; engine "
        "openai: on the servers, each pinned to the batch's version; engine vllm: refused) while "
        "the learner updates, each batch by one policy version, rollout.max_staleness (>= 1) versions "
        "behind; pair it with optim.offpolicy_correction (docs/results/async.md)")
    max_staleness: int = key(
        0,
        "policy versions a batch's sampler may lag the learner: rollout.async needs s >= 1 (the batch of "
        "iteration k is sampled by version max(0, k - 1 - s)); engine openai: a failed weight push is "
        "tolerated this many versions; 0 = never stale")


def _engine_sections() -> list[tuple[str, type, Any]]:
    """One sub-section ``rollout.<section>`` per registered engine that has options: its options dataclass
    (``rollout.openai``, ``rollout.vllm``, a ``--import``-ed engine's)."""
    return [(e.section, e.options, field(default_factory=e.options, metadata={
        "doc": f"options of rollout.engine={e.name}"})) for e in registered_engines().values() if e.has_options()]


#: ``rollout.*``: the keys above plus the engines' sub-sections, built from the engine registry, so a new engine's
#: options appear in the config, its validation and ``--help`` without an edit here.
RolloutConfig = dataclasses.make_dataclass("RolloutConfig", _engine_sections(), bases=(RolloutKeys,))
RolloutConfig.__module__, RolloutConfig.__doc__ = __name__, RolloutKeys.__doc__


def rollout_section() -> type:
    """The class of ``Config().rollout``: :data:`RolloutConfig`, extended (a subclass) by one sub-section per
    engine with options registered after this module was built — a user's, loaded with ``--import`` — so its
    options are config keys (``rollout.<section>.<key>``), in ``--help``, ``config.yaml`` and its checks like a
    built-in's (as :func:`gigpo.train.config.schema.algorithm_section` for estimators). A section that would
    shadow a key of ``rollout`` is a ValueError naming both."""
    return extended_section(RolloutConfig, RolloutKeys, _engine_sections(), "rollout", "engine",
                            RolloutKeys.__doc__)
