"""Hostile harnesses against the host's bounds (issue #24, items 2-7), on the local
(bubblewrap) backend and on docker.

Each attack is written as the attacker would write the harness: code appended to a copy of
a base harness that patches one of its hooks. The rollouts run through ``RolloutSession``
(what eval and the Pool API use), so the assertions see the outcome, the error and the
trajectory the host would store:

2. refused model calls are kept without their bodies, and past the record bound nothing more
   is kept and the rollout ends ``context_limit`` (error ``record_limit...``);
3. a database whose table makes host scoring run for minutes (a VIRTUAL generated column of
   ``zeroblob``) is scored inside the scoring limits;
4. one rollout's slow connections (slow-loris) do not starve the others' model calls;
5. a harness that says ``infra_error`` is not believed;
6. malformed or deeply nested harness-written state is ``harness_error`` or dropped, never a
   host crash;
7. resets are counted.
"""

from __future__ import annotations

import json
import shutil
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from harnessctl import bounds
from harnessctl.gateway import Budget, Gateway, llm, transport
from harnessctl.harness import load_harness
from harnessctl.policy import Policy
from harnessctl.records import Trajectory
from harnessctl.run.session import RolloutSession
from harnessctl.runtime.client import GatewayClient
from harnessctl.sandbox import Limits
from harnessctl.store.trajectories import write_trajectory
from harnessctl.suite import load_suite
from tests.helpers import ROOT
from tests.helpers.ci import unavailable

pytestmark = pytest.mark.slow  # the slow tier (README, "Tests")

DBBENCH = ROOT / "examples" / "dbbench"
TOY = ROOT / "examples" / "toyenv"
MUTATION = "dev-020"  # INSERT into "School Location Table": host scoring hashes the table
QUERY = ["dev-000", "dev-001", "dev-004"]
DEEP = 400

PRELUDE = r'''

import json as _json, os as _os, socket as _socket, sys as _sys, threading as _threading
import time as _time

_CONFIG = _json.loads(__CONFIG__)
_DONE = []


def _client():
    return _sys.modules["harnessctl_runtime"].client.GatewayClient.from_env()


def _deep(n):
    value = []
    for _ in range(n):
        value = [value]
    return value


def _attack(state):
    """Runs once, before the first model call, on the task named in the config."""
    if _DONE:
        return
    _DONE.append(1)
    if state.task.get("task_id") != _CONFIG["task"]:
        _time.sleep(_CONFIG.get("victim_delay_s", 0))
        return
    _ATTACKS[_CONFIG["attack"]](state)


def _refused(state):  # item 2: over-budget calls of 4 MiB each
    client = _client()
    big = [{"role": "user", "content": "x" * (4 << 20)}]
    for _ in range(_CONFIG["n"]):
        try:
            client.chat(big)
        except Exception:
            pass


def _flood(state):  # item 2: many small refused requests (an empty message list)
    client = _client()
    for _ in range(_CONFIG["n"]):
        client._request("POST", "/v1/chat/completions", {"messages": []})


def _plant(state):  # item 3: a table whose hash runs long opcodes, one per column and row
    import sqlite3
    db = _os.path.join(_os.environ["HXRT_TASK_DIR"], "db.sqlite")
    conn = sqlite3.connect(db)
    table = '"School Location Table"'
    conn.execute("DROP TABLE " + table)
    conn.execute("CREATE TABLE " + table + " (seed TEXT)")
    conn.executemany(
        "INSERT INTO " + table + " (seed) VALUES (?)",
        [("s%d" % i,) for i in range(_CONFIG["rows"])],
    )
    # added afterwards, so that no row is computed now: only when read (by the scorer)
    for column in ("School", "Location", "Date moved", "Currently at this location"):
        conn.execute(
            "ALTER TABLE " + table + ' ADD COLUMN "' + column + '" TEXT GENERATED ALWAYS AS '
            "(length(hex(zeroblob(%d + length(seed))))) VIRTUAL" % _CONFIG["blob"]
        )
    conn.commit()
    conn.close()
    state.status = "answered"  # ends the episode at once: the host scores the table


def _slowloris(state):  # item 4: hold as many connections as possible, a byte at a time
    path = _os.environ["HXRT_GATEWAY"][len("unix://"):]
    token = _client().token  # the runtime read (and removed) any token file already
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
    auth = b"Authorization: Bearer " + token.encode()
    body_head = head + auth + b"\r\nContent-Length: 9000\r\n\r\n"

    def hold():
        conns = []
        end = _time.monotonic() + _CONFIG["hold_s"]
        while _time.monotonic() < end:
            while len(conns) < _CONFIG["n"]:
                s = _socket.socket(_socket.AF_UNIX)
                s.settimeout(0.5)
                try:
                    s.connect(path)
                    body = len(conns) % 4 == 0  # a quarter send a token, then dribble a body
                    s.sendall(body_head if body else head[:5])
                except OSError:
                    s.close()
                    break
                conns.append(s)
            for s in list(conns):
                try:
                    s.send(b"X")
                except OSError:
                    conns.remove(s)
                    s.close()
            _time.sleep(0.5)
        for s in conns:
            s.close()

    thread = _threading.Thread(target=hold, daemon=True)
    thread.start()
    thread.join()


def _claim_infra(state):  # item 5: declare its own failure an infrastructure error
    state.status = "infra_error"


def _bad_rounds(state):  # item 6: a counter the host reads as a number
    state.status = "answered"
    state.answer = "[]"
    state.round = "many"


def _deep_answer(state):  # item 6
    state.status = "answered"
    state.answer = _deep(_CONFIG.get("depth", 400))


def _deep_event(state):  # item 6: a line of the event log nested 400 deep
    path = _os.path.join(_os.environ["HXRT_TASK_DIR"], "events.jsonl")
    with open(path, "a") as fh:
        fh.write(_json.dumps({"event": "deep", "x": _deep(400)}) + "\n")


def _resets(state):  # item 7: eight threads resetting the episode
    client = _client()

    def go():
        for _ in range(_CONFIG["n"]):
            try:
                client._request("POST", "/v1/env/reset", {})
            except Exception:
                pass

    threads = [_threading.Thread(target=go) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _deep_step(state):  # item 6: step arguments nested 400 deep
    client = _client()
    deep = {"x": _deep(400)}
    client._request("POST", "/v1/env/step", {"tool": "act", "argument": "look", "arguments": deep})


_ATTACKS = {
    "refused": _refused, "flood": _flood, "plant": _plant, "slowloris": _slowloris,
    "claim_infra": _claim_infra, "bad_rounds": _bad_rounds, "deep_answer": _deep_answer,
    "deep_event": _deep_event, "resets": _resets, "deep_step": _deep_step,
}
'''


def hostile(tmp: Path, base: Path, cls: str, config: dict) -> Path:
    """A copy of ``base`` whose ``should_stop`` runs the attack of ``config`` first."""
    dst = tmp / f"hostile-{config['attack']}"
    shutil.copytree(base, dst, ignore=shutil.ignore_patterns("__pycache__"))
    code = PRELUDE.replace("__CONFIG__", repr(json.dumps(config)))
    code += (
        f"\n\n_should_stop = {cls}.should_stop\n\n"
        "def _stop(self, state):\n"
        "    _attack(state)\n"
        "    return _should_stop(self, state)\n\n"
        f"{cls}.should_stop = _stop\n"
    )
    (dst / "harness.py").write_text((dst / "harness.py").read_text() + code)
    manifest = (dst / "harness.yaml").read_text()
    name = manifest.split("name:", 1)[1].split()[0]
    (dst / "harness.yaml").write_text(manifest.replace(name, dst.name, 1))
    return dst


def bwrap_works() -> bool:
    from harnessctl.sandbox.local import LocalSandbox

    sb = LocalSandbox()
    sb.start(None)
    try:
        return sb.fs_isolated
    finally:
        sb.close()


@pytest.fixture(params=["local", "docker"])
def backend(request) -> str:
    if request.param == "docker":
        request.getfixturevalue("docker_engine")
    elif not shutil.which("bwrap") or not bwrap_works():
        unavailable("the bubblewrap tests", "bubblewrap is not installed or cannot run")
    return request.param


def run(
    backend: str,
    harness_dir: Path,
    suite_dir: Path,
    tasks: list[str],
    *,
    policy: str,
    timeout_s: float = 30,
    workers: int = 1,
) -> dict:
    """Run ``tasks`` (of the dev split) with the hostile harness in one session, ``workers``
    at once; the rollout records by task id."""
    harness = load_harness(harness_dir)
    suite = load_suite(suite_dir)
    by_id = suite.tasks("dev").by_id()
    limits = Limits(timeout_s=timeout_s)
    with (
        RolloutSession(suite.environment, sandbox=backend, limits=limits) as session,
        ThreadPoolExecutor(max_workers=workers) as pool,
    ):
        futures = {t: pool.submit(session.run, harness, by_id[t], 0, Policy(policy)) for t in tasks}
        return {t: f.result() for t, f in futures.items()}


def stored_bytes(tmp: Path, trajectory: Trajectory) -> int:
    """What the store would write for this trajectory (uncompressed JSON), written for real."""
    path = tmp / "t" / f"{trajectory.rollout_id}.json.gz"
    write_trajectory(path, trajectory)  # raises on what cannot be serialized
    return len(trajectory.model_dump_json())


def dbbench(tmp: Path, config: dict) -> Path:
    return hostile(tmp, ROOT / "harnesses" / "dbbench-base", "DBBenchHarness", config)


def toy(tmp: Path, config: dict) -> Path:
    try:
        import toyenv  # noqa: F401
    except ImportError:
        unavailable(
            "the toy environment's bounds test",
            "examples/toyenv is not installed: pip install -e examples/toyenv",
        )
    return hostile(tmp, TOY / "harnesses" / "toy-base", "ToyHarness", config)


# --- item 2: what the host keeps of a rollout ---------------------------------------------
@pytest.mark.timeout(240)
def test_refused_calls_are_kept_without_their_bodies(backend, tmp_path):
    n = 40  # 40 x 4 MiB: the landed code kept every body (160 MiB in one trajectory)
    config = {"attack": "refused", "task": QUERY[0], "n": n}
    recs = run(backend, dbbench(tmp_path, config), DBBENCH, [QUERY[0]], policy="sim/dbbench")
    rec = recs[QUERY[0]]
    assert rec.outcome not in ("infra_error", "harness_error"), rec.error
    refused = [c for c in rec.trajectory.calls if c.status == "budget_exceeded"]
    assert len(refused) == n
    for call in refused:
        assert call.messages == [] and call.params == {} and call.tools is None
        assert "prompt alone" in (call.error or "")
        assert "(request of 41943" in (call.error or "") and "not kept" in call.error
    assert stored_bytes(tmp_path, rec.trajectory) < 1 * bounds.MiB


@pytest.mark.timeout(240)
def test_a_rollout_past_the_record_bound_ends_context_limit(backend, tmp_path, monkeypatch):
    monkeypatch.setattr(bounds, "MAX_RECORDS", 300)
    config = {"attack": "flood", "task": QUERY[0], "n": 1500}
    recs = run(backend, dbbench(tmp_path, config), DBBENCH, [QUERY[0]], policy="sim/dbbench")
    rec = recs[QUERY[0]]
    assert rec.outcome == "context_limit", (rec.outcome, rec.error)
    assert (rec.error or "").startswith("record_limit:"), rec.error
    assert "not recorded" in rec.error
    assert len(rec.trajectory.calls) + len(rec.trajectory.steps) <= 300
    bad = [c for c in rec.trajectory.calls if c.status == "bad_request"]
    assert bad and all(c.messages == [] and "not kept" in (c.error or "") for c in bad)


def test_record_bound_counts_bytes_of_answered_calls():
    """A unit check of the byte bound: a call that would pass it is refused unsent."""
    sent = []

    def completer(model, messages, params, **_k):
        sent.append(len(messages[0]["content"]))
        return llm.Completion("ok", 1, 1, 0.0, 0.0, 1, "stop", "m")

    with Gateway(completer=completer) as gw:
        budget = Budget(max_calls=100, max_tokens=10**9, max_record_bytes=1 * bounds.MiB)
        token = gw.open_rollout("r", model="m", params={}, budget=budget)
        client = GatewayClient(gw.address, token)
        statuses = []
        for _ in range(6):
            body = {"messages": [{"role": "user", "content": "y" * 300_000}]}
            statuses.append(client._request("POST", "/v1/chat/completions", body)[0])
        ledger = gw.close_rollout(token)
    assert statuses == [200, 200, 200, 400, 400, 400]
    assert len(sent) == 3 and len(ledger.calls) == 3
    assert ledger.record_limit and ledger.record_limit.startswith("record_limit:")
    assert "3 request(s) refused and not recorded" in ledger.record_limit


# --- item 3: host scoring inside its limits -------------------------------------------------
@pytest.mark.timeout(150)
@pytest.mark.parametrize("limit", ["value_length", "wall_clock"])
def test_host_scoring_runs_inside_its_limits(backend, tmp_path, monkeypatch, limit):
    """Four generated columns of ``length(hex(zeroblob(50000000)))``: about a second per row
    in a handful of VM opcodes, so the landed code's progress handler (every 1000 opcodes,
    5 s) first looked at the clock after some 30 s of hashing, outside the rollout's timeout
    and at hundreds of MB; at the issue's sizes, minutes and gigabytes."""
    if limit == "wall_clock":  # lift the value bound: the wall clock alone must stop it
        monkeypatch.setattr(bounds, "SCORE_MAX_VALUE_BYTES", 1_000_000_000)
        monkeypatch.setattr(bounds, "SCORE_TIMEOUT_S", 3.0)
    config = {"attack": "plant", "task": MUTATION, "blob": 50_000_000, "rows": 200}
    started = time.monotonic()
    recs = run(backend, dbbench(tmp_path, config), DBBENCH, [MUTATION], policy="sim/dbbench")
    took = time.monotonic() - started
    rec = recs[MUTATION]
    assert took < 25, took
    if limit == "wall_clock":
        assert rec.outcome == "timeout", (rec.outcome, rec.error)
        assert "host scoring stopped at its 3 s limit" in (rec.error or "")
    else:
        assert rec.outcome == "wrong_answer", (rec.outcome, rec.error)
        assert rec.trajectory.score is not None
        detail = rec.trajectory.score.detail
        assert "too big" in detail["error"] and detail["scoring_s"] < 10, detail


# --- item 4: slow-loris -----------------------------------------------------------------------
@pytest.mark.timeout(240)
def test_slow_connections_of_one_rollout_do_not_starve_the_others(backend, tmp_path, monkeypatch):
    monkeypatch.setattr(transport._Quiet, "max_connections", 64)
    monkeypatch.setattr(transport, "HEADER_DEADLINE_S", 3.0)
    monkeypatch.setattr(transport, "REQUEST_DEADLINE_S", 5.0)
    attacker, victims = QUERY[0], [QUERY[1], QUERY[2], "dev-045"]
    config = {
        "attack": "slowloris", "task": attacker, "n": 180, "hold_s": 14, "victim_delay_s": 3,
    }  # fmt: skip
    recs = run(
        backend, dbbench(tmp_path, config), DBBENCH, [attacker, *victims],
        policy="sim/dbbench", workers=4, timeout_s=60,
    )  # fmt: skip
    for task in victims:
        rec = recs[task]
        assert rec.outcome not in ("infra_error", "harness_error", "timeout"), (task, rec.error)
        assert any(c.status == "ok" for c in rec.trajectory.calls), task
    assert recs[attacker].outcome != "infra_error", recs[attacker].error


def test_a_dribbling_connection_is_closed_at_its_deadline(monkeypatch):
    monkeypatch.setattr(transport, "HEADER_DEADLINE_S", 1.5)
    monkeypatch.setattr(transport, "REQUEST_DEADLINE_S", 3.0)
    with Gateway(completer=lambda *a, **k: None) as gw:
        token = gw.open_rollout("r", model="m", params={}, budget=Budget())
        head = socket.socket(socket.AF_UNIX)
        body = socket.socket(socket.AF_UNIX)
        for s in (head, body):
            s.settimeout(10)
            s.connect(str(gw.socket_path))
        body.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
            + token.encode()
            + b"\r\nContent-Length: 1000\r\n\r\n"
        )
        started = time.monotonic()
        closed: dict[str, float] = {}
        while len(closed) < 2 and time.monotonic() - started < 20:
            for name, s in (("head", head), ("body", body)):
                if name in closed:
                    continue
                try:
                    s.send(b"X")  # one byte at a time, never a whole request
                except OSError:
                    closed[name] = time.monotonic() - started
            time.sleep(0.2)
        gw.close_rollout(token)
    assert closed.get("head", 99) < 1.5 + 1.5, closed
    assert closed.get("body", 99) < 3.0 + 1.5, closed


# --- item 5: infrastructure status is the host's observation ---------------------------------
@pytest.mark.timeout(120)
def test_a_harness_cannot_declare_its_failure_an_infra_error(backend, tmp_path):
    config = {"attack": "claim_infra", "task": QUERY[0]}
    recs = run(backend, dbbench(tmp_path, config), DBBENCH, [QUERY[0]], policy="sim/dbbench")
    rec = recs[QUERY[0]]
    assert rec.outcome == "harness_error", (rec.outcome, rec.error)
    assert "the host did not observe" in (rec.error or "")


# --- item 6: malformed harness-written state -------------------------------------------------
@pytest.mark.timeout(120)
@pytest.mark.parametrize("attack", ["bad_rounds", "deep_answer", "deep_event"])
def test_malformed_state_is_the_harnesses_error_not_a_host_crash(backend, tmp_path, attack):
    config = {"attack": attack, "task": QUERY[0]}
    recs = run(backend, dbbench(tmp_path, config), DBBENCH, [QUERY[0]], policy="sim/dbbench")
    rec = recs[QUERY[0]]
    stored_bytes(tmp_path, rec.trajectory)  # the store can write it
    if attack == "bad_rounds":
        assert rec.outcome == "harness_error", (rec.outcome, rec.error)
        assert "result.json: field 'rounds'" in (rec.error or ""), rec.error
    elif attack == "deep_answer":
        assert rec.outcome == "harness_error", (rec.outcome, rec.error)
        assert "result.json" in (rec.error or "") and "nested deeper" in rec.error
    else:
        assert rec.outcome not in ("infra_error", "harness_error"), rec.error
        assert not any(e.get("event") == "deep" for e in rec.trajectory.events)


# --- items 6 and 7: a host-served environment --------------------------------------------------
@pytest.mark.timeout(180)
@pytest.mark.parametrize("attack", ["resets", "deep_step"])
def test_host_served_episode_requests_are_bounded(backend, tmp_path, attack):
    """The landed code kept every reset (8 threads stored 59,181 of them in 64 s) and stored
    step arguments it could not serialize."""
    suite = load_suite(TOY)
    task = sorted(suite.tasks("dev").by_id())[0]
    config = {"attack": attack, "task": task, "n": 100}
    recs = run(backend, toy(tmp_path, config), TOY, [task], policy="replay/toy")
    rec = recs[task]
    stored_bytes(tmp_path, rec.trajectory)
    assert rec.outcome != "infra_error", rec.error
    steps = rec.trajectory.steps
    if attack == "resets":
        done = [s for s in steps if s.kind == "reset" and s.status == "ok"]
        refused = [s for s in steps if s.status == "reset_budget_exceeded"]
        assert len(done) == bounds.MAX_RESETS, len(done)
        assert len(refused) == 8 * 100 + 1 - bounds.MAX_RESETS
        assert all("not kept" in (s.error or "") for s in refused)
    else:
        assert all(s.arguments is None or "x" not in s.arguments for s in steps)


def test_malformed_result_files_are_named_not_raised(tmp_path):
    """What the host reads of result.json, unit by unit (item 6): every malformed form is a
    message naming the file and the field, never an exception."""
    from harnessctl.untrusted import checked_result, parse_events

    def check(data) -> str | None:
        raw = data if isinstance(data, bytes) else json.dumps(data).encode()
        return checked_result(raw, True)[1]

    assert check({"status": "answered", "rounds": "many"}).startswith("result.json: field 'rounds'")
    assert "tool_error_streak" in check({"status": "done", "tool_error_streak": 2**40})
    assert "rounds" in check({"status": "done", "rounds": -1})
    assert check({"status": 3}) == "result.json: field 'status' must be a string"
    assert check([1]) == "result.json must hold a JSON object"
    assert "nested deeper" in check(
        b'{"status": "done", "answer": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    )
    assert "not JSON" in check(b"\xff\xfe")
    assert checked_result(None, False) == (None, None)  # no file: the runtime died
    assert "regular file" in checked_result(None, True)[1]
    ok, problem = checked_result(json.dumps({"status": "done", "rounds": 3, "x": 1}).encode(), True)
    assert problem is None and ok["rounds"] == 3 and ok["x"] == 1
    deep = json.dumps({"event": "x", "v": json.loads("[" * 40 + "]" * 40)})
    lines = (deep + "\n" + '{"event": "ok"}\n' + "[" * 100000 + "\n").encode()
    assert parse_events(lines) == [{"event": "ok"}]


def test_the_bounds_are_documented():
    """docs/sandboxes.md lists every bound of harnessctl.bounds with its value."""
    text = (ROOT / "docs" / "sandboxes.md").read_text()
    names = [n for n in vars(bounds) if n.isupper() and n not in ("MiB", "RECORD_LIMIT")]
    assert len(names) >= 15
    for name in names:
        assert f"`{name}`" in text, name


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__, "-q"])
