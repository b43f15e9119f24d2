"""One more nbval test per notebook that builds widgets: move every widget and check that each one answers.

nbval runs a notebook's cells and compares their outputs, but nobody drags a slider there. This item runs after a
notebook's last cell, in the same kernel: it moves every slider, dropdown, toggle, checkbox and text box the notebook
built to another value (and back), and fails if a callback raises or prints an error. It runs with whatever
ipywidgets the environment has: 8.1.x in the README's test command, Colab's 7.7.1 in CI's second pass.

Registered by the root conftest.py.
"""

from __future__ import annotations

import json
import re
from queue import Empty

import pytest

# Runs inside the notebook's kernel. Works with ipywidgets 7 (Widget.widgets) and 8 (widget._instances).
PROBE = r"""
def _course_widget_probe():
    import json

    import ipywidgets as w
    from ipywidgets.widgets import widget as widget_module

    if w.__version__.startswith("7."):
        registry = w.Widget.widgets
    else:  # 8.x keeps them here (Widget.widgets still answers, with a DeprecationWarning)
        registry = widget_module._instances
    live = list(registry.values())
    outputs = [x for x in live if isinstance(x, w.Output)]
    report = []
    for x in live:
        old = None
        if isinstance(x, (w.IntSlider, w.FloatSlider)):
            old, new = x.value, (x.max if x.value != x.max else x.min)
        elif isinstance(x, (w.Dropdown, w.ToggleButtons)) and len(x.options) > 1:
            old, new = x.index, (1 if x.index == 0 else 0)
        elif isinstance(x, w.Checkbox):
            old, new = x.value, not x.value
        elif isinstance(x, w.Text):
            old, new = x.value, (x.value + " and")
        else:
            continue
        attribute = "index" if isinstance(x, (w.Dropdown, w.ToggleButtons)) else "value"
        before = [o.outputs for o in outputs]
        entry = {"widget": type(x).__name__, "description": x.description, "error": None}
        try:
            setattr(x, attribute, new)
            entry["outputs changed"] = any(o.outputs != b for o, b in zip(outputs, before))
            setattr(x, attribute, old)
        except Exception as error:  # noqa: BLE001 - reported to the test, which fails
            entry["error"] = f"{type(error).__name__}: {error}"
        report.append(entry)
    print("WIDGET-PROBE " + json.dumps({"version": w.__version__, "moved": report}))


_course_widget_probe()
del _course_widget_probe
"""


_BUILDS_A_WIDGET = re.compile(r"\b(?:widgets\.[A-Z]\w*\(|interact(?:ive)?\()")


def notebook_builds_widgets(nbfile) -> bool:
    """True if a code cell constructs a widget (``widgets.IntSlider(...)``, ``interact(...)``)."""
    return any(c.cell_type == "code" and _BUILDS_A_WIDGET.search(c.source) for c in nbfile.nb.cells)


class WidgetsRespond(pytest.Item):
    """Move every widget the notebook built; fail if one raises or prints an error."""

    def runtest(self) -> None:
        kernel = self.parent.kernel
        if kernel is None or not kernel.is_alive():
            pytest.skip("the notebook's kernel is not running (an earlier cell failed)")
        msg_id = kernel.execute_cell_input(PROBE, allow_stdin=False)
        timeout = self.config.option.nbval_cell_timeout
        kernel.await_reply(msg_id, timeout=timeout)
        printed, errors = [], []
        while True:
            try:
                msg = kernel.get_message(stream="iopub", timeout=timeout)
            except Empty:
                raise AssertionError("the widget probe gave no output") from None
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "status" and content["execution_state"] == "idle":
                break
            if kind == "stream":
                (errors if content["name"] == "stderr" else printed).append(content["text"])
            elif kind == "error":
                errors.append(f"{content['ename']}: {content['evalue']}")
        if errors:
            raise AssertionError("moving the widgets raised or printed errors:\n" + "\n".join(errors))
        line = next((p for p in "".join(printed).splitlines() if p.startswith("WIDGET-PROBE ")), None)
        assert line is not None, f"the widget probe printed no report: {printed!r}"
        report = json.loads(line.removeprefix("WIDGET-PROBE "))
        assert report["moved"], f"the notebook builds widgets but none was found (ipywidgets {report['version']})"
        failed = [entry for entry in report["moved"] if entry["error"]]
        assert not failed, f"with ipywidgets {report['version']}, these widgets raised when moved: {failed}"

    def reportinfo(self):
        return self.path, 0, f"{self.parent.name}::widgets respond"


def add_widget_items(items: list) -> None:
    """After the last cell of each notebook that builds widgets, add a :class:`WidgetsRespond` item."""
    try:
        from nbval.plugin import IPyNbCell
    except ImportError:  # nbval not installed: nothing to add
        return
    result = []
    for index, item in enumerate(items):
        result.append(item)
        if not isinstance(item, IPyNbCell):
            continue
        following = items[index + 1] if index + 1 < len(items) else None
        last_of_notebook = following is None or following.parent is not item.parent
        if last_of_notebook and notebook_builds_widgets(item.parent):
            result.append(WidgetsRespond.from_parent(item.parent, name="widgets respond"))
    items[:] = result
