"""The classroom grader: the course's exercises as nbgrader assignments (docs/grading.md is the teacher's how-to).

``python -m tools.grader pin`` writes a copy of the lecture notebooks pinned to a git tag
(:mod:`~tools.grader.lecture`); ``release`` turns chosen course notebooks into assignments pinned to a git tag
(:mod:`~tools.grader.release`, :mod:`~tools.grader.assignment`, :mod:`~tools.grader.slicing`,
:mod:`~tools.grader.pinning`); ``collect`` copies a folder of ``<student>.ipynb`` files into nbgrader's layout
(:mod:`~tools.grader.collect`); ``grade`` runs nbgrader's autograde under a time budget (:mod:`~tools.grader.budget`),
reads each checker's verdict (:mod:`~tools.grader.verdicts`), flags reference solutions, the package functions the
exercises ask for (:mod:`~tools.grader.forbidden`) and teacher material (:mod:`~tools.grader.flags`), and writes one
results table (:mod:`~tools.grader.results`), ``--jobs`` submissions at a time. How long grading takes is measured by
:mod:`~tools.grader.throughput`.
"""
