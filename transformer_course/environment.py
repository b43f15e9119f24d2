"""Is the Python session running the library versions that are installed? The setup cell asks before anything else.

Colab imports torch, numpy and ipywidgets before a notebook's first cell runs. If ``pip install`` then replaces one
of them on disk, the session keeps running the old one from memory while newly imported modules expect the new one:
widgets go blank after the next restart, or an import fails half-way with a message about another library. Nothing
warns, because the setup cell runs pip quietly. So the setup cell compares, for each library the session has already
imported, the version in memory with the version on disk, and stops with one sentence when they differ.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from importlib import metadata

from transformer_course.language import tr

__all__ = ["RestartNeeded", "WATCHED_LIBRARIES", "stale_libraries", "stop_if_restart_needed"]

# import name -> distribution name on PyPI
WATCHED_LIBRARIES: dict[str, str] = {"torch": "torch", "numpy": "numpy", "ipywidgets": "ipywidgets"}


class RestartNeeded(RuntimeError):
    """A library this session had imported was replaced on disk: the session must restart to use the new one."""


def public_version(version: str) -> str:
    """'2.11.0+cu130' -> '2.11.0': PyPI's torch reports a local build tag in memory that its metadata leaves out."""
    return version.split("+", 1)[0].strip()


def stale_libraries(
    libraries: Mapping[str, str] | None = None,
    loaded: Mapping[str, object] | None = None,
    installed_version: Callable[[str], str] | None = None,
) -> list[tuple[str, str, str]]:
    """The libraries whose imported version differs from the installed one, as (name, in memory, on disk).

    ``libraries`` maps import names to distribution names (default :data:`WATCHED_LIBRARIES`); ``loaded`` is the
    module table (default ``sys.modules``); ``installed_version`` reads a distribution's version from disk
    (default ``importlib.metadata.version``). A library not imported yet, or not installed by pip, is skipped.
    """
    libraries = WATCHED_LIBRARIES if libraries is None else libraries
    loaded = sys.modules if loaded is None else loaded
    installed_version = metadata.version if installed_version is None else installed_version
    stale = []
    for module_name, distribution in libraries.items():
        module = loaded.get(module_name)
        in_memory = getattr(module, "__version__", None)
        if not isinstance(in_memory, str):
            continue
        try:
            on_disk = installed_version(distribution)
        except metadata.PackageNotFoundError:
            continue
        if public_version(in_memory) != public_version(on_disk):
            stale.append((module_name, in_memory, on_disk))
    return stale


def restart_message(stale: Iterable[tuple[str, str, str]]) -> str:
    """One sentence naming what changed and what to do, in the reader's language."""
    stale = list(stale)
    changes = ", ".join(f"{name} {old} -> {new}" for name, old, new in stale)
    changes_zh = "，".join(f"{name} {old} -> {new}" for name, old, new in stale)
    return tr(
        f"Installing the course changed a library this session had already imported ({changes}): "
        "choose Runtime > Restart session (in Jupyter or VS Code: restart the kernel), then run this cell again.",
        f"安装课程包替换了本会话已经导入的库（{changes_zh}）：请选择“代码执行程序 > 重启会话”"
        "（Runtime > Restart session；在 Jupyter 或 VS Code 中则是重启内核），然后重新运行这个单元格。",
    )


def stop_if_restart_needed() -> None:
    """Raise :class:`RestartNeeded` with one clear sentence if an imported library was replaced on disk."""
    stale = stale_libraries()
    if stale:
        raise RestartNeeded(restart_message(stale))
