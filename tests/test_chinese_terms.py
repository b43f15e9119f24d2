"""One term per idea in every Chinese text of the course: no forbidden variant from the table "禁用的变体" of
translations/zh/GLOSSARY.md in the notebooks' catalogues, README.zh-CN.md, the checkers' Chinese feedback, or the
Chinese guide and teacher files.

The guide and teacher files are edited by hand outside the catalogues; those in ``PENDING`` still hold variants and
are expected to fail (strict xfail) until the replacements listed for them are applied. Then their test passes,
strict xfail turns that into a failure, and the file comes off ``PENDING``.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GLOSSARY = ROOT / "translations" / "zh" / "GLOSSARY.md"
SECTION = "## 禁用的变体"
CJK = re.compile(r"[\u4e00-\u9fff]")
CELL_SPLIT = re.compile(r"(?<!\\)\|")

CATALOGUES = sorted((ROOT / "translations" / "zh").glob("[0-9][0-9]_*.md"))
CHECKERS = sorted(p for p in (ROOT / "transformer_course" / "exercises").glob("*.py") if p.name != "__init__.py")
HAND_WRITTEN = [ROOT / "README.zh-CN.md", *sorted((ROOT / "docs").glob("*.zh-CN.md"))]
HAND_WRITTEN += sorted((ROOT / "teacher").glob("*.zh-CN.md"))
# Files that still hold variants until the lead applies the replacements listed for them (see the module docstring).
PENDING: set[str] = set()


@dataclass(frozen=True)
class Rule:
    """One row of the table: the preferred form and a forbidden variant (exact text or a regular expression)."""

    preferred: str
    variant: str
    pattern: re.Pattern


@dataclass(frozen=True)
class Finding:
    where: str
    line: int
    found: str
    rule: Rule

    def __str__(self) -> str:
        return f"{self.where}:{self.line}: {self.found!r} -> write {self.rule.preferred}"


def _cells(row: str) -> list[str]:
    """A Markdown table row's cells, split on unescaped pipes, with ``\\|`` turned back into ``|``."""
    return [c.strip().replace("\\|", "|") for c in CELL_SPLIT.split(row.strip().strip("|"))]


def parse_rules(glossary: str) -> list[Rule]:
    """The rules of the forbidden-variants table (the table after the heading ``SECTION``)."""
    if SECTION not in glossary:
        raise ValueError(f"the glossary has no section {SECTION!r}")
    rules = []
    for line in glossary.split(SECTION, 1)[1].splitlines():
        if not line.lstrip().startswith("|"):
            continue
        cells = _cells(line)
        if len(cells) != 4 or set(cells[0]) <= set("-: ") or cells[0] == "首选":
            continue
        preferred, variant, kind, _note = cells
        if not (variant.startswith("`") and variant.endswith("`")):
            raise ValueError(f"a forbidden variant is written in backticks, got {variant!r}")
        variant = variant[1:-1]
        if kind == "文字":
            pattern = re.compile(re.escape(variant))
        elif kind == "正则":
            pattern = re.compile(variant)
        else:
            raise ValueError(f"匹配 is 文字 or 正则, got {kind!r} for {variant!r}")
        rules.append(Rule(preferred, variant, pattern))
    return rules


RULES = parse_rules(GLOSSARY.read_text(encoding="utf-8"))


def findings(text: str, where: str, rules: list[Rule] = RULES, first_line: int = 1) -> list[Finding]:
    """Every forbidden variant in ``text``, with its line (``first_line`` is the number of the text's first line)."""
    found = []
    for rule in rules:
        for match in rule.pattern.finditer(text):
            line = first_line + text.count("\n", 0, match.start())
            found.append(Finding(where, line, match.group(0), rule))
    return found


def chinese_strings(source: str) -> list[tuple[int, str]]:
    """The string literals of a Python source that hold Chinese (the checkers' Chinese feedback), with their line."""
    return [
        (node.lineno, node.value)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and CJK.search(node.value)
    ]


def file_findings(path: Path) -> list[Finding]:
    where = str(path.relative_to(ROOT))
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".py":
        return [f for line, s in chinese_strings(text) for f in findings(s, where, first_line=line)]
    return findings(text, where)


def _report(found: list[Finding]) -> str:
    return f"{len(found)} forbidden variant(s) (translations/zh/GLOSSARY.md, {SECTION}):\n" + "\n".join(map(str, found))


def test_the_table_is_read_and_every_regex_compiles():
    assert len(RULES) >= 20, [r.variant for r in RULES]
    variants = {r.variant for r in RULES}
    assert {"遮蔽", "论断", "空行", "这里显示的这次运行", "抽样"} <= variants


# Examples of each regular-expression rule in use, each of which must be found, and near misses that must not.
CAUGHT = [
    "束搜索把正确的日期留作第二个假设。",
    "只是一*袋*词元。",
    "不带缓存 49,024 次，带缓存 319 次（少 154 倍）",
    "使用缓存时，靠后的一步快三倍以上",
    "它比有缩放时小 1000 倍以上",
    "把输入放大 5 倍",
    "本课程的模型使用 **512 个词元**：",
    "同一个 512 个词元的 BPE 分词器",
    "十六本笔记本",
    "每本笔记本都在一个新内核中运行",
    "| 合计 | 12 | 14 本笔记本 | 878 |",
    "它可能使用从不存储权重的融合内核",
    "块稀疏的 GPU 内核",
]
NOT_CAUGHT = [
    "假设 $q$ 和 $k$ 的各分量相互独立",
    "速度至少是它的 1.5 倍",
    "每种平方级方法的计算量恰好变为 16 倍",
    "秩每增大到四倍，移动大约减半",
    "在空闲的机器上要快好几倍",
    "本笔记本把模型缩小了",
    "见笔记本 05。本笔记本接着讲",
    "交互控件需要一个正在运行的内核",
    "用户态加内核态时间",
    "返回一个二元组 `(scores, documents)`",
    "按二元计数抽取",
    "大约 3 倍",
]


@pytest.mark.parametrize("text", CAUGHT)
def test_a_planted_variant_is_found(text):
    assert findings(text, "planted"), f"no rule catches {text!r}"


@pytest.mark.parametrize("text", NOT_CAUGHT)
def test_a_correct_phrase_is_not_flagged(text):
    assert not findings(text, "fine"), _report(findings(text, "fine"))


def test_a_variant_planted_in_a_real_catalogue_fails_the_check(tmp_path):
    """The check that runs on the catalogues fails once a variant is written into one of them."""
    planted = tmp_path / "06_masks.md"
    text = (ROOT / "translations" / "zh" / "06_masks.md").read_text(encoding="utf-8")
    planted.write_text(text + "\n这一行是一个空行，被完全遮蔽了。\n", encoding="utf-8")
    found = findings(planted.read_text(encoding="utf-8"), "06_masks.md")
    assert {f.found for f in found} == {"空行", "遮蔽"}, _report(found)
    assert all(f.line == text.count("\n") + 2 for f in found)


def test_a_variant_planted_in_a_checker_string_is_found():
    source = 'tr("that is 8 times too big", "大了 8 倍：单位是字节")\nx = "English only"\n'
    assert chinese_strings(source) == [(1, "大了 8 倍：单位是字节")]
    assert [f.found for f in findings(chinese_strings(source)[0][1], "checker")] == ["大了 8 倍"]


@pytest.mark.parametrize("path", CATALOGUES, ids=lambda p: p.name)
def test_catalogue_has_no_forbidden_variant(path):
    found = file_findings(path)
    assert not found, _report(found)


@pytest.mark.parametrize("path", CHECKERS, ids=lambda p: p.name)
def test_checker_feedback_has_no_forbidden_variant(path):
    found = file_findings(path)
    assert not found, _report(found)


def _hand_written(path: Path):
    name = str(path.relative_to(ROOT))
    if name in PENDING:
        reason = f"{name}: replacements listed for the lead, not applied yet; once applied, remove it from PENDING"
        return pytest.param(path, id=name, marks=pytest.mark.xfail(strict=True, reason=reason))
    return pytest.param(path, id=name)


@pytest.mark.parametrize("path", [_hand_written(p) for p in HAND_WRITTEN])
def test_readme_guide_and_teacher_files_have_no_forbidden_variant(path):
    found = file_findings(path)
    assert not found, _report(found)


def test_pending_files_exist():
    assert PENDING <= {str(p.relative_to(ROOT)) for p in HAND_WRITTEN}


TITLE = re.compile(r"^# \d\d · (?P<zh>[^\n]+)$", re.MULTILINE)


@pytest.mark.parametrize("path", CATALOGUES, ids=lambda p: p.name)
def test_the_title_is_chinese_without_an_english_subtitle(path):
    """A Chinese title is Chinese, as in d2l-zh: no English title in parentheses after it (names such as BERT stay)."""
    title = TITLE.search(path.read_text(encoding="utf-8"))
    assert title, f"{path.name} has no title '# NN · 中文标题'"
    assert not re.search(r"（[A-Za-z][^）]*）$", title["zh"]), f"{path.name}: English in the title: {title[0]}"


# Chinese is never set in italics: CJK fonts have no italic, so a browser slants the characters, and d2l-zh marks a
# term at its definition in bold. An italic span is one `*...*` or `_..._` (not `**`) that holds a Chinese character;
# math and inline code are blanked first, since `*` there is multiplication.
ITALIC_CHINESE = re.compile(
    r"(?<![*\\A-Za-z0-9])([*_])(?![*_\s])([^*_\n]*?[\u4e00-\u9fff][^*_\n]*?)(?<![\s*_])\1(?![*_A-Za-z0-9])"
)
MATH_AND_CODE = re.compile(r"\$\$.*?\$\$|\$[^$\n]*\$|`[^`\n]*`", re.DOTALL)
# The instructor guide cites a notebook's heading as "§ *heading*", the form tools/guide_numbers.py reads.
HEADING_REFERENCE = re.compile(r"§ \*[^*\n]+\*")
MARKDOWN_ENTRY = re.compile(r"<!-- cell [^>]*-->\n(.*?)(?=<!-- (?:cell|code) |\Z)", re.DOTALL)


def italic_chinese(markdown: str) -> list[str]:
    """The italic spans that hold Chinese in ``markdown``, e.g. ["*之间*"]."""
    text = HEADING_REFERENCE.sub(" ", MATH_AND_CODE.sub(" ", markdown))
    return [match[0] for match in ITALIC_CHINESE.finditer(text)]


@pytest.mark.parametrize(
    "text, spans",
    [
        ("注意力在位置*之间*混合信息", ["*之间*"]),
        ("称为_暴露偏差_。", ["_暴露偏差_"]),
        ("**教师强制**（teacher forcing）", []),
        ("*bank* 有两个含义", []),
        ("$a * b$ 与 `x*y` 中的 *号", []),
        ("**演示** 07 § *四种堆叠*", []),
    ],
)
def test_italic_chinese_is_found_and_bold_math_code_and_latin_are_not(text, spans):
    assert italic_chinese(text) == spans


@pytest.mark.parametrize("path", [*CATALOGUES, *HAND_WRITTEN], ids=lambda p: p.name)
def test_no_chinese_is_set_in_italics(path):
    text = path.read_text(encoding="utf-8")
    markdown = "\n".join(MARKDOWN_ENTRY.findall(text)) if path in CATALOGUES else text
    found = italic_chinese(markdown)
    assert not found, f"{path.name}: Chinese in italics (use bold for a term, wording for emphasis): {found}"
