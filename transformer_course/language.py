"""The language the course speaks to the reader: English by default, Chinese after ``set_language("zh")``.

The setup cell of every Chinese notebook calls ``set_language("zh")``. From then on the exercise checkers give
their feedback in Chinese, :mod:`transformer_course.claims` prints ``成立：...`` instead of ``holds: ...``, and the
package's figures put Chinese text in a font that has the glyphs (:func:`use_chinese_font`). Code that speaks to
the reader writes each message in both languages and lets :func:`tr` choose::

    print(tr("the mask hides 6 entries", "掩码遮住了 6 个位置"))

A name that the program also uses as data (a dict key printed as a table's row, a legend built from a config's
name) cannot be written twice; the program keeps the English name and shows it through :func:`display_name`,
which looks up its Chinese form in ``display_names/zh/*.json`` (one file per notebook)::

    ax.plot(steps, losses, label=display_name(name))
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
import sys
import textwrap
import unicodedata
import warnings
from importlib import resources

LANGUAGES = ("en", "zh")
# fonts with the Chinese glyphs, in the order they are tried: Linux (Debian's fonts-noto-cjk, fonts-wqy-microhei),
# macOS, Windows
CHINESE_FONTS = (
    "Noto Sans CJK SC",
    "Noto Serif CJK SC",
    "WenQuanYi Micro Hei",
    "WenQuanYi Zen Hei",
    "Source Han Sans SC",
    "PingFang SC",
    "Heiti SC",
    "Microsoft YaHei",
    "SimHei",
)
# the small font package Colab's setup installs when no font above is there (about 5 MB, from Ubuntu's archive)
COLAB_FONT_PACKAGE = "fonts-wqy-microhei"
_language = "en"
_font_missing_noted = False  # the note that no Chinese font is installed is printed once


def set_language(language: str) -> None:
    """Speak ``language`` to the reader from now on: "en" (English, the default) or "zh" (Chinese). With "zh",
    matplotlib's figures also get a Chinese font (:func:`use_chinese_font`) and pandas lines up columns of Chinese
    text."""
    global _language
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {LANGUAGES}, got {language!r}")
    _language = language
    if language == "zh":
        use_chinese_font()
        _align_chinese_tables()


def _align_chinese_tables() -> None:
    """pandas pads a table's columns by characters; a Chinese character is two columns wide on screen."""
    try:
        import pandas
    except ImportError:  # pandas is optional here: only the notebooks that show tables import it
        return
    pandas.set_option("display.unicode.east_asian_width", True)


def get_language() -> str:
    """The language the course speaks: "en" or "zh"."""
    return _language


def tr(en: str, zh: str) -> str:
    """The message in the reader's language: ``en`` or ``zh``."""
    return zh if _language == "zh" else en


def _display_name_files(language: str) -> list[tuple[str, dict[str, str]]]:
    """(file name, its names) for each ``display_names/<language>/*.json``, in file-name order."""
    folder = resources.files("transformer_course") / "display_names" / language
    if not folder.is_dir():
        return []
    files = sorted((f for f in folder.iterdir() if f.name.endswith(".json")), key=lambda f: f.name)
    return [(f.name, json.loads(f.read_text(encoding="utf-8"))) for f in files]


@functools.cache
def display_names(language: str) -> dict[str, str]:
    """Every name of ``display_names/<language>/*.json`` (English name -> the name shown), merged; one file per
    notebook. A name with ``{}`` is a pattern: ``"warm-up {}": "预热 {} 步"`` shows "warm-up 30" as "预热 30 步"."""
    return {name: shown for _, names in _display_name_files(language) for name, shown in names.items()}


def display_name_conflicts(language: str) -> list[str]:
    """The names that two files show in two different ways (a test keeps this empty: one name, one translation)."""
    first: dict[str, tuple[str, str]] = {}
    conflicts = []
    for file, names in _display_name_files(language):
        for name, shown in names.items():
            if name in first and first[name][0] != shown:
                conflicts.append(f"{name!r} is {first[name][0]!r} in {first[name][1]} and {shown!r} in {file}")
            first.setdefault(name, (shown, file))
    return conflicts


@functools.cache
def _name_patterns(language: str) -> list[tuple[re.Pattern, str]]:
    patterns = []
    for name, shown in display_names(language).items():
        if "{}" in name:
            regex = "^" + "(.+?)".join(re.escape(part) for part in name.split("{}")) + "$"
            patterns.append((re.compile(regex), shown))
    return patterns


YES_NO = {"zh": ("否", "是")}


def display_name(name: str | bool) -> str:
    """``name`` as the reader sees it: unchanged in English; in Chinese, its entry in :func:`display_names` (a
    pattern's ``{}`` filled with what it matched). A name with no Chinese entry is shown as it is, with a warning
    that names the folder to add it to; a name with no Latin letter (one a learner wrote in Chinese) needs no entry.
    A bool is a yes or a no: ``True``/``False`` in English, 是/否 in Chinese.

    Use it where a name the program uses as data is shown: ``label=display_name(name)``,
    ``print(f"equal: {display_name(equal)}")``."""
    if isinstance(name, bool):
        return YES_NO[_language][name] if _language in YES_NO else str(name)
    if _language == "en":
        return name
    names = display_names(_language)
    if name in names:
        return names[name]
    for pattern, shown in _name_patterns(_language):
        match = pattern.match(name)
        if match:
            return shown.format(*match.groups())
    if re.search("[A-Za-z]", name):  # a name with no Latin letter (one a learner wrote in Chinese) needs no entry
        warnings.warn(
            f"{name!r} 没有对应的中文名，按原样显示。如果这是你自己起的名字，可以不管这条提示；"
            f"课程自带的名字缺了中文，应补进 transformer_course/display_names/{_language}/。",
            stacklevel=2,
        )
    return name


def display_width(text: str) -> int:
    """The columns ``text`` takes in a monospace font: a Chinese character (or a full-width sign) takes two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


# What a line may not break inside: a run of narrow characters (a Latin word, a number) or one wide character (a
# Chinese character, a full-width sign), with the opening marks before it and the closing marks after it.
_UNBROKEN = re.compile(r"\s+|[（「《“]*(?:[^\s\u2e80-\u9fff\uff00-\uffef]+|\S)[，。、：；）」》！？”]*")


def fill(text: str, width: int, initial_indent: str = "", subsequent_indent: str = "") -> str:
    """``textwrap.fill`` by screen columns (:func:`display_width`), for text in either language. Text with no wide
    character is wrapped exactly as textwrap wraps it; Chinese text, which has no spaces, may also break between two
    Chinese characters, never before a closing mark (，。）) or after an opening one (（“)."""
    if display_width(text) == len(text):
        return textwrap.fill(text, width, initial_indent=initial_indent, subsequent_indent=subsequent_indent)
    lines, line, gap = [], initial_indent, ""
    for piece in _UNBROKEN.findall(text):
        if piece.isspace():
            gap = " "
            continue
        if line.strip() and display_width(line + gap + piece) > width:
            lines.append(line)
            line, gap = subsequent_indent, ""
        line, gap = line + gap + piece, ""
    return "\n".join([*lines, line])


def ljust(text: str, width: int) -> str:
    """``text`` left-aligned in ``width`` columns (:func:`display_width`), as ``f"{text:<{width}}"`` does for
    Latin text."""
    return text + " " * max(0, width - display_width(text))


def rjust(text: str, width: int) -> str:
    """``text`` right-aligned in ``width`` columns (:func:`display_width`), as ``f"{text:>{width}}"`` does for
    Latin text."""
    return " " * max(0, width - display_width(text)) + text


def chinese_font(rescan: bool = False) -> str | None:
    """The first of :data:`CHINESE_FONTS` that matplotlib can find on this machine, or None. With ``rescan``,
    matplotlib first lists the machine's fonts again: its cached list misses a font installed after it was made."""
    from matplotlib import font_manager

    if rescan:
        font_manager.fontManager = font_manager._load_fontmanager(try_read_cache=False)
    installed = {font.name for font in font_manager.fontManager.ttflist}
    return next((name for name in CHINESE_FONTS if name in installed), None)


def _install_font_on_colab() -> bool:
    """On Colab (root, Ubuntu, apt), install :data:`COLAB_FONT_PACKAGE`; True if it worked."""
    if "google.colab" not in sys.modules or shutil.which("apt-get") is None:
        return False
    done = subprocess.run(
        ["apt-get", "install", "-y", "-qq", COLAB_FONT_PACKAGE], capture_output=True, text=True, check=False
    )
    return done.returncode == 0


def use_chinese_font() -> str | None:
    """Let matplotlib draw Chinese text: the first font of :data:`CHINESE_FONTS` found (installed first on Colab)
    becomes the fallback after matplotlib's own font, so Latin letters and digits look as in the English figures.
    Returns the font's name; None, with a note in Chinese saying what to install, when there is none."""
    import matplotlib

    font = chinese_font() or chinese_font(rescan=True)
    if font is None and _install_font_on_colab():
        font = chinese_font(rescan=True)
    if font is None:
        global _font_missing_noted
        if _font_missing_noted:
            return None
        _font_missing_noted = True
        print(
            "提示：本机没有找到中文字体，图中的中文会显示为方框。装一个即可，例如 Debian/Ubuntu 上 "
            f"`apt-get install {COLAB_FONT_PACKAGE}`，然后重启内核。"
        )
        # matplotlib would warn once per missing glyph; the note above says it once
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .*missing from", category=UserWarning)
        return None
    # matplotlib falls back from one family of font.family to the next for a missing glyph
    matplotlib.rcParams["font.family"] = ["sans-serif", font]
    return font
