"""The API client is importable without torch: envs (the dialogue env's LLM user) talk HTTP through it, and envs
must not pull in model code."""

import subprocess
import sys


def test_client_import_loads_no_torch():
    code = "import sys, gigpo.apiclient, gigpo.serve.client; assert 'torch' not in sys.modules, 'torch was imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_package_names_still_resolve():
    import gigpo.serve as serve

    for name in serve.__all__:
        assert getattr(serve, name) is not None
