"""The registries' rules (issue 40): an engine, tracker or loss registered with what its kind needs, a name
taken by another class or function refused, and an engine's section kept off rollout's own keys."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest

from gigpo.algo import loss_registry
from gigpo.algo.registry import option
from gigpo.rollout import registry
from gigpo.rollout.engines import Capabilities, register_engine
from gigpo.train.reporting import trackers


@pytest.fixture(autouse=True)
def restored():
    """Every registry as it was before the test."""
    tables = [(t, dict(t)) for t in (registry.ENGINES, trackers.TRACKERS, loss_registry.LOSSES)]
    yield
    for table, saved in tables:
        table.clear()
        table.update(saved)


@dataclass
class Opts:
    width: int = option(1, "a width (>= 1)")


def _engine(qualname="Eng", **attrs):
    return type(qualname, (), {"from_config": classmethod(lambda cls, cfg, bundle, run_dir: None), **attrs})


def test_an_engine_declares_what_its_capabilities_need():
    with pytest.raises(TypeError, match="lacks preflight"):
        register_engine("e1", _engine(capabilities=Capabilities(early_probe=True)))
    with pytest.raises(TypeError, match="lacks async_worker"):
        register_engine("e1", _engine(capabilities=Capabilities(async_rollout="worker")))
    with pytest.raises(TypeError, match="lacks from_config"):
        register_engine("e1", type("Bare", (), {}))
    with pytest.raises(TypeError, match="options must be a dataclass"):
        register_engine("e1", _engine(options=dict))


def test_names_and_sections_are_one_engines():
    register_engine("wide", _engine(options=Opts))
    assert registry.ENGINES["wide"].section == "wide" and registry.ENGINES["wide"].has_options()
    with pytest.raises(ValueError, match="'wide' is already registered"):
        register_engine("wide", _engine("Other", options=Opts))  # another class under a taken name
    with pytest.raises(ValueError, match="rollout.wide is engine 'wide'"):
        register_engine("wider", _engine("Wider", options=Opts), section="wide")
    assert registry.ENGINES["hf"].section == "" and not registry.ENGINES["hf"].has_options()


def test_an_engine_section_cannot_shadow_a_rollout_key():
    from gigpo.train.config.schema_rollout import rollout_section

    register_engine("groups", _engine(options=Opts))
    with pytest.raises(ValueError, match="rollout.groups would replace the key rollout.groups"):
        rollout_section()
    del registry.ENGINES["groups"]
    register_engine("ray", _engine(options=Opts))  # a fixed sub-section of rollout is a key too
    with pytest.raises(ValueError, match="rollout.ray would replace the key rollout.ray"):
        rollout_section()


def test_trackers_and_losses_are_checked_when_registered():
    with pytest.raises(TypeError, match="lacks samples, alert, finish"):
        trackers.register_tracker("half", type("Half", (), {"metrics": lambda self, it, rec: None}))
    with pytest.raises(ValueError, match="'tensorboard' is already registered"):
        trackers.register_tracker("tensorboard", type("Other", (), {m: lambda *a: None for m in
                                                                     ("metrics", "samples", "alert", "finish")}))
    with pytest.raises(ValueError, match="'ppo-clip' is already registered"):
        loss_registry.register_loss("ppo-clip", lambda *a, **k: None, description="x")
    with pytest.raises(ValueError, match="ratio must be"):
        loss_registry.register_loss("x", lambda *a, **k: None, description="x", ratio="row")
    assert loss_registry.get_loss("gspo").fn().__name__ == "gspo_loss"  # imported on first use
    assert dataclasses.is_dataclass(registry.ENGINES["openai"].options)
