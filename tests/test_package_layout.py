"""The package's shape: every public name has one home, and imports run one way between its folders."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import transformer_course


def _modules() -> list:
    found = []
    for info in pkgutil.walk_packages(transformer_course.__path__, prefix="transformer_course."):
        if info.name.startswith("transformer_course.exercises"):
            continue
        found.append(importlib.import_module(info.name))
    return found


def test_every_public_name_is_listed_by_the_module_that_defines_it():
    """A class or function in a module's ``__all__`` is defined there, not re-exported from another module
    (the package's front door, ``transformer_course/__init__.py``, aside)."""
    borrowed = []
    for module in _modules():
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            if (inspect.isclass(obj) or inspect.isfunction(obj)) and obj.__module__ != module.__name__:
                borrowed.append(f"{module.__name__}.{name} (defined in {obj.__module__})")
    assert not borrowed, borrowed


# What each folder may import from the package's other folders (the README's table says the same in words).
MAY_IMPORT = {
    "text": set(),
    "core": {"text"},
    "efficient": {"core", "text"},
    "training": {"core", "text"},
    "families": {"core", "text"},
    "prelude": {"core", "text", "training"},
}
FOLDERS = set(MAY_IMPORT) | {"exercises"}


def _folders_imported(path: Path, folder: str) -> set[str]:
    """The package folders that the module at ``path`` (inside ``folder``) imports, at any depth of its code."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level == 0:
                parts = (node.module or "").split(".")
                target = parts[1] if parts[0] == "transformer_course" and len(parts) > 1 else None
            elif node.level == 1:
                target = folder
            else:  # from .. import x, or from ..folder import x
                head = (node.module or "").split(".")[0]
                names = [alias.name for alias in node.names]
                target = head if head else next((n for n in names if n in FOLDERS), None)
            if target in FOLDERS:
                found.add(target)
    return found - {folder}


def test_folders_import_only_their_foundations():
    package = Path(transformer_course.__file__).parent
    wrong = []
    for folder, allowed in MAY_IMPORT.items():
        for path in sorted((package / folder).glob("*.py")):
            extra = _folders_imported(path, folder) - allowed
            if extra:
                wrong.append(f"{folder}/{path.name} imports {sorted(extra)}")
    assert not wrong, wrong


def test_the_top_level_helpers_import_no_folder():
    package = Path(transformer_course.__file__).parent
    for name in ("checks", "claims", "environment", "memory_tracker", "timing", "utils", "viz"):
        assert not _folders_imported(package / f"{name}.py", ""), name
