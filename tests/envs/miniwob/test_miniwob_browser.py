"""MiniWoB++'s own task pages in headless Chromium: an episode's observation, actions in
text and as calls, the page's reward, a clean page per episode in a reused browser, the
page's clock, hostile actions (the agent's failure, never the host's), no network, and no
browser left behind by its process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from tests.envs.miniwob import require_browser

require_browser()

from harnessctl.envs.miniwob import MiniwobEnvironment  # noqa: E402
from harnessctl.envs.miniwob.browser import POOL, close_browsers  # noqa: E402
from harnessctl.envs.miniwob.dom import parse_page  # noqa: E402
from harnessctl.envs.miniwob.episode import FAR_MS  # noqa: E402
from harnessctl.envs.miniwob.gold import split_observation  # noqa: E402
from harnessctl.envs.miniwob.tasks import make_task  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(scope="module", autouse=True)
def browsers():
    yield
    close_browsers()


def task(name: str, seed: int = 1):
    return make_task({"task": name, "seed": seed}, "<test>", "test")


def episode(name: str, seed: int = 1):
    env = MiniwobEnvironment()
    t = task(name, seed)
    return env, t, env.open_episode(t, 0)


def page(observation: str):
    utterance, text = split_observation(observation) or ("", "")
    return utterance, parse_page(text)


def ref_of(observation: str, predicate) -> int:
    return next(e.ref for e in page(observation)[1] if predicate(e))


def test_an_episode_is_the_page_its_reward_and_the_score():
    env, t, ep = episode("enter-text")
    try:
        first = ep.reset()
        utterance, elements = page(first.observation)
        word = utterance.split('"')[1]
        assert utterance.startswith("Enter ") and not first.done
        field = ref_of(first.observation, lambda e: e.tag == "input[text]")
        button = ref_of(first.observation, lambda e: e.tag == "button")
        typed = ep.step("type", f'[{field}] "{word}"', None)
        assert f'value="{word}"' in typed.observation and not typed.done
        done = ep.step("click", "", {"ref": button})  # a function call
        assert done.done and done.info["raw_reward"] == 1.0 and done.info["done_by"] == "page"
        score = env.score(t, None, None, ep)
        assert score.success and score.detail["raw_reward"] == 1.0
        assert score.detail["reward"] == pytest.approx(1.0, abs=1e-3)  # the clock is frozen
        assert score.detail["time_limit_ms"] == 10_000 and score.detail["steps"] == 2
        again = ep.step("click", f"[{button}]", None)  # once over, it repeats its last answer
        assert again.done and again.observation == done.observation
    finally:
        ep.close()


def test_a_wrong_answer_is_the_pages_own_negative_reward():
    env, t, ep = episode("click-test-2")
    try:
        first = ep.reset()
        utterance, elements = page(first.observation)
        label = utterance.removeprefix("Click button ").rstrip(".")
        other = next(e.ref for e in elements if e.tag == "button" and e.text != label)
        done = ep.step("click", f"[{other}]", None)
        assert done.done and done.info["raw_reward"] == -1.0
        assert not env.score(t, None, None, ep).success
    finally:
        ep.close()


def test_the_same_seed_draws_the_same_page_and_each_episode_starts_clean():
    _, _, ep = episode("enter-text", seed=7)
    try:
        first = ep.reset()
        field = ref_of(first.observation, lambda e: e.tag == "input[text]")
        ep.step("type", f'[{field}] "left over"', None)
        ep.step("press", "<Tab>", None)
        browser = ep.browser
        assert ep.reset().observation == first.observation  # reset: the page afresh
    finally:
        ep.close()
    size = POOL.size()
    _, _, other = episode("enter-text", seed=7)
    try:
        assert other.reset().observation == first.observation
        assert other.browser is browser and POOL.size() == size  # the browser is reused
    finally:
        other.close()
    _, _, different = episode("enter-text", seed=8)
    try:
        assert different.reset().observation != first.observation
    finally:
        different.close()


def test_the_pages_own_timer_is_out_of_reach_and_the_limit_is_the_pages_time():
    _, _, ep = episode("click-button")
    try:
        ep.reset()
        assert ep.browser.driver.execute_script("return core.EPISODE_MAX_TIME") == FAR_MS
        ep.time_limit_ms = 0.0  # as if the page had spent its 10 s on the agent's actions
        out = ep.step("press", "<Tab>", None)
        assert out.done and ep.reason == "timed out" and ep.raw_reward == -1.0
    finally:
        ep.close()


def test_a_refused_action_is_answered_with_the_reason_and_the_page():
    _, _, ep = episode("click-button")
    try:
        ep.reset()
        for tool, argument, why in (
            ("click", "[999]", "no element [999]"),
            ("click", '"Ok"', "ref first"),
            ("press", "<NoSuchKey>", "unknown key"),
            ("scroll", "[4]", "unknown tool"),
        ):
            out = ep.step(tool, argument, None)
            assert not out.done and why in out.info["error"], out.info
            assert out.observation.startswith("Error: ") and "Page:" in out.observation
    finally:
        ep.close()


HOSTILE = "<script>window.pwned=1</script>'); core.endEpisode(1, false, 'x'); ('\"`${1}`"


def test_script_in_typed_text_is_only_text():
    env, t, ep = episode("enter-text")
    try:
        first = ep.reset()
        field = ref_of(first.observation, lambda e: e.tag == "input[text]")
        out = ep.step("type", "", {"ref": field, "text": HOSTILE})
        assert not out.done  # the page did not end: nothing of it ran
        value = next(e.value for e in page(out.observation)[1] if e.ref == field)
        assert value == HOSTILE
        driver = ep.browser.driver
        assert driver.execute_script("return typeof window.pwned") == "undefined"
        assert driver.execute_script("return WOB_DONE_GLOBAL") is False
    finally:
        ep.close()


def test_a_huge_string_is_refused_not_typed():
    _, _, ep = episode("enter-text")
    try:
        first = ep.reset()
        field = ref_of(first.observation, lambda e: e.tag == "input[text]")
        out = ep.step("type", f"[{field}] " + "x" * 2_000_000, None)
        assert "text too long" in out.info["error"] and not out.done
        assert 'value=""' in out.observation
    finally:
        ep.close()


def _plant(ep, html: str) -> int:
    """Put an element on the page as a task page could (a link it renders), and its ref."""
    ep.browser.driver.execute_script(
        "document.getElementById('area').insertAdjacentHTML('beforeend', arguments[0]);", html
    )
    shown = ep.step("press", "<Shift>", None)  # any step reads the page afresh
    return ref_of(shown.observation, lambda e: e.id == "planted")


@pytest.mark.parametrize(
    "html, why",
    [
        ('<a id="planted" href="https://example.com/">x</a>', "navigated away"),
        ('<a id="planted" href="http://example.com/">x</a>', "navigated away"),
        ('<button id="planted" onclick="window.open(\'about:blank\')">x</button>', "window"),
    ],
)
def test_navigating_away_or_opening_a_window_ends_the_episode_as_the_agents_failure(html, why):
    env, t, ep = episode("click-test")
    try:
        ep.reset()
        ref = _plant(ep, html)
        out = ep.step("click", f"[{ref}]", None)
        assert out.done and why in out.info["error"], out.info
        assert "Page:" not in out.observation  # nothing of another page reaches the agent
        score = env.score(t, None, None, ep)
        assert not score.success and score.detail["error"] == out.info["error"]
        assert len(ep.browser.driver.window_handles) == 1
        assert "Page:" in ep.reset().observation  # the next reset: the task page again
    finally:
        ep.close()


def test_a_link_to_a_local_file_goes_nowhere():
    """The pages are web pages (served on loopback): Chromium lets none of them navigate to a
    file URL, so the tab stays on the task and the episode goes on."""
    _, _, ep = episode("click-test")
    try:
        ep.reset()
        ref = _plant(ep, '<a id="planted" href="file:///etc/hostname">x</a>')
        out = ep.step("click", f"[{ref}]", None)
        assert not out.done and "Page:" in out.observation
        assert ep.browser.driver.current_url.endswith("/miniwob/click-test.html")
    finally:
        ep.close()


def test_the_browser_reaches_no_network_no_other_local_service_and_no_file():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    other = f"http://127.0.0.1:{listener.getsockname()[1]}/"
    _, _, ep = episode("click-test")
    try:
        ep.reset()
        driver = ep.browser.driver
        fetch = "var done = arguments[arguments.length - 1]; fetch(arguments[0]).then("
        fetch += "function (r) { done('read ' + r.status); }, function (e) { done('failed'); });"
        for url in ("https://example.com/", "http://example.com/", other, "file:///etc/hostname"):
            assert driver.execute_async_script(fetch, url) == "failed", url
        # the task pages themselves, and nothing above their directory
        assert driver.execute_async_script(fetch, "click-button.html") == "read 200"
        assert driver.execute_async_script(fetch, "/../../../../etc/hostname") == "read 404"
    finally:
        ep.close()
        listener.close()


def test_an_ended_process_leaves_no_browser_behind(tmp_path):
    """A process that opens an episode and exits without closing it: its browsers are quit
    at exit (the pool's atexit), their profile directories removed. Under a TMPDIR long
    enough (pytest's tmp_path) that Chromium's singleton socket would not fit there."""
    script = textwrap.dedent(
        """
        import json, sys
        from harnessctl.envs.miniwob import MiniwobEnvironment
        from harnessctl.envs.miniwob.tasks import make_task
        env = MiniwobEnvironment()
        ep = env.open_episode(make_task({"task": "click-test", "seed": 1}, "x", "t"), 0)
        ep.reset()
        print(json.dumps([ep.browser.profile, ep.browser.pid]))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    import json

    profile, pid = json.loads(done.stdout.strip().splitlines()[-1])
    assert profile.startswith(str(tmp_path)) and not os.path.exists(profile)
    leftovers = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read().decode(errors="replace")
        except OSError:
            continue
        if profile in cmdline or str(tmp_path) in cmdline:
            leftovers.append((entry, cmdline[:120]))
    assert not leftovers and not os.path.exists(f"/proc/{pid}"), leftovers


def test_the_browsers_of_a_process_killed_with_its_reaper_are_reaped_by_the_next(tmp_path):
    """The last resort: a process killed outright (SIGKILL) together with its reaper (as
    ``kill -9`` of both would) leaves its browsers; the next process to start one reaps them
    first (``reap_orphans``: the owner's pid is in each profile's name). (A process killed
    alone takes its browsers with it: test_miniwob_protocols.py kills a real eval.)"""
    import json
    import tempfile

    from harnessctl.envs.miniwob.browser import reap_orphans

    script = textwrap.dedent(
        """
        import json, os, signal
        from harnessctl.envs.miniwob import MiniwobEnvironment
        from harnessctl.envs.miniwob.browser import REAPER
        from harnessctl.envs.miniwob.tasks import make_task
        env = MiniwobEnvironment()
        ep = env.open_episode(make_task({"task": "click-test", "seed": 1}, "x", "t"), 0)
        ep.reset()
        print(json.dumps([ep.browser.profile, ep.browser.pid]), flush=True)
        os.kill(REAPER._process.pid, signal.SIGKILL)
        REAPER._process.wait()
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == -9, done.stderr
    profile, driver = json.loads(done.stdout.strip().splitlines()[-1])
    assert profile.startswith(tempfile.gettempdir()) and os.path.exists(f"/proc/{driver}")
    reaped = reap_orphans()
    assert driver in reaped and len(reaped) >= 2  # the driver and its Chromium
    deadline = time.monotonic() + 10
    while _running(driver) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(driver) and not os.path.exists(profile)


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie awaiting its reaper is not)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def test_pages_are_utf8_as_miniwob_shows_them():
    """MiniWoB++ opens its pages as file:// URLs, which Chromium reads as UTF-8; served over
    HTTP without a charset they read as windows-1252 ("CancÃ©l"). The page server names the
    charset, and unicode-test's episode reads as the same page and seed opened the official
    way."""
    import urllib.request

    from harnessctl.envs.miniwob.browser import Browser, html_dir, page_server

    base = page_server().base
    for path, kind in (
        ("/miniwob/unicode-test.html", "text/html; charset=utf-8"),
        ("/core/core.css", "text/css; charset=utf-8"),
        ("/common/special/social-media/like.png", "image/png"),
    ):
        with urllib.request.urlopen(base + path) as response:
            assert response.headers["Content-Type"] == kind, path
    _, _, ep = episode("unicode-test")
    try:
        utterance, elements = page(ep.reset().observation)
    finally:
        ep.close()
    served = sorted(e.text for e in elements if e.tag == "button")
    official = Browser()  # its own browser: file:// is blocked for the pool's, opened here
    try:
        driver = official.driver
        driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})
        driver.get(f"file://{html_dir()}/miniwob/unicode-test.html")
        shown = driver.execute_script(
            "Math.seedrandom(arguments[0]); core.startEpisodeReal();"
            "return [core.getUtterance().utterance || core.getUtterance(),"
            " Array.from(document.querySelectorAll('#area button'), b => b.textContent)];",
            1,
        )
    finally:
        official.quit()  # the pool's browsers keep their block list: only this one's changed
    assert utterance == shown[0] == 'Click on the "Cancél" button.'
    assert served == sorted(shown[1]) and "Cancél" in served
    assert not any("Ã" in text or "â" in text for text in served)


def test_images_the_page_draws_with_are_loaded_before_the_agent_sees_it(monkeypatch):
    """social-media draws its buttons as images named by its stylesheet, which load after the
    episode starts: a page read before they arrive has no buttons (a race the machine's load
    decided). The images are loaded before the episode, however slowly they are served."""
    from harnessctl.envs.miniwob import browser

    served = browser._Quiet.do_GET

    def slowly(handler):
        if handler.path.endswith(".png"):
            time.sleep(0.3)
        return served(handler)

    monkeypatch.setattr(browser._Quiet, "do_GET", slowly)
    _, _, ep = episode("social-media")
    try:
        ep.reset()
        ep.browser.driver.execute_cdp_cmd("Network.clearBrowserCache", {})
        first = ep.reset()
    finally:
        ep.close()
    classes = {c for e in page(first.observation)[1] for c in e.classes}
    assert {"reply", "retweet", "like", "more"} <= classes, first.observation


def test_the_gold_opens_a_submenu_by_clicking_its_item():
    """click-menu-2 seed 1 asks for "Prev", in the "Playback" submenu: jQuery UI's menu opens a
    submenu on a click of its item (as in the official environment), so Menu, Playback, Prev
    earns reward 1."""
    from harnessctl.envs.miniwob.gold import solve

    env, t, ep = episode("click-menu-2")
    try:
        out, taken, labels = ep.reset(), [], []
        while not out.done and len(taken) < 6:
            action = solve("click-menu-2", out.observation, taken)
            assert action is not None, out.observation
            ref = int(action.split("[")[1].rstrip("]"))
            labels.append(next(e.all_text() for e in page(out.observation)[1] if e.ref == ref))
            out = ep.step("click", f"[{ref}]", None)
            taken.append(action)
        assert labels == ["Menu", "Playback", "Prev"] and out.info["raw_reward"] == 1.0
        assert env.score(t, None, None, ep).success
    finally:
        ep.close()
