"""Values to types: a YAML or CLI value converted to a key's annotated type (int, float, bool, str, Literal,
dict, tuple), or a one-line :class:`ConfigError` naming the key. Floats must be finite, ints fit in 64 bits."""

from __future__ import annotations

import math
import types
import typing
from typing import Any, Literal, get_args, get_origin

import yaml

from gigpo.train.config.error import ConfigError

#: Integers travel to numpy/torch (seeds, sizes), which hold 64 bits; a larger value is a typo, not a setting.
INT_LIMIT = 2**63


def _yaml_value(text: str, key: str) -> Any:
    """A CLI value parsed as YAML (``[0.8, 0.9]``, ``{a: 1}``), or a ConfigError naming ``key``."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"{key}: {text!r} is not valid YAML ({yaml_problem(err)})") from None


def parse_scalar(text: str) -> Any:
    """A CLI value for an untyped key: YAML when it parses (``6`` → 6, ``true`` → True), else the text itself."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def _as_int(value: Any, key: str) -> int:
    if isinstance(value, bool):
        raise ConfigError(f"{key}: expected an integer, got {value!r}")
    if isinstance(value, int):
        out = value
    else:
        text = value.strip() if isinstance(value, str) else value
        try:
            if not isinstance(text, str):
                raise TypeError  # int(3.5) would truncate: non-strings take the float path and its checks
            out = int(text)  # exact for "12345678901234567890", which a float would round
        except (TypeError, ValueError):
            try:
                f = float(text)
            except (TypeError, ValueError):
                raise ConfigError(f"{key}: expected an integer, got {value!r}") from None
            if not math.isfinite(f) or abs(f) >= INT_LIMIT:
                raise ConfigError(f"{key}: {value!r} is out of range for an integer (|x| < 2^63)") from None
            if f != int(f):
                raise ConfigError(f"{key}: expected an integer, got {value!r}") from None
            out = int(f)
    if abs(out) >= INT_LIMIT:
        raise ConfigError(f"{key}: {value!r} is out of range for an integer (|x| < 2^63)")
    return out


def _as_float(value: Any, key: str) -> float:
    if isinstance(value, bool):
        raise ConfigError(f"{key}: expected a number, got {value!r}")
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key}: expected a number, got {value!r}") from None
    except OverflowError:  # float(10**400)
        raise ConfigError(f"{key}: {value!r} is out of range for a number") from None
    if not math.isfinite(f):
        raise ConfigError(f"{key}: expected a finite number, got {value!r}")
    return f


def coerce(value: Any, tp: Any, key: str) -> Any:
    """Convert ``value`` (from YAML or a CLI string) to the annotated type ``tp`` or raise ConfigError."""
    origin = get_origin(tp)
    if tp is Any:
        return parse_scalar(value) if isinstance(value, str) else value
    if origin is Literal:
        choices = get_args(tp)
        if value not in choices:
            raise ConfigError(f"{key}: {value!r} is not one of {', '.join(map(repr, choices))}")
        return value
    if origin in (typing.Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if value is None or value == "null":
            return None
        return coerce(value, args[0], key)
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "1", "yes", "on"):
            return True
        if isinstance(value, str) and value.lower() in ("false", "0", "no", "off"):
            return False
        raise ConfigError(f"{key}: expected true/false, got {value!r}")
    if tp is int:
        return _as_int(value, key)
    if tp is float:
        return _as_float(value, key)
    if tp is str:
        if isinstance(value, (dict, list)):
            raise ConfigError(f"{key}: expected a string, got {value!r}")
        return str(value)
    if tp is dict or origin is dict:
        if isinstance(value, str):
            value = _yaml_value(value, key)
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a mapping, got {value!r}")
        return dict(value)  # a copy: later `key.sub=...` overrides must not edit the YAML data
    if tp is tuple or origin is tuple:
        if isinstance(value, str):
            value = _yaml_value(value, key)
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}: expected a list, got {value!r}")
        return tuple(_as_float(v, f"{key}[{i}]") for i, v in enumerate(value))
    return value


def yaml_problem(err: yaml.YAMLError) -> str:
    """One line from a multi-line YAML error: what is wrong and where."""
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    mark = getattr(err, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{problem}{where}"
