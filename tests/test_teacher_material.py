"""The assignments' keys and rubrics are teacher material (teacher/), kept out of every public file, and every brief
the public guide gives has its key and rubric there.

Public files are the ones students are pointed at: the instructor guide and the other pages of docs/, the READMEs, the
site's pages, the notebooks (English and Chinese) and the installed package. A key "leaks" if one of its sentences
(text of a key section after its question, whitespace aside) or its marker appears in one of them.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
TEACHER = ROOT / "teacher"
GUIDES = {"en": ROOT / "docs" / "instructor_guide.md", "zh": ROOT / "docs" / "instructor_guide.zh-CN.md"}
KEYS = {
    "en": (TEACHER / "assignments.md", TEACHER / "mini_project.md"),
    "zh": (TEACHER / "assignments.zh-CN.md", TEACHER / "mini_project.zh-CN.md"),
}
MARKER = "teacher-key"
# "### A1.2 (3 points)" / "### A1.2（3 分）"; the mini-project's parts are P.1, P.2, ...
KEY_HEADING = re.compile(r"^### ((?:A\d|P)\.\d+) ?[(（](\d+) (?:points?|分)[)）]\s*$", re.MULTILINE)
# the guide's briefs: "### A4 (week 4; ...)" or "### Mini-project ..." then "1. (3 points) ..." / "1. （3 分）..."
BRIEF_HEADING = re.compile(r"^### (A\d|Mini-project|小项目)\b", re.MULTILINE)
BRIEF_ITEM = re.compile(r"^(\d+)\. ?[(（](\d+) (?:points?|分)[)）]", re.MULTILINE)
QUESTION = {"en": "**Question.**", "zh": "**题目。**"}
ANSWER = {"en": ("**Answer.**",), "zh": ("**答案。**",)}
SPLIT = {"en": ("**Points.**", "**Rubric.**"), "zh": ("**给分。**", "**评分标准。**")}
# a sentence long enough to be the key's own words, not a phrase any text could share
SENTENCE_END = {"en": re.compile(r"(?<=[.;!?])\s+"), "zh": re.compile(r"(?<=[。；！？])")}
MIN_CHARS = {"en": 50, "zh": 20}
# Facts only a key gives (numbers, formulas), the same in both languages: the guide held all of them before the keys
# moved to teacher/, and no public file may hold them again.
KEY_FACTS = {
    "A1.1": ("0.9617", "1.0398"),
    "A1.2": (r"\mathrm{diag}(1 - S_t^2)\,W",),
    "A1.3": (r"1 + 4(2^L - 1) \ge 1024",),
    "A2.1": ("4,080,185.1", "544.1"),
    "A2.2": (r"\sum_i \cos(\omega_i (j - i + 2))",),
    "A3.1": (r"N_d(8d^2 + 8d + 2 d\, d_{ff} + d_{ff} + d + 6d)",),
    "A4.1": (r"$\prod_t p_t$",),
    "A5.1": ("0.3125 MiB",),
    "A5.3": ("$1/(i+1)$",),
    "A6.2": ("0.863", "-0.400"),
}


def _flat(text: str) -> str:
    return " ".join(text.split())


def key_sections(path: Path) -> dict[str, tuple[int, str]]:
    """Key id ("A1.2", "P.3") -> (its points, the text of its section)."""
    text = path.read_text(encoding="utf-8")
    heads = list(KEY_HEADING.finditer(text))
    sections = {}
    for k, head in enumerate(heads):
        end = heads[k + 1].start() if k + 1 < len(heads) else len(text)
        body = text[head.end() : end].split("\n## ", 1)[0]
        sections[head.group(1)] = (int(head.group(2)), body)
    return sections


def key_sentences(language: str) -> list[tuple[str, str]]:
    """(key id, sentence) for every sentence of every key after its question, in ``language``'s teacher files."""
    found = []
    for path in KEYS[language]:
        for key, (_, body) in key_sections(path).items():
            after = body.split(QUESTION[language], 1)[-1].split("\n\n", 1)[-1]
            for sentence in SENTENCE_END[language].split(_flat(after)):
                if len(sentence) >= MIN_CHARS[language] and MARKER not in sentence:
                    found.append((key, sentence))
    return found


def briefs(language: str) -> dict[str, int]:
    """Brief item id ("A1.2", "P.3") -> its points, from section 6 of the public guide."""
    text = GUIDES[language].read_text(encoding="utf-8")
    section = re.split(r"^## 6\.", text, flags=re.MULTILINE)[1]
    section = re.split(r"^## 7\.", section, flags=re.MULTILINE)[0]
    heads = list(BRIEF_HEADING.finditer(section))
    items = {}
    for k, head in enumerate(heads):
        body = section[head.end() : heads[k + 1].start() if k + 1 < len(heads) else len(section)]
        name = head.group(1) if head.group(1).startswith("A") else "P"
        for item in BRIEF_ITEM.finditer(body):
            items[f"{name}.{item.group(1)}"] = int(item.group(2))
    return items


def _public_texts() -> dict[str, str]:
    """Every public file's text, by path: docs/, the READMEs, the site's pages, the notebooks' cells (English and
    Chinese) and every text file of the installed package."""
    paths = [*ROOT.glob("docs/**/*.md"), *ROOT.glob("README*.md"), *ROOT.glob("site/*.md"), *ROOT.glob("site/*.yml")]
    texts = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in paths}
    for path in ROOT.glob("notebooks/**/*.ipynb"):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        texts[str(path.relative_to(ROOT))] = "\n".join("".join(c["source"]) for c in cells)
    for path in (ROOT / "transformer_course").rglob("*"):
        if path.is_file() and path.suffix in {".py", ".md", ".json", ".txt", ".yml", ".yaml", ".toml", ".cfg"}:
            texts[str(path.relative_to(ROOT))] = path.read_text(encoding="utf-8", errors="replace")
    return {name: _flat(text) for name, text in texts.items()}


@pytest.fixture(scope="module")
def public_texts() -> dict[str, str]:
    return _public_texts()


@pytest.mark.parametrize("language", sorted(KEYS))
def test_no_public_file_holds_a_key(language, public_texts):
    sentences = key_sentences(language)
    assert len(sentences) > 50, f"found only {len(sentences)} key sentences in the {language} teacher files"
    leaks = [(key, name) for key, sentence in sentences for name, text in public_texts.items() if sentence in text]
    assert not leaks, f"key sentences found in public files: {leaks[:10]}"
    markers = [name for name, text in public_texts.items() if MARKER in text]
    assert not markers, f"a key's marker ({MARKER}) is in public files: {markers}"


def test_the_keys_facts_are_in_the_keys_and_in_no_public_file(public_texts):
    for assignments, _ in KEYS.values():
        keys = {key: _flat(body) for key, (_, body) in key_sections(assignments).items()}
        missing = [(key, fact) for key, facts in KEY_FACTS.items() for fact in facts if fact not in keys[key]]
        assert not missing, f"{assignments.name} no longer gives {missing}"
    facts = [fact for group in KEY_FACTS.values() for fact in group]
    leaks = [(fact, name) for fact in facts for name, text in public_texts.items() if fact in text]
    assert not leaks, f"key facts found in public files: {leaks[:10]}"


@pytest.mark.parametrize("language", sorted(KEYS))
def test_every_key_is_marked_and_has_an_answer_and_its_points(language):
    for path in KEYS[language]:
        sections = key_sections(path)
        assert sections, f"{path.name} has no key sections"
        for key, (_, body) in sections.items():
            assert f"<!-- {MARKER} {key} -->" in body, f"{path.name}: {key} has no marker"
            assert QUESTION[language] in body, f"{path.name}: {key} does not repeat its question"
            if key.startswith("A"):
                assert any(a in body for a in ANSWER[language]), f"{path.name}: {key} has no answer"
            assert any(s in body for s in SPLIT[language]), f"{path.name}: {key} does not split its points"


@pytest.mark.parametrize("language", sorted(KEYS))
def test_every_brief_of_the_guide_has_its_key_and_rubric(language):
    given = briefs(language)
    keyed = {key: points for path in KEYS[language] for key, (points, _) in key_sections(path).items()}
    assert {f"A{n}" for n in range(1, 8)} | {"P"} <= {item.split(".")[0] for item in given}
    assert given == keyed, (
        f"briefs without a key: {sorted(set(given) - set(keyed))}; keys without a brief: "
        f"{sorted(set(keyed) - set(given))}; points that differ: "
        f"{sorted(k for k in set(given) & set(keyed) if given[k] != keyed[k])}"
    )
    for assignment in {item.split(".")[0] for item in given}:
        points = sum(p for item, p in given.items() if item.split(".")[0] == assignment)
        assert points == (20 if assignment == "P" else 10), f"{assignment} is worth {points} points"


def test_the_two_languages_have_the_same_keys():
    for english, chinese in zip(KEYS["en"], KEYS["zh"]):
        en, zh = key_sections(english), key_sections(chinese)
        assert {k: p for k, (p, _) in en.items()} == {k: p for k, (p, _) in zh.items()}, chinese.name


def test_the_public_guide_keeps_no_answers_in_its_briefs():
    for language, words in {"en": ("*Answer:*", "*Rubric:*", "Points: 1"), "zh": ("*答案：*", "*评分标准：*")}.items():
        text = GUIDES[language].read_text(encoding="utf-8")
        section = re.split(r"^## 6\.", text, flags=re.MULTILINE)[1]
        section = re.split(r"^## 7\.", section, flags=re.MULTILINE)[0]
        assert not [w for w in words if w in section], f"the {language} guide's briefs hold an answer or a rubric"


def test_teacher_material_is_neither_on_the_site_nor_in_the_package():
    toc = yaml.safe_load((ROOT / "site" / "_toc.yml").read_text(encoding="utf-8"))
    files = [chapter["file"] for part in toc["parts"] for chapter in part["chapters"]]
    assert not [f for f in files if f.startswith("teacher")], "the site's table of contents lists teacher material"
    project = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^include = \["transformer_course\*"\]$', project, re.MULTILINE), "the package includes more"
    assert not (ROOT / "transformer_course" / "teacher").exists()
    readme = (TEACHER / "README.md").read_text(encoding="utf-8")
    assert "repository is public" in readme, "teacher/README.md must say the keys are readable in the repository"


def test_the_keys_exact_numbers():
    """The answers that are exact, recomputed: A1.1, A1.3, A2.1, A3.1, A5.1 (and its Mistral variant)."""
    import torch

    from transformer_course import Transformer, TransformerConfig, count_parameters
    from transformer_course.efficient.kv_cache import PUBLISHED_DECODERS, kv_cache_bytes

    key = {k: _flat(body) for path in KEYS["en"] for k, (_, body) in key_sections(path).items()}
    assert f"{10 ** (-1 / 59):.4f} \\le \\text{{scale}} \\le {10 ** (1 / 59):.4f}" in key["A1.1"]
    plain, dilated = math.ceil(1023 / 4), next(n for n in range(1, 20) if 1 + 4 * (2**n - 1) >= 1024)
    assert f"\\lceil 1023/4 \\rceil = {plain}" in key["A1.3"] and f"$L = {dilated}$" in key["A1.3"]
    for base in (100, 10**4, 10**6):
        assert f"{2 * math.pi * base ** (62 / 64):,.1f}" in key["A2.1"]
    slow = {base: sum(50 * base ** (-2 * i / 64) < 1 for i in range(32)) for base in (100, 10**4, 10**6)}
    assert f"{slow[10**6]} of the 32 pairs" in key["A2.1"]
    assert f"({slow[10**4]} with $10^4$, {slow[100]} with 100)" in key["A2.1"]
    for preset in ("base", "big"):
        with torch.device("meta"):  # the shapes only: no memory for 214 million parameters
            model = Transformer(
                TransformerConfig.preset(
                    preset, src_vocab_size=37000, tgt_vocab_size=37000, share_embeddings=True, tie_output=True
                )
            )
        assert f"{count_parameters(model):,}" in key["A3.1"], preset
    everything = _flat((TEACHER / "assignments.md").read_text(encoding="utf-8"))  # the variants too
    for name in ("Llama-2-7B", "Llama-2-70B", "Mistral-7B"):
        shape = PUBLISHED_DECODERS[name]
        per_token = kv_cache_bytes(shape.num_layers, shape.num_kv_heads, shape.head_dim, 1)
        assert f"{per_token:,} bytes per token" in everything, name
