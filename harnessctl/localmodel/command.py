"""``python -m harnessctl.localmodel``: serve a catalogue model or a GGUF file, or list the
catalogue."""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

from ..constants import ENV_MODEL_MIN_SPEED
from ..errors import ConfigError, HarnessctlError
from .catalogue import CATALOGUE, DEFAULT
from .fetch import cache_state, model_dir, prepare
from .server import serve
from .speed import DEFAULT_MIN_SPEED


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harnessctl.localmodel",
        description="Serve a small model on 127.0.0.1 (OpenAI-compatible) until Ctrl-C; "
        "prints the litellm model string and api_base to use.",
    )
    parser.add_argument(
        "--model",
        default=DEFAULT,
        help=f"a catalogue name (--list; fetched once and verified) or a GGUF file "
        f"(default: {DEFAULT})",
    )
    parser.add_argument("--list", action="store_true", help="list the catalogue and exit")
    parser.add_argument(
        "--model-dir", type=Path, help="where model files are kept (HARNESSCTL_MODEL_DIR)"
    )
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    parser.add_argument(
        "--threads",
        type=int,
        help="threads to generate with (default: the cores idle at start, at least 1: "
        "llama.cpp's threads wait for each other, so one on a busy core slows them all)",
    )
    parser.add_argument("--ctx", type=int, default=8192, help="context tokens per slot")
    parser.add_argument(
        "--parallel", type=int, default=1, help="slots: requests served at once (one per worker)"
    )
    parser.add_argument(
        "--max-reply", type=int, default=512, help="tokens per completion at most (server-wide)"
    )
    parser.add_argument(
        "--min-speed",
        type=float,
        help=f"warn when the speed measured at start is below this many tokens/s; 0: never "
        f"({ENV_MODEL_MIN_SPEED}, default {DEFAULT_MIN_SPEED:g})",
    )
    args = parser.parse_args(argv)
    if args.threads is not None and args.threads < 1:
        parser.error("--threads must be 1 or more")
    if args.list:
        print(render_catalogue(args.model_dir))
        return 0
    try:
        min_speed = _min_speed(args.min_speed)
        served = prepare(args.model, args.model_dir, progress=lambda m: print(m, file=sys.stderr))
        if sys.stdout.isatty():
            print(f"serving {served.path} as {served.alias} (Ctrl-C stops it)", file=sys.stderr)
        serve(
            served.path,
            alias=served.alias,
            chat_template=served.chat_template,
            port=args.port,
            threads=args.threads,
            ctx=args.ctx,
            parallel=args.parallel,
            max_reply=args.max_reply,
            min_speed=min_speed,
        )
    except HarnessctlError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


def _min_speed(flag: float | None) -> float:
    """The speed floor: the flag, else ``HARNESSCTL_MODEL_MIN_SPEED``, else the default."""
    raw = str(flag) if flag is not None else os.environ.get(ENV_MODEL_MIN_SPEED, "").strip()
    if not raw:
        return DEFAULT_MIN_SPEED
    where = "--min-speed" if flag is not None else ENV_MODEL_MIN_SPEED
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(where, f"{raw!r} is not a number of tokens/s") from None
    if not (math.isfinite(value) and value >= 0):
        raise ConfigError(where, f"{raw!r} is not a number of tokens/s of 0 or more")
    return value


def render_catalogue(dest: Path | None = None) -> str:
    """The catalogue as a plain table: name, bytes, cache state, licence, upstream model."""
    dest = dest if dest is not None else model_dir()
    rows = [("name", "bytes", "cached", "licence", "upstream")]
    for entry in CATALOGUE.values():
        licence = entry.licence.split(" (")[0]
        rows.append((entry.name, f"{entry.size:,}", cache_state(entry, dest), licence,
                     f"{entry.upstream} {entry.quant}"))  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["  ".join([*(c.ljust(w) for c, w in zip(row, widths, strict=False)), row[4]])
             for row in rows]  # fmt: skip
    return "\n".join([*lines, f"(in {dest})"])
