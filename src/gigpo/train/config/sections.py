"""A config section extended by the registry entries that arrived after it was built (``--import``): the one rule
behind ``algorithm.<estimator>`` and ``rollout.<engine>`` sub-sections."""

from __future__ import annotations

import dataclasses
from typing import Any

#: the extended classes, by (base class, its new (section, options class) pairs): one class per combination, so
#: configs built twice with the same plug-ins share their section's type
_EXTENDED: dict[tuple[type, tuple[tuple[str, type], ...]], type] = {}


def extended_section(base: type, keys: type, sections: list[tuple[str, type, Any]], parent: str, kind: str,
                     doc: str | None) -> type:
    """``base`` (the section's class: ``keys``' fields plus the sub-sections registered when it was built),
    subclassed by one field per entry of ``sections`` (``(name, options class, default)``, the registry's current
    list) that ``base`` lacks; ``base`` itself when none. A sub-section named like one of ``keys``' fields is a
    ValueError naming both (``{parent}.{name}``, a ``kind``'s options)."""
    built = {f.name for f in dataclasses.fields(base)}
    own = built - {f.name for f in dataclasses.fields(keys)}  # the sub-sections base already has
    extra = [s for s in sections if s[0] not in own]
    if not extra:
        return base
    for section, options, _ in extra:
        if section in built:
            raise ValueError(f"{kind} options {options.__name__}: its config section {parent}.{section} would "
                             f"replace the key {parent}.{section}; register it with section=<another name>")
    names = (base, tuple((s[0], s[1]) for s in extra))
    if names not in _EXTENDED:
        cls = dataclasses.make_dataclass(base.__name__, extra, bases=(base,))
        cls.__module__, cls.__doc__ = base.__module__, doc
        _EXTENDED[names] = cls
    return _EXTENDED[names]
