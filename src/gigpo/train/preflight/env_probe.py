"""Probing an env before a run (its action spec, whether its start depends on the seed, its prompt length): a
probe only informs, so an env whose reset raises or hangs must not stop or hang the run here — the rollout's env
guard reports such an env with its own one-line fault (``rollout.env_timeout_s``, the fault tests)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

#: seconds a probe may take before it is abandoned (its daemon thread is left to finish or hang on its own)
PROBE_TIMEOUT_S = 10.0


def probe(fn: Callable[[], Any], timeout: float = PROBE_TIMEOUT_S) -> tuple[bool, Any]:
    """``(True, fn())``, or ``(False, None)`` when ``fn`` raised or ran longer than ``timeout`` seconds."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException:  # noqa: BLE001 - any failure of the env is the rollout's to report
            box["failed"] = True

    worker = threading.Thread(target=run, name="gigpo-env-probe", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive() or box.get("failed") or "value" not in box:
        return False, None
    return True, box["value"]
