"""Open JupyterLab on copies of the notebooks (what `make lab` calls), so exploring never changes a tracked file.

The numbered notebooks' .ipynb are copied once into build/lab/ (git-ignored) without their pairing with the
py:percent twins, beside a jupytext.toml that pairs nothing (so a Jupyter started at the repository root, where
pyproject.toml pairs ipynb with py:percent, leaves them unpaired too): opening, running and autosaving write the
copies only, and the file browser lists each notebook once. A copy already there is kept, edits and all; `--fresh`
(make lab FRESH=1) replaces every copy with the tracked notebook. Kernels start in build/lab/, and covlib finds the
data, models and output folders as it does from notebooks/ (covlib/core/paths.py).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
LAB = ROOT / "build" / "lab"
README = """# Your copies of the notebooks

Open the `.ipynb` here. They are copies of `notebooks/*.ipynb` (git-ignored, in `build/lab/`): edits, outputs and
autosaves stay here and never touch the tracked notebooks or their `.py` twins. `make lab` keeps these copies;
`make lab FRESH=1` replaces them with fresh copies of the tracked notebooks (your edits here are lost).
"""


def prepare(lab: Path = LAB, fresh: bool = False) -> list[Path]:
    """Copy each numbered notebook into `lab`, unpaired (kept when there unless `fresh`); the copies' paths."""
    lab.mkdir(parents=True, exist_ok=True)
    (lab / "jupytext.toml").write_text('formats = "ipynb"  # no .py twin for the copies\n', encoding="utf-8")
    (lab / "README.md").write_text(README, encoding="utf-8")
    for extra in ("COURSE.md", "credibility_ratings_template.csv"):
        shutil.copy2(ROOT / "notebooks" / extra, lab / extra)
    copies = []
    for source in sorted((ROOT / "notebooks").glob("[0-9][0-9]*_*.ipynb")):
        copy = lab / source.name
        if fresh or not copy.exists():
            nb = nbformat.read(source, as_version=4)
            nb.metadata.get("jupytext", {}).pop("formats", None)  # the copy is no twin of the tracked .py
            nbformat.write(nb, copy)
        copies.append(copy)
    return copies


def command(lab: Path = LAB, root_user: bool | None = None) -> list[str]:
    """The `jupyter lab` command on `lab`, with --allow-root when run as root (JupyterLab refuses root without it)."""
    root_user = os.geteuid() == 0 if root_user is None else root_user
    jupyter = Path(sys.executable).with_name("jupyter")
    return [str(jupyter), "lab", f"--ServerApp.root_dir={lab}", *(["--allow-root"] if root_user else [])]


def main() -> None:
    """Prepare the copies and start JupyterLab on them."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fresh", action="store_true", help="replace every copy with the tracked notebook")
    args = ap.parse_args()
    copies = prepare(fresh=args.fresh)
    print(f"JupyterLab on {len(copies)} copies in {LAB} (git-ignored; edits stay there). "
          "make lab FRESH=1 replaces them with the tracked notebooks.")
    sys.exit(subprocess.call(command(), cwd=LAB))  # nbgrader wants its course folder (the cwd) under the root


if __name__ == "__main__":
    main()
