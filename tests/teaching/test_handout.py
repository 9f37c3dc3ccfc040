"""The students' hand-out (`make assignments`) locates itself: from a new shell inside the folder (no COVLIB_*
variable), covlib finds the folder's covlib.toml, writes its outputs there and reads the data copied beside the
notebooks, in a fresh virtual environment holding nothing but the covlib wheel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from covlib.core import paths
from covlib.data.readers import SHARED_FILES

course = pytest.importorskip("teaching.course")

# In the hand-out folder, what the exercise notebooks load (01, 02: adversarial HotpotQA and its few-shot pool;
# 02, 08, 09: the offline corpus; 04: the HotpotQA sample; 08, 09: NQ-open and WebQuestions).
LOADS = """
from covlib import data
from covlib.core import paths
print(paths.root(), paths.data_dir(), sep="\\n")
data.load_adv_hotpotqa(split="test"); data.load_fewshot("hotpotqa"); data.load_fewshot_answers()
data.default_corpus(); data.load_hotpotqa(); data.load_nq_open(); data.load_web_questions()
"""

# Run in the fresh venv, which has covlib without its dependencies: paths alone, and every hand-out data file opened.
CHECK = """
import json, sys
from covlib.core import paths
opened = {}
for parts in json.loads(sys.argv[1]):
    with open(paths.dataset_path(*parts), encoding="utf-8") as handle:
        opened["/".join(parts)] = len(handle.read())
print(json.dumps({"module": paths.__file__, "root": str(paths.root()), "data": str(paths.data_dir()),
                  "cache": str(paths.cache_dir()), "models": str(paths.models_dir()), "opened": opened}))
"""


def new_shell(extra_path: Path | None = None) -> dict[str, str]:
    """A new terminal's environment: no COVLIB_* variable, no PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COVLIB_") and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join(([str(extra_path)] if extra_path else []) + ["/usr/bin", "/bin"])
    return env


def test_handout_holds_its_data_and_config_and_the_notebooks_load_from_a_new_shell(tmp_path):
    out = tmp_path / "handout"
    course.write_assignments(out, wheel=False)
    assert (out / paths.CONFIG_NAME).read_text() == course.HANDOUT_CONFIG
    for name in course.HANDOUT_DATA:
        assert (out / "data" / Path(*SHARED_FILES[name])).is_file(), name
    assert (out / "data" / "README.md").is_file()  # sources and licences travel with the data
    readme = (out / "README.md").read_text()
    assert f"torch=={course.torch_version()} --index-url https://download.pytorch.org/whl/cpu" in readme
    assert "export COVLIB" not in readme  # covlib.toml says it
    done = subprocess.run([sys.executable, "-c", LOADS], cwd=out, env=new_shell(), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[:2] == [str(out.resolve()), str((out / "data").resolve())]


@pytest.mark.slow
def test_handout_locates_itself_in_a_fresh_venv_from_a_new_shell(tmp_path):
    out = tmp_path / "handout"
    course.write_assignments(out)
    wheel = next(out.glob("covlib-*.whl"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    python = venv / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index",
                    str(wheel)], check=True, timeout=120)
    files = json.dumps([list(SHARED_FILES[name]) for name in course.HANDOUT_DATA])
    # as a student types it: cd into the folder, activate, run python; nothing exported
    shell = 'cd "$1" && . "$2/bin/activate" && python -c "$3" "$4"'
    done = subprocess.run(["bash", "-c", shell, "-", str(out), str(venv), CHECK, files], env=new_shell(),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout)
    assert Path(found["module"]).is_relative_to(venv)  # the wheel's covlib, not the repository's
    handout = out.resolve()
    assert found["root"] == str(handout) and found["data"] == str(handout / "data")
    assert found["cache"] == str(handout / ".cache") and found["models"] == str(handout / ".cache" / "models")
    assert len(found["opened"]) == len(course.HANDOUT_DATA) and all(found["opened"].values())
    # the same shell outside the hand-out: no covlib.toml, so not the hand-out's folders
    done = subprocess.run(["bash", "-c", shell, "-", str(tmp_path), str(venv), CHECK, "[]"], env=new_shell(),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["data"] != str(handout / "data")
