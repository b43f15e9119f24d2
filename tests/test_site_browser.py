"""The built course site in headless Chromium with the network off, opened from disk as a reader behind a firewall
would: a notebook page shows typeset maths, search finds a page, a slide deck shows its maths, the Chinese book shows a
Chinese page with its maths and its search finds a Chinese term, the playground runs notebook 15's GPT (its tokens,
greedy tokens and attention maps checked against the package's), and no request leaves the site's folder.

Skipped, with the reason, only when no Chromium or no Playwright is installed (.ci/run installs both). With
COURSE_SAVE_SCREENSHOTS=1 the tests also save figures/site_page.png, figures/site_slide.png and
figures/site_playground.png for the README.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
import torch

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


def _save(page, tmp_path: Path, name: str, full_page: bool = False) -> None:
    shot = tmp_path / name
    page.screenshot(path=str(shot), full_page=full_page)
    if os.environ.get("COURSE_SAVE_SCREENSHOTS") == "1":
        shutil.copy2(shot, ROOT / "figures" / name)


def _search_results(page) -> list[str]:
    """The links of a finished Sphinx search: its results are appended one by one (5 ms apart, each fetching a
    summary), so reading them when the first appears sees only part of the list; the summary line is written last."""
    page.wait_for_function(
        "() => Boolean(document.querySelector('#search-results p.search-summary')?.innerText.trim())",
        timeout=60_000,
    )
    return page.locator("ul.search li a").evaluate_all("links => links.map(a => a.getAttribute('href'))")


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
    found = _search_results(page)
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
        found = _search_results(page)
        assert any(notebook in href for href in found[:3]), (term, found[:10])
    page.goto((built_site / "zh" / "docs" / "instructor_guide.zh-CN.html").as_uri())
    assert page.locator("article h1").first.inner_text().strip().startswith("教师指南")
    assert not outside, f"requests left the site: {outside[:5]}"


# ---------------------------------------------------------------------------------------------------------------
# The playground: notebook 15's GPT run by ONNX Runtime Web (WebAssembly), from disk

GREEDY_TOKENS = 24
# the example prompts, code, and characters whose handling differs between Python's and JavaScript's regular
# expressions (\s: \x1c-\x1f and \x85 are Python whitespace, \ufeff is JavaScript's) or that the tokenizer never saw
TOKENIZER_TEXTS = [
    "def f(x):\n    return x + 1  # 2.5",
    "  two spaces, a tab\there,\n\nand lines   ",
    "odd spaces:\x1c\x1f\x85\xa0\u3000\ufeff|",
    "unseen: é, ∑, 中文, 😀",
    "",
]


@pytest.fixture(scope="module")
def shipped_model():
    from transformer_course.families.language_model import load_shipped_language_model

    model, tokenizer, _, _ = load_shipped_language_model()
    return model, tokenizer


def _open_playground(context, built_site, name: str):
    """The page, once its model has loaded; also the seconds that took and the page's errors."""
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    started = time.monotonic()
    page.goto((built_site / "playground" / name).as_uri())
    page.wait_for_selector('#status[data-state="ready"], #status[data-state="error"]', timeout=120_000)
    assert page.get_attribute("#status", "data-state") == "ready", page.inner_text("#status")
    return page, time.monotonic() - started, errors


def _set(page, selector: str, value) -> None:
    page.eval_on_selector(selector, "(el, v) => { el.value = String(v); el.dispatchEvent(new Event('input')); }", value)


def _generate(page) -> list[int]:
    page.click("#generate")
    page.wait_for_selector('#status[data-state="done"]', timeout=120_000)
    return json.loads(page.get_attribute("#output", "data-new-ids"))


def test_the_playground_runs_the_course_gpt_offline(offline_browser, built_site, shipped_model, tmp_path):
    """The page loads the model from disk; its tokenizer gives the package's ids; greedy generation gives the tokens
    of ``decoding.generate`` (never <unk>, as the page); sampling writes text; the attention map changes with the
    head and the layer; the next-token chart shows ten tokens."""
    from transformer_course.core.decoding import generate

    context, outside = offline_browser
    model, tokenizer = shipped_model
    page, seconds, errors = _open_playground(context, built_site, "index.html")
    print(f"the playground was ready {seconds:.1f} s after it was opened")
    examples = page.eval_on_selector_all("button.example", "buttons => buttons.map(b => b.textContent)")
    assert len(examples) >= 3
    texts = examples + TOKENIZER_TEXTS
    assert page.evaluate("texts => texts.map(t => coursePlayground.encode(t))", texts) == [
        tokenizer.encode(t) for t in texts
    ]

    unk = tokenizer.tokens.index("<unk>")
    page.select_option("#decoding", "greedy")
    _set(page, "#new-tokens", GREEDY_TOKENS)
    for prompt in examples[:2]:
        page.fill("#prompt", prompt)
        ids = tokenizer.encode(prompt)
        with torch.no_grad():
            expected = generate(model, torch.tensor([ids]), GREEDY_TOKENS, greedy=True, banned=[unk])[0, len(ids) :]
        assert _generate(page) == expected.tolist(), prompt
        assert json.loads(page.get_attribute("#output", "data-prompt-ids")) == ids
    assert page.locator("#bars .bar").count() == 10
    assert page.locator("#bars .bar").first.get_attribute("class") == "bar chosen", "greedy takes the likeliest"

    maps = []
    for layer, head in [(0, 0), (0, 1), (3, 1)]:
        page.select_option("#layer", str(layer))
        page.select_option("#head", str(head))
        maps.append(page.eval_on_selector("#attention-map", "canvas => canvas.toDataURL()"))
    assert len(set(maps)) == 3, "the attention map did not change with the head or the layer"

    page.select_option("#decoding", "sample")
    _set(page, "#temperature", 0.8)
    _set(page, "#top-p", 0.9)
    _set(page, "#new-tokens", 40)
    page.fill("#prompt", examples[2])
    sampled = _generate(page)
    assert len(sampled) == 40 and unk not in sampled
    assert page.inner_text("#output").startswith(examples[2]) and len(page.inner_text("#output")) > len(examples[2])
    page.select_option("#layer", "1")
    page.select_option("#head", "2")
    _save(page, tmp_path, "site_playground.png", full_page=True)
    assert not errors, errors
    assert not outside, f"requests left the site: {outside[:5]}"


def test_the_chinese_playground_runs_in_chinese(offline_browser, built_site):
    context, outside = offline_browser
    page, _, errors = _open_playground(context, built_site, "index.zh-CN.html")
    assert page.evaluate("() => document.documentElement.lang") == "zh-CN"
    assert "浏览器" in page.inner_text("h1") and "就绪" in page.inner_text("#status")
    _set(page, "#new-tokens", 3)
    page.click("#generate")
    page.wait_for_selector('#status[data-state="done"]', timeout=120_000)
    assert "生成了 3 个新词元" in page.inner_text("#status")
    assert 1 <= page.locator("#bars .bar").count() <= 10  # top-p 0.9 may leave fewer than ten tokens to draw from
    assert not errors, errors
    assert not outside, f"requests left the site: {outside[:5]}"
