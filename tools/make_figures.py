"""Regenerate every figure under figures/ that the README shows, deterministically.

python tools/make_figures.py           # all figures
python tools/make_figures.py --list    # their names
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from transformer_course.utils import seed_everything  # noqa: E402
from transformer_course.viz import draw_architecture, set_style  # noqa: E402

FIGURES_DIR = Path(__file__).resolve().parent.parent / "figures"

# name -> (function that draws it, the notebook that explains it)
FIGURES: dict[str, tuple[Callable[[], Figure], str]] = {
    "architecture": (draw_architecture, "00_introduction.ipynb"),
}


def save(fig: Figure, path: Path) -> None:
    # no software version in the PNG metadata, so the file changes only when the picture does
    fig.savefig(path, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--list", action="store_true", help="list the figures and exit")
    args = parser.parse_args()
    if args.list:
        for name, (_, notebook) in FIGURES.items():
            print(f"{name}.png  (notebooks/{notebook})")
        return
    FIGURES_DIR.mkdir(exist_ok=True)
    for name, (draw, _) in FIGURES.items():
        seed_everything(0)
        set_style()
        save(draw(), FIGURES_DIR / f"{name}.png")
        print(f"figures/{name}.png")


if __name__ == "__main__":
    main()
