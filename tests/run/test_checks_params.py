"""Parameter names checked before anything runs (issue #56): a misspelt name is refused with
the closest known one and the known names, for an offline policy and for any editor."""

from __future__ import annotations

import pytest

from harnessctl.errors import ConfigError
from harnessctl.run.checks import (
    check_model_params,
    check_param_names,
    check_policy_params,
    did_you_mean,
)


def test_did_you_mean_names_a_close_known_name_only():
    assert did_you_mean("temprature", ["temperature", "top_p"]) == "; did you mean 'temperature'?"
    assert did_you_mean("thinking", ["temperature", "top_p"]) == ""


def test_unknown_names_are_refused_naming_the_option_the_name_and_the_known_ones():
    check_param_names("--editor-param", "engineer", {"seed": 1}, ["seed", "top_p"])
    with pytest.raises(ConfigError) as caught:
        check_param_names("--editor-param", "engineer", {"sed": 1}, ["top_p", "seed"])
    assert caught.value.where == "--editor-param"
    assert caught.value.message == (
        "unknown engineer parameter 'sed'; did you mean 'seed'? (its parameters: seed, top_p)"
    )
    with pytest.raises(ConfigError, match=r"'x' \(it takes none\)"):
        check_param_names("--editor-param", "rules editor", {"x": 1}, ())


def test_a_misspelt_simulated_policy_param_gets_a_close_match():
    with pytest.raises(ConfigError) as caught:
        check_policy_params("sim/dbbench", {"skil": 0.8})
    said = caught.value.message
    assert "takes no parameter skil; did you mean 'skill'?" in said
    assert "rate_lose_track" in said  # the known names are listed


def test_a_real_model_typo_lists_the_known_names_under_the_callers_option():
    with pytest.raises(ConfigError) as caught:
        check_model_params("openai/m", {"edit_fromat": "json"}, option="--editor-param",
                           own=("edit_format",))  # fmt: skip
    assert caught.value.where == "--editor-param"
    assert "did you mean 'edit_format'?" in caught.value.message
    assert "temperature" in caught.value.message  # the known names
    check_model_params("openai/m", {"thinking": {"type": "enabled"}})  # the provider's own
