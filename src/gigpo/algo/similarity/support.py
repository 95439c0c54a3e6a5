"""Small shared pieces of the similarity engine: text -> codepoint arrays, and optional imports with a clear error."""

from __future__ import annotations

import importlib
from types import ModuleType

import numpy as np


def codepoints(s: str) -> np.ndarray:
    """uint32 codepoints of ``s`` (a zero-copy view of its UTF-32 encoding). surrogatepass: a str may hold lone
    surrogates; they are just code points here, as in difflib."""
    return (
        np.frombuffer(s.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        if s
        else np.zeros(0, np.uint32)
    )


def require(module: str, needed_by: str) -> ModuleType:
    """Import an optional dependency on first use; if it is missing, say which metric needs it and how to get it."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        top = module.split(".")[0]
        raise ImportError(
            f"{needed_by} needs the optional package {top!r}: pip install {top} "
            "(or pip install 'gigpo[fast]' for the compiled core)"
        ) from err
