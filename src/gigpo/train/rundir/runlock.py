"""One run per directory: a lock held for the life of the process that trains in it.

The lock is ``RUN_DIR/.gigpo.lock``, an advisory ``flock`` on that file; the file records the holder's PID and
host for the error message. It is opened without following a symlink (``O_NOFOLLOW``): a link planted there is
refused, never written through. ``flock`` belongs to the open file, so the kernel releases it when the
holder exits in any way (crash, ``kill -9``, a power cut on a local disk): a lock whose holder is dead is simply
free, and the next run takes it over (logging which PID left it) — no stale-PID guessing. Two runs started at the
same instant cannot both pass: whoever gets the lock second sees it held and stops with exit 2 naming the
holder's PID (:class:`RunDirLocked`, a config error), before it writes anything.

Within one process the lock is re-entrant (a test that trains, then resumes the same directory, holds it once);
it is released, and its file removed, at process exit or by :func:`release_run_dir`. Under ``torchrun`` only
global rank 0 locks (the other ranks never write the run directory). ``flock`` works on local filesystems and
on NFS (Linux maps it onto byte-range locks there); where ``fcntl`` does not exist (Windows) no lock is taken.
"""

from __future__ import annotations

import atexit
import errno
import json
import logging
import os
import socket
import stat
import threading
from pathlib import Path

from gigpo.safefiles import read_regular
from gigpo.train.config.error import ConfigError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

LOCK_FILE = ".gigpo.lock"

_held: dict[str, tuple[int, int]] = {}  # resolved run dir -> (fd, re-entry count)
_guard = threading.Lock()


class RunDirLocked(ConfigError):
    """Another live process trains in this run directory."""


def _holder(path: Path) -> dict:
    try:
        raw, _ = read_regular(path, 4096)
        data = json.loads(raw or b"{}")
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _pid_alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def lock_run_dir(run_dir: str | Path) -> None:
    """Take the run directory's lock for this process (a no-op if this process holds it already, and on ranks
    other than 0). Raises :class:`RunDirLocked` naming the holder when another live process has it."""
    if fcntl is None or os.environ.get("RANK", "0").strip() not in ("", "0"):
        return
    key = str(Path(run_dir).resolve())
    with _guard:
        if key in _held:
            fd, n = _held[key]
            _held[key] = (fd, n + 1)
            return
        path = Path(key) / LOCK_FILE
        while True:
            try:  # never through a symlink: the record below would overwrite the link's target
                fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | os.O_NONBLOCK, 0o644)
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    os.close(fd)
                    raise OSError(errno.EINVAL, "not a regular file")
            except OSError as e:
                if e.errno not in (errno.ELOOP, errno.EINVAL, errno.ENXIO):
                    raise
                raise RunDirLocked(f"{path} is a symlink or not a regular file: gigpo does not write its lock "
                                   "through it; remove it (or use another train.run_dir)") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                who = _holder(path)
                pid = who.get("pid", "unknown")
                where = f" on {who['host']}" if who.get("host") not in (None, socket.gethostname()) else ""
                raise RunDirLocked(f"{run_dir} is in use by another gigpo run (PID {pid}{where}); wait for it "
                                   "to finish or stop it, or use another train.run_dir") from None
            # The previous holder removes the file when it releases: if ours was unlinked meanwhile, the lock is
            # on a dead inode that a third process would not see. Retry on the file now at the path.
            try:
                same = os.fstat(fd).st_ino == os.stat(path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        previous = _holder(path)
        if previous.get("pid") not in (None, os.getpid()) and not _pid_alive(previous.get("pid")):
            log.warning("took over the lock of %s left by PID %s, which is no longer running", run_dir,
                        previous.get("pid"))
        record = json.dumps({"pid": os.getpid(), "host": socket.gethostname()}).encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, record, 0)
        _held[key] = (fd, 1)


def release_run_dir(run_dir: str | Path, *, force: bool = False) -> None:
    """Drop one hold of the lock (all of them with ``force``); the last one removes the lock file and unlocks."""
    key = str(Path(run_dir).resolve())
    with _guard:
        if key not in _held:
            return
        fd, n = _held[key]
        if n > 1 and not force:
            _held[key] = (fd, n - 1)
            return
        del _held[key]
        try:
            os.unlink(Path(key) / LOCK_FILE)  # before unlocking: a waiter then retries on a fresh file
        except OSError:
            pass
        os.close(fd)  # closing the last descriptor releases the flock


def holds_lock(run_dir: str | Path) -> bool:
    return str(Path(run_dir).resolve()) in _held


@atexit.register
def _release_all() -> None:
    for key in list(_held):
        release_run_dir(key, force=True)
