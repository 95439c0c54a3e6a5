"""The configuration as text: every key with its default, allowed values and description (``gigpo train --help``),
and a resolved :class:`Config` as YAML (``gigpo train --print-config``, a run directory's config.yaml).

Descriptions are data on the schema (``metadata["doc"]`` of each field, set by
:func:`gigpo.train.config.schema.key`), never scraped from source, so they survive packaging and can be tested."""

from __future__ import annotations

import dataclasses
import textwrap
import types
import typing
from collections.abc import Iterator
from typing import Any, Literal, get_args, get_origin

import yaml

from gigpo.algo.loss_registry import registered_losses
from gigpo.rollout.engines import registered_engines
from gigpo.train.config.algorithms import algorithm_names, spec_of
from gigpo.train.config.schema import SECTIONS, Config
from gigpo.train.reporting.trackers import registered_trackers

_WIDTH = 110


def allowed_values(tp: Any) -> str:
    """What a key of type ``tp`` accepts, as shown by ``--help``: the choices of a Literal, or the kind of value."""
    origin = get_origin(tp)
    if origin is Literal:
        return " | ".join(str(c) for c in get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " | ".join(allowed_values(a) if a is not type(None) else "null" for a in get_args(tp))
    return {bool: "true | false", int: "int", float: "float", str: "str", dict: "mapping", tuple: "list of numbers",
            Any: "any"}.get(tp, getattr(tp, "__name__", str(tp)))


def iter_keys(cls: type, prefix: str) -> Iterator[tuple[str, Any, Any, str]]:
    """``(dotted key, type, default, description)`` of every key of section ``cls``, sub-sections (a field whose
    type is a dataclass, e.g. ``algorithm.hgpo``) expanded in place."""
    hints = typing.get_type_hints(cls)
    defaults = cls()
    for f in dataclasses.fields(cls):
        tp, value = hints[f.name], getattr(defaults, f.name)
        if dataclasses.is_dataclass(tp):
            yield from iter_keys(tp, f"{prefix}.{f.name}")
        else:
            yield f"{prefix}.{f.name}", tp, value, f.metadata.get("doc", "")


def field_comments(cls: type) -> dict[str, str]:
    """The description of each field of section ``cls`` (its ``metadata["doc"]``), by field name."""
    return {f.name: f.metadata.get("doc", "") for f in dataclasses.fields(cls)}


def section_doc(cls: type) -> str:
    return " ".join(s.strip() for s in (cls.__doc__ or "").strip().splitlines())


def describe() -> str:
    """Every key with its default, allowed values and description, then the tables of algorithms, engines, losses
    and trackers — built-in and ``--import``-ed (``--help``)."""
    defaults = Config()  # the section classes of an instance: ``algorithm`` grows with estimators registered later
    lines = []
    for sname in SECTIONS:
        stype = type(getattr(defaults, sname))
        lines += textwrap.wrap(f"{sname}:  {section_doc(stype)}", _WIDTH, subsequent_indent="    ")
        for key, tp, default, doc in iter_keys(stype, sname):
            head = f"  {key} = {default!r}  [{allowed_values(tp)}]"
            if len(head) + 4 + len(doc) <= _WIDTH:
                lines.append(f"{head}    # {doc}")
            else:  # the whole description, wrapped under its key
                lines.append(head)
                lines += textwrap.wrap(doc, _WIDTH, initial_indent="      # ", subsequent_indent="      # ")
    lines.append("algorithms (algorithm.name):")
    names = algorithm_names()  # the table, then registered estimators without an entry (GraphGPO, --import-ed)
    width = max(map(len, names))
    lines += [f"  {name:{width}s}  {spec_of(name).description}" for name in names]
    lines.append("engines (rollout.engine; options in rollout.<name>):")
    engines = registered_engines()  # the built-ins, then --import-ed ones
    width = max(map(len, engines))
    lines += [f"  {name:{width}s}  {spec.description}" for name, spec in engines.items()]
    lines.append("losses (algorithm.loss):")
    losses = registered_losses()
    width = max(map(len, losses))
    lines += [f"  {name:{width}s}  {loss.description}" for name, loss in losses.items()]
    lines.append("trackers (train.loggers):")
    trackers = registered_trackers()
    width = max(map(len, trackers))
    lines += [f"  {name:{width}s}  {t.description}" for name, t in trackers.items()]
    return "\n".join(lines)


def config_yaml(cfg: Config) -> str:
    """``cfg`` as YAML, in the sections' order, secrets masked (``--print-config`` output is pasted and shared;
    gigpo.train.config.secrets); :func:`gigpo.train.config.config_from_dict` reads it back (a masked key is
    refused there: set the key again, or use the GIGPO_API_KEY environment variable)."""
    from gigpo.train.config.secrets import mask_config

    return yaml.safe_dump(mask_config(cfg.to_dict()), sort_keys=False, allow_unicode=True)
