"""The local Ray cluster ``--executor ray`` starts listens on loopback only and refuses a
process without its token (issue 53, item 7: it listened on every interface, unauthenticated).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harnessctl.run.ray import LOCAL_CLUSTER_ENV, connect
from tests.helpers.ci import unavailable

pytestmark = pytest.mark.slow  # starts a cluster (about 10 s)

LOOPBACK = ("127.", "::1", "::ffff:127.")
# a client of the cluster's GCS, as another user of the machine could run one
PROBE = (
    "import sys; from ray._raylet import GcsClient; "
    "print(len(GcsClient(address=sys.argv[1]).internal_kv_keys(b'', None, timeout=10)))"
)


def _listening(root) -> list[tuple[str, str]]:
    """(process name, address) of every socket the process tree of ``root`` listens on."""
    import psutil

    found = []
    for proc in [root, *root.children(recursive=True)]:
        try:
            conns = proc.net_connections(kind="inet")
            found += [(proc.name(), c.laddr.ip) for c in conns if c.status == psutil.CONN_LISTEN]
        except psutil.Error:  # a worker that exited meanwhile
            continue
    return found


def _probe(gcs: str, home: Path, **env: str) -> subprocess.Popen:
    home.mkdir(exist_ok=True)
    kept = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    return subprocess.Popen(
        [sys.executable, "-c", PROBE, gcs],
        env={**kept, "HOME": str(home), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_the_local_cluster_listens_on_loopback_and_refuses_a_process_without_its_token(
    monkeypatch, tmp_path
):
    try:
        import psutil
        import ray
        from ray._private import ray_constants
    except ImportError:
        unavailable("the Ray executor tests", "pip install -e '.[test]' installs ray")
    assert not ray.is_initialized()  # another module's cluster would be reused, not started
    for name in (*LOCAL_CLUSTER_ENV, "RAY_ADDRESS"):
        monkeypatch.delenv(name, raising=False)  # and removed again afterwards
    # Ray is imported already (above), as a caller's code may have: told again, then restored
    monkeypatch.setattr(ray_constants, "ENABLE_RAY_CLUSTER", ray_constants.ENABLE_RAY_CLUSTER)
    connect(None)
    try:
        assert ray.get(ray.remote(lambda: os.getpid()).remote())  # a worker runs
        sockets = _listening(psutil.Process())
        assert {name for name, _ in sockets} >= {"gcs_server", "raylet"}, sockets
        assert all(ip.startswith(LOOPBACK) for _, ip in sockets), sockets
        gcs = ray.get_runtime_context().gcs_address
        assert gcs.startswith(LOOPBACK)
        ours = Path.home()  # the test's own HOME, where Ray wrote the cluster's token
        assert (ours / ".ray" / "auth_token").is_file()
        # at once: each imports Ray (seconds); the holder is the control, the token opens it
        stranger = _probe(gcs, tmp_path / "stranger", RAY_AUTH_MODE="disabled")
        holder = _probe(gcs, ours, RAY_AUTH_MODE="token")
        (_, refused), (_, held) = stranger.communicate(timeout=120), holder.communicate(timeout=120)
        assert stranger.returncode != 0
        assert "Authentication token is missing or incorrect" in refused
        assert holder.returncode == 0, held[-2000:]
    finally:
        ray.shutdown()
        monkeypatch.undo()  # the environment as it was, and Ray's configuration read from it
        from ray import _raylet

        _raylet.Config.initialize("")
