"""What a run is told: the typed config (schema, sections of the registries' choices), loading YAML/presets and
key=value overrides, coercion, bounds, secrets, the checks made before any model loads, and --help.

Typed training configuration: sections, defaults, YAML + ``key=value`` overrides, validation before any model
loads. This module is the public face; the parts live in

* :mod:`gigpo.train.config.schema`: the sections (dataclasses) with their defaults and ``#:`` documentation;
* :mod:`gigpo.train.config.coercion`: a value to its key's type (finite floats, 64-bit ints, Literals, ...);
* :mod:`gigpo.train.config.load`: defaults ← algorithm preset ← YAML file ← ``key=value`` overrides;
* :mod:`gigpo.train.config.check`: types, ranges, cross-field rules and the env's options (:func:`validate`);
* :mod:`gigpo.train.config.help`: ``--help`` text and ``--print-config`` YAML;
* :mod:`gigpo.train.config.algorithms`: the algorithm table the checks and the help read.

Every mistake is a one-line :class:`ConfigError` naming the key (or file), raised before anything heavy runs.
"""

from gigpo.train.config.algorithms import ALGORITHMS
from gigpo.train.config.check import env_option_error, validate
from gigpo.train.config.coercion import coerce
from gigpo.train.config.error import ConfigError
from gigpo.train.config.help import config_yaml, describe, field_comments
from gigpo.train.config.load import (
    apply_overrides,
    config_from_dict,
    load_config,
    parse_cli_overrides,
    read_config_file,
    resolve_config_path,
)
from gigpo.train.config.presets import ALGO_PRESET_DIR, CONFIG_DIR
from gigpo.train.config.schema import (
    SECTIONS,
    AlgorithmConfig,
    Config,
    EnvConfig,
    GroupingConfig,
    LoraConfig,
    ModelConfig,
    OptimConfig,
    PromptConfig,
    RolloutConfig,
    TrainConfig,
)

__all__ = [
    "ALGORITHMS", "ALGO_PRESET_DIR", "CONFIG_DIR", "SECTIONS", "AlgorithmConfig", "Config", "ConfigError",
    "EnvConfig", "GroupingConfig", "LoraConfig", "ModelConfig", "OptimConfig", "PromptConfig", "RolloutConfig",
    "TrainConfig", "apply_overrides", "coerce", "config_from_dict", "config_yaml", "describe", "env_option_error",
    "field_comments", "load_config", "parse_cli_overrides", "read_config_file", "resolve_config_path", "validate",
]
