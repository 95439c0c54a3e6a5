"""Files gigpo reads back and files it creates, made safe against what a run directory may hold; stdlib only.

A run directory is shared, copied and sometimes tampered with, so:

* **reads** of run files (metrics, samples, configs) take regular files only — a FIFO would block forever, a
  link to ``/dev/zero`` never ends — and stop after a byte budget counted on what was actually read, never on
  ``st_size`` (which a device or a growing file does not honour): :func:`read_regular`;
* **lines** are split on ``"\\n"`` only, the one line break JSON escapes: ``str.splitlines`` also splits on
  U+2028, U+2029, U+0085, ... which ``json.dumps(..., ensure_ascii=False)`` writes raw inside strings:
  :func:`json_lines`;
* **writes** never follow a symlink planted at the path (``O_NOFOLLOW``): a link named ``config.yaml`` or
  ``.gigpo.lock`` must not make gigpo overwrite its target outside the run directory: :func:`open_nofollow`,
  :func:`write_text_nofollow`, :func:`replace_text`.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import IO

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


class NotRegularFile(OSError):
    """A path gigpo reads or writes that is not a regular file (a FIFO, a device, a socket, a directory) or, for
    a write, a symlink: one line naming it."""


def read_regular(path: str | Path, max_bytes: int) -> tuple[bytes, bool]:
    """``(data, cut)``: at most ``max_bytes`` bytes of the regular file at ``path`` (a symlink is followed to its
    target, which must be a regular file too); ``cut`` is True when the file holds more. Opened non-blocking, so
    a FIFO is refused instead of waiting for a writer. Raises :class:`NotRegularFile` for anything else, OSError
    when it cannot be opened."""
    fd = os.open(path, os.O_RDONLY | _NONBLOCK | _CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(errno.EINVAL, "not a regular file (a FIFO, device or directory)", str(path))
        if _NONBLOCK:
            os.set_blocking(fd, True)
        chunks: list[bytes] = []
        left = max(0, int(max_bytes)) + 1  # one byte more tells whether the file was cut
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    return (data[:max_bytes], True) if len(data) > max_bytes else (data, False)


def read_regular_text(path: str | Path, max_bytes: int) -> tuple[str, bool]:
    """:func:`read_regular` decoded as UTF-8 (bad bytes replaced)."""
    data, cut = read_regular(path, max_bytes)
    return data.decode("utf-8", errors="replace"), cut


def json_lines(text: str) -> list[str]:
    """The lines of a JSON-lines text as its writer delimits them: on ``"\\n"`` only (see the module docstring);
    a ``"\\r"`` before it is dropped."""
    return [ln[:-1] if ln.endswith("\r") else ln for ln in text.split("\n")]


def open_nofollow(path: str | Path, mode: str = "w", perms: int = 0o644) -> IO:
    """``open(path, mode)`` for writing (``"w"``, ``"a"``, ``"wb"``, ``"ab"``) that refuses a symlink at
    ``path`` (:class:`NotRegularFile`) and any existing non-regular file, instead of writing through it."""
    flags = os.O_WRONLY | os.O_CREAT | _NOFOLLOW | _CLOEXEC | _NONBLOCK
    flags |= os.O_APPEND if mode.startswith("a") else os.O_TRUNC
    try:
        fd = os.open(path, flags, perms)
    except OSError as e:
        if e.errno == errno.ELOOP or (e.errno == errno.ENXIO and Path(path).is_fifo()):
            raise NotRegularFile(e.errno, "is a symlink or a FIFO: gigpo does not write through it; remove it",
                                 str(path)) from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFile(errno.EINVAL, "not a regular file: gigpo does not write into it; remove it",
                                 str(path))
        if _NONBLOCK:
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    if "b" in mode:
        return os.fdopen(fd, mode)
    return os.fdopen(fd, mode, encoding="utf-8")


def write_text_nofollow(path: str | Path, text: str, perms: int = 0o644) -> None:
    """Write ``text`` to ``path`` (UTF-8) without following a symlink there (:func:`open_nofollow`)."""
    with open_nofollow(path, "w", perms) as f:
        f.write(text)


def replace_text(path: str | Path, text: str, perms: int = 0o644) -> None:
    """Write ``text`` to ``path`` atomically: into ``path.tmp`` (never through a symlink), then renamed over
    ``path`` (a rename replaces a link itself, never its target). A reader never sees half a file; a failed
    write leaves no ``.tmp`` behind."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        if tmp.is_symlink() or tmp.is_file():  # a planted link, or one left by a crash (with its old mode)
            tmp.unlink()
        write_text_nofollow(tmp, text, perms)
        os.replace(tmp, path)
    except BaseException:
        try:
            if tmp.is_file() and not tmp.is_symlink():
                tmp.unlink()
        except OSError:
            pass
        raise
