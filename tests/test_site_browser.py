"""The built course site in headless Chromium with the network off, opened from disk as a reader behind a firewall
would: a notebook page shows typeset maths, search finds a page, a slide deck shows its maths, the Chinese book shows a
Chinese page with its maths and its search finds a Chinese term, and no request leaves the site's folder.

Skipped, with the reason, only when no Chromium or no Playwright is installed (.ci/run installs both). With
COURSE_SAVE_SCREENSHOTS=1 the test also saves figures/site_page.png and figures/site_slide.png for the README.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
MATHS_PAGE = "notebooks/04_scaled_dot_product_attention.html"
MATHS_DECK = "slides/04_scaled_dot_product_attention.slides.html"

playwright_api = pytest.importorskip("playwright.sync_api", reason="Playwright for Python is not installed")
if not CHROMIUM.exists():
    pytest.skip(f"no browser: {CHROMIUM} is missing (apt-get install chromium)", allow_module_level=True)


@pytest.fixture(scope="module")
def offline_browser(built_site):
    """A Chromium page with networking off; every request that is not a file inside the site is recorded and
    refused."""
    outside: list[str] = []
    site_url = built_site.resolve().as_uri()

    def refuse_outside(route):
        url = route.request.url
        if url.startswith(site_url) or url.startswith("data:") or url.startswith("blob:"):
            route.continue_()
        else:
            outside.append(url)
            route.abort()

    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        context = browser.new_context(offline=True, viewport={"width": 1280, "height": 800})
        context.route("**/*", refuse_outside)
        yield context, outside
        context.close()
        browser.close()


def _save(page, tmp_path: Path, name: str) -> None:
    shot = tmp_path / name
    page.screenshot(path=str(shot))
    if os.environ.get("COURSE_SAVE_SCREENSHOTS") == "1":
        shutil.copy2(shot, ROOT / "figures" / name)


def test_a_notebook_page_shows_typeset_maths(offline_browser, built_site, tmp_path):
    context, outside = offline_browser
    page = context.new_page()
    page.goto((built_site / MATHS_PAGE).as_uri())
    page.wait_for_selector("article mjx-container", state="attached", timeout=30_000)
    started = "() => Boolean(window.MathJax && MathJax.startup && MathJax.startup.promise)"
    page.wait_for_function(started, timeout=30_000)
    page.evaluate("() => MathJax.startup.promise")
    typeset = page.locator("article mjx-container").count()
    assert typeset >= 10, f"only {typeset} formulas were typeset"
    text = page.locator("article").inner_text()
    assert "$$" not in text and "\\sqrt{d_k}" not in text, "raw LaTeX is left on the page"
    _save(page, tmp_path, "site_page.png")
    assert not outside, f"requests left the site: {outside[:5]}"


def test_search_finds_the_softmax_pages(offline_browser, built_site):
    context, outside = offline_browser
    page = context.new_page()
    page.goto((built_site / "search.html").as_uri() + "?q=softmax")
    page.wait_for_selector("ul.search li a", timeout=30_000)
    found = page.locator("ul.search li a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
    assert any("04_scaled_dot_product_attention" in href for href in found), found[:10]
    assert not outside, f"requests left the site: {outside[:5]}"


def test_a_slide_deck_renders_with_maths(offline_browser, built_site, tmp_path):
    context, outside = offline_browser
    page = context.new_page()
    page.goto((built_site / MATHS_DECK).as_uri())
    page.wait_for_selector(".reveal.ready section.present", timeout=30_000)
    page.wait_for_selector(".reveal mjx-container", state="attached", timeout=30_000)
    first = page.locator(".reveal .slides > section").first
    assert first.is_visible() and first.inner_text().strip(), "the first slide is empty"
    # go to the first slide with a formula and show it
    index = page.evaluate(
        """() => [...document.querySelectorAll('.reveal .slides > section')]
                 .findIndex(s => s.querySelector('mjx-container'))"""
    )
    assert index >= 0
    # reveal.js is an AMD module here (nbconvert's template loads it with require.js), not a global
    page.evaluate(
        "i => new Promise(done => require(['../_static/reveal.js/dist/reveal.js'], R => { R.slide(i); done(); }))",
        index,
    )
    page.wait_for_timeout(1000)
    assert page.locator(".reveal section.present mjx-container").count() > 0
    _save(page, tmp_path, "site_slide.png")
    assert not outside, f"requests left the site: {outside[:5]}"


def test_the_chinese_book_shows_chinese_text_and_maths(offline_browser, built_site):
    context, outside = offline_browser
    page = context.new_page()
    page.goto((built_site / "zh" / "notebooks" / "zh" / "04_scaled_dot_product_attention.html").as_uri())
    page.wait_for_selector("article mjx-container", state="attached", timeout=30_000)
    page.wait_for_function(
        "() => Boolean(window.MathJax && MathJax.startup && MathJax.startup.promise)", timeout=30_000
    )
    page.evaluate("() => MathJax.startup.promise")
    assert page.locator("article mjx-container").count() >= 10
    assert "缩放点积注意力" in page.locator("article h1").first.inner_text()
    assert page.evaluate("() => document.documentElement.lang") == "zh-CN"
    assert not outside, f"requests left the site: {outside[:5]}"


def test_chinese_search_finds_the_page_that_teaches_a_term(offline_browser, built_site):
    context, outside = offline_browser
    page = context.new_page()
    for term, notebook in [("多头注意力", "05_multi_head_attention"), ("教师强制", "09_training")]:
        page.goto((built_site / "zh" / "search.html").as_uri() + f"?q={term}")
        page.wait_for_selector("ul.search li a", timeout=30_000)
        found = page.locator("ul.search li a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
        assert any(notebook in href for href in found[:3]), (term, found[:10])
    page.goto((built_site / "zh" / "docs" / "instructor_guide.zh-CN.html").as_uri())
    assert page.locator("article h1").first.inner_text().strip().startswith("教师指南")
    assert not outside, f"requests left the site: {outside[:5]}"
