"""The ``worker`` rollout engine: generation in a separate process that holds its own CPU copy of the policy.

Why a process and not a thread: the learner's update and the rollout's generation are both torch compute; in
one process they would share one set of intra-op threads and the GIL-bound Python of the sampling loop. A
worker process with ``threads`` torch threads of its own overlaps with the learner on a second core without
oversubscription (``rollout.async``, :mod:`gigpo.train.async_rollout`).

The copy lives in shared memory: the parent builds it (``copy.deepcopy`` of the learner's model, then
``share_memory()``) and hands it to a spawned child, so :meth:`WorkerEngine.push_weights` is an in-place copy of
the learner's parameters into those tensors — no serialisation, no per-push transfer — made while the worker
is idle (one caller drives the engine: the rollout thread). The child samples with the ordinary
:class:`gigpo.rollout.engines.hf.HFEngine` on that copy, so free and constrained decoding behave exactly as in one
process. Constraints cross the pipe as their admissible-action lists (an
:class:`~gigpo.agent.constrained.ActionConstraint` holds a tokenizer); the child rebuilds them with its own
:class:`~gigpo.agent.constrained.ConstraintCache`.

Failure contract: a worker that dies (killed, out of memory, a crash in generation) makes the pending and every
later :meth:`generate` raise :class:`WorkerDied` until :meth:`restart`, which starts a fresh child on the same
shared weights; the caller decides what the lost generations mean (the async loop fails that iteration's
trajectories and goes on).
"""

from __future__ import annotations

import copy
import multiprocessing as mp
import threading
from typing import Any

import torch

from gigpo.rollout.registry import EngineError as _EngineError
from gigpo.rollout.registry import Generation
from gigpo.rollout.sampling import eos_ids as _eos_ids


class WorkerDied(_EngineError):
    """The rollout worker process is gone; its generations are lost (call :meth:`WorkerEngine.restart`)."""


def _constraint_spec(c: Any) -> tuple | None:
    """What the child needs to rebuild ``c``: its admissible actions and response format (None: free row)."""
    if c is None:
        return None
    return tuple(c.trie.actions), c.fmt, bool(c.trie.slot_ids is not None)


def _worker_main(conn: Any, model: Any, tokenizer: Any, threads: int, engine_cls: type) -> None:
    """The child: answer ``("generate", prompts, kwargs, specs)``, ``("seed", s)``, ``("close",)``."""
    import signal

    # Ctrl-C reaches the whole process group; the learner stops this worker itself (close), so the worker must
    # not die first with a KeyboardInterrupt traceback that the learner would take for a crash
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from gigpo.agent.constrained import ConstraintCache

    if threads:
        torch.set_num_threads(threads)
    engine = engine_cls(model.eval(), tokenizer, "cpu")
    caches: dict[tuple, ConstraintCache] = {}
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):  # the parent is gone
            return
        kind = msg[0]
        if kind == "close":
            conn.send(("ok", None))
            return
        try:
            if kind == "seed":
                torch.manual_seed(int(msg[1]))
                conn.send(("ok", None))
            elif kind == "generate":
                _, prompts, kwargs, specs = msg
                constraints = None
                if specs is not None:
                    constraints = []
                    for spec in specs:
                        if spec is None:
                            constraints.append(None)
                            continue
                        actions, fmt, slots = spec
                        cache = caches.get((fmt, slots))
                        if cache is None:
                            cache = caches[(fmt, slots)] = ConstraintCache(tokenizer, engine.eos_ids, fmt,
                                                                           slots=slots)
                        constraints.append(cache.get(list(actions)))
                conn.send(("ok", engine.generate(prompts, constraints=constraints, **kwargs)))
            else:
                conn.send(("error", f"unknown request {kind!r}"))
        except Exception as e:  # a bad request must not take the worker down with it
            conn.send(("error", f"{type(e).__name__}: {e}"))


class WorkerEngine:
    """Sampling in a spawned worker process on a shared-memory CPU copy of ``model`` (module docstring).

    ``engine_cls``: the in-process engine the child samples with (:class:`gigpo.rollout.engines.hf.HFEngine`,
    whose :meth:`~gigpo.rollout.engines.hf.HFEngine.async_worker` builds this); ``threads``: the worker's torch
    intra-op threads (0 = torch's default). ``stats()`` counts pushes,
    restarts and the version the worker samples from."""

    shares_learner_weights = False

    def __init__(self, model: Any, tokenizer: Any, *, engine_cls: type, threads: int = 1,
                 start_timeout_s: float = 120.0):
        self.model = copy.deepcopy(model).cpu().eval().requires_grad_(False)
        self.model.share_memory()
        self.tokenizer = tokenizer
        self.eos_ids = _eos_ids(self.model, tokenizer)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_ids[0]
        self.threads = int(threads)
        self.engine_cls = engine_cls
        self.start_timeout_s = start_timeout_s
        self.version = -1
        self.restarts = 0
        self.pushes = 0
        self._lock = threading.Lock()  # one request at a time on the pipe
        self._proc: Any = None
        self._conn: Any = None
        self._start()

    # ------------------------------------------------------------------ process
    def _start(self) -> None:
        ctx = mp.get_context("spawn")  # never fork a process whose torch threads are running
        parent, child = ctx.Pipe()
        self._proc = ctx.Process(target=_worker_main, args=(child, self.model, self.tokenizer, self.threads,
                                                            self.engine_cls),
                                 name="gigpo-rollout-worker", daemon=True)
        self._proc.start()
        child.close()
        self._conn = parent

    def restart(self) -> None:
        """A fresh child on the same shared weights (the dead one's generations stay lost)."""
        self._stop(kill=True)
        self.restarts += 1
        self._start()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def _request(self, msg: tuple, timeout_s: float | None = None) -> Any:
        with self._lock:
            if self._proc is None or not self._proc.is_alive():
                raise WorkerDied(f"rollout worker (pid {self.pid}) is not running")
            try:
                self._conn.send(msg)
                # poll in slices so a dead child is noticed even if the pipe stays open
                while not self._conn.poll(0.5):
                    if not self._proc.is_alive():
                        raise WorkerDied(f"rollout worker (pid {self.pid}) died (exit code {self._proc.exitcode})")
                status, value = self._conn.recv()
            except (EOFError, OSError, BrokenPipeError) as e:
                raise WorkerDied(f"rollout worker (pid {self.pid}) died ({type(e).__name__})") from None
        if status != "ok":
            raise _EngineError(f"rollout worker: {value}")
        return value

    # ------------------------------------------------------------------ engine contract
    def probe(self) -> None:
        """The worker answers (it has imported torch and holds the weights)."""
        self._request(("seed", 0))

    def seed(self, seed: int) -> None:
        """Seed the worker's torch sampling RNG (the async loop does this per iteration: reproducible)."""
        self._request(("seed", int(seed)))

    def generate(self, prompts: list[list[int]], *, max_new_tokens: int, temperature: float = 1.0,
                 top_p: float = 1.0, constraints: list[Any] | None = None) -> list[Generation]:
        if not prompts:
            return []
        specs = [_constraint_spec(c) for c in constraints] if constraints is not None else None
        kwargs = {"max_new_tokens": max_new_tokens, "temperature": temperature, "top_p": top_p}
        return self._request(("generate", prompts, kwargs, specs))

    @torch.no_grad()
    def push_weights(self, model: Any, version: int, *, required: bool = False) -> dict[str, float]:
        """Copy ``model``'s parameters and buffers into the shared copy, in place (the worker must be idle: the
        caller is the only one driving this engine)."""
        with self._lock:
            src = dict(model.named_parameters())
            src.update(dict(model.named_buffers()))
            for name, dst in [*self.model.named_parameters(), *self.model.named_buffers()]:
                dst.copy_(src[name].detach().to(dst.device, dst.dtype))
            self.version = int(version)
            self.pushes += 1
        return {}

    def stats(self) -> dict[str, float]:
        return {"rollout/worker_restarts": float(self.restarts), "rollout/worker_version": float(self.version)}

    def _stop(self, kill: bool = False) -> None:
        proc, conn = self._proc, self._conn
        self._proc = self._conn = None
        if proc is None:
            return
        if not kill and proc.is_alive():
            try:
                conn.send(("close",))
                if conn.poll(5.0):
                    conn.recv()
            except (EOFError, OSError, BrokenPipeError):
                pass
        proc.join(timeout=0 if kill else 5.0)
        if proc.is_alive():
            proc.kill()
            proc.join(timeout=5.0)
        conn.close()

    def close(self) -> None:
        self._stop()
