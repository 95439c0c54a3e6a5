"""The two backends of :class:`gigpo.envs.guard.EnvGuard`: a runner thread that can be abandoned, and one worker
process per env that can be killed. See the guard's module docstring for when to use which."""

from __future__ import annotations

import multiprocessing as mp
import queue
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from gigpo.envs import crash_report
from gigpo.envs.faults import NO_ARG_METHODS, EnvFault, EnvHandle, _error_text, env_attrs, wait_time

#: Marks a handle whose env is stuck in a call on an abandoned thread: it must not even be closed.
_HUNG = object()


def _call(env: Any, method: str, arg: Any) -> Any:
    fn = getattr(env, method)
    return fn() if method in NO_ARG_METHODS else fn(arg)


# ------------------------------------------------------------------------------------------------------ inline
@dataclass
class _Batch:
    """Jobs for one runner thread. ``completed``, ``phase``, ``limit``, ``deadline`` (of the phase in progress:
    building the env, then the call) and ``finished`` change only under ``cond``, so the caller and the runner
    agree on whether the job in progress finished before its deadline. The runner notifies only when the caller
    must wake earlier than planned: a deadline moved forward (env built, call started) or the batch finished —
    in the common case one wake-up per batch."""

    jobs: list[tuple[EnvHandle, str, Any]]
    guard: Any
    deadline: float
    limit: float
    phase: str
    results: list[Any] = field(default_factory=list)
    completed: int = 0
    finished: bool = False
    abandoned: bool = False
    cond: threading.Condition = field(default_factory=threading.Condition)

    def begin(self, phase: str, limit: float) -> bool:
        """Start timing ``phase``; False when the caller already gave up on this batch (the thread retires)."""
        with self.cond:
            if self.abandoned:
                return False
            old, self.deadline = self.deadline, time.monotonic() + limit
            self.phase, self.limit = phase, limit
            if self.deadline < old:
                self.cond.notify()
            return True


def _first_phase(guard: Any, h: EnvHandle, method: str) -> tuple[str, float]:
    return ("make", guard.start_timeout_s) if h._backend is None else (method, guard.timeout_s)


def _runner(q: queue.SimpleQueue) -> None:
    while True:
        b = q.get()
        if b is None:
            return
        g = b.guard
        for k, (h, method, arg) in enumerate(b.jobs):
            res = None
            if h._backend is None:
                if not b.begin("make", g.start_timeout_s):
                    return
                res = _guarded("make", _build, g, h)
            if res is None:
                if not b.begin(method, g.timeout_s):
                    return
                res = _guarded(method, _inline_call, h, method, arg)
            with b.cond:
                if b.abandoned:  # the caller gave up on this job while it ran: this thread is retired
                    return
                b.results.append(res)
                b.completed = k + 1
                b.deadline = time.monotonic() + g.timeout_s  # never a stale deadline before the next begin()
        with b.cond:
            b.finished = True
            b.cond.notify()


def _build(guard: Any, h: EnvHandle) -> None:
    crash_report.enter(h.name or "?", "__init__", None, 0)
    try:
        env = guard.factory()
    finally:
        crash_report.leave()
    h.update(env_attrs(env))
    h._backend = env


def _inline_call(h: EnvHandle, method: str, arg: Any) -> Any:
    # what a process-killing crash inside this call is reported as (gigpo.envs.crash_report; off unless installed)
    seed, steps = getattr(h, "_seed", None), getattr(h, "_steps", 0)
    if method == "reset":
        seed, steps = arg, 0
    elif method == "step":
        steps += 1
    h._seed, h._steps = seed, steps
    crash_report.enter(h.name or "?", method, seed, steps)
    try:
        out = _call(h._backend, method, arg)
    finally:
        crash_report.leave()
    if method == "reset":
        h.update(env_attrs(h._backend))
    return out


def _guarded(phase: str, fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except BaseException as e:  # noqa: BLE001 - even SystemExit from an env is the env's fault, not the run's
        return EnvFault("error", phase, _error_text(e))


class InlineBackend:
    """Runs a batch of calls in order on one daemon thread; the caller sleeps until the batch is done or the
    call in progress passes its deadline. One hand-off per batch keeps the per-step cost negligible."""

    def __init__(self, guard: Any):
        self.guard = guard
        self._queue: queue.SimpleQueue | None = None

    def start(self, h: EnvHandle) -> None:
        h._backend = None  # built by the runner on the handle's first call, under the start deadline

    def run(self, calls: list[tuple[EnvHandle, str, Any]]) -> list[Any]:
        results: list[Any] = []
        while len(results) < len(calls):
            rest = calls[len(results):]
            phase, limit = _first_phase(self.guard, rest[0][0], rest[0][1])
            b = _Batch(rest, self.guard, time.monotonic() + limit, limit, phase)
            if self._queue is None:
                self._queue = queue.SimpleQueue()
                threading.Thread(target=_runner, args=(self._queue,), daemon=True, name="gigpo-env-runner").start()
            self._queue.put(b)
            hung = self._wait(b)
            results.extend(b.results[:b.completed])
            if hung:
                rest[b.completed][0]._backend = _HUNG
                self._queue = None  # the runner is stuck inside the env: the next batch gets a fresh thread
                results.append(EnvFault("timeout", b.phase, (
                    f"did not return within {b.limit:g} s; the env instance and its thread were abandoned (a "
                    "thread cannot be killed: an env that busy-loops keeps using CPU; process workers kill it)")))
        return results

    def _wait(self, b: _Batch) -> bool:
        """False when every job finished; True when the job in progress overran its deadline (now abandoned)."""
        with b.cond:
            while not b.finished:
                left = b.deadline - time.monotonic()
                if left <= 0:
                    b.abandoned = True
                    return True
                b.cond.wait(left)
            return False

    def discard_many(self, handles: list[EnvHandle]) -> None:
        live = [h for h in handles if h._backend is not None and h._backend is not _HUNG]
        if live:
            self.run([(h, "close", None) for h in live])  # a close that hangs is abandoned like any call
        for h in handles:
            h._backend = _HUNG

    def close(self) -> None:
        if self._queue is not None:
            self._queue.put(None)  # the idle runner thread exits
            self._queue = None


# ----------------------------------------------------------------------------------------------------- process
def _process_main(conn: Any, factory: Any) -> None:
    """Worker process: build the env, then answer ``(method, arg)`` requests until ``close`` or EOF."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group; the parent decides
    try:
        env = factory()
        conn.send(("ready", env_attrs(env)))
    except BaseException as e:  # noqa: BLE001
        conn.send(("make-error", _error_text(e)))
        return
    while True:
        try:
            method, arg = conn.recv()
        except (EOFError, OSError):  # the parent is gone
            return
        try:
            out = _call(env, method, arg)
            msg = ("ok", out, env_attrs(env) if method == "reset" else None)
        except BaseException as e:  # noqa: BLE001
            msg = ("err", _error_text(e))
        try:
            conn.send(msg)  # pickles fully before writing: a failure sends nothing
        except Exception as e:  # noqa: BLE001
            conn.send(("err", f"the output cannot be sent to the trainer ({_error_text(e)})"))
        if method == "close":
            return


@dataclass
class _Proc:
    process: Any
    conn: Any
    ready: bool = False
    dead: bool = False


class ProcessBackend:
    """One ``spawn`` worker process per env handle; the calls of a batch run concurrently."""

    def __init__(self, guard: Any):
        self.guard = guard
        self._ctx = mp.get_context("spawn")

    def start(self, h: EnvHandle) -> None:
        parent, child = self._ctx.Pipe()
        p = self._ctx.Process(target=_process_main, args=(child, self.guard.factory), daemon=True,
                              name=f"gigpo-env-{self.guard.name or 'worker'}")
        p.start()  # returns at once: workers of a batch import and build their envs in parallel
        child.close()
        h._backend = _Proc(p, parent)

    def run(self, calls: list[tuple[EnvHandle, str, Any]]) -> list[Any]:
        deadlines: list[float | EnvFault] = []
        for h, method, arg in calls:
            pr = h._backend
            try:
                pr.conn.send((method, arg))
                deadlines.append(time.monotonic() + self.guard.timeout_s
                                 + (0.0 if pr.ready else self.guard.start_timeout_s))
            except Exception as e:  # noqa: BLE001 - a dead pipe, or an action that cannot be pickled
                deadlines.append(self._fault(h, "error", method, f"cannot reach the worker process ({_error_text(e)})"))
        return [d if isinstance(d, EnvFault) else self._answer(h, method, d)
                for (h, method, _), d in zip(calls, deadlines)]

    def _answer(self, h: EnvHandle, method: str, deadline: float) -> Any:
        pr = h._backend
        while True:
            phase = method if pr.ready else "make"
            if not pr.conn.poll(wait_time(deadline)):
                limit = self.guard.timeout_s + (0.0 if pr.ready else self.guard.start_timeout_s)
                return self._fault(h, "timeout", phase,
                                   f"did not return within {limit:g} s; its worker process was killed")
            try:
                msg = pr.conn.recv()
            except (EOFError, OSError):
                pr.process.join(1.0)
                return self._fault(h, "error", phase, f"the worker process died (exit code {pr.process.exitcode})")
            if msg[0] == "ready":
                pr.ready = True
                h.update(msg[1])
                deadline = min(deadline, time.monotonic() + self.guard.timeout_s)
                continue
            if msg[0] == "make-error":
                return self._fault(h, "error", "make", msg[1])
            if msg[0] == "err":
                return EnvFault("error", method, msg[1])
            if msg[2] is not None:
                h.update(msg[2])
            return msg[1]

    def _fault(self, h: EnvHandle, kind: str, method: str, message: str) -> EnvFault:
        self._kill(h._backend)
        return EnvFault(kind, method, message)

    @staticmethod
    def _kill(pr: _Proc) -> None:
        if not pr.dead:
            pr.dead = True
            if pr.process.is_alive():
                pr.process.kill()
            pr.process.join(5.0)
            pr.conn.close()

    def discard_many(self, handles: list[EnvHandle]) -> None:
        live = [h._backend for h in handles if isinstance(h._backend, _Proc) and not h._backend.dead]
        for pr in live:
            try:
                pr.conn.send(("close", None))
            except Exception:  # noqa: BLE001 - already gone; killed below
                pass
        deadline = time.monotonic() + self.guard.timeout_s
        for pr in live:  # a clean exit within the deadline, else killed
            pr.process.join(wait_time(deadline))
            self._kill(pr)

    def close(self) -> None:
        pass  # every process was stopped by discard_many
