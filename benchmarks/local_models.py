#!/usr/bin/env python3
"""The catalogue's local models on this machine: prompt and generation tokens per second, and
what the prompt cache saves on a rollout's second turn.

For each `--model` (repeatable) and each `--threads` (repeatable; a count or `auto`) it starts
`harnessctl.localmodel.LocalModel` (llama.cpp's server, one slot) and plays `--repeats`
two-turn conversations, each opened by a system prompt of about 500 tokens (a DBBench-like
instruction and schema) that starts with a fresh line, so no conversation finds another's
prefix cached. Every call is greedy and generates exactly `--max-tokens` tokens (the end
token ignored), so calls differ only in what they prefill:

* turn 1: system + question, nothing cached: prompt tok/s and generation tok/s, from the
  `timings` llama.cpp returns with each completion;
* turn 2: turn 1, its reply and a second question, the prefix cached (`cache_prompt`, the
  server's default): wall time, tokens taken from the cache;
* turn 2 again with `cache_prompt: false`: the wall time the cache saved.

Prints one JSON object per model and thread count (medians over the repeats) as it goes;
`--json FILE` appends them as JSON lines.

usage: .venv/bin/python benchmarks/local_models.py --model smollm2 --model qwen2.5-coder-0.5b
       [--threads 1 --threads 2] [--repeats 3] [--max-tokens 32] [--json out.jsonl]
Needs the `local-model` extra; fetches each model once (up to 1.1 GB).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

SCHEMA = """You are an agent that answers questions about a SQLite database. In each turn, write
either one SQL query in a ```sql block, which will be run and its result shown to you, or
the final answer after "Final Answer:". Never invent tables or columns; when a query fails,
read the error and fix the query. The database has these tables:

orders(id INTEGER PRIMARY KEY, customer_id INTEGER, placed_at TEXT, status TEXT, total REAL)
customers(id INTEGER PRIMARY KEY, name TEXT, email TEXT, country TEXT, created_at TEXT)
order_items(order_id INTEGER, product_id INTEGER, quantity INTEGER, unit_price REAL)
products(id INTEGER PRIMARY KEY, name TEXT, category TEXT, price REAL, stock INTEGER)
shipments(id INTEGER PRIMARY KEY, order_id INTEGER, carrier TEXT, shipped_at TEXT,
          delivered_at TEXT, status TEXT)
returns(id INTEGER PRIMARY KEY, order_item_id INTEGER, reason TEXT, refunded REAL)
reviews(id INTEGER PRIMARY KEY, product_id INTEGER, customer_id INTEGER, stars INTEGER,
        body TEXT, written_at TEXT)

Status values of orders: 'pending', 'paid', 'shipped', 'delivered', 'cancelled'.
Status values of shipments: 'label', 'in_transit', 'delivered', 'lost'.
Dates are ISO 8601 strings in UTC. Money is in euros, two decimals. A customer's country is
an ISO 3166 alpha-2 code. Products are in one of the categories 'books', 'garden',
'kitchen', 'toys', 'tools'. A return refers to one line of an order; its refund may be
partial. Reviews have between one and five stars.

Rules: use only the tables above; prefer one query that answers the question to several
small ones; round money to two decimals; when the question asks for a list, answer with a
JSON list of values in the order the question implies; when it asks for a count, answer with
the number alone. If the result of a query is empty, say so and check the query's filters
before answering. Do not explain your reasoning at length: the answer is read by a program.
"""
QUESTIONS = (
    "How many orders placed in March 2024 were cancelled?",
    "Which three products had the most returns? Give their names.",
)


def post(url: str, body: dict) -> tuple[float, dict]:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    t0 = time.perf_counter()
    with urllib.request.urlopen(request, timeout=900) as response:
        data = json.loads(response.read())
    return time.perf_counter() - t0, data


def conversation(api_base: str, alias: str, nonce: str, max_tokens: int) -> dict:
    url = f"{api_base}/chat/completions"
    sampling = {"temperature": 0.0, "seed": 7, "max_tokens": max_tokens, "ignore_eos": True}
    messages = [
        {"role": "system", "content": f"Session {nonce}.\n{SCHEMA}"},
        {"role": "user", "content": QUESTIONS[0]},
    ]
    wall1, first = post(url, {"model": alias, "messages": messages, **sampling})
    messages += [
        {"role": "assistant", "content": first["choices"][0]["message"]["content"]},
        {"role": "user", "content": f"Result: [(0,)]\n{QUESTIONS[1]}"},
    ]
    body = {"model": alias, "messages": messages, **sampling}
    wall2, cached = post(url, body)
    wall3, cold = post(url, {**body, "cache_prompt": False})
    t1, t2, t3 = first["timings"], cached["timings"], cold["timings"]
    return {
        "prompt_tokens": t1["prompt_n"],
        "prompt_tok_s": t1["prompt_per_second"],
        "gen_tok_s": statistics.median(t["predicted_per_second"] for t in (t1, t2, t3)),
        "turn1_s": wall1,
        "turn2_prompt_tokens": t3["prompt_n"],
        "turn2_cached_tokens": t2.get("cache_n", 0),
        "turn2_cached_s": wall2,
        "turn2_uncached_s": wall3,
    }


def machine() -> str:
    cpu = platform.processor() or "?"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        names = [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
                 if line.startswith("model name")]  # fmt: skip
        cpu = names[0] if names else cpu
    return f"{os.cpu_count()} x {cpu}, {platform.system()}"


def measure(name: str, threads: int | None, repeats: int, max_tokens: int) -> dict:
    from harnessctl.localmodel import LocalModel

    load = round(os.getloadavg()[0], 2)  # a busy machine's numbers are not a quiet one's
    t0 = time.perf_counter()
    with LocalModel(model=name, threads=threads, ctx=4096, timeout_s=600) as model:
        start_s = time.perf_counter() - t0
        chosen, probe = model.threads, model.tokens_per_s  # "auto": what the server picked
        alias = model.model.split("/", 1)[1]
        hello = {"model": alias, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
        post(f"{model.api_base}/chat/completions", hello)  # the first call's one-off costs
        runs = [
            conversation(model.api_base, alias, f"{time.time_ns()}-{i}", max_tokens)
            for i in range(repeats)
        ]
    row = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
    row = {k: round(v) if k.endswith("tokens") else round(v, 3) for k, v in row.items()}
    return {
        "model": name,
        "threads": "auto" if threads is None else threads,
        "threads_used": chosen,
        "start_probe_gen_tok_s": None if probe is None else round(probe, 2),
        "repeats": repeats,
        "max_tokens": max_tokens,
        **row,
        "server_start_s": round(start_s, 2),
        "load_before": load,
        "machine": machine(),
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", action="append", help="a catalogue name (repeatable)")
    parser.add_argument(
        "--threads",
        type=lambda v: None if v == "auto" else int(v),
        action="append",
        help="a count or 'auto' (the server's own choice from the idle cores); repeatable; "
        "default auto",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--json", type=Path, help="append the rows here as JSON lines")
    args = parser.parse_args()
    for name in args.model or ["smollm2"]:
        for threads in args.threads or [None]:
            row = measure(name, threads, args.repeats, args.max_tokens)
            print(json.dumps(row), flush=True)
            if args.json:
                with args.json.open("a") as out:
                    out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
