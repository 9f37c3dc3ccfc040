"""covlib.core.paths: environment variables, then the nearest covlib.toml, then the repository's defaults."""

from __future__ import annotations

import os
import sys

import pytest

from covlib.core import paths
from covlib.core.records import DataError

VARIABLES = ("COVLIB_ROOT", "COVLIB_DATA", "COVLIB_CACHE", "COVLIB_MODELS")


@pytest.fixture
def bare(monkeypatch):
    """No COVLIB_* variable set, as in a new shell."""
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def _handout(tmp_path, text='root = "."\ndata = "data"\n'):
    folder = tmp_path / "handout"
    (folder / "data").mkdir(parents=True)
    (folder / paths.CONFIG_NAME).write_text(text)
    return folder


def test_without_config_or_variables_the_repository_defaults_hold(bare, tmp_path):
    bare.chdir(tmp_path)
    assert paths.config_file() is None
    assert paths.root() == paths.code_root()
    assert paths.data_dir() == (paths.code_root().parent / "shared" / "data").resolve()
    assert paths.cache_dir() == paths.code_root() / ".cache"
    assert paths.models_dir() == paths.code_root() / ".cache" / "models"


def test_config_in_the_current_folder_or_a_parent_sets_root_and_data(bare, tmp_path):
    folder = _handout(tmp_path)
    inside = folder / "sub" / "deeper"
    inside.mkdir(parents=True)
    for where in (folder, inside):
        bare.chdir(where)
        assert paths.config_file() == folder / paths.CONFIG_NAME
        assert paths.root() == folder.resolve()
        assert paths.data_dir() == (folder / "data").resolve()
        assert paths.dataset_path("nq_open", "x.jsonl") == (folder / "data" / "nq_open" / "x.jsonl").resolve()
        assert paths.cache_dir() == folder.resolve() / ".cache"  # follows root
        assert paths.models_dir() == folder.resolve() / ".cache" / "models"
        assert paths.figures_dir() == folder.resolve() / "figures"


def test_environment_variables_win_over_the_config(bare, tmp_path):
    folder = _handout(tmp_path, 'root = "."\ndata = "data"\ncache = "c"\nmodels = "m"\n')
    bare.chdir(folder)
    assert paths.cache_dir() == (folder / "c").resolve() and paths.models_dir() == (folder / "m").resolve()
    bare.setenv("COVLIB_ROOT", str(tmp_path / "elsewhere"))
    bare.setenv("COVLIB_DATA", str(tmp_path / "otherdata"))
    bare.setenv("COVLIB_CACHE", str(tmp_path / "cache"))
    assert paths.root() == (tmp_path / "elsewhere").resolve()
    assert paths.data_dir() == (tmp_path / "otherdata").resolve()
    assert paths.cache_dir() == (tmp_path / "cache").resolve()
    assert paths.models_dir() == (folder / "m").resolve()  # not set in the environment: the file's
    assert "COVLIB_DATA" in paths.describe_data_dir()


def test_config_without_data_keeps_the_default_beside_its_root(bare, tmp_path):
    folder = _handout(tmp_path, 'root = "out"\n')
    bare.chdir(folder)
    assert paths.root() == (folder / "out").resolve()
    assert paths.data_dir() == (folder / "shared" / "data").resolve()


def test_a_bad_config_is_an_error_naming_the_file(bare, tmp_path):
    folder = _handout(tmp_path, 'root = "."\ndta = "data"\n')
    bare.chdir(folder)
    with pytest.raises(ValueError, match=r"covlib\.toml: unknown setting\(s\) dta"):
        paths.data_dir()
    (folder / paths.CONFIG_NAME).write_text("root = [1]\n")
    with pytest.raises(ValueError, match="root should be a path"):
        paths.root()


def test_the_python_310_reader_reads_what_make_assignments_writes(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "tomllib", None)  # import tomllib -> ImportError, as on Python 3.10
    text = '# a comment\nroot = "."  # outputs\n\ndata = "data"\n'
    assert paths._parse_toml(text, tmp_path / "covlib.toml") == {"root": ".", "data": "data"}
    with pytest.raises(ValueError, match="line 1"):
        paths._parse_toml("root = .\n", tmp_path / "covlib.toml")


def test_a_missing_data_file_says_how_to_set_the_data_folder(bare, tmp_path):
    from covlib import data

    bare.chdir(tmp_path)
    bare.setenv("COVLIB_ROOT", str(tmp_path / "nowhere"))
    with pytest.raises(DataError, match=r"file not found; the data folder is .*COVLIB_DATA.*covlib\.toml"):
        data.load_nq_open()
    folder = _handout(tmp_path)
    bare.delenv("COVLIB_ROOT")
    bare.chdir(folder)
    with pytest.raises(DataError, match=r"set by `data` in .*covlib\.toml"):
        data.load_nq_open()
    with pytest.raises(DataError, match=r"file not found$"):  # a path of the caller's own: no data-folder advice
        data.load_nq_open(tmp_path / "mine.jsonl")


def test_unwritable_names_the_first_folder_that_cannot_be_written_and_why(tmp_path):
    ok, blocked = tmp_path / "out" / "figures", tmp_path / "out" / "tables"
    blocked.parent.mkdir()
    blocked.write_text("a file where a folder should be")  # stops root as well as any other user
    assert paths.unwritable([ok, blocked, tmp_path / "later"]) == (
        f"{blocked} cannot be written: {blocked} is a file, not a folder")
    assert ok.is_dir() and not list(ok.iterdir())  # created, and the check's temporary file removed
    assert not (tmp_path / "later").exists()
    assert paths.unwritable([blocked / "executed"]).endswith(f"{blocked} is a file, not a folder")
    assert paths.unwritable([ok, tmp_path / "new" / "results"]) is None
    if os.geteuid() != 0:  # root writes through permission bits: a read-only folder stops only other users
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o555)
        try:
            assert paths.unwritable([locked]) == f"{locked} cannot be written: Permission denied"
        finally:
            locked.chmod(0o755)
