"""`python -m gigpo.serve CHECKPOINT_OR_MODEL [--port P]`: the same as `gigpo serve`."""

import sys

from gigpo.serve.server import serve_main

if __name__ == "__main__":
    sys.exit(serve_main(sys.argv[1:]))
