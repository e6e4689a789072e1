"""Which profiles a router reads (issue #56): one split for every candidate, by one rule that
``route`` and ``eval --router`` share, and the record of what was read. Profiles are made by
hand in a real store; no rollout runs."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from harnessctl.errors import HarnessctlError
from harnessctl.profiles.evidence import choose_split, read_evidence
from harnessctl.store import ProfileRow, Store
from tests.helpers.profiles import routable_profile

POLICY, SUITE = "sim/dbbench", "dbbench-dev"


def test_the_default_is_one_split_every_candidate_has_other_than_the_routed_one() -> None:
    both = {"a": {"train", "test"}, "b": {"train", "test"}}
    assert choose_split(both, judged="test")[0] == "train"
    assert choose_split(both, judged="dev")[0] == "train"  # train before other splits
    assert choose_split(both, judged=None)[0] == "train"
    assert choose_split(both, judged="train")[0] == "test"  # not the routed tasks' own
    split, why = choose_split(both, judged="train")
    assert why == (
        "default: every candidate has a profile on it; not the routed tasks' split (train)"
    )
    # one ranking reads one split: a split only some candidates have loses to a common one,
    # even the routed tasks' own (the output then says IN-SAMPLE)
    some = {"a": {"train", "test"}, "b": {"train"}}
    split, why = choose_split(some, judged="train")
    assert split == "train" and "own split" in why
    # none common: the split most candidates have, then the name; no clock decides
    assert choose_split({"a": {"dev"}, "b": {"test"}, "c": {"test"}})[0] == "test"
    assert choose_split({"a": {"dev"}, "b": {"test"}})[0] == "dev"
    with pytest.raises(HarnessctlError, match="no candidate harness has a profile"):
        choose_split({"a": set()})


@pytest.fixture
def store(tmp_path: Path):
    """A store holding profiles of a (train, test), b (train, test) and c (test), the test
    ones built last (the newest, which routing used to prefer)."""
    with Store.for_workspace(tmp_path) as db:
        made = [("a", "train"), ("b", "train"), ("a", "test"), ("b", "test"), ("c", "test")]
        for i, (name, split) in enumerate(made):
            profile = routable_profile(name, (i, 10)).model_copy(update={"split": split})
            db.record_profile(
                ProfileRow(
                    harness_hash=name * 64, harness_name=name, policy_id=POLICY, suite=SUITE,
                    split=split, data_json=json.dumps(profile.dump()), created_at=float(i),
                )
            )  # fmt: skip
        yield db


def specs(*names: str) -> list:
    return [SimpleNamespace(name=n, hash=n * 64) for n in names]


def test_read_evidence_reads_one_split_and_says_which(store) -> None:
    profiles, evidence = read_evidence(
        store, specs("a", "b"), policy_id=POLICY, suite=SUITE, judged_split="dev"
    )
    assert {n: p.split for n, p in profiles.items()} == {"a": "train", "b": "train"}
    assert (evidence.split, evidence.asked, evidence.harnesses) == ("train", False, ["a", "b"])
    assert evidence.describe().startswith(
        f"profiles read: {SUITE}/train under {POLICY}, of a, b (default: every candidate"
    )
    # named: that split, said to be named
    profiles, evidence = read_evidence(
        store, specs("a", "b"), policy_id=POLICY, suite=SUITE, judged_split="dev", split="test"
    )
    assert {p.split for p in profiles.values()} == {"test"} and evidence.asked
    assert evidence.reason == "named by --split"


def test_a_candidate_without_the_split_is_named_or_left_out(store) -> None:
    with pytest.raises(HarnessctlError) as err:
        read_evidence(store, specs("a", "c"), policy_id=POLICY, suite=SUITE, split="train")
    assert f"no profile on {SUITE}/train" in str(err.value) and "c (has test)" in str(err.value)
    # by default the split all three have, though not train
    profiles, evidence = read_evidence(
        store, specs("a", "b", "c"), policy_id=POLICY, suite=SUITE, judged_split="dev"
    )
    assert evidence.split == "test" and sorted(profiles) == ["a", "b", "c"]
    # a pool of whatever is profiled (route without --pool): c is left out, and named
    profiles, evidence = read_evidence(
        store, specs("a", "b", "c"), policy_id=POLICY, suite=SUITE, split="train",
        drop_missing=True,
    )  # fmt: skip
    assert sorted(profiles) == ["a", "b"] and evidence.left_out == {"c": ["test"]}
    assert "left out (no profile on this split): c (has test)" in evidence.describe()
    with pytest.raises(HarnessctlError, match="no candidate harness has a profile on"):
        read_evidence(store, specs("c"), policy_id=POLICY, suite=SUITE, split="train",
                      drop_missing=True)  # fmt: skip
