"""The router: smoothed profile scores, Borda aggregation, and LLM voters through real
litellm against the local OpenAI-compatible stub (scripted votes, garbage, failures)."""

from __future__ import annotations

import json
import socket

import pytest

from harnessctl.gateway import llm
from harnessctl.profiles.router import profile_scores, route
from harnessctl.profiles.voting import Voter, parse_ranking
from harnessctl.records import Profile
from tests.helpers.openai_stub import Hang, OpenAIStub, Reply
from tests.helpers.profiles import routable_profile


def prof(name: str, overall: tuple[int, int], cat: dict, out: dict) -> Profile:
    return routable_profile(name, overall, cat, out)


POOL = {
    "fmt": prof("fmt", (10, 40), {"INSERT": (2, 10)}, {"invalid_format": (8, 10)}),
    "rec": prof("rec", (10, 40), {"INSERT": (4, 10)}, {"tool_error": (9, 10)}),
    "ctx": prof("ctx", (6, 40), {"INSERT": (3, 10)}, {"invalid_format": (1, 10)}),
}


def test_profile_score_follows_the_failure_outcome() -> None:
    fmt_first = route(POOL, task_id="t", category="INSERT", failure_outcomes=["invalid_format"])
    rec_first = route(POOL, task_id="t", category="INSERT", failure_outcomes=["tool_error"])
    assert fmt_first.ranked[0].name == "fmt"
    assert rec_first.ranked[0].name == "rec"
    assert any("tool_error: 9/10" in r for r in rec_first.ranked[0].reasons)


def test_little_evidence_is_shrunk_not_trusted() -> None:
    lucky = prof("lucky", (1, 1), {"counting": (1, 1)}, {"step_limit": (1, 1)})
    steady = prof("steady", (30, 40), {"counting": (6, 8)}, {"step_limit": (15, 20)})
    weak = prof("weak", (5, 40), {"counting": (1, 8)}, {"step_limit": (2, 20)})
    pool = {"lucky": lucky, "steady": steady, "weak": weak}
    scores = profile_scores(pool, "counting", ["step_limit"])
    assert 0 < scores["lucky"][0] < 1
    assert scores["steady"][0] > scores["lucky"][0] > scores["weak"][0]
    unseen = profile_scores(POOL, "ranking", ["timeout"])  # no cell at all: overall rate
    assert unseen["fmt"][0] == pytest.approx(unseen["rec"][0])
    assert unseen["ctx"][0] < unseen["fmt"][0]


def test_parse_ranking_keeps_known_names_in_order() -> None:
    names = ["ctx", "fmt", "rec"]
    assert parse_ranking('```json\n{"ranking": ["rec", "nope", "fmt", "rec"]}\n```', names) == [
        "rec",
        "fmt",
    ]
    assert parse_ranking('["ctx"]', names) == ["ctx"]
    for bad in ("no json here", '{"ranking": "fmt"}', '{"ranking": ["zzz"]}', "{oops"):
        with pytest.raises(ValueError):
            parse_ranking(bad, names)


@pytest.fixture(scope="module")
def litellm_loaded():
    return llm.get_litellm()


def _votes(body: dict) -> str:
    """Each stub model votes its own way, after checking it was shown the evidence."""
    prompt = body["messages"][-1]["content"]
    assert "card of ctx" in prompt and "how it failed: tool_error" in prompt
    model = body["model"]
    if model == "garbage":
        return "I would go with the second one, probably."
    if model == "half-garbage":
        return '{"ranking": ["not-a-harness"]}'
    return json.dumps({"ranking": ["ctx", "fmt", "rec"]})


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_voters_through_litellm_reorder_and_bad_voters_are_ignored(litellm_loaded) -> None:
    params = {"api_key": "dummy"}
    with OpenAIStub(default=Reply(_votes)) as stub, OpenAIStub(default=Hang(5)) as slow:
        voters = [
            Voter("openai/vote-a", {**params, "api_base": stub.url}),
            Voter("openai/garbage", {**params, "api_base": stub.url}),
            Voter("openai/vote-b", {**params, "api_base": stub.url}),
            Voter("openai/half-garbage", {**params, "api_base": stub.url}),
            Voter("openai/down", {**params, "api_base": f"http://127.0.0.1:{_closed_port()}/v1"}),
            Voter("openai/slow", {**params, "api_base": slow.url}, timeout_s=1.0),
        ]
        result = route(
            POOL,
            task_id="t",
            category="INSERT",
            failure_outcomes=["invalid_format"],
            k=2,
            voters=voters,
            digests=["how it failed: tool_error after a bad table name"],
        )
        assert len(stub.chat_requests) == 4
    by_model = {v.model: v for v in result.votes}
    assert [m for m, v in by_model.items() if v.ok] == ["openai/vote-a", "openai/vote-b"]
    assert "no JSON" in (by_model["openai/garbage"].error or "")
    assert "names no candidate" in (by_model["openai/half-garbage"].error or "")
    assert by_model["openai/down"].error and by_model["openai/slow"].error
    # profile alone: fmt > rec > ctx. Borda, the profile weighted as much as the two valid
    # voters: fmt 4+1+1=6, rec 2+0+0=2, ctx 0+2+2=4 -> the votes lift ctx above rec.
    assert [c.name for c in result.ranked] == ["fmt", "ctx", "rec"]
    assert [c.score for c in result.ranked] == [6.0, 4.0, 2.0]
    assert result.ranked[1].votes == {"openai/vote-a": 1, "openai/vote-b": 1}
    assert [c.name for c in result.top] == ["fmt", "ctx"]
    payload = result.to_dict()
    assert sum(1 for v in payload["voters"] if not v["ok"]) == 4
