"""Secrets in a configuration: which keys hold credentials, and a config with them masked.

A key is secret when its schema field says so (``option(..., secret=True)``, e.g. ``rollout.openai.api_key``),
or — for keys the schema does not know, such as an env's constructor options or an old config's spellings
(``rollout.engine_api_key``) — when its last name looks like a credential (``api_key``, ``password``,
``token``, ...). Everything gigpo shows or sends elsewhere goes through
:func:`mask_config` / :func:`mask_flat`: ``gigpo view`` reports and ``--serve`` JSON, tracker configs
(TensorBoard, W&B, MLflow) and ``--print-config``. A set value becomes :data:`MASK`; an empty one stays empty
(it says that no key was set). The run's own ``config.yaml`` keeps the value (a resume needs it) and is then
written readable by its owner only.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import re
import typing
from typing import Any

from gigpo.train.config.schema import SECTIONS, Config

#: what a secret value is shown as (fixed: its length or prefix would say something about the key)
MASK = "********"
#: last names of unknown keys (env options, an old config's keys) taken for credentials
_CREDENTIAL_NAME = re.compile(r"(^|_)(api_?key|password|passwd|secret|token|access_key|secret_key)$", re.I)


def _walk(cls: type, prefix: str, out: set[str], known: set[str]) -> None:
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        name = f"{prefix}{f.name}"
        tp = hints.get(f.name)
        if dataclasses.is_dataclass(tp):
            _walk(tp, name + ".", out, known)
            continue
        known.add(name)
        if f.metadata.get("secret"):
            out.add(name)


def _schema() -> tuple[frozenset[str], frozenset[str]]:
    # the section classes of an instance: ``algorithm`` and ``rollout`` grow with estimators and engines
    # registered later (--import), whose options may hold credentials too
    defaults = Config()
    return _schema_of(tuple((section, type(getattr(defaults, section))) for section in SECTIONS))


@functools.lru_cache(maxsize=8)
def _schema_of(sections: tuple[tuple[str, type], ...]) -> tuple[frozenset[str], frozenset[str]]:
    secret: set[str] = set()
    known: set[str] = set()
    for section, cls in sections:
        _walk(cls, section + ".", secret, known)
    return frozenset(secret), frozenset(known)


def secret_keys() -> frozenset[str]:
    """The dotted keys the schema marks secret."""
    return _schema()[0]


def is_secret_key(key: str) -> bool:
    """``key`` (dotted) holds a credential: marked in the schema, or unknown to it and named like one."""
    secret, known = _schema()
    if key in secret:
        return True
    return key not in known and bool(_CREDENTIAL_NAME.search(key.rsplit(".", 1)[-1]))


def _masked(value: Any) -> Any:
    return MASK if value not in (None, "") else value


def mask_flat(flat: dict[str, Any]) -> dict[str, Any]:
    """A copy of a flat ``{"section.key": value}`` mapping with every secret value masked."""
    return {k: _masked(v) if is_secret_key(k) else v for k, v in flat.items()}


def mask_override(arg: str) -> str:
    """A ``key=value`` command-line override with the value masked when the key is secret (a command written to
    a log or a file); any other argument unchanged."""
    key, sep, value = arg.partition("=")
    return f"{key}={_masked(value)}" if sep and not key.startswith("-") and is_secret_key(key.strip()) else arg


def mask_config(data: Any) -> Any:
    """A deep copy of a nested config mapping (``Config.to_dict()``, a parsed config.yaml of any version) with
    every secret value masked; anything that is not a mapping is returned as is."""
    if not isinstance(data, dict):
        return data
    out = copy.deepcopy(data)

    def walk(node: dict, prefix: str) -> None:
        for k, v in node.items():
            key = f"{prefix}{k}"
            if isinstance(v, dict):
                walk(v, key + ".")
            elif is_secret_key(key):
                node[k] = _masked(v)

    walk(out, "")
    return out


def has_secret(data: Any) -> bool:
    """True when a nested config mapping holds a set secret value (its file is then written owner-only)."""
    return mask_config(data) != data


def masked_values(cfg: Config) -> list[str]:
    """The secret keys of ``cfg`` whose value is :data:`MASK` itself (a masked copy used as a config)."""
    flat: dict[str, Any] = {}

    def walk(node: dict, prefix: str) -> None:
        for k, v in node.items():
            if isinstance(v, dict):
                walk(v, f"{prefix}{k}.")
            else:
                flat[f"{prefix}{k}"] = v

    walk(cfg.to_dict(), "")
    return [k for k, v in flat.items() if v == MASK and is_secret_key(k)]
