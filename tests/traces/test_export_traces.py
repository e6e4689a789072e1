"""`harnessctl export-traces`: real evals (sandboxed subprocesses, the offline sim policy),
exported and read back by each format's own tooling:

- OTLP/JSON parsed into ``opentelemetry-proto``'s ``ExportTraceServiceRequest`` (OTLP/JSON
  writes trace and span ids as hex where protobuf's JSON mapping expects base64: converted
  first, as the OTLP specification says), every ``gen_ai.*`` attribute and operation name
  checked against ``opentelemetry-semantic-conventions``;
- ATIF validated against the JSON schema of Harbor 0.25.0's own pydantic ``Trajectory``
  (tests/contracts/atif/README.md: Harbor needs Python 3.12, so it does not install here),
  the model validators that schema cannot express checked by hand, and Harbor's model itself
  when it imports.
"""

from __future__ import annotations

import base64
import json

import jsonschema
import pytest
from typer.testing import CliRunner

from harnessctl.cli import app
from harnessctl.store import Store
from harnessctl.traces import ExportTracesResult
from harnessctl.workspace import load_workspace
from tests.helpers import ROOT
from tests.helpers.ci import unavailable
from tests.helpers.cli import TASKS, task_flags
from tests.helpers.stores import make_rollout

runner = CliRunner()
SCHEMA = ROOT / "tests" / "contracts" / "atif" / "harbor-0.25.0-trajectory.schema.json"


def invoke(*args):
    result = runner.invoke(app, [str(a) for a in args])
    return result


@pytest.fixture
def evaluated(workspace):
    result = invoke("eval", "dbbench-base", "--rollouts", 2, *task_flags(TASKS[:3]), "--json")
    assert result.exit_code == 0, result.output
    store = load_workspace(workspace).open_store()
    return workspace, store, json.loads(result.stdout)


def _otlp_message(data: dict):
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

    for rs in data["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    return json_format.Parse(json.dumps(data), trace_service_pb2.ExportTraceServiceRequest())


def _semconv_names() -> tuple[set[str], set[str]]:
    from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as g
    from opentelemetry.semconv.attributes import error_attributes

    names = {v for k, v in vars(g).items() if k.startswith("GEN_AI_") and isinstance(v, str)}
    names.add(error_attributes.ERROR_TYPE)
    operations = {o.value for o in g.GenAiOperationNameValues}
    return names, operations


def test_otel_export_loads_in_opentelemetry_proto(evaluated, tmp_path):
    from opentelemetry.semconv.schemas import Schemas

    workspace, store, run = evaluated
    out = tmp_path / "traces.json"
    result = invoke("export-traces", "--format", "otel", "--out", out, "--run", run["run_id"])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    schema_url = data["resourceSpans"][0]["schemaUrl"]
    assert schema_url in {s.value for s in Schemas}
    spans = _otlp_message(data).resource_spans[0].scope_spans[0].spans
    rows = store.rollouts()
    assert len(rows) == 6
    semconv, operations = _semconv_names()
    for row in rows:
        trajectory = store.trajectory(row)
        mine = [s for s in spans if s.trace_id == bytes.fromhex(row.id)]
        roots = [s for s in mine if not s.parent_span_id]
        assert len(roots) == 1 and len(roots[0].span_id) == 8
        chats = [s for s in mine if s.name.startswith("chat ")]
        assert len(chats) == len(trajectory.calls) > 0
        assert all(s.parent_span_id == roots[0].span_id for s in mine if s is not roots[0])
        tools = [t for t in trajectory.turns() if (t.get("action") or {}).get("kind") == "tool"]
        assert len([s for s in mine if s.name.startswith("execute_tool")]) == len(tools)
        for span in mine:
            attrs = {a.key: a.value for a in span.attributes}
            assert attrs["gen_ai.operation.name"].string_value in operations
            assert {k for k in attrs if k.startswith("gen_ai.")} <= semconv
        first = {a.key: a.value for a in chats[0].attributes}
        assert first["gen_ai.usage.input_tokens"].int_value == trajectory.calls[0].prompt_tokens
        sent = json.loads(first["gen_ai.input.messages"].string_value)
        assert sent[-1]["parts"][0]["content"] == trajectory.calls[0].messages[-1]["content"]
        root = {a.key: a.value for a in roots[0].attributes}
        assert root["harnessctl.outcome"].string_value == row.outcome


@pytest.mark.parametrize("fmt", ["otel", "atif"])
def test_a_forged_time_is_clamped_and_a_corrupt_trajectory_skipped(evaluated, tmp_path, fmt):
    """Trajectories hold what sandboxes wrote: a runtime event's time forged as 1e308 or a
    word is clamped into its rollout with a warning, and a corrupt trajectory file is left
    out and named; the rest of the selection is exported and loads in its own tooling."""
    from harnessctl.store.trajectories import write_trajectory

    workspace, store, run = evaluated
    rows = sorted(store.rollouts(), key=lambda r: r.id)
    forged, corrupt = rows[0], rows[1]
    data = store.trajectory_data(forged)
    turns = [e for e in data["events"] if e.get("event") == "turn"]
    assert turns
    for n, turn in enumerate(turns):
        turn["t"] = [1e308, "yesterday", float("nan")][n % 3]
        turn["action"] = {"kind": "tool", "tool": "sql", "argument": "SELECT 1"}
    write_trajectory(store.trajectory_dir / forged.trajectory_path, data)
    (store.trajectory_dir / corrupt.trajectory_path).write_bytes(b"\x1f\x8b not gzip")
    out = tmp_path / ("traces.json" if fmt == "otel" else "atif")
    result = invoke(
        "export-traces", "--format", fmt, "--out", out, "--run", run["run_id"], "--json"
    )
    assert result.exit_code == 0, result.output
    done = ExportTracesResult.model_validate_json(result.stdout[result.stdout.index("{") :])
    assert done.rollouts == len(rows) - 1 and list(done.skipped) == [corrupt.id]
    assert "corrupt" in done.skipped[corrupt.id]
    if fmt == "atif":
        assert sorted(p.stem for p in out.iterdir()) == sorted(r.id for r in rows[2:] + [forged])
        return
    assert len(done.warnings) == len(turns) and all(forged.id in w for w in done.warnings)
    spans = _otlp_message(json.loads(out.read_text())).resource_spans[0].scope_spans[0].spans
    assert {s.trace_id.hex() for s in spans} == {r.id for r in rows if r is not corrupt}
    mine = [s for s in spans if s.trace_id.hex() == forged.id]
    root = next(s for s in mine if not s.parent_span_id)
    tools = [s for s in mine if s.name.startswith("execute_tool")]
    assert len(tools) == len(turns)
    for span in tools:  # clamped into the rollout
        assert root.start_time_unix_nano <= span.start_time_unix_nano <= root.end_time_unix_nano


def _atif_invariants(doc: dict) -> None:
    """Harbor's model validators, which its JSON schema cannot say."""
    for n, step in enumerate(doc["steps"], start=1):
        assert step["step_id"] == n
        if step["source"] != "agent":
            assert not {"model_name", "tool_calls", "metrics", "reasoning_content"} & set(step)
        ids = {tc["tool_call_id"] for tc in step.get("tool_calls") or []}
        for result in (step.get("observation") or {}).get("results", []):
            assert result.get("source_call_id") in ids | {None}


@pytest.mark.slow
def test_atif_export_validates_against_harbors_schema(evaluated, tmp_path):
    workspace, store, run = evaluated
    out = tmp_path / "atif"
    result = invoke("export-traces", "--format", "atif", "--out", out, "--json")
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["kind"] == "export-traces" and record["rollouts"] == 6
    assert ExportTracesResult.model_validate(record).spec == "ATIF-v1.7"
    schema = json.loads(SCHEMA.read_text())
    for row in store.rollouts():
        doc = json.loads((out / f"{row.id}.json").read_text())
        jsonschema.validate(doc, schema)
        _atif_invariants(doc)
        trajectory = store.trajectory(row)
        agent = [s for s in doc["steps"] if s["source"] == "agent"]
        assert [s["message"] for s in agent] == [c.reply or "" for c in trajectory.calls]
        assert doc["session_id"] == row.id and doc["agent"]["name"] == "dbbench-base"
        assert doc["extra"]["harnessctl"]["outcome"] == row.outcome
        assert "detail" not in json.dumps(doc["extra"])  # the checker's detail: maybe gold
        assert any(s.get("tool_calls") and s.get("observation") for s in agent)
    try:
        from harbor.models.trajectories import Trajectory as HarborTrajectory
    except ImportError:
        return  # Harbor needs Python 3.12: the schema above stands in for it
    for path in out.glob("*.json"):
        HarborTrajectory.model_validate(json.loads(path.read_text()))


def test_exports_never_carry_secrets(tmp_path, workspace):
    """A trajectory whose parameters were stored unredacted (an old document, a hand-made
    one) is redacted again on the way out."""
    secret = "sk-live-THISMUSTNOTLEAK0123456789"
    store = Store(f"sqlite:///{tmp_path / 's.db'}", workspace / ".harnessctl" / "trajectories")
    row = make_rollout("k1", harness_name="h", task_id="t1")
    call = {
        "index": 0,
        "model": "openai/gpt-4o-mini",
        "reply": "hi",
        "messages": [{"role": "user", "content": "task"}],
        "params": {"api_key": secret, "temperature": 0.5},
    }
    trajectory = {
        "kind": "trajectory",
        "version": 4,
        "rollout_id": row.id,
        "task_id": "t1",
        "seed": 0,
        "harness": {"name": "h", "hash": "h1"},
        "outcome": "success",
        "policy": {
            "model": "openai/gpt-4o-mini",
            "params": {"api_key": secret, "headers": {"Authorization": secret}},
        },
        "calls": [call],
    }
    store.record_rollout(row, [], trajectory)
    url = f"sqlite:///{tmp_path / 's.db'}"
    for fmt, out in (("otel", tmp_path / "o.json"), ("atif", tmp_path / "a")):
        result = invoke("export-traces", "--format", fmt, "--out", out, "--store", url)
        assert result.exit_code == 0, result.output
        text = (
            out.read_text() if out.is_file() else "".join(p.read_text() for p in out.glob("*.json"))
        )
        assert secret not in text and "***" in text
    otel = json.loads((tmp_path / "o.json").read_text())
    spans = otel["resourceSpans"][0]["scopeSpans"][0]["spans"]
    chat = next(s for s in spans if s["name"].startswith("chat"))
    assert {"key": "gen_ai.request.temperature", "value": {"doubleValue": 0.5}} in chat[
        "attributes"
    ]


def test_bad_selection_exits_nonzero(workspace, tmp_path):
    bad = invoke("export-traces", "--format", "otel", "--out", tmp_path / "x", "--outcome", "x")
    assert bad.exit_code == 2 and "--outcome" in bad.output
    fmt = invoke("export-traces", "--format", "csv", "--out", tmp_path / "x")
    assert fmt.exit_code != 0
    none = invoke("export-traces", "--format", "otel", "--out", tmp_path / "x")
    assert none.exit_code != 0 and "no stored rollout" in none.output


@pytest.mark.slow
def test_a_host_served_environments_steps_are_exported(tmp_path, monkeypatch):
    """The toy environment (examples/toyenv) is served from the host: each recorded reset
    and step becomes an ``execute_tool`` span at its own start time, and ATIF carries them."""
    import shutil

    try:
        import toyenv  # noqa: F401
    except ImportError:
        unavailable(
            "the toy environment's trace export",
            "examples/toyenv is not installed: pip install -e examples/toyenv",
        )
    from harnessctl.workspace import init_workspace

    toy = ROOT / "examples" / "toyenv"
    ws = tmp_path / "ws"
    shutil.copytree(toy / "harnesses" / "toy-base", ws / "harnesses" / "toy-base")
    shutil.copytree(toy / "tasks", ws / "toy" / "tasks")
    shutil.copy(toy / "suite.yaml", ws / "toy" / "suite.yaml")
    (ws / "harnessctl.yaml").write_text("sandbox: local\nworkers: 2\npolicy: sim/toy\nsuite: toy\n")
    init_workspace(ws, examples=False)
    monkeypatch.setenv("HARNESSCTL_WORKSPACE", str(ws))
    monkeypatch.chdir(ws)
    ran = invoke("eval", "toy-base", "--split", "train", "--rollouts", "1", "--json")
    assert ran.exit_code == 0, ran.output
    store = load_workspace(ws).open_store()
    rows = store.rollouts()
    assert rows
    out, atif = tmp_path / "toy.json", tmp_path / "toy-atif"
    assert invoke("export-traces", "--format", "otel", "--out", out).exit_code == 0
    assert invoke("export-traces", "--format", "atif", "--out", atif).exit_code == 0
    data = json.loads(out.read_text())
    spans = _otlp_message(data).resource_spans[0].scope_spans[0].spans
    schema = json.loads(SCHEMA.read_text())
    for row in rows:
        trajectory = store.trajectory(row)
        assert trajectory.steps, "a host-served rollout records its environment steps"
        tools = [
            s
            for s in spans
            if s.trace_id == bytes.fromhex(row.id) and s.name.startswith("execute_tool")
        ]
        assert len(tools) == len(trajectory.steps)
        starts = sorted(s.start_time_unix_nano for s in tools)
        assert starts == sorted(int(st.started_at * 1e9) for st in trajectory.steps)
        doc = json.loads((atif / f"{row.id}.json").read_text())
        jsonschema.validate(doc, schema)
        _atif_invariants(doc)
        exported = doc["extra"]["harnessctl"]["env_steps"]
        assert [s["observation"] for s in exported] == [s.observation for s in trajectory.steps]


EVIL = "sql\x1b]0;owned\x07\x1b[2J\u202eevil\x00\n\x9b31m"


def _forged_names(row, steps: bool) -> dict:
    """A trajectory whose every name a harness (or an editor's harness.yaml) could choose is
    forged with terminal escapes, a bidirectional override and control characters."""
    call = {
        "index": 0,
        "model": f"openai/gpt-4o-mini{EVIL}",
        "reply": "",
        "messages": [{"role": "user", "content": f"task {EVIL}"}],
        "tool_calls": [{"id": f"c1{EVIL}", "type": "function",
                        "function": {"name": EVIL, "arguments": "{}"}}],
    }  # fmt: skip
    data = {
        "kind": "trajectory",
        "version": 4,
        "rollout_id": row.id,
        "task_id": row.task_id,
        "seed": 0,
        "harness": {"name": f"base{EVIL}", "hash": "h1"},
        "outcome": "success",
        "policy": {"model": "openai/gpt-4o-mini", "params": {}},
        "calls": [call],
    }
    if steps:
        data["steps"] = [{"index": 0, "kind": "step", "tool": EVIL, "observation": EVIL}]
    else:
        action = {"kind": "tool", "tool": EVIL, "argument": "SELECT 1"}
        data["events"] = [{"event": "turn", "action": action, "observation": {"text": EVIL}}]
    return data


def test_exported_names_carry_no_control_characters(tmp_path, workspace):
    """Span names, attribute keys and name attributes (tool, agent, model) keep their
    printable characters only; content (messages, tool results) is kept as recorded."""
    import unicodedata

    from harnessctl.traces.otel import NAME_ATTRIBUTES

    url = f"sqlite:///{tmp_path / 's.db'}"
    store = Store(url, workspace / ".harnessctl" / "trajectories")
    for key, steps in (("k1", True), ("k2", False)):
        row = make_rollout(key, harness_name="base")
        store.record_rollout(row, [], _forged_names(row, steps))

    def printable(text: str) -> bool:
        return not any(unicodedata.category(c) in {"Cc", "Cf", "Zl", "Zp"} for c in text)

    out = tmp_path / "o.json"
    result = invoke("export-traces", "--format", "otel", "--out", out, "--store", url)
    assert result.exit_code == 0, result.output
    spans = _otlp_message(json.loads(out.read_text())).resource_spans[0].scope_spans[0].spans
    names = sorted(s.name for s in spans)
    assert "execute_tool sqlevil" in names and "invoke_agent basesqlevil" in names
    kept = []
    for span in spans:
        assert printable(span.name), repr(span.name)
        for attr in span.attributes:
            assert printable(attr.key)
            if attr.key in NAME_ATTRIBUTES:
                assert printable(attr.value.string_value), (attr.key, attr.value)
            elif attr.key == "gen_ai.tool.call.result":
                kept.append(attr.value.string_value)
    assert kept == [EVIL, EVIL]  # content: the data as the environment returned it
    atif = tmp_path / "a"
    result = invoke("export-traces", "--format", "atif", "--out", atif, "--store", url)
    assert result.exit_code == 0, result.output
    for path in atif.glob("*.json"):
        doc = json.loads(path.read_text())
        named = [doc["agent"]["name"], doc["agent"]["model_name"]]
        for step in doc["steps"]:
            calls = step.get("tool_calls", [])
            named += [step.get("model_name", "")] + [v for tc in calls for v in tc.values()]
        assert all(printable(n) for n in named) and "basesqlevil" in named, named
        _atif_invariants(doc)
