"""A real browser test: JupyterLab in headless Chromium runs a course notebook, a slider is moved, and the
widget's figure must change. This is what nbval cannot check: that the widgets work for a reader.

Skipped, with the reason, only when no Chromium or no Playwright is installed (.ci/run installs both).
The screenshot goes to the test's temporary folder, with a record of what it shows (the notebook, the headings and
exercise titles in view, the slider's value); with COURSE_SAVE_SCREENSHOTS=1 both also replace
figures/jupyterlab_widget.png and figures/jupyterlab_widget.json for the README (so an ordinary test run leaves the
committed figure alone). tests/test_readme.py checks that the recorded exercise titles are still notebook 04's.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
# a notebook whose first slider redraws a figure inside an Output widget
WIDGET_NOTEBOOK = "04_scaled_dot_product_attention.ipynb"
SCREENSHOT = ROOT / "figures" / "jupyterlab_widget.png"
SCREENSHOT_RECORD = SCREENSHOT.with_suffix(".json")
TOKEN = "course-browser-test"

playwright_api = pytest.importorskip("playwright.sync_api", reason="Playwright for Python is not installed")
if not CHROMIUM.exists():
    pytest.skip(f"no browser: {CHROMIUM} is missing (apt-get install chromium)", allow_module_level=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get_json(url: str) -> object:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def _wait_for(condition, timeout: float, what: str, interval: float = 0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = condition()
        except Exception:  # the server or page is not ready yet
            value = None
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


# The lab extensions that come with the course's requirements (JupyterLab's own are built in). Any other extension
# installed in this environment (a teacher's nbgrader, say) is switched off in the test's server, so that the page, and
# the README's screenshot, show what a learner's install shows.
LEARNER_EXTENSIONS = {"@jupyter-widgets/jupyterlab-manager", "@jupyter-notebook/lab-extension", "jupyterlab_pygments"}


def _other_lab_extensions() -> list[str]:
    folder = Path(sys.prefix) / "share" / "jupyter" / "labextensions"
    found = [*folder.glob("*/package.json"), *folder.glob("@*/*/package.json")]
    names = {json.loads(path.read_text(encoding="utf-8"))["name"] for path in found}
    return sorted(names - LEARNER_EXTENSIONS)


def _write_setting(settings_dir: Path, plugin: str, values: dict) -> None:
    path = settings_dir / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(values))


@pytest.fixture
def jupyterlab(tmp_path):
    """A JupyterLab server on 127.0.0.1 serving a COPY of the notebook, autosave off, all state in tmp_path."""
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(ROOT / "notebooks" / WIDGET_NOTEBOOK, work / WIDGET_NOTEBOOK)
    settings = tmp_path / "settings"
    _write_setting(settings, "docmanager-extension/plugin", {"autosave": False})
    _write_setting(settings, "apputils-extension/notification", {"fetchNews": "false"})  # no pop-up
    # render every cell (no virtual scrolling), so every input prompt is in the page
    _write_setting(settings, "notebook-extension/tracker", {"windowingMode": "none"})
    labconfig = tmp_path / "config" / "labconfig"
    labconfig.mkdir(parents=True)
    disabled = {name: True for name in _other_lab_extensions()}
    (labconfig / "page_config.json").write_text(json.dumps({"disabledExtensions": disabled}))
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
        JUPYTER_DATA_DIR=str(tmp_path / "data"),
        JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
        JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"),
    )
    port = _free_port()
    log = open(tmp_path / "jupyterlab.log", "w")
    server = subprocess.Popen(
        [
            sys.executable, "-m", "jupyterlab", "--no-browser", "--ip", "127.0.0.1", "--port", str(port),
            f"--IdentityProvider.token={TOKEN}", "--allow-root", f"--ServerApp.root_dir={work}",
        ],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_for(lambda: _get_json(f"{base}/api/status?token={TOKEN}"), 60, "JupyterLab to start")
        yield base
    finally:
        os.killpg(server.pid, signal.SIGTERM)  # only the server we started, and its kernels
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
        log.close()


# What the page shows in its window: the text of the rendered markdown's headings and bold runs that are on screen and
# not covered (the element found at a point of each of their boxes is the element itself or inside it). A heading's
# text leaves out JupyterLab's anchor link (the pilcrow).
IN_VIEW = """() => {
  const onScreen = (el) => Array.from(el.getClientRects()).some((r) => {
    if (r.bottom <= 0 || r.top >= window.innerHeight || r.right <= 0 || r.left >= window.innerWidth) return false;
    const x = Math.min(Math.max(r.left + 2, 0), window.innerWidth - 1);
    const y = (Math.max(r.top, 0) + Math.min(r.bottom, window.innerHeight)) / 2;
    const hit = document.elementFromPoint(x, y);
    return hit !== null && (hit === el || el.contains(hit));
  });
  const text = (el) => Array.from(el.childNodes)
    .filter((n) => !(n.classList && n.classList.contains("jp-InternalAnchorLink")))
    .map((n) => n.textContent).join("").trim();
  const scope = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-MarkdownCell .jp-RenderedMarkdown";
  const inView = (selector) => Array.from(document.querySelectorAll(`${scope} ${selector}`)).filter(onScreen).map(text);
  return {headings: inView(":is(h1, h2, h3, h4)"), bold: inView("strong")};
}"""


def _kernel_idle(base: str) -> bool:
    sessions = _get_json(f"{base}/api/sessions?token={TOKEN}")
    return bool(sessions) and all(s["kernel"]["execution_state"] == "idle" for s in sessions)


def test_slider_redraws_the_figure_in_jupyterlab(jupyterlab, tmp_path):
    base = jupyterlab
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch_persistent_context(
            user_data_dir=str(tmp_path / "chromium"),
            executable_path=str(CHROMIUM),
            headless=True,
            viewport={"width": 1280, "height": 900},
            args=[
                "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
            ],
        )  # fmt: skip
        page = browser.pages[0] if browser.pages else browser.new_page()
        page.set_default_timeout(60_000)
        page.goto(f"{base}/lab/tree/{WIDGET_NOTEBOOK}?token={TOKEN}")
        page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=90_000)
        _wait_for(lambda: _kernel_idle(base), 90, "the kernel to start and be idle")
        select_kernel = page.locator(".jp-Dialog button.jp-mod-accept")
        if select_kernel.count():
            select_kernel.first.click()

        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()

        prompts = page.locator(".jp-CodeCell .jp-InputPrompt")

        def all_cells_ran() -> bool:
            texts = [t.strip() for t in prompts.evaluate_all("els => els.map(e => e.textContent)")]
            return bool(texts) and all(re.fullmatch(r"\[\d+\]:?", t) for t in texts)

        try:
            _wait_for(all_cells_ran, 240, "every cell to run")
        except AssertionError:
            page.screenshot(path=str(tmp_path / "failure.png"))
            print(prompts.evaluate_all("els => els.map(e => e.textContent)"))
            errors = page.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')
            print("error outputs:", errors.all_inner_texts())  # e.g. a claim that failed on this run
            raise
        _wait_for(lambda: _kernel_idle(base), 60, "the kernel to finish")

        image = page.locator(".jp-OutputArea-output .widget-output img").first
        image.scroll_into_view_if_needed()
        before = image.get_attribute("src")
        assert before and before.startswith("data:image/png"), "the widget shows no figure"
        handle = page.locator(".widget-slider .noUi-handle").first
        readout = page.locator(".widget-readout").first
        value_before = readout.inner_text()
        handle.focus()
        for _ in range(5):
            handle.press("ArrowRight")
        _wait_for(lambda: readout.inner_text() != value_before, 20, "the slider's value to change")
        after = _wait_for(
            lambda: (src := image.get_attribute("src")) != before and src, 60, "the widget's figure to be redrawn"
        )
        assert after.startswith("data:image/png")
        _wait_for(lambda: _kernel_idle(base), 60, "the kernel to finish redrawing")
        time.sleep(1.0)  # let the last redraw reach the page
        page.locator(".widget-slider").first.scroll_into_view_if_needed()
        shot = tmp_path / SCREENSHOT.name
        page.screenshot(path=str(shot))
        in_view = page.evaluate(IN_VIEW)  # what the screenshot shows, read right after taking it
        record = {
            "notebook": WIDGET_NOTEBOOK,
            "section_headings": in_view["headings"],
            "exercise_headings": [t for t in in_view["bold"] if re.match(r"Exercise \d", t)],
            "slider_value": readout.inner_text(),
        }
        (tmp_path / SCREENSHOT_RECORD.name).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        browser.close()
    if os.environ.get("COURSE_SAVE_SCREENSHOTS") == "1":
        # tests/test_readme.py checks these titles against the notebook: a record without any would check nothing
        assert record["section_headings"] or record["exercise_headings"], f"no title in the screenshot: {record}"
        shutil.copy2(shot, SCREENSHOT)
        shutil.copy2(tmp_path / SCREENSHOT_RECORD.name, SCREENSHOT_RECORD)
