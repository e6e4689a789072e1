"""`harnessctl view`: the API over a real store (Starlette's test client), then the page in
a real headless Chromium driven over the DevTools protocol: it loads, a trajectory opens
with hostile model text shown as text, and a running eval's new rollouts appear without a
reload. The page's eval is a real `harnessctl eval` process (sandboxed rollouts, the
offline sim policy) writing the store the viewer reads."""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harnessctl.cli import app as cli
from harnessctl.workspace import load_workspace
from tests.helpers.ci import unavailable
from tests.helpers.cli import TASKS, task_flags
from tests.helpers.stores import make_edit, make_profile, make_rollout

# every test here serves or reads the viewer's app: the `view` extra (.ci/run installs it)
_MISSING = [m for m in ("starlette", "uvicorn") if importlib.util.find_spec(m) is None]
if _MISSING:
    unavailable(
        "the viewer's tests",
        f"missing {', '.join(_MISSING)}: pip install -e '.[view]' to run these",
        module=True,
    )

CHROMIUM = "/usr/bin/chromium"
HOSTILE = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
runner = CliRunner()


@pytest.fixture
def populated(workspace):
    result = runner.invoke(
        cli, ["eval", "dbbench-base", "--rollouts", "1", *task_flags(TASKS[:2]), "--json"]
    )
    assert result.exit_code == 0, result.output
    store = load_workspace(workspace).open_store()
    row = make_rollout(
        "hostile",
        harness_name="dbbench-base",
        task_id="dev-<b>x</b>",
        outcome="wrong_answer",
        success=False,
        created_at=time.time() - 3600,
    )
    call = {
        "index": 0,
        "model": "sim/dbbench",
        "reply": HOSTILE,
        "status": "ok",
        "messages": [{"role": "user", "content": "task " + HOSTILE}],
    }
    trajectory = {
        "kind": "trajectory",
        "version": 4,
        "rollout_id": row.id,
        "task_id": row.task_id,
        "seed": 7,
        "outcome": "wrong_answer",
        "harness": {"name": "dbbench-base", "hash": "h1"},
        "policy": {"model": "sim/dbbench"},
        "calls": [call],
        "events": [
            {
                "event": "turn",
                "round": 1,
                "kind": "tool",
                "reply": HOSTILE,
                "action": {"kind": "tool", "tool": "sql", "argument": HOSTILE},
                "observation": {"text": HOSTILE, "ok": True},
            }
        ],
    }
    store.record_rollout(row, [], trajectory)
    store.record_edit(
        make_edit(
            parent_name="dbbench-base",
            direction="format<i>x</i>",
            child_name="dbbench-base.fmt.r1",
            status="accepted",
            accepted=True,
            rescues=3,
            regressions=1,
            reward=0.25,
        )
    )
    card = {"summary": HOSTILE, "fixes": ["invalid_format"]}
    success = {"successes": 3, "rollouts": 4, "rate": 0.75, "ci95": [0.3, 0.95]}
    data = json.dumps({"card": card, "success": success})
    store.record_profile(make_profile(harness_name="dbbench-base.fmt.r1", data_json=data))
    return workspace, store, row.id


def test_api_is_read_only_and_filters(populated):
    from starlette.testclient import TestClient

    from harnessctl.view.app import create_app

    workspace, store, hostile = populated
    client = TestClient(create_app(store), base_url="http://127.0.0.1:8765")
    page = client.get("/")
    assert (
        page.status_code == 200 and "script-src 'self'" in page.headers["content-security-policy"]
    )
    assert "innerHTML" not in client.get("/static/viewer.js").text
    runs = client.get("/api/runs").json()
    assert runs["kind"] == "runs" and len(runs["runs"]) == 1
    every = client.get("/api/rollouts").json()
    assert every["total"] == 3
    wrong = client.get("/api/rollouts", params={"outcome": "wrong_answer"}).json()
    assert [r["id"] for r in wrong["rollouts"]][-1] == hostile
    assert all(r["outcome"] == "wrong_answer" for r in wrong["rollouts"])
    by_run = client.get("/api/rollouts", params={"run": runs["runs"][0]["id"]}).json()
    assert by_run["total"] == 2
    later = client.get("/api/rollouts", params={"since": time.time() + 10}).json()
    assert later["total"] == 0
    one = client.get(f"/api/rollouts/{hostile}").json()
    assert one["trajectory"]["calls"][0]["reply"] == HOSTILE
    assert client.get("/api/rollouts", params={"outcome": "bogus"}).status_code == 400
    assert client.get("/api/rollouts/ffffffffffff").status_code == 404
    for method in ("post", "put", "delete"):
        assert getattr(client, method)("/api/runs").status_code == 405
    [edit] = client.get("/api/lineage").json()["edits"]
    assert (edit["child"], edit["rescues"], edit["regressions"]) == ("dbbench-base.fmt.r1", 3, 1)
    [profile] = client.get("/api/profiles").json()["profiles"]
    assert profile["harness"] == "dbbench-base.fmt.r1" and profile["card"]["summary"] == HOSTILE


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Browser:
    """Headless Chromium over the DevTools protocol (one page)."""

    def __init__(self, profile: Path) -> None:
        import httpx
        from websockets.sync.client import connect

        self.port = _free_port()
        self.proc = subprocess.Popen(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--remote-debugging-port={self.port}",
                "--remote-allow-origins=*",
                f"--user-data-dir={profile}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.time() + 60
        while True:
            try:
                pages = httpx.get(f"http://127.0.0.1:{self.port}/json/list").json()
                url = next(p["webSocketDebuggerUrl"] for p in pages if p["type"] == "page")
                break
            except (httpx.HTTPError, StopIteration):
                if time.time() > deadline:
                    raise
                time.sleep(0.2)
        self.ws = connect(url, max_size=None)
        self.ids = itertools.count(1)

    def call(self, method: str, **params):
        n = next(self.ids)
        self.ws.send(json.dumps({"id": n, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == n:
                assert "error" not in message, message
                return message["result"]

    def eval(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 30.0):
        deadline = time.time() + timeout
        while time.time() < deadline:
            value = self.eval(expression)
            if value:
                return value
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {expression}")

    def close(self) -> None:
        self.ws.close()
        self.proc.terminate()
        self.proc.wait(timeout=30)


TOKEN = "launch-token"


@contextlib.contextmanager
def serving(store, workspace=None, token=None):
    """The viewer over ``store`` on a free loopback port, in a thread: its URL."""
    import uvicorn

    from harnessctl.view.app import create_app

    port = _free_port()
    config = uvicorn.Config(
        create_app(store, workspace, token=token),
        host="127.0.0.1",
        port=port,
        log_level="warning",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture
def served(populated):
    workspace, store, hostile = populated
    with serving(store, load_workspace(workspace), token=TOKEN) as url:
        yield workspace, store, hostile, url


@pytest.mark.slow
def test_viewer_in_headless_chromium(served, tmp_path):
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)")
    workspace, store, hostile, url = served
    browser = Browser(tmp_path / "profile")
    try:
        # the launch's URL sets the cookie and drops the token; every later page reads with it
        browser.call("Page.navigate", url=f"{url}?token={TOKEN}")
        assert browser.wait_for("location.search === '' && location.pathname === '/'")
        assert browser.wait_for("document.querySelectorAll('#runs-table tbody tr').length") == 1
        # a trajectory opens; the hostile text is text: no element, no script ran
        browser.call("Page.navigate", url=f"{url}#rollout={hostile}")
        browser.wait_for("document.querySelectorAll('#calls section.call').length")
        assert browser.eval("document.querySelectorAll('#main img, #main script').length") == 0
        assert browser.eval("window.__pwned === undefined")
        shown = browser.eval("document.getElementById('calls').textContent")
        assert HOSTILE in shown and "task " + HOSTILE in shown
        assert HOSTILE in browser.eval("document.getElementById('turns').textContent")
        assert "dev-<b>x</b>" in browser.eval("document.querySelector('#main h2').textContent")
        # lineage and profiles render, their text as text
        browser.call("Page.navigate", url=f"{url}#lineage")
        browser.wait_for("document.querySelectorAll('#lineage-table tbody tr').length === 1")
        lineage = browser.eval("document.getElementById('lineage-table').textContent")
        assert "format<i>x</i>" in lineage and "dbbench-base.fmt.r1" in lineage
        browser.call("Page.navigate", url=f"{url}#profiles")
        browser.wait_for("document.querySelectorAll('#profiles-table tbody tr').length === 1")
        profiles = browser.eval("document.getElementById('profiles-table').textContent")
        assert HOSTILE + "fixes: invalid_format" in profiles.replace("\n", "")
        assert "75.0% (3/4)" in profiles
        assert (
            browser.eval("document.querySelectorAll('#main img, #main script, #main i').length")
            == 0
        )
        assert browser.eval("window.__pwned === undefined")
        # a running eval's new rollouts appear in the open page, no reload
        browser.call("Page.navigate", url=f"{url}#rollouts")
        rows = "document.querySelectorAll('#rollouts-table tbody tr').length"
        assert browser.wait_for(rows) == 3
        env = {**os.environ, "HARNESSCTL_WORKSPACE": str(workspace)}
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "harnessctl.cli",
                "eval",
                "dbbench-base",
                "--rollouts",
                "2",
                "--workers",
                "1",
                *task_flags(TASKS),
            ],
            env=env,
            cwd=workspace,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        try:
            browser.wait_for("document.querySelector('tr[data-live=\"1\"]') !== null", 120)
            still_running = proc.poll() is None
            out, _ = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 0, out.decode()[-2000:]
        assert still_running, "the eval ended before the page showed a new rollout"
        total = len(store.rollouts())
        assert browser.wait_for(f"{rows} === {total}", 30) is True
        live = browser.eval("document.querySelectorAll('tr[data-live=\"1\"]').length")
        assert live == total - 3
    finally:
        browser.close()


@pytest.mark.slow
def test_the_command_serves_on_loopback(populated):
    import httpx

    workspace, store, hostile = populated
    env = {**os.environ, "HARNESSCTL_WORKSPACE": str(workspace)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "harnessctl.cli", "view", "--port", "0"],
        env=env,
        cwd=workspace,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stderr.readline()
        assert "http://127.0.0.1:" in line and "/?token=" in line, line
        url = line.split()[3]
        root = url.split("?")[0]
        deadline = time.time() + 30
        while True:
            try:
                bare = httpx.get(root + "api/rollouts")
                break
            except httpx.ConnectError:
                assert time.time() < deadline and proc.poll() is None
                time.sleep(0.2)
        assert bare.status_code == 401  # no token, no store
        with httpx.Client() as browser:  # the printed URL sets the cookie, then redirects
            opened = browser.get(url, follow_redirects=True)
            assert opened.status_code == 200 and str(opened.url) == root
            assert browser.get(root + "api/rollouts").json()["total"] == 3
        rebound = httpx.get(root + "api/rollouts", headers={"Host": "attacker.example:80"})
        assert rebound.status_code == 403
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_guard_refuses_foreign_hosts_other_origins_and_missing_tokens(populated):
    """DNS rebinding (a page of another name resolved to 127.0.0.1), cross-origin requests
    and requests without the launch's token read nothing; the printed URL's token sets a
    strict, HttpOnly cookie and is dropped from the address."""
    from starlette.testclient import TestClient

    from harnessctl.view.app import create_app

    workspace, store, hostile = populated
    app = create_app(store, token="s3cret", hosts=["127.0.0.1", "localhost", "::1"])
    for base in ("http://attacker.example:8765", "http://127.0.0.1.nip.io:8765"):
        foreign = TestClient(app, base_url=base)
        assert foreign.get("/api/runs", params={"token": "s3cret"}).status_code == 403
    client = TestClient(app, base_url="http://127.0.0.1:8765")
    assert client.get("/api/runs").status_code == 401
    assert client.get("/api/runs", cookies={"harnessctl_view": "guess"}).status_code == 401
    opened = client.get("/?token=s3cret&x=1", follow_redirects=False)
    assert opened.status_code == 303 and opened.headers["location"] == "/?x=1"
    cookie = opened.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie
    assert client.get("/api/runs").json()["kind"] == "runs"  # the cookie now carries it
    for headers in (
        {"Origin": "http://attacker.example"},
        {"Origin": "null"},
        {"Sec-Fetch-Site": "cross-site"},
    ):
        assert client.get("/api/runs", headers=headers).status_code == 403, headers
    assert client.get("/api/runs", headers={"Origin": "http://127.0.0.1:8765"}).status_code == 200
    ipv6 = TestClient(app, base_url="http://[::1]:8765")
    assert ipv6.get("/api/runs", params={"token": "s3cret"}).json()["kind"] == "runs"


def _two_runs(store) -> tuple[str, str]:
    """Runs A (harness "base") and B ("child") on tasks t1 (A fails, B succeeds) and t2
    (both succeed), each rollout with a trajectory whose reply names its side."""
    from harnessctl.store import RunRow

    for run_id, harness in (("runa0000", "base"), ("runb0000", "child")):
        store.start_run(
            RunRow(
                id=run_id,
                command="eval",
                harness_hash=harness,
                suite="s",
                split="dev",
                policy_id="sim/dbbench",
            )
        )
        for task, ok in (("t1", harness == "child"), ("t2", True)):
            row = make_rollout(
                f"{harness}-{task}",
                run_id=run_id,
                harness_hash=harness,
                harness_name=harness,
                task_id=task,
                seed=0,
                suite="s",
                split="dev",
                outcome="success" if ok else "wrong_answer",
                success=ok,
                category="c",
            )
            reply = f"reply {harness} {task}"
            store.record_rollout(
                row,
                [],
                {
                    "kind": "trajectory",
                    "version": 4,
                    "rollout_id": row.id,
                    "task_id": task,
                    "seed": 0,
                    "outcome": row.outcome,
                    "policy": {"model": "sim/dbbench"},
                    "harness": {"name": harness, "hash": harness},
                    "calls": [
                        {
                            "index": 0,
                            "model": "sim/dbbench",
                            "reply": reply,
                            "messages": [{"role": "user", "content": task}],
                        }
                    ],
                },
            )
        store.finish_run(run_id, "done", None, store.rollouts(run_id=run_id))
    return "runa0000", "runb0000"


@pytest.mark.slow
def test_two_runs_compared_side_by_side_in_chromium(workspace, tmp_path):
    from starlette.testclient import TestClient

    from harnessctl.view.app import create_app

    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)")
    store = load_workspace(workspace).open_store()
    a, b = _two_runs(store)
    client = TestClient(create_app(store), base_url="http://localhost:8765")
    api = client.get("/api/compare", params={"a": a, "b": b}).json()
    assert (api["kind"], api["pairs"], api["rescues"], api["regressions"]) == ("compare", 2, 1, 0)
    assert client.get("/api/compare").status_code == 400
    with serving(store) as url:
        browser = Browser(tmp_path / "profile")
        try:
            browser.call("Page.navigate", url=url)
            browser.wait_for("document.querySelectorAll('#runs-table tbody tr').length === 2")
            browser.eval(
                f"document.querySelector('input[name=a][value={a}]').click();"
                f"document.querySelector('input[name=b][value={b}]').click();"
                "document.getElementById('compare-button').click()"
            )
            summary = browser.wait_for(
                "document.getElementById('compare-summary')?.textContent", 30
            )
            assert "rescues 1, regressions 0" in summary and "A 50.0% -> B 100.0%" in summary
            link = browser.eval(
                "document.querySelector('#compare-changes tr[data-change=rescue] a').href"
            )
            browser.call("Page.navigate", url=link)
            browser.wait_for("document.querySelectorAll('.pair .column').length === 2")
            left = browser.eval("document.querySelector('[data-side=A]').textContent")
            right = browser.eval("document.querySelector('[data-side=B]').textContent")
            assert "reply base t1" in left and "wrong_answer" in left
            assert "reply child t1" in right and "success" in right
            # where the two part is said and marked on both sides (issue #41)
            said = browser.eval("document.getElementById('divergence').textContent")
            assert "First divergence: model call 0" in said, said
            assert browser.eval("document.querySelectorAll('.column .diverged').length") == 2
        finally:
            browser.close()
