"""The setup cell's restart check: it names a library pip replaced after the session imported it, and nothing else."""

from __future__ import annotations

import types
from importlib import metadata

import pytest

from transformer_course.environment import RestartNeeded, stale_libraries, stop_if_restart_needed


def module(version: str) -> types.ModuleType:
    m = types.ModuleType("fake")
    m.__version__ = version
    return m


def disk(versions: dict[str, str]):
    def version(name: str) -> str:
        if name not in versions:
            raise metadata.PackageNotFoundError(name)
        return versions[name]

    return version


LIBS = {"torch": "torch", "numpy": "numpy", "ipywidgets": "ipywidgets"}


def test_an_upgrade_after_import_is_named():
    loaded = {"ipywidgets": module("7.7.1"), "torch": module("2.11.0+cpu")}
    stale = stale_libraries(LIBS, loaded, disk({"ipywidgets": "8.1.8", "torch": "2.11.0+cpu", "numpy": "2.1.3"}))
    assert stale == [("ipywidgets", "7.7.1", "8.1.8")]


def test_a_local_build_tag_is_not_a_change():
    # PyPI's torch says 2.11.0+cu130 in memory and 2.11.0 in its metadata: the same release
    loaded = {"torch": module("2.11.0+cu130")}
    assert stale_libraries(LIBS, loaded, disk({"torch": "2.11.0"})) == []


def test_not_imported_or_not_installed_is_skipped():
    assert stale_libraries(LIBS, {}, disk({"torch": "2.13.0"})) == []
    assert stale_libraries(LIBS, {"numpy": module("2.1.3")}, disk({})) == []
    assert stale_libraries(LIBS, {"numpy": types.ModuleType("no_version")}, disk({"numpy": "2.1.3"})) == []


def test_this_session_needs_no_restart():
    stop_if_restart_needed()  # the test run imports what is installed


def test_the_message_is_one_sentence_with_the_way_out(monkeypatch):
    import transformer_course.environment as environment

    monkeypatch.setattr(environment, "stale_libraries", lambda: [("numpy", "2.1.3", "2.3.0")])
    with pytest.raises(RestartNeeded) as error:
        stop_if_restart_needed()
    message = str(error.value)
    assert "numpy 2.1.3 -> 2.3.0" in message and "Runtime > Restart session" in message
    assert message.count(". ") == 0  # one sentence


def test_the_chinese_edition_gets_the_message_in_chinese(monkeypatch):
    # the Chinese setup block sets the language before this check, so its one sentence is Chinese too
    import transformer_course.environment as environment
    from transformer_course.language import get_language, set_language

    monkeypatch.setattr(environment, "stale_libraries", lambda: [("numpy", "2.1.3", "2.3.0")])
    before = get_language()
    set_language("zh")
    try:
        with pytest.raises(RestartNeeded) as error:
            stop_if_restart_needed()
    finally:
        set_language(before)
    message = str(error.value)
    assert "numpy 2.1.3 -> 2.3.0" in message and "重启会话" in message and "重新运行这个单元格" in message
    assert message.count("。") == 1 and message.endswith("。")  # one sentence
