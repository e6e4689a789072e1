"""The LLM editor through litellm against a local OpenAI-compatible server with scripted
replies: a good patch is applied and judged; bad patches are rejected with the right reason."""

import git
import pytest

from harnessctl.evolve.directions import catalogue
from harnessctl.evolve.editors import LLMEditor
from harnessctl.evolve.engine import Engine, EvolveRequest
from harnessctl.harness import load_harness
from tests.helpers.evolve import committed_workspace_eval
from tests.helpers.openai_stub import Fail, OpenAIStub, Reply

ANCHOR = "        return messages + self.history(state)\n"


def block(path, search, replace):
    return f"{path}\n<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n"


GOOD = block(
    "harness.py",
    ANCHOR,
    "        messages = messages + self.history(state)\n"
    "        if state.rounds_left <= 1 and len(messages) > 2:\n"
    "            note = '\\n\\nThis is your last round: answer now with Final Answer.'\n"
    "            last = messages[-1]\n"
    "            messages[-1] = {**last, 'content': last['content'] + note}\n"
    "        return messages\n",
)
NOT_APPLYING = block("harness.py", "        return something_else()\n", "        return 1\n")
OUT_OF_SCOPE = block("harness.yaml", "name: dbbench-base\n", "name: hacked\n")
SYNTAX = block("harness.py", ANCHOR, "        return messages +\n")
CRASH = block("harness.py", ANCHOR, "        raise RuntimeError('editor broke it')\n")


def evolve_engine(workspace, directions, editor, **options):
    """An Engine over the test split of a git-initialised copy of the example workspace."""
    ws, base, evaluation = committed_workspace_eval(workspace, split="test", timeout_s=20)
    catalog = catalogue("dbbench")
    request = EvolveRequest(
        base=base,
        eval=evaluation,
        directions=[catalog[d] for d in directions],
        editor=editor,
        batch_size=4,
        control_size=4,
        **options,
    )
    return Engine(request, ws, ws.open_store())


@pytest.fixture
def engine_for(workspace):
    def make(stub, rounds=1, retries=4):
        editor = LLMEditor("openai/editor-model", {"api_base": stub.url, "api_key": "x"})
        return evolve_engine(
            workspace,
            ["termination"],
            editor,
            rounds=rounds,
            alpha=1.0,
            min_net=0,
            editor_retries=retries,
        )

    make.workspace = workspace
    return make


@pytest.mark.slow
def test_bad_patches_are_rejected_with_reasons_then_a_good_one_is_judged(engine_for, workspace):
    with OpenAIStub() as stub:
        stub.push(
            *(
                Reply(text)
                for text in ["no patch here", NOT_APPLYING, OUT_OF_SCOPE, SYNTAX, CRASH, GOOD]
            )
        )
        result = engine_for(stub, retries=5).run()
        requests = stub.chat_requests
    reasons = [(e.attempt, e.status, e.reason) for e in result.edits]
    assert [r[2] for r in reasons[:5]] == [
        "no_blocks",
        "does_not_apply",
        "out_of_scope",
        "syntax_error",
        "smoke_failed",
    ]
    assert reasons[5][1] in ("accepted", "evaluated")
    assert "editor broke it" in result.edits[4].detail
    # each retry carried the rejection back to the model
    assert "Your patch was rejected: no_blocks" in requests[1].body["messages"][-1]["content"]
    assert "does_not_apply" in requests[2].body["messages"][-1]["content"]
    first_prompt = requests[0].body["messages"][1]["content"]
    assert "Direction: termination" in first_prompt and "harness.py" in first_prompt
    assert "### task" in first_prompt  # failure digests are in the prompt
    good = result.edits[5]
    assert good.batch_size > 0 and good.patch.startswith("harness.py")
    if good.accepted:
        repo = git.Repo(workspace)
        assert f"Harness-Edit-Id: {good.id}" in repo.head.commit.message
        child = load_harness(workspace / "harnesses" / good.child_name)
        assert child.manifest.parent == "dbbench-base"
        assert child.manifest.direction == "termination"
        assert not repo.is_dirty(untracked_files=True)


@pytest.mark.slow
def test_rerun_reuses_recorded_edits_without_calling_the_editor(engine_for):
    with OpenAIStub() as stub:
        stub.push(Reply(NOT_APPLYING), Reply(GOOD))
        first = engine_for(stub, retries=1).run()
        calls = len(stub.chat_requests)
        second = engine_for(stub, retries=1).run()
        assert len(stub.chat_requests) == calls  # nothing asked again
    assert [e.id for e in first.edits] == [e.id for e in second.edits]


@pytest.mark.slow
def test_max_edits_stops_the_evolution(workspace):
    from harnessctl.evolve.editors import make_editor

    engine = evolve_engine(
        workspace,
        ["execution-recovery", "context-construction"],
        make_editor("rules", family="dbbench"),
        rounds=2,
        max_edits=1,
    )
    result = engine.run()
    assert len(result.edits) == 1
    assert result.stopped == "max edits (1) reached"
    assert result.edits[0].editor == "rules"
    assert result.edits[0].response.startswith("rule-based editor (offline, not an LLM)")


@pytest.mark.slow
def test_a_new_editor_setting_is_a_new_run_and_never_replaces_a_committed_sibling(engine_for):
    with OpenAIStub() as stub:
        stub.push(Reply(GOOD))
        first = engine_for(stub, retries=0).run()
    [kept] = [e for e in first.edits if e.accepted]
    repo = git.Repo(engine_for.workspace)
    kept_dir = engine_for.workspace / "harnesses" / kept.child_name
    before = {p: p.read_bytes() for p in kept_dir.rglob("*") if p.is_file()}
    with OpenAIStub() as other:  # another api_base: the same model, elsewhere
        other.push(Reply(GOOD))
        second = engine_for(other, retries=0).run()
        assert len(other.chat_requests) == 1  # asked, not replayed from the first run
    assert second.evolve_id != first.evolve_id
    [new] = [e for e in second.edits if e.accepted]
    assert new.id != kept.id and new.child_name == f"{kept.child_name}-2"
    assert {p: p.read_bytes() for p in kept_dir.rglob("*") if p.is_file()} == before
    assert load_harness(kept_dir).manifest.edit_id == kept.id
    assert f"Harness-Edit-Id: {new.id}" in repo.head.commit.message
    assert not repo.is_dirty(untracked_files=True)


def test_a_stale_git_lock_is_named_in_one_line_before_any_work(engine_for, workspace):
    from harnessctl.errors import HarnessctlError

    with OpenAIStub() as stub:
        engine = engine_for(stub)
        (workspace / ".git" / "index.lock").write_text("")
        with pytest.raises(HarnessctlError, match=r"index\.lock exists.*delete that file"):
            engine.run()
        assert stub.chat_requests == []
    assert engine.store.rollouts() == []


@pytest.mark.slow
def test_evolve_stops_with_exit_3_when_rollouts_fail_on_infrastructure(workspace):
    from typer.testing import CliRunner

    from harnessctl.cli import app

    tiny = workspace / "examples" / "tiny"  # two tasks: each rollout retries before failing
    tiny.mkdir()
    lines = (workspace / "examples" / "dbbench" / "dev.jsonl").read_text().splitlines()
    (tiny / "tasks.jsonl").write_text("\n".join(lines[:2]) + "\n")
    (tiny / "suite.yaml").write_text(
        "name: tiny\nenv: dbbench\ntasks: [tasks.jsonl]\nsplits:\n  all: {}\n"
    )
    committed_workspace_eval(workspace, split="test")  # a git repository, as init makes
    # the server is up (one that is down is refused by the preflight, exit 2) but every
    # generation fails with a 503: retried, then an infrastructure failure
    with OpenAIStub(default=Fail(503, "overloaded")) as stub:
        args = ["evolve", "dbbench-base", "--policy", "openai/x", "--param", f"api_base={stub.url}"]
        args += ["--param", "api_key=k", "--suite", "examples/tiny", "--split", "all"]
        result = CliRunner().invoke(app, [*args, "--rollouts", "1"])
    assert result.exit_code == 3, result.output
    assert "rollout(s) failed on infrastructure after retries" in result.stderr
    assert "Traceback" not in result.output


def test_the_json_edit_format_asks_for_its_schema_and_its_reply_is_a_patch():
    """`edit_format=json`: the model is asked (system prompt and `response_format`) for the
    edits as a JSON object, decoded under its schema where the server supports it; the reply
    parses into the same blocks and applies. `edit_format` itself is not sent."""
    import json

    from harnessctl.errors import ConfigError
    from harnessctl.evolve.editors import EditContext
    from harnessctl.evolve.patch import apply_blocks, changed_lines, parse_patch
    from tests.helpers import BASE_HARNESS

    shorter = "        return (messages + self.history(state))[-40:]"
    reply = {"edits": [{"path": "harness.py", "search": ANCHOR.rstrip("\n"), "replace": shorter}]}
    files = {"harness.py": (BASE_HARNESS / "harness.py").read_text()}
    ctx = EditContext(direction=catalogue("dbbench")["termination"], files=files, digests=[])
    params = {"api_base": "", "api_key": "x", "edit_format": "json"}
    with OpenAIStub() as stub:
        stub.push(Reply(json.dumps(reply)))
        editor = LLMEditor("openai/editor-model", {**params, "api_base": stub.url})
        proposal = editor.propose(ctx, None)
        body = stub.chat_requests[0].body
    assert proposal is not None
    schema = body["response_format"]["json_schema"]["schema"]
    assert body["response_format"]["type"] == "json_schema" and "edits" in schema["properties"]
    # grounded in the files: a path among them, a search among the lines each holds once
    (choice,) = schema["properties"]["edits"]["items"]["anyOf"]
    assert choice["properties"]["path"] == {"const": "harness.py"}
    lines = choice["properties"]["search"]["enum"]
    assert ANCHOR.rstrip("\n") in lines
    assert all(files["harness.py"].count(line + "\n") == 1 for line in lines)
    assert "edit_format" not in body
    assert '{"edits": [{"path"' in body["messages"][0]["content"]
    blocks = parse_patch(proposal.response)
    assert [b.path for b in blocks] == ["harness.py"] and blocks[0].search == ANCHOR
    assert changed_lines(BASE_HARNESS, apply_blocks(BASE_HARNESS, blocks)) == 2
    with pytest.raises(ConfigError, match="edit_format"):
        LLMEditor("openai/editor-model", {"edit_format": "yaml"})
