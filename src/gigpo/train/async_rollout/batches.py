"""The batches an asynchronous run owes to later iterations, as JSON in a checkpoint (``async_batches.json``).

A resume replays them exactly (:mod:`gigpo.train.async_rollout`). No pickle: tuples and non-string-keyed dicts
are tagged so state keys round-trip as the same hashable values, and the shared allowed-token lists of
constrained decoding are stored once."""

from __future__ import annotations

import collections
import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np

from gigpo.rollout.batch import COLUMNS, RolloutBatch, Trajectory
from gigpo.safefiles import write_text_nofollow

ASYNC_FILE = "async_batches.json"


def _enc(x: Any) -> Any:
    """JSON with tuples and non-string-keyed dicts tagged, so state keys round-trip exactly (hashable)."""
    if isinstance(x, tuple):
        return {"__t": [_enc(v) for v in x]}
    if isinstance(x, list):
        return [_enc(v) for v in x]
    if isinstance(x, dict):
        return {"__d": [[_enc(k), _enc(v)] for k, v in x.items()]}
    if isinstance(x, (np.integer, np.floating, np.bool_)):
        return x.item()
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    raise TypeError(f"cannot store a {type(x).__name__} in {ASYNC_FILE}")


def _dec(x: Any) -> Any:
    if isinstance(x, list):
        return [_dec(v) for v in x]
    if isinstance(x, dict):
        if "__t" in x:
            return tuple(_dec(v) for v in x["__t"])
        return {_dec(k): _dec(v) for k, v in x["__d"]}
    return x


def _batch_to_json(b: RolloutBatch) -> dict:
    table: list[list[int]] = []
    index: dict[int, int] = {}

    def ref(ids: list[int] | None) -> int | None:  # shared allowed-id lists (a slot's vocabulary) stored once
        if ids is None:
            return None
        if id(ids) not in index:
            index[id(ids)] = len(table)
            table.append(list(ids))
        return index[id(ids)]

    cols = {name: _enc(getattr(b, name)) for name in COLUMNS if name != "allowed_tokens"}
    cols["allowed_tokens"] = [None if row is None else [ref(a) for a in row] for row in b.allowed_tokens]
    return {"columns": cols, "allowed_table": table, "policy_version": list(getattr(b, "policy_version", [])),
            "trajectories": [_enc(dataclasses.asdict(t)) for t in b.trajectories]}


def _batch_from_json(d: dict) -> RolloutBatch:
    b = RolloutBatch()
    table = d["allowed_table"]
    for name, col in d["columns"].items():
        if name == "allowed_tokens":
            col = [None if row is None else [None if i is None else table[i] for i in row] for row in col]
        else:
            col = _dec(col)
        setattr(b, name, col)
    b.trajectories = [Trajectory(**_dec(t)) for t in d["trajectories"]]
    b.policy_version = list(d["policy_version"])
    return b


def save_batches(path: Path, owed: dict[int, tuple], start_version: int) -> None:
    """``owed``: iteration -> (batch, stats, row_shard, version, collect seconds), the batches collected for
    iterations not yet trained; written as JSON (no pickle: a checkpoint is safe to load from anyone)."""
    out = {"format": 1, "start_version": int(start_version), "batches": []}
    for it, (batch, stats, row_shard, v, seconds) in sorted(owed.items()):
        out["batches"].append({"iteration": it, "version": v, "seconds": seconds, "stats": stats,
                               "row_shard": np.asarray(row_shard).tolist(), "batch": _batch_to_json(batch)})
    write_text_nofollow(path, json.dumps(out))


def load_batches(path: Path) -> tuple[dict[int, tuple], int]:
    """The owed batches by iteration (ordered) and the run's start version, as :func:`save_batches` wrote them."""
    data = json.loads(Path(path).read_text())
    if data.get("format") != 1:
        raise ValueError(f"{path}: unknown {ASYNC_FILE} format {data.get('format')!r}")
    out = collections.OrderedDict()
    for e in data["batches"]:
        out[int(e["iteration"])] = (_batch_from_json(e["batch"]), e["stats"],
                                    np.asarray(e["row_shard"], dtype=np.int64), int(e["version"]), e["seconds"])
    return out, int(data["start_version"])
