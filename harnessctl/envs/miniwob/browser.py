"""Headless Chromium driven through Selenium, on MiniWoB++'s own task pages.

One :class:`Browser` is one Chromium (and its chromedriver) with one tab. Browsers are pooled
per process (:data:`POOL`): an episode takes an idle one (or starts one), and gives it back
when it closes, so each rollout worker reuses one browser across its episodes. Every episode
starts from a clean state: the task page is loaded again (a fresh document, no state of the
episode before) and its generator seeded. Every browser is quit when the process exits
(``atexit``) or when :func:`close_browsers` is called; a browser whose session failed is
quit and dropped instead of going back to the pool. Browsers die with their owner however it
ends: each chromedriver starts in a process group of its own (Chromium and its helpers with
it), registered with the owner's reaper (:mod:`.reaper`, a small process started with the
first browser, that kills every group still registered once its owner is gone, a SIGKILL
included). As a last resort (the reaper killed too), the next pool to start a browser first
reaps those whose owner is gone (:func:`reap_orphans`).

The browser reaches nothing but the task pages. The pages are served read only from the
installed package's ``html`` directory by a loopback HTTP server of this process
(:class:`PageServer`, one per process, on a free port of 127.0.0.1), not as ``file://`` URLs:
a web page may neither read nor navigate to a ``file://`` URL (Chromium's rule for web
origins), so no file outside the task pages is within the browser's reach. Every host name
resolves to nothing, every request but those to the page server goes to a proxy that does
not exist (loopback included: no other local service is reachable), and the DevTools
protocol blocks every https, ws(s), ftp, data and file URL; no extensions, downloads denied.
Whatever the page does after an action (navigating away, opening a window) is seen by the
episode after the step and is the agent's failure (see :mod:`harnessctl.envs.miniwob`).

Selenium is imported here only, lazily (``pip install 'harnessctl[miniwob]'``); the binaries
are Debian's ``chromium`` and ``chromium-driver`` (``HARNESSCTL_CHROMIUM`` and
``HARNESSCTL_CHROMEDRIVER`` name others).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from harnessctl.errors import ConfigError

from . import reaper

CHROMIUM_ENV = "HARNESSCTL_CHROMIUM"
CHROMEDRIVER_ENV = "HARNESSCTL_CHROMEDRIVER"
#: Where a page's tab starts: the window MiniWoB++'s own instances use (the task is 160x210).
WINDOW = (500, 500)
#: A page that does not load (its cover never appears) in this long is an infrastructure error.
LOAD_TIMEOUT_S = 10
#: The marker every episode leaves on its document: gone after a step, the page navigated.
MARK = "__harnessctl_episode"
#: A browser's profile directory: ``<tmp>/hx-chromium-<owner pid>-<random>``.
PROFILE_PREFIX = "hx-chromium-"
#: The longest TMPDIR Chromium is started with (its singleton socket's path must fit 107 bytes).
SHORT_TMP = 48
_BLOCKED = ["https://*", "ws://*", "wss://*", "ftp://*", "file://*", "data:*", "chrome://*"]


def html_dir() -> Path:
    """MiniWoB++'s task pages (``miniwob/html``) as the installed package ships them;
    ``ConfigError`` when the package is not installed."""
    import importlib.util

    spec = importlib.util.find_spec("miniwob")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            "env",
            "the miniwob environment needs MiniWoB++'s package and Selenium: "
            "pip install 'harnessctl[miniwob]'",
        )
    return Path(list(spec.submodule_search_locations)[0]) / "html"


def binaries() -> tuple[str, str]:
    """(chromium, chromedriver) paths; ``ConfigError`` naming what is missing."""
    chromium = os.environ.get(CHROMIUM_ENV) or shutil.which("chromium") or ""
    driver = os.environ.get(CHROMEDRIVER_ENV) or shutil.which("chromedriver") or ""
    if not chromium or not driver:
        raise ConfigError(
            "env",
            "the miniwob environment needs Chromium and its driver: apt-get install chromium "
            f"chromium-driver (or set {CHROMIUM_ENV} and {CHROMEDRIVER_ENV})",
        )
    return chromium, driver


#: Types served with ``charset=utf-8``. MiniWoB++'s pages and scripts are UTF-8 and name no
#: charset; MiniWoB++ opens them as ``file://`` URLs, which Chromium reads as UTF-8, while an
#: HTTP page without one is read as windows-1252 (``unicode-test``'s "Cancél" became
#: "CancÃ©l"). The header makes the served pages what MiniWoB++ shows.
UTF8_TYPES = ("text/", "application/javascript", "application/json")


class _Quiet(http.server.SimpleHTTPRequestHandler):
    """Serves the task pages (GET and HEAD only, the standard library's handler) silently,
    text as UTF-8 (:data:`UTF8_TYPES`)."""

    def guess_type(self, path: Any) -> str:
        kind = super().guess_type(path)
        return f"{kind}; charset=utf-8" if kind.startswith(UTF8_TYPES) else kind

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        return


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a page navigated away while a file was on its way (a reset's reload): not an error
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class PageServer:
    """MiniWoB++'s ``html`` directory, read only, over HTTP on a free port of 127.0.0.1."""

    def __init__(self, root: Path) -> None:
        handler = functools.partial(_Quiet, directory=str(root))
        self.httpd = _Server(("127.0.0.1", 0), handler)
        self.port = int(self.httpd.server_address[1])
        self.base = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, name="miniwob-pages", daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


_SERVER: PageServer | None = None
_SERVER_LOCK = threading.Lock()


def page_server() -> PageServer:
    """This process's page server, started on first use."""
    global _SERVER
    with _SERVER_LOCK:
        if _SERVER is None:
            _SERVER = PageServer(html_dir())
        return _SERVER


def task_url(task: str) -> str:
    """The URL of a MiniWoB++ task page (``click-button``: ``.../miniwob/click-button.html``)."""
    return f"{page_server().base}/miniwob/{task}.html"


class Reaper:
    """This process's reaper (:mod:`.reaper`): started with the first browser, told of each
    browser's process group as its chromedriver starts and again when it is quit; started
    afresh (and told of every live group) if it is gone, and in a child forked by this
    process, which must not hold its parent's pipe (the reaper waits for the pipe's end)."""

    SCRIPT = Path(reaper.__file__).resolve()

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._owner = 0
        self.groups: dict[int, dict[str, Any]] = {}

    def add(self, group: int, profile: str) -> None:
        """Register the process group ``group`` (its leader just started) and its profile."""
        message = {"add": group, "started": reaper.start_time(group), "profile": profile}
        with self._lock:
            self.groups[group] = message
            self._send(message)

    def drop(self, group: int) -> None:
        """Forget ``group``: its browser was quit."""
        with self._lock:
            if self.groups.pop(group, None) is not None:
                self._send({"drop": group})

    def _send(self, message: dict[str, Any]) -> None:
        for _ in range(2):  # a reaper found gone is started again, once
            try:
                pipe = self._pipe()
                pipe.write(json.dumps(message).encode() + b"\n")
                pipe.flush()
                return
            except (OSError, ValueError):
                self._process = None

    def _pipe(self) -> Any:
        process = self._process
        if process is None or self._owner != os.getpid() or process.poll() is not None:
            # its own session: a Ctrl-C or a kill of this process's group leaves it running
            process = subprocess.Popen(
                [sys.executable, "-I", "-S", str(self.SCRIPT), str(os.getpid())],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            self._process, self._owner = process, os.getpid()
            assert process.stdin is not None
            for message in self.groups.values():
                process.stdin.write(json.dumps(message).encode() + b"\n")
        assert process.stdin is not None
        return process.stdin

    def stop(self) -> None:
        """End the pipe (at exit, once every browser is quit): the reaper exits."""
        with self._lock:
            process, self._process = self._process, None
            if process is None or self._owner != os.getpid():
                return
            with contextlib.suppress(OSError, ValueError):
                assert process.stdin is not None
                process.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=5)

    def forget(self) -> None:
        """In a forked child: let go of the parent's pipe (never written to here)."""
        process, self._process = self._process, None
        self._lock = threading.Lock()
        self.groups = {}
        if process is not None and process.stdin is not None:
            with contextlib.suppress(OSError, ValueError):
                os.close(process.stdin.fileno())


REAPER = Reaper()
os.register_at_fork(after_in_child=REAPER.forget)


def _service(driver: str, env: dict[str, str], profile: str) -> Any:
    """Selenium's chromedriver service, started in a session of its own (so its process group
    holds the driver, Chromium and Chromium's helpers) and registered with :data:`REAPER` the
    moment its process exists, before Chromium is launched."""
    from selenium.webdriver.chrome.service import Service

    class Owned(Service):
        def _start_process(self, path: str) -> None:
            super()._start_process(path)
            REAPER.add(self.process.pid, profile)

    return Owned(driver, env=env, popen_kw={"start_new_session": True})


#: Load every image a stylesheet of the page names (``url(...)``), each settled (loaded or
#: failed), then answer how many.
PRELOAD_JS = """
var finish = arguments[arguments.length - 1], urls = {};
Array.prototype.forEach.call(document.styleSheets, function (sheet) {
  var rules;
  try { rules = sheet.cssRules; } catch (e) { return; }
  Array.prototype.forEach.call(rules || [], function (rule) {
    var found, pattern = /url\\(\\s*['"]?([^'")]+)['"]?\\s*\\)/g;
    while ((found = pattern.exec(rule.cssText || '')) !== null) {
      if (found[1].indexOf('data:') !== 0) {
        urls[new URL(found[1], sheet.href || location.href).href] = true;
      }
    }
  });
});
var names = Object.keys(urls);
Promise.all(names.map(function (u) {
  return new Promise(function (settle) {
    var image = new Image();
    image.onload = image.onerror = function () { settle(); };
    image.src = u;
  });
})).then(function () { finish(names.length); });
"""


class Browser:
    """One headless Chromium with one tab (see the module docstring)."""

    def __init__(self) -> None:
        from selenium import webdriver

        chromium, driver = binaries()
        server = page_server()
        # the owner's pid in the profile's name: reap_orphans finds a dead owner's browsers
        self.profile = tempfile.mkdtemp(prefix=f"{PROFILE_PREFIX}{os.getpid()}-")
        options = webdriver.ChromeOptions()
        options.binary_location = chromium
        for argument in (
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-sync",
            "--no-first-run",
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
            "--proxy-server=127.0.0.1:9",
            # no implicit loopback bypass: only the page server is reached directly
            f"--proxy-bypass-list=<-loopback>;127.0.0.1:{server.port}",
            f"--user-data-dir={self.profile}",
            f"--window-size={WINDOW[0]},{WINDOW[1]}",
        ):
            options.add_argument(argument)
        # Chromium keeps its singleton socket under TMPDIR, and a socket's path is at most 107
        # bytes: under a long TMPDIR it would exit at start, so it gets a short one (the profile
        # stays where reap_orphans looks for it)
        env = dict(os.environ)
        if len(tempfile.gettempdir()) > SHORT_TMP:
            env["TMPDIR"] = "/tmp"
        self.service = _service(driver, env, self.profile)
        try:
            self.driver = webdriver.Chrome(service=self.service, options=options)
        except BaseException:
            self._kill()
            raise
        self.driver.set_page_load_timeout(LOAD_TIMEOUT_S)
        self.driver.set_script_timeout(LOAD_TIMEOUT_S)
        self.driver.execute_cdp_cmd("Network.enable", {})
        self.driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": _BLOCKED})
        self.driver.execute_cdp_cmd("Page.setDownloadBehavior", {"behavior": "deny"})
        self.tab = self.driver.current_window_handle
        self.episodes = 0

    @property
    def pid(self) -> int | None:
        """The chromedriver's process id (Chromium is its child)."""
        process = getattr(self.driver.service, "process", None)
        return process.pid if process is not None else None

    def load(self, url: str, seed: str, token: str) -> None:
        """Load the task page afresh, seed its generator and mark the document as this
        episode's (the page's own episode is not started yet)."""
        self.close_other_windows()
        self.driver.switch_to.window(self.tab)
        self.driver.get(url)
        deadline = time.monotonic() + LOAD_TIMEOUT_S
        while not self.driver.execute_script("return typeof core === 'object' && !!core.cover_div"):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the task page {url} did not load")
            time.sleep(0.01)
        # the images the page's stylesheets name load into this document before its episode
        # starts: an element drawn by one (social-media's icons) has no size, and is not on
        # the page the agent sees, until it has loaded (a race the machine's load decided)
        self.driver.execute_async_script(PRELOAD_JS)
        # the seed and the mark are arguments, never script text
        self.driver.execute_script(
            "Math.seedrandom(arguments[0]); window[arguments[1]] = arguments[2];",
            seed,
            MARK,
            token,
        )
        self.episodes += 1

    def close_other_windows(self) -> int:
        """Close every window but the tab; how many there were."""
        others = [h for h in self.driver.window_handles if h != self.tab]
        for handle in others:
            self.driver.switch_to.window(handle)
            self.driver.close()
        self.driver.switch_to.window(self.tab)
        return len(others)

    def quit(self) -> None:
        """Quit Chromium and its driver, kill whatever of them is left, remove the profile."""
        try:
            self.driver.quit()
        finally:
            self._kill()

    def _kill(self) -> None:
        process = getattr(self.service, "process", None)
        group = process.pid if process is not None else None
        started = REAPER.groups.get(group, {}).get("started") if group else None
        groups = {group: started} if group else {}
        reaper.kill_browsers(groups, set(), {self.profile})
        if group:
            REAPER.drop(group)


class BrowserPool:
    """Idle browsers of this process, reused across episodes (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[Browser] = []
        self._all: list[Browser] = []

    def acquire(self) -> Browser:
        """An idle browser, or a new one (after reaping the browsers of dead processes)."""
        with self._lock:
            if self._idle:
                return self._idle.pop()
            if not self._all:
                reap_orphans()
        browser = Browser()
        with self._lock:
            self._all.append(browser)
        return browser

    def release(self, browser: Browser, healthy: bool = True) -> None:
        """Give ``browser`` back; one that failed is quit instead."""
        if healthy:
            with self._lock:
                if browser in self._all:
                    self._idle.append(browser)
                    return
        self.discard(browser)

    def discard(self, browser: Browser) -> None:
        """Quit ``browser`` and forget it."""
        with self._lock:
            if browser in self._all:
                self._all.remove(browser)
            if browser in self._idle:
                self._idle.remove(browser)
        with contextlib.suppress(Exception):  # a browser already gone is quit enough
            browser.quit()

    def close(self) -> None:
        """Quit every browser of the pool (idle or in use)."""
        with self._lock:
            browsers, self._all, self._idle = list(self._all), [], []
        for browser in browsers:
            with contextlib.suppress(Exception):  # quit what can be quit
                browser.quit()

    def size(self) -> int:
        """How many browsers the pool holds (idle or in use)."""
        with self._lock:
            return len(self._all)


def reap_orphans() -> list[int]:
    """Kill the browsers (Chromium and its chromedriver) whose owning process is gone and
    whose reaper did not (it was killed too): a browser is found by its profile directory
    (``--user-data-dir=<tmp>/hx-chromium-<owner pid>-...``), its driver is the parent of its
    main process. Linux only (``/proc``); the pids killed."""
    if not os.path.isdir("/proc"):
        return []
    marker = f"--user-data-dir={tempfile.gettempdir()}/{PROFILE_PREFIX}"
    victims: set[int] = set()
    profiles: set[str] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        flag = next((a for a in reaper.cmdline(pid) if a.startswith(marker)), None)
        if flag is None:
            continue
        owner = flag[len(marker) :].split("-", 1)[0]
        if not owner.isdigit() or os.path.exists(f"/proc/{owner}"):
            continue
        victims.add(pid)
        profiles.add(flag.split("=", 1)[1])
        driver = _parent(pid)
        if driver and any("chromedriver" in a for a in reaper.cmdline(driver)[:1]):
            victims.add(driver)
    if not victims:
        return []
    # the browser's helpers whose flags name the profile otherwise (crashpad's database...)
    return reaper.kill_browsers({}, victims, profiles)


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


POOL = BrowserPool()


@atexit.register
def _at_exit() -> None:
    POOL.close()
    REAPER.stop()


def close_browsers() -> None:
    """Quit every browser this process started (the pool's)."""
    POOL.close()


def page_state(driver: Any) -> dict[str, Any]:
    """The page's episode state and view in one round trip (see ``STATE_JS``), read once the
    page has run what the last action queued (two turns of its event loop: a widget that
    answers a keystroke with a zero-delay timer, as jQuery UI's autocomplete does, has
    answered by then, as it has for a person or a model that reads the page later)."""
    return dict(driver.execute_async_script(STATE_JS, MARK))


#: The page's own globals (``WOB_DONE_GLOBAL``, ``WOB_RAW_REWARD_GLOBAL``, ``WOB_REWARD_GLOBAL``,
#: ``WOB_REWARD_REASON``), its utterance and DOM (``core.getUtterance``, ``core.getDOMInfo``),
#: the episode mark and the time the page spent computing them.
STATE_JS = """
var finish = arguments[arguments.length - 1], markName = arguments[0];
setTimeout(function () { setTimeout(function () { finish(read(markName)); }, 0); }, 0);
function read(markName) {
var t0 = performance.now();
var mark = window[markName] === undefined ? null : String(window[markName]);
if (typeof core !== 'object') { return {mark: mark, foreign: true, page_ms: 0}; }
var state = {
  mark: mark, foreign: false,
  done: !!WOB_DONE_GLOBAL, raw_reward: WOB_RAW_REWARD_GLOBAL, reward: WOB_REWARD_GLOBAL,
  reason: WOB_REWARD_REASON === null ? null : String(WOB_REWARD_REASON),
};
if (!state.done) {
  var said = core.getUtterance();
  state.utterance = (said !== null && typeof said === 'object') ? String(said.utterance) : said;
  state.dom = core.getDOMInfo();
}
state.page_ms = performance.now() - t0;
return state;
}
"""
