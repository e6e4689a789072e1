"""Seeds and sampling values are range-checked before any trainer's policy server sees them:
the gateway refuses a seed no server takes, and the TRL server's own checks refuse what its
model cannot take, each a 400 naming the field (issue 53, item 7). No trainer imported."""

from __future__ import annotations

import json
import math

import pytest

from harnessctl.gateway import protocol
from harnessctl.integrations.chat_request import (
    SEED_MAX,
    SEED_MIN,
    BadRequest,
    check_chat_request,
    torch_seed,
)

HI = [{"role": "user", "content": "Say hi."}]


@pytest.mark.parametrize("seed", [2**63, -(2**63) - 1, 2**70])
def test_the_gateway_refuses_a_seed_past_64_bits(seed):
    raw = json.dumps({"model": "m", "messages": HI, "seed": seed}).encode()
    with pytest.raises(protocol.RequestError, match="seed must be a signed 64-bit integer"):
        protocol.parse_chat_request(raw)


@pytest.mark.parametrize("seed", [SEED_MIN, -1, 0, 7, SEED_MAX])
def test_the_gateway_passes_every_64_bit_seed(seed):
    raw = json.dumps({"model": "m", "messages": HI, "seed": seed}).encode()
    assert protocol.parse_chat_request(raw)[1]["seed"] == seed


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("seed", 2**64, "seed must be between -9223372036854775808 and 9223372036854775807"),
        ("seed", 2**200, "not a 201-bit integer"),
        ("seed", True, "seed must be an integer"),
        ("seed", 1.5, "seed must be an integer"),
        ("top_p", math.nan, "top_p must be between 0 and 1, not nan"),
        ("top_p", 1.5, "top_p must be between 0 and 1"),
        ("temperature", math.inf, "temperature must be between 0 and 2"),
        ("temperature", -0.1, "temperature must be between 0 and 2"),
        ("temperature", "hot", "temperature must be a number"),
        ("max_tokens", 0, "max_tokens must be between 1 and"),
        ("messages", [], "messages must be a non-empty list"),
        ("messages", [{"content": "no role"}], "messages[0] must be an object with a string role"),
        ("messages", [{"role": "user", "content": 3}], "messages[0].content must be a string"),
    ],
)
def test_the_policy_server_refuses_what_its_model_cannot_take(field, value, said):
    # NaN and infinity arrive as JSON's extensions, which Python's parser accepts
    body = json.loads(json.dumps({"messages": HI, field: value}))
    with pytest.raises(BadRequest) as refused:
        check_chat_request(body)
    assert said in str(refused.value)


def test_a_checked_request_keeps_the_values_sent_and_the_defaults():
    got = check_chat_request({"messages": HI, "seed": SEED_MAX, "temperature": 0, "top_p": 0.9})
    assert (got.seed, got.temperature, got.top_p, got.max_tokens) == (SEED_MAX, 0.0, 0.9, None)
    assert check_chat_request({"messages": HI}).seed == 0
    with pytest.raises(BadRequest, match="a JSON object"):
        check_chat_request(["not", "an", "object"])


@pytest.mark.parametrize("seed", [SEED_MIN, -1, 0, 3, 2**40, SEED_MAX])
def test_every_seed_maps_into_torchs_range_and_small_ones_as_before(seed):
    mixed = torch_seed(seed, 12_345)
    assert 0 <= mixed < 2**64
    if 0 <= seed * 7919 + 12_345 < 2**64:  # what the server seeded before: unchanged
        assert mixed == seed * 7919 + 12_345
