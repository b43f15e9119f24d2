"""The package's shape: every public name has one home, and imports run one way between its folders."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

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
