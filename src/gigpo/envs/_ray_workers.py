"""The ``ray`` backend of :class:`gigpo.envs.guard.EnvGuard`: envs live in Ray actors (a local ``ray.init`` or the
cluster at ``ray_address``), so a slow env's steps run on other cores or other machines.

Placement: ``num_workers == 0`` gives every env its own actor (the isolation of ``process`` workers); with
``num_workers = W`` the envs are spread round-robin over W actors, and each actor runs its envs' calls one after
another (an actor is one Python process). Deadlines: the k-th call queued on an actor within a batch must finish
within ``k × timeout_s`` (plus ``start_timeout_s`` for each env it still has to build) of the batch's start, so a
call may use time its predecessors left unused but a hang is always caught. A call past its deadline, or an
actor that dies, kills (or loses) the actor: **every** env it hosts faults — the hung or crashed one and its
co-tenants, each trajectory ended as failed with a message naming the cause — and fresh envs go to a fresh actor.

Ray is initialised once per process (the first ray guard) and never shut down here: a run's train and eval
collectors share it, and a cluster joined with ``ray_address`` belongs to its owner.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Any

from gigpo.envs.faults import NO_ARG_METHODS, EnvFault, EnvHandle, _error_text, env_attrs


class _EnvHost:
    """The actor: env instances by slot id, built from pickled factories; every error comes back as a value."""

    def __init__(self) -> None:
        self.envs: dict[int, Any] = {}

    def make(self, slot: int, factory: Any) -> tuple:
        try:
            self.envs[slot] = env = factory()
            return ("ok", env_attrs(env))
        except BaseException as e:  # noqa: BLE001 - the env's fault, reported as a fault of its trajectory
            return ("make-error", _error_text(e))

    def call(self, slot: int, method: str, arg: Any) -> tuple:
        env = self.envs.get(slot)
        if env is None:
            return ("err", "the env was never built")
        try:
            out = getattr(env, method)() if method in NO_ARG_METHODS else getattr(env, method)(arg)
            if method == "close":
                self.envs.pop(slot, None)
            return ("ok", out, env_attrs(env) if method == "reset" else None)
        except BaseException as e:  # noqa: BLE001
            return ("err", _error_text(e))


@dataclass
class _Actor:
    ref: Any
    envs: set[int] = field(default_factory=set)
    dead: bool = False


@dataclass
class _Slot:
    actor: _Actor
    slot: int
    built: bool = False


_REMOTE: Any = None


def _ray(address: str) -> Any:
    """``ray``, initialised (once) locally or on ``address``; the actor class made remote once."""
    global _REMOTE
    try:
        import ray
    except ImportError:
        raise ImportError("env workers 'ray' need Ray: pip install 'gigpo[ray]' (or use env workers 'process')") \
            from None
    if not ray.is_initialized():
        ray.init(address=address or None, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True,
                 configure_logging=False)
    if _REMOTE is None:
        _REMOTE = ray.remote(num_cpus=0)(_EnvHost)  # an env host reserves no CPU: envs mostly wait on I/O or us
    return ray


class RayBackend:
    def __init__(self, guard: Any):
        self.guard = guard
        self.ray = _ray(getattr(guard, "ray_address", "") or "")
        self.num_workers = int(getattr(guard, "num_workers", 0) or 0)
        self._actors: list[_Actor] = []
        self._ids = itertools.count()
        self._rr = itertools.count()
        self._factory_ref = self.ray.put(guard.factory)  # shipped once, not with every make()

    def _new_actor(self) -> _Actor:
        a = _Actor(_REMOTE.remote())
        self._actors.append(a)
        return a

    def _place(self) -> _Actor:
        if not self.num_workers:
            return self._new_actor()
        live = [a for a in self._actors if not a.dead]
        while len(live) < self.num_workers:
            live.append(self._new_actor())
        return live[next(self._rr) % len(live)]

    def start(self, h: EnvHandle) -> None:
        a = self._place()
        s = _Slot(a, next(self._ids))
        a.envs.add(s.slot)
        h._backend = s

    def run(self, calls: list[tuple[EnvHandle, str, Any]]) -> list[Any]:
        g, start = self.guard, time.monotonic()
        queued: dict[int, float] = {}  # per actor: the allowance of the calls queued on it so far in this batch
        pending = []  # (index, handle, method, make ref or None, call ref, deadline)
        out: list[Any] = [None] * len(calls)
        for i, (h, method, arg) in enumerate(calls):
            s: _Slot = h._backend
            if s.actor.dead:
                out[i] = EnvFault("error", method, "its worker actor was lost earlier")
                continue
            make_ref = None
            allowance = g.timeout_s
            if not s.built:
                make_ref = s.actor.ref.make.remote(s.slot, self._factory_ref)
                allowance += g.start_timeout_s
            ref = s.actor.ref.call.remote(s.slot, method, arg)
            total = queued.get(id(s.actor), 0.0) + allowance
            queued[id(s.actor)] = total
            pending.append((i, h, method, make_ref, ref, start + total))
        for i, h, method, make_ref, ref, deadline in pending:
            out[i] = self._answer(h, method, make_ref, ref, deadline)
        return out

    def _get(self, ref: Any, deadline: float) -> Any:
        ready, _ = self.ray.wait([ref], timeout=max(0.0, deadline - time.monotonic()))
        if not ready:
            raise TimeoutError
        return self.ray.get(ref)

    def _answer(self, h: EnvHandle, method: str, make_ref: Any, ref: Any, deadline: float) -> Any:
        s: _Slot = h._backend
        if s.actor.dead:
            return EnvFault("error", method, "its worker actor was killed because another env it hosted faulted")
        phase = "make" if make_ref is not None else method
        try:
            if make_ref is not None:
                msg = self._get(make_ref, deadline)
                if msg[0] == "make-error":
                    return EnvFault("error", "make", msg[1])
                s.built = True
                h.update(msg[1])
                phase = method
            msg = self._get(ref, deadline)
        except TimeoutError:
            self._kill(s.actor)
            return EnvFault("timeout", phase, f"did not return within its deadline ({self.guard.timeout_s:g} s "
                                              "per call); its worker actor was killed")
        except Exception as e:  # noqa: BLE001 - RayActorError and friends: the actor process is gone
            self._kill(s.actor)
            return EnvFault("error", phase, f"the worker actor died ({type(e).__name__}: "
                                            f"{' '.join(str(e).split())[:200]})")
        if msg[0] == "err":
            return EnvFault("error", method, msg[1])
        if msg[2] is not None:
            h.update(msg[2])
        return msg[1]

    def _kill(self, a: _Actor) -> None:
        if not a.dead:
            a.dead = True
            try:
                self.ray.kill(a.ref, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass

    def discard_many(self, handles: list[EnvHandle]) -> None:
        live = [h for h in handles if isinstance(h._backend, _Slot) and not h._backend.actor.dead]
        built = [h for h in live if h._backend.built]
        if built:
            self.run([(h, "close", None) for h in built])  # each close under the deadline
        for h in live:
            s = h._backend
            s.actor.envs.discard(s.slot)
            if not s.actor.envs and not self.num_workers:  # a one-env actor whose env is gone
                self._kill(s.actor)

    def close(self) -> None:
        for a in self._actors:
            self._kill(a)
        self._actors.clear()
