"""Root conftest: applies to the notebooks as well as to tests/ (pytest notebooks, pytest tests, plain pytest).

Being a conftest.py in a folder without ``__init__.py``, it makes pytest put this folder, the repository root, on
sys.path (pytest's default import mode), so the tests import ``tools`` and ``benchmarks`` as packages, as
``python -m tools.NAME`` run from the root does.
"""

import importlib.util
from pathlib import Path

# loaded by its path, so that it does not depend on how pytest has set up sys.path for this run
_spec = importlib.util.spec_from_file_location("course_nbval_widgets", Path(__file__).parent / "tests/nbval_widgets.py")
nbval_widgets = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(nbval_widgets)


def pytest_collection_modifyitems(session, config, items):
    # nbval compares outputs but never moves a slider: after each notebook that builds widgets, move them all
    nbval_widgets.add_widget_items(items)
