"""env=openenv:URL against openenv-core 0.3.0: a server built from openenv-core's own env template (the echo env
``openenv init`` generates), started by this module on 127.0.0.1; the class-in-process route; a server that is
down (exit 2 before the run directory exists) or lost mid-run (the trajectory fails through the guard)."""

import importlib.util
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.peers("openenv")
pytest.importorskip("openenv", reason="needs the [openenv] extra (pip install 'gigpo[openenv]')")

from gigpo import cli  # noqa: E402
from gigpo.envs import make  # noqa: E402
from gigpo.envs.guard import EnvFault, GuardedEnv, registered_factory  # noqa: E402


def _template_env(dest: Path) -> Path:
    """openenv-core's env template, with its placeholders filled as `openenv init echo_env` fills them (without
    the `uv lock` step, which needs the network)."""
    src = Path(importlib.util.find_spec("openenv").origin).parent / "cli" / "templates" / "openenv_env"
    names = {"__ENV_CLASS_NAME__": "EchoEnv", "__ENV_TITLE_NAME__": "Echo Env", "__ENV_NAME__": "echo_env"}
    root = dest / "echo_env"
    for f in src.rglob("*"):
        if f.is_dir() or "__pycache__" in f.parts:
            continue
        out = root / Path(str(f.relative_to(src)).replace("__ENV_NAME__", "echo_env"))
        out.parent.mkdir(parents=True, exist_ok=True)
        text = f.read_text()
        for old, new in names.items():
            text = text.replace(old, new)
        if out.name == "app.py":  # as the template's comment says: more sessions at once (a group's envs)
            text = text.replace("max_concurrent_envs=1", "max_concurrent_envs=8")
        out.write_text(text)
    return root


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = _template_env(tmp_path_factory.mktemp("openenv"))
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "server.app:app", "--host", "127.0.0.1",
                             "--port", str(port)], cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180  # the server imports gradio: slow on a loaded machine
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the template server exited: {proc.stderr.read().decode()[-500:]}")
        try:
            urllib.request.urlopen(f"{url}/schema", timeout=2).read()
            break
        except OSError:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("the template server did not start within 180 s")
    yield url, root, proc
    if proc.poll() is None:
        proc.terminate()
        proc.wait(timeout=30)


def test_reset_step_through_the_template_server(server):
    url, _, _ = server
    env = make(f"openenv:{url}")
    assert env.action_field == "message"
    obs, info = env.reset(3)
    assert obs == "Echo Env environment ready!" and info["admissible_actions"] is None
    obs, reward, done, info = env.step("hello")
    assert obs == "hello" and reward == pytest.approx(0.5) and not done and info["action_valid"]
    env.close()


def test_group_contract_two_sessions_same_seed_same_actions(server):
    url, _, _ = server
    a, b = make(f"openenv:{url}"), make(f"openenv:{url}")
    assert a.reset(5) == b.reset(5)
    assert [a.step(m) for m in ("x", "yy")] == [b.step(m) for m in ("x", "yy")]
    a.close(), b.close()


def test_max_steps_is_truncation(server):
    url, _, _ = server
    env = make(f"openenv:{url}", max_steps=2)
    env.reset(0)
    assert not env.step("a")[2]
    obs, reward, done, info = env.step("b")
    assert done and info["truncated"] and not info["won"]
    env.close()


def test_the_template_class_in_process(server, monkeypatch):
    _, root, _ = server
    monkeypatch.syspath_prepend(str(root.parent))
    env = make("openenv:echo_env.server.echo_env_environment:EchoEnvEnvironment")
    obs, info = env.reset(1)
    assert obs == "Echo Env environment ready!"
    assert env.step("abc")[:2] == ("abc", pytest.approx(0.3))


def test_a_server_that_is_down_is_exit_2_before_the_run_directory(capsys, tmp_path):
    run_dir = tmp_path / "run"
    code = cli.main(["train", f"env=openenv:http://127.0.0.1:{_free_port()}", f"train.run_dir={run_dir}",
                     "env.timeout_s=3"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "no OpenEnv server answers there" in err
    assert not run_dir.exists()


def test_a_server_lost_mid_run_fails_the_trajectory_through_the_guard(server):
    """Last in this module: it kills the module's server."""
    url, _, proc = server
    env = GuardedEnv(registered_factory(f"openenv:{url}", timeout_s=5), timeout_s=20, name="openenv")
    env.reset(0)
    proc.kill()
    proc.wait(timeout=30)
    with pytest.raises(EnvFault):
        env.step("after the server died")
    env.close()
