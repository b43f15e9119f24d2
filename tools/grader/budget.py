"""The time limit of one submission: a budget of seconds for the cells that run the learner's code.

nbgrader's Execute (nbclient) asks for a timeout before each cell (``timeout_func``); a cell that runs past it is
interrupted and recorded as a ``CellTimeoutError``, and the next cells still run. :class:`TimeBudget` answers so that
the learner's cells (answer cells, test cells, cells the learner added) share ``seconds`` for the whole notebook,
while the teacher's cells (setup, context) get ``teacher_seconds`` each: a slow machine that takes long to import
torch does not eat the learner's time. Once the budget is spent, each remaining learner cell gets one second.
:class:`BudgetedExecute` is nbgrader's Execute with a fresh budget for every notebook it runs. It also starts the
kernel again when one dies before it answers (:data:`KERNEL_START_ATTEMPTS` tries in all): on a busy machine, or with
``grade --jobs`` starting kernels side by side, a kernel now and then fails to start, and that is not the learner's
doing. A kernel that dies once it has started (the learner's code crashed it) is not started again.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from functools import cache

# tries to start a notebook's kernel before the submission counts as one nbgrader could not grade
KERNEL_START_ATTEMPTS = 3


def is_learner_cell(cell: dict) -> bool:
    """True for a cell that runs the learner's code: an nbgrader answer or test cell, or one without nbgrader's
    metadata (added by the learner)."""
    meta = cell.get("metadata", {}).get("nbgrader")
    if not meta:
        return True
    return bool(meta.get("solution") or meta.get("grade") or not meta.get("locked"))


class TimeBudget:
    """``timeout_func`` for nbclient: a budget of ``seconds`` for a notebook's learner cells."""

    def __init__(self, seconds: float, teacher_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        if not (isinstance(seconds, int | float) and seconds > 0):
            raise ValueError(f"the time limit must be a number of seconds > 0, got {seconds!r}")
        if not (isinstance(teacher_seconds, int | float) and teacher_seconds > 0):
            raise ValueError(f"the teacher cells' time limit must be a number of seconds > 0, got {teacher_seconds!r}")
        self.seconds, self.teacher_seconds, self.clock = float(seconds), float(teacher_seconds), clock
        self.used = 0.0
        self._started: float | None = None  # when the learner cell running now started, if one is

    def __call__(self, cell: dict) -> int:
        """The timeout of ``cell``, which starts now (the cell before it has just ended)."""
        now = self.clock()
        if self._started is not None:
            self.used += now - self._started
            self._started = None
        if not is_learner_cell(cell):
            return math.ceil(self.teacher_seconds)
        self._started = now
        return max(1, math.ceil(self.seconds - self.used))


@cache
def budgeted_execute() -> type:
    """nbgrader's Execute preprocessor with a fresh :class:`TimeBudget` for each notebook it runs (configured as
    ``BudgetedExecute.learner_timeout`` and ``BudgetedExecute.teacher_timeout``); made on first use, since nbgrader
    is slow to import."""
    from nbgrader.preprocessors import Execute
    from traitlets import Float

    class BudgetedExecute(Execute):
        learner_timeout = Float(60.0, help="seconds for a notebook's learner cells in all").tag(config=True)
        teacher_timeout = Float(600.0, help="seconds for each of the teacher's cells").tag(config=True)

        kernel_started = False  # set once this notebook's kernel has answered

        def start_new_kernel_client(self):  # noqa: ANN201 (nbclient's signature; nbconvert calls this one)
            client = super().start_new_kernel_client()
            self.kernel_started = True
            return client

        def preprocess(self, nb, resources):  # noqa: ANN001, ANN201 (nbconvert's signature)
            for attempt in range(1, KERNEL_START_ATTEMPTS + 1):
                self.timeout_func = TimeBudget(self.learner_timeout, self.teacher_timeout)
                self.kernel_started = False
                try:
                    return super().preprocess(nb, resources)
                except Exception as error:  # noqa: BLE001 (whatever stopped the kernel from starting)
                    if self.kernel_started or attempt == KERNEL_START_ATTEMPTS:
                        raise
                    self.log.warning(
                        "the kernel did not start (%s); starting it again (try %d of %d)",
                        error,
                        attempt + 1,
                        KERNEL_START_ATTEMPTS,
                    )
            raise AssertionError("unreachable")

    return BudgetedExecute
