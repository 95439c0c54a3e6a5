"""Worker of tests/train/test_distributed.py, run under ``torchrun``: trains each configuration it is given (one
per ``--run NAME key=value ...`` group, sharing one process group) and leaves each run directory behind.

Each rank's own numbers are not written anywhere: the test compares the checkpoints rank 0 writes."""

from __future__ import annotations

import sys

from gigpo.train import distributed
from gigpo.train.config import load_config
from gigpo.train.trainer import Trainer


def main(argv: list[str]) -> int:
    runs: list[list[str]] = []
    for a in argv:
        if a == "--run":
            runs.append([])
        else:
            runs[-1].append(a)
    for overrides in runs:
        cfg = load_config(None, overrides)
        distributed.init(cfg)
        Trainer(cfg).train()
    distributed.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
