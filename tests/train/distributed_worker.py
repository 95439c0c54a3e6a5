"""Worker of tests/train/test_distributed.py, run under ``torchrun``: trains each configuration it is given, one
per ``+run key=value ...`` or ``+resume RUN_DIR key=value ...`` group (``+``, not ``--``, which torchrun would
read), in one process group — one job launch for several runs — and leaves each run directory behind.

Each rank's own numbers are not written anywhere: the test compares the checkpoints rank 0 writes."""

from __future__ import annotations

import sys

from gigpo.train.config import load_config, parse_cli_overrides
from gigpo.train.parallel import distributed
from gigpo.train.rundir import plan_resume
from gigpo.train.trainer import Trainer


def main(argv: list[str]) -> int:
    runs: list[list[str]] = []
    for a in argv:
        if a in ("+run", "+resume"):  # +resume RUN_DIR key=value ...: continue that run (Trainer.resume)
            runs.append([a])
        else:
            runs[-1].append(a)
    for kind, *args in runs:
        if kind == "+resume":
            plan = plan_resume(args[0], parse_cli_overrides(args[1:]))
            distributed.init(plan.cfg)
            Trainer.from_plan(plan).train()
            continue
        cfg = load_config(None, args)
        distributed.init(cfg)
        Trainer(cfg).train()
    distributed.shutdown(synchronize=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
