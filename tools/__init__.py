"""The course's maintenance tools (building the site, the translations, the shipped files; executing notebooks).

A package of this repository, not of the installed course: run a tool from the repository root as
``python -m tools.NAME``.
"""
