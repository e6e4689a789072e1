"""Editors turn (direction, harness files, failure digests) into a SEARCH/REPLACE patch.

Two editors share one interface and one downstream path (parse, apply, validate, reward):

- ``LLMEditor``: any litellm model string; on a validation failure it gets the error back
  and may retry (the engine bounds the retries).
- ``RuleEditor`` (``--editor rules``, the offline default): the catalogue of real code
  repairs that the harness's environment ships with its directions (``repairs/``), chosen by
  matching their signals against the failure digests. It is rule-based, not a model, and
  says so in every response.
- ``EngineerEditor`` (``--editor engineer:DIR``, :mod:`harnessctl.engineer.editor`): a
  harness engineer trained by ``harnessctl train-engineer``, run with transformers.

Editors are plugins of one registry (:data:`EDITORS`, entry point group
``harnessctl.editors``): a name maps to a factory ``(workspace=, family=, params=) -> Editor``;
any other ``--editor`` value is a litellm model string for ``LLMEditor``.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import ConfigError
from ..harness import format_validation_error, read_yaml
from ..registry import Registry
from ..store.calls import HostCall
from .digest import Digest
from .directions import Direction, builtin_dir

SYSTEM = """You are a harness engineer. A harness is the code and prompts around an LLM agent: \
it builds the context, parses and validates actions, mediates tools and recovers from errors. \
You improve one harness along ONE repair direction, using failure trajectories as evidence.

Answer with one or more SEARCH/REPLACE blocks and nothing else that looks like one. Each \
block is the file's path (as listed below), then a SEARCH part holding lines copied exactly \
from that file (they must match exactly once), then the REPLACE part. For instance, to \
change `limit = 5` to `limit = 8` in harness.py:

harness.py
<<<<<<< SEARCH
        limit = 5
=======
        limit = 8
>>>>>>> REPLACE

Rules: edit only the files listed as editable; keep the change small (the edit budget is in \
changed lines); the harness runs with the Python standard library and `harnessctl_runtime` only; \
never hard-code answers for particular tasks."""


SYSTEM_JSON = (
    SYSTEM.split("\n", 1)[0]
    + """

Answer with one JSON object and nothing else: {"edits": [{"path": ..., "search": ..., \
"replace": ...}]}. `path` is a file's path as listed below; `search` is one whole line \
copied exactly from that file, indentation included (a line the file holds once); \
`replace` is what that line becomes: one or more lines (to add code, repeat the line and \
add yours after it, indented as the file is). For instance, to change `limit = 5` to \
`limit = 8` in harness.py:
{"edits": [{"path": "harness.py", "search": "        limit = 5", "replace": "        limit = 8"}]}

Rules: edit only the files listed as editable; `replace` must differ from `search`; keep the \
change small (the edit budget is in changed lines); the harness runs with the Python standard \
library and `harnessctl_runtime` only; never hard-code answers for particular tasks."""
)
#: ``LLMEditor`` params that configure the editor and are not sent to the model.
EDITOR_PARAMS = ("edit_format",)


@dataclass
class EditContext:
    direction: Direction
    files: dict[str, str]
    digests: list[Digest]
    tried: list[str] = field(default_factory=list)  # responses already proposed for this parent
    history: list[dict] = field(default_factory=list)  # prior messages in this round (retries)


@dataclass
class Proposal:
    editor: str
    prompt: str
    response: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    calls: list[HostCall] = field(default_factory=list)
    """The model calls behind this proposal, for the call log (none for the rule editor)."""


class Editor(Protocol):
    name: str

    def propose(self, ctx: EditContext, feedback: str | None) -> Proposal | None: ...


def render_prompt(ctx: EditContext) -> str:
    return render_parts(ctx.direction, ctx.files, [dg.render() for dg in ctx.digests])


def render_parts(direction: Direction, files: dict[str, str], digests: list[str]) -> str:
    """The editor's user message: brief, scope, current files, failure digests."""
    d = direction
    parts = [
        f"## Direction: {d.name} — {d.title}",
        d.brief,
        f"Outcomes to fix: {', '.join(d.targets)}. Hooks to change: {', '.join(d.hooks) or 'any'}.",
        f"Editable files (globs): {', '.join(d.files)}. Edit budget: {d.max_changed_lines} "
        "changed lines.",
        "## Current files",
    ]
    for rel, text in sorted(files.items()):
        parts.append(f"{rel}\n```\n{text}```")
    parts.append(f"## Failure trajectories ({len(digests)})")
    parts.extend(digests)
    return "\n\n".join(parts)


def retry_turn(feedback: str) -> dict[str, str]:
    """The user turn that hands a rejected patch's ``reason: detail`` back to the editor (the
    exported datasets render retries with it too)."""
    return {
        "role": "user",
        "content": f"Your patch was rejected: {feedback}\nSend a corrected patch.",
    }


class LLMEditor:
    """Asks a model (any litellm model string) for SEARCH/REPLACE blocks, or, with the param
    ``edit_format=json``, for the same edits as a JSON object (:func:`.patch.json_blocks`)
    decoded under its JSON schema (``response_format``): a small model that drifts out of the
    block format (a 1.5B wrote fenced code with no SEARCH line) cannot leave a schema."""

    def __init__(
        self, model: str, params: dict | None = None, timeout_s: float | None = None
    ) -> None:
        # None: the gateway's default for the endpoint (a loopback server is waited for longer
        # and never sent the call again, harnessctl.gateway.llm.call_timeout)
        self.model = model
        self.params = dict(params or {})
        self.timeout_s = timeout_s
        self.name = f"llm:{model}"
        self.edit_format = str(self.params.get("edit_format", "blocks"))
        if self.edit_format not in ("blocks", "json"):
            raise ConfigError(
                "--editor-param edit_format", f"{self.edit_format!r} is not blocks or json"
            )

    def call_params(self, files: dict[str, str] | None = None) -> dict:
        """What the model call is sent: the params less the editor's own, plus, for
        ``edit_format=json``, the schema the reply is decoded under: with the editable
        ``files`` known, each edit's ``path`` is one of them and its ``search`` one of that
        file's lines that occur exactly once (so every edit applies: a small model copying
        text from the trajectories instead of the file cannot), else the generic schema."""
        from .patch import EDITS_SCHEMA, grounded_schema

        sent = {k: v for k, v in self.params.items() if k not in EDITOR_PARAMS}
        if self.edit_format == "json":
            body = grounded_schema(files) if files else EDITS_SCHEMA
            schema = {"name": "harness_edits", "schema": body}
            sent.setdefault("response_format", {"type": "json_schema", "json_schema": schema})
        return sent

    def propose(self, ctx: EditContext, feedback: str | None) -> Proposal | None:
        from ..gateway.llm import complete

        if not ctx.history:
            system = SYSTEM_JSON if self.edit_format == "json" else SYSTEM
            ctx.history = [
                {"role": "system", "content": system},
                {"role": "user", "content": render_prompt(ctx)},
            ]
        if feedback is not None:
            ctx.history.append(retry_turn(feedback))
        started = time.time()
        sent = self.call_params(ctx.files)
        result = complete(
            self.model,
            list(ctx.history),
            sent,
            timeout_s=self.timeout_s,
            retries=2,
            backoff_s=0.5,
        )
        ctx.history.append({"role": "assistant", "content": result.content})
        prompt = "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in ctx.history[:-1])
        return Proposal(
            self.name,
            prompt,
            result.content,
            result.prompt_tokens,
            result.completion_tokens,
            result.cost_usd,
            [HostCall.of(self.model, sent, started, completion=result)],
        )


class Repair(BaseModel):
    """One catalogue repair (``harnessctl/directions/<family>/repairs/*.yaml``)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    direction: str
    description: str
    signals: list[str] = []
    requires: list[str] = []
    patch: str


def load_repairs(family: str, workspace: Path | None = None) -> list[Repair]:
    shipped = builtin_dir(family)
    folders = [shipped / "repairs"] if shipped else []
    if workspace is not None:
        folders.append(workspace / "directions" / "repairs")
    repairs: list[Repair] = []
    for folder in folders:
        for path in sorted(folder.glob("*.yaml")) if folder.is_dir() else []:
            data = read_yaml(path)
            if not isinstance(data, dict):
                raise ConfigError(str(path), "expected a mapping at the top level")
            try:
                repairs.append(Repair.model_validate(data))
            except ValidationError as exc:
                raise format_validation_error(str(path), exc) from None
    return repairs


RULE_HEADER = "rule-based editor (offline, not an LLM): repair "


class RuleEditor:
    """Chooses a catalogue repair for the direction whose signals best match the digests."""

    name = "rules"

    def __init__(self, repairs: list[Repair]) -> None:
        self.repairs = repairs

    @property
    def identity(self) -> str:
        """``rules`` and its catalogue: an edited repair is a new editor (evolve id)."""
        blob = json.dumps([r.model_dump(mode="json") for r in self.repairs], sort_keys=True)
        return f"rules#{hashlib.sha256(blob.encode()).hexdigest()[:12]}"

    def propose(self, ctx: EditContext, feedback: str | None) -> Proposal | None:
        tried = {
            r[len(RULE_HEADER) :].split(":", 1)[0] for r in ctx.tried if r.startswith(RULE_HEADER)
        }
        text = "\n".join(dg.text() for dg in ctx.digests)
        candidates = []
        for order, repair in enumerate(self.repairs):
            if repair.direction != ctx.direction.name or repair.id in tried:
                continue
            score = sum(1 for s in repair.signals if s.lower() in text)
            if repair.signals and score == 0:
                continue
            if not _applies(repair, ctx.files):
                continue
            candidates.append((-score, order, repair))
        if not candidates:
            return None
        repair = sorted(candidates, key=lambda c: (c[0], c[1]))[0][2]
        response = f"{RULE_HEADER}{repair.id}: {repair.description}\n\n{repair.patch}"
        ctx.tried.append(response)
        return Proposal(self.name, render_prompt(ctx), response)


def _applies(repair: Repair, files: dict[str, str]) -> bool:
    from .patch import PatchError, parse_patch

    try:
        blocks = parse_patch(repair.patch)
    except PatchError:
        return False
    for block in blocks:
        current = files.get(block.path)
        if block.search.strip() == "":
            if current is not None:
                return False
        elif current is None or current.count(block.search) != 1:
            return False
    return True


def rule_editor(*, workspace: Path | None = None, family: str, params: dict | None = None):
    """The ``rules`` editor over the catalogue of environment ``family`` (and the workspace's)."""
    return RuleEditor(load_repairs(family, workspace))


EDITORS: Registry[Editor] = Registry(
    "harnessctl.editors",
    "editor",
    {
        "rules": "harnessctl.evolve.editors:rule_editor",
        "null": "harnessctl.evolve.null:null_editor",
        "engineer": "harnessctl.engineer.editor:engineer_editor",
    },
    option="--editor",
)
BUILTIN_WITH_ARGUMENT = ("engineer",)
"""Editors written ``NAME:ARGUMENT`` (``engineer:DIR``): checked before the dotted form, which
``engineer:dir`` would otherwise match as ``module:factory``."""
_DOTTED = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")  # package.module:factory


def make_editor(
    spec: str, *, workspace: Path | None = None, family: str, params: dict | None = None
) -> Editor:
    """A registered editor (``rules``, a plugin's name or ``package.module:factory``; a
    registered name with an argument, ``engineer:DIR``, passes it as the param ``model``),
    else an ``LLMEditor`` for ``spec`` as a litellm model string. The params are checked by
    name first (:func:`check_editor_params`): a misspelt one is refused before anything
    runs, not ignored."""
    name, _, argument = spec.partition(":")
    if argument and name in BUILTIN_WITH_ARGUMENT:
        params = {**(params or {}), "model": argument}
        spec = name
    elif spec not in EDITORS.names() and not _DOTTED.match(spec):
        check_editor_params(spec, None, params or {})
        return LLMEditor(spec, params)
    factory = EDITORS.get(spec)
    check_editor_params(spec, factory, params or {})
    return factory(workspace=workspace, family=family, params=params)


#: The ``--editor-param`` names of the built-in registered editors: the rule-based and null
#: editors read none; the engineer's are its module's (imported only when it is asked for).
BUILTIN_PARAMS: dict[str, tuple[str, ...] | str] = {
    "rules": (),
    "null": (),
    "engineer": "harnessctl.engineer.editor:PARAMS",
}


def editor_param_names(name: str, factory: object) -> tuple[str, ...] | None:
    """The parameters registered editor ``name`` reads: a built-in's, else its factory's
    ``param_names`` (a tuple of names); None for a plugin that declares none (its factory
    then judges its params itself)."""
    from ..registry import load_object

    builtin = BUILTIN_PARAMS.get(name)
    if isinstance(builtin, str):
        return tuple(load_object(builtin))
    if builtin is not None:
        return builtin
    declared = getattr(factory, "param_names", None)  # optional, as a sim policy's
    return tuple(declared) if declared is not None else None


def check_editor_params(spec: str, factory: object | None, params: dict) -> None:
    """``--editor-param`` names checked before any rollout (exit 2 naming the parameter, a
    close match and the known names). A registered editor's are held to the names it reads
    (:func:`editor_param_names`). An LLM editor (``factory`` None) sends its params to
    litellm, which forwards a provider's own parameters as they are, so there is no closed
    list: its own (``edit_format``) and the chat-call names the policy check knows are
    checked by value, a name one or two letters from one of them is refused as a typo, and
    any other goes to the provider, whose preflight call judges it (as a policy's ``--param``,
    :func:`harnessctl.run.checks.check_model_params`)."""
    from ..run.checks import check_model_params, check_param_names

    option = "--editor-param"
    if factory is None:
        from ..gateway.protocol import is_secret

        secrets = {k: v for k, v in params.items() if is_secret(k, v)}
        plain = {k: v for k, v in params.items() if k not in secrets}
        check_model_params(spec, plain, secrets, option=option, own=EDITOR_PARAMS)
        return
    known = editor_param_names(spec, factory)
    if known is not None:
        what = spec if spec == "engineer" else f"{spec} editor"
        check_param_names(option, what, params, known)
