"""``python -m gigpo ...``: the same as the ``gigpo`` command."""

import sys

from gigpo.cli import main

sys.exit(main())
