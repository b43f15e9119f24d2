"""Re-execute course notebooks in place, top to bottom in a fresh kernel, so their stored outputs are fresh.

    python -m tools.execute_notebooks                  # every notebook
    python -m tools.execute_notebooks 03 04            # some, by number or file name
    python -m tools.execute_notebooks --language zh 03 # the Chinese edition's (notebooks/zh/), built first by
                                                       # python -m tools.translations build 03

Run it after every package change that touches a notebook, then commit the notebooks with their outputs.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from tools.course_notebooks import notebook_paths

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def execute(path: Path, timeout: int = 600) -> float:
    """Execute one notebook in place; returns the wall time in seconds."""
    nb = nbformat.read(path, as_version=4)
    nb.metadata["kernelspec"] = KERNELSPEC
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        record_timing=False,
    )
    start = time.perf_counter()
    client.execute()
    elapsed = time.perf_counter() - start
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    nb.metadata.get("language_info", {}).pop("version", None)
    nbformat.write(nb, path)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="notebook numbers or file names (default: all)")
    parser.add_argument("--timeout", type=int, default=600, help="seconds allowed per cell")
    parser.add_argument("--language", choices=["en", "zh"], default="en", help="zh: the Chinese edition's notebooks")
    args = parser.parse_args()
    paths = notebook_paths(args.names)
    if args.language != "en":
        paths = [path.parent / args.language / path.name for path in paths]
        missing = [path.name for path in paths if not path.is_file()]
        if missing:
            raise SystemExit(f"not built yet: {', '.join(missing)}; run python -m tools.translations build first")
    if args.language == "zh":
        from transformer_course.language import CHINESE_FONTS, chinese_font

        if chinese_font(rescan=True) is None:
            raise SystemExit(
                f"no Chinese font found (any of {', '.join(CHINESE_FONTS)}): the figures would show boxes. Install "
                "one first, e.g. apt-get install fonts-noto-cjk, as .ci/run does"
            )
    for path in paths:
        print(f"{path.name}: executing ...", flush=True)
        print(f"{path.name}: done in {execute(path, args.timeout):.1f} s", flush=True)


if __name__ == "__main__":
    main()
