"""One MiniWoB++ episode in a pooled headless browser (host only).

``reset`` takes a browser from the process's pool, loads the task page afresh, seeds it with
the task's seed and starts the page's own episode (``core.startEpisodeReal()``); ``step``
performs one action of MiniWoB++'s action space and reads the page's own state back
(``WOB_DONE_GLOBAL``, ``WOB_RAW_REWARD_GLOBAL``, ``WOB_REWARD_GLOBAL``): the page's JavaScript
decides when the episode is over and its reward. ``close`` gives the browser back.

The page's clock. A task page ends its episode after ``core.EPISODE_MAX_TIME`` (10 s unless
the task sets another) and scales its reward by the time left. A model's turn takes
seconds, so that clock would time every model out: the episode counts instead the time the
page itself spends on the agent's actions (each step's browser time), against the task's own
limit, and ends the episode as the page's timer would ("timed out", reward -1) once it is
spent; the page's own timer is pushed out of reach (``EPISODE_MAX_TIME`` set to a day before
the episode starts, so the time-scaled reward is the raw one to within 1e-4).

The agent's failures, never the host's: a refused action (an unknown ref, a key that is not
one, text over the limit) is answered with the reason and the page; an action after which
the page is no longer the episode's document (the page navigated away) or a window opened
ends the episode unsuccessfully (``info["error"]``); typed text is only ever keystrokes and
refs only ever integers passed as script arguments, so nothing the agent sends runs as
script. A browser that fails itself (its session gone) raises: an infrastructure error.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from harnessctl.envs import Episode, StepResult, Task

from .actions import ActionError, WebAction, parse_action
from .browser import POOL, Browser, page_state, task_url
from .dom import render_page

#: The page's own timer, out of reach: a day (the episode's clock is the page time, above).
FAR_MS = 86_400_000
OVER = "The episode is over."


def observation(utterance: str, page: str) -> str:
    """What the agent sees: the task's instruction and the page as text."""
    return f"Task: {utterance}\nPage:\n{page}"


def _infra(exc: BaseException) -> bool:
    """Whether a WebDriver error is the browser's own failure (its session or process gone)."""
    from selenium.common.exceptions import InvalidSessionIdException, NoSuchWindowException

    if isinstance(exc, InvalidSessionIdException | ConnectionError):
        return True
    if isinstance(exc, NoSuchWindowException):
        return False
    text = str(exc).lower()
    return "session deleted" in text or "disconnected" in text or "chrome not reachable" in text


class MiniwobEpisode(Episode):
    """One task page played for one rollout (see the module docstring)."""

    def __init__(self, task: Task, max_steps: int, pool: Any = POOL) -> None:
        self.task = task
        self.name = str(task.record["task"])
        self.seed = task.record["seed"]
        self.max_steps = max_steps
        self.pool = pool
        self.browser: Browser | None = None
        self.steps = 0
        self.done = False
        self.raw_reward = 0.0
        self.reward = 0.0
        self.reason: str | None = None
        self.error: str | None = None
        self.time_limit_ms = 10_000.0
        self.page_ms = 0.0  # the page's time on the agent's actions (its clock, above)
        self.browser_ms = 0.0  # the whole browser time of the steps, round trips included
        self.token = ""
        self._last: StepResult | None = None

    # --- lifecycle ------------------------------------------------------------------------
    def reset(self) -> StepResult:
        if self.browser is None:
            self.browser = self.pool.acquire()
        browser = self.browser
        self.token = secrets.token_hex(8)
        browser.load(task_url(self.name), self.seed, self.token)
        limit = browser.driver.execute_script(
            "var limit = core.EPISODE_MAX_TIME; core.EPISODE_MAX_TIME = arguments[0];"
            "core.startEpisodeReal(); return limit;",
            FAR_MS,
        )
        self.time_limit_ms = float(limit or 10_000)
        deadline = time.monotonic() + 2
        while not browser.driver.execute_script("return !!WOB_TASK_READY;"):
            if time.monotonic() > deadline:
                raise RuntimeError(f"task page {self.name} did not get ready")
            time.sleep(0.02)
        self.steps, self.done, self.error, self.reason = 0, False, None, None
        self.raw_reward = self.reward = self.page_ms = self.browser_ms = 0.0
        self._last = None
        return self._answer(page_state(browser.driver), None)

    def close(self) -> None:
        browser, self.browser = self.browser, None
        if browser is not None:
            self.pool.release(browser, healthy=self._healthy(browser))

    @staticmethod
    def _healthy(browser: Browser) -> bool:
        try:
            browser.driver.execute_script("return 1;")
        except Exception:  # noqa: BLE001 - any failure: the browser is not reused
            return False
        return True

    # --- steps ----------------------------------------------------------------------------
    def step(self, tool: str, argument: str, arguments: dict[str, Any] | None) -> StepResult:
        self.steps += 1
        if self.done and self._last is not None:
            last = self._last
            return StepResult(last.observation, done=True, info=dict(last.info))
        if self.browser is None:
            raise RuntimeError("step before reset")
        driver = self.browser.driver
        try:
            action = parse_action(tool, argument, arguments)
        except ActionError as exc:
            return self._answer(self._state(), str(exc))
        started = time.perf_counter()
        try:
            refused, page_ms = self._perform(action)
        except Exception as exc:
            if _infra(exc):
                raise
            refused, page_ms = f"the browser refused the action: {type(exc).__name__}", 0.0
        if self.browser.close_other_windows():
            return self._fail("a window was opened; the episode ended", started)
        state = self._state()
        self.browser_ms += (time.perf_counter() - started) * 1000
        self.page_ms += page_ms + float(state.get("page_ms") or 0)
        if state.get("mark") != self.token:
            return self._fail("the page navigated away from the task; the episode ended", started)
        if not state.get("done") and self.browser_ms > self.time_limit_ms:
            driver.execute_script("core.endEpisode(-1, false, 'timed out');")
            state = self._state()
        return self._answer(state, refused)

    def _perform(self, action: WebAction) -> tuple[str | None, float]:
        """Do ``action`` on the page: (why it was refused or None, the page's time in ms)."""
        assert self.browser is not None
        driver = self.browser.driver
        if action.kind in ("click", "type"):
            result = driver.execute_script(CLICK_JS, action.ref)
            if result.get("error"):
                return f"no element [{action.ref}] on the page to {action.kind}", 0.0
            page_ms = float(result.get("page_ms") or 0)
            if action.kind == "click":
                return None, page_ms
            self._keys(action.text)
            return None, page_ms
        self._chord(action.keys)
        return None, 0.0

    def _keys(self, text: str) -> None:
        from selenium.webdriver.common.action_chains import ActionChains

        assert self.browser is not None
        chain = ActionChains(self.browser.driver, duration=0)
        for key in text:
            chain.w3c_actions.key_action.key_down(key)
            chain.w3c_actions.key_action.key_up(key)
        chain.perform()

    def _chord(self, keys: tuple[str, ...]) -> None:
        from selenium.webdriver.common.action_chains import ActionChains

        assert self.browser is not None
        chain = ActionChains(self.browser.driver, duration=0)
        for key in keys:
            chain.w3c_actions.key_action.key_down(key)
        for key in reversed(keys):
            chain.w3c_actions.key_action.key_up(key)
        chain.perform()

    def _state(self) -> dict[str, Any]:
        assert self.browser is not None
        try:
            return page_state(self.browser.driver)
        except Exception as exc:
            if _infra(exc):
                raise
            return {"mark": None, "foreign": True, "page_ms": 0}

    def _fail(self, why: str, started: float) -> StepResult:
        self.browser_ms += (time.perf_counter() - started) * 1000
        self.done, self.error, self.raw_reward, self.reward = True, why, -1.0, -1.0
        info = {"error": why, "done_by": "host", "raw_reward": -1.0}
        self._last = StepResult(f"{OVER} {why}", done=True, info=info)
        return StepResult(self._last.observation, done=True, info=dict(info))

    def _answer(self, state: dict[str, Any], refused: str | None) -> StepResult:
        info: dict[str, Any] = {"steps": self.steps}
        if refused:
            info["error"] = refused
        if state.get("done"):
            self.done = True
            self.raw_reward = float(state.get("raw_reward") or 0)
            self.reward = float(state.get("reward") or 0)
            self.reason = state.get("reason")
            info.update(done_by="page", raw_reward=self.raw_reward)
            text = f"{OVER} The task page gave the reward {self.raw_reward:g}."
            self._last = StepResult(text, done=True, info=info)
            return StepResult(text, done=True, info=dict(info))
        text = observation(str(state.get("utterance") or ""), render_page(state.get("dom") or {}))
        if refused:
            text = f"Error: {refused}.\n{text}"
        if self.steps >= self.max_steps:
            self.done = True
            info["truncated"] = True
            self._last = StepResult(text, done=True, info=info)
            return StepResult(text, done=True, info=dict(info))
        return StepResult(text, info=info)


#: Click the element of a ref as MiniWoB++'s ``CLICK_ELEMENT`` does (``core.elementClick``,
#: the page's own), refusing a ref the page's last DOM read did not hand out.
CLICK_JS = """
var t0 = performance.now();
var ref = arguments[0];
if (!(ref in core.previousDOMInfo)) { return {error: 'no element'}; }
var result = core.elementClick(ref);
return {error: result === true ? null : String(result), page_ms: performance.now() - t0};
"""

__all__ = ["FAR_MS", "MiniwobEpisode", "observation"]
