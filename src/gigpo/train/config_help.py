"""The configuration as text: every key with its default and documentation (``gigpo train --help``), and a
resolved :class:`Config` as YAML (``gigpo train --print-config``, a run directory's config.yaml)."""

from __future__ import annotations

import dataclasses
import inspect
import textwrap
import typing

import yaml

from gigpo.train.algorithms import SPECS
from gigpo.train.config_schema import SECTIONS, Config

_WIDTH = 110


def describe() -> str:
    """Every key with its default and documentation, then the algorithm table (for ``gigpo train --help``)."""
    hints = typing.get_type_hints(Config)
    lines = []
    for sname in SECTIONS:
        stype = hints[sname]
        doc = " ".join(s.strip() for s in (stype.__doc__ or "").strip().splitlines())
        lines += textwrap.wrap(f"{sname}:  {doc}", _WIDTH, subsequent_indent="    ")
        defaults = stype()
        comments = field_comments(stype)
        for f in dataclasses.fields(stype):
            key = f"  {sname}.{f.name} = {getattr(defaults, f.name)!r}"
            hint = comments.get(f.name, "")
            if not hint:
                lines.append(key)
            elif len(key) + 4 + len(hint) <= _WIDTH:
                lines.append(f"{key}    # {hint}")
            else:  # the whole comment, wrapped under its key
                lines.append(key)
                lines += textwrap.wrap(hint, _WIDTH, initial_indent="      # ", subsequent_indent="      # ")
    lines.append("algorithms (algorithm.name):")
    width = max(map(len, SPECS))
    lines += [f"  {name:{width}s}  {spec.description}" for name, spec in SPECS.items()]
    return "\n".join(lines)


def field_comments(cls: type) -> dict[str, str]:
    """The documentation of each field: the ``#:`` comment lines above it (all of them, joined) followed by its
    trailing ``#:`` comment. Documentation lives in the dataclass source, next to the default."""
    try:
        src = inspect.getsource(cls).splitlines()
    except (OSError, TypeError):
        return {}
    out: dict[str, str] = {}
    pending: list[str] = []
    for line in src:
        s = line.strip()
        if s.startswith("#:"):
            pending.append(s[2:].strip())
            continue
        if ":" in s and not s.startswith(("class", '"', "def", "@")):
            name = s.split(":")[0].strip()
            if name.isidentifier():
                trailing = s.split("#:", 1)[1].strip() if "#:" in s else ""
                out[name] = " ".join([*pending, trailing]).strip()
        pending = []
    return out


def config_yaml(cfg: Config) -> str:
    """``cfg`` as YAML, in the sections' order; :func:`gigpo.train.config.config_from_dict` reads it back."""
    return yaml.safe_dump(cfg.to_dict(), sort_keys=False, allow_unicode=True)
