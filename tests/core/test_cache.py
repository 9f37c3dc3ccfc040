"""The call cache (covlib.core.cache): a broken, truncated, read-only or uncreatable cache says which file and what to do."""

from __future__ import annotations

import os

import pytest

from covlib.core import paths
from covlib.core.cache import Cache, CacheError, cached_batch


def test_garbage_or_a_folder_at_the_cache_path_says_what_to_do(tmp_path):
    garbage = tmp_path / "calls.sqlite"
    garbage.write_bytes(b"not a database " * 100)
    with pytest.raises(CacheError, match=r"calls.sqlite.*not a usable SQLite cache.*delete the file"):
        Cache(garbage).get("k")
    with pytest.raises(CacheError, match="is a folder, not a SQLite file"):
        Cache(tmp_path).get("k")


def test_truncated_cache_names_the_file_and_remedy(tmp_path):
    good = Cache(tmp_path / "good.sqlite")
    good.put_many({str(i): "value " * 200 for i in range(500)})
    good.close()
    blob = (tmp_path / "good.sqlite").read_bytes()
    (tmp_path / "cut.sqlite").write_bytes(blob[: len(blob) // 3])
    with pytest.raises(CacheError, match=r"cut.sqlite.*malformed.*delete the file"):
        cut = Cache(tmp_path / "cut.sqlite")
        [cut.get(str(i)) for i in range(500)]


def test_finished_cache_reads_in_a_read_only_setting(tmp_path, monkeypatch):
    cache = Cache(tmp_path / "calls.sqlite", table="lm")
    cache.put_many({"a": 1, "b": [1.5, "x"]})
    cache.close()
    monkeypatch.setenv("COVLIB_CACHE_READONLY", "1")
    shared = Cache(tmp_path / "calls.sqlite", table="lm")
    assert shared.readonly and shared.get_many(["a", "b", "c"]) == {"a": 1, "b": [1.5, "x"]} and len(shared) == 2
    with pytest.raises(CacheError, match="read-only.*1 new results are not in it"):
        shared.put("c", 3)
    assert Cache(tmp_path / "other.sqlite").get("a") is None  # no file yet: nothing cached, nothing created
    assert not (tmp_path / "other.sqlite").exists()


def test_cached_batch_serves_hits_and_runs_the_misses_once_in_order(tmp_path):
    """The one cached-batch helper of the LM, the HTTP backend and the NLI judges: hits come from the cache without
    the model, the misses (each key once, first job kept, in order) go to one call, and what it yields is stored."""
    cache = Cache(tmp_path / "calls.sqlite", table="lm")
    cache.put("k1", "CACHED")
    calls: list[dict[str, str]] = []

    def shout(todo: dict[str, str]):  # the "model": one call for all the misses, one batch per two jobs
        calls.append(dict(todo))
        items = list(todo.items())
        for start in range(0, len(items), 2):
            yield {key: text.upper() for key, text in items[start : start + 2]}

    jobs = [("k3", "three"), ("k1", "one"), ("k2", "two"), ("k3", "three again"), ("k4", "four")]
    found = cached_batch(cache, jobs, shout)
    assert calls == [{"k3": "three", "k2": "two", "k4": "four"}] and list(calls[0]) == ["k3", "k2", "k4"]
    assert found == {"k1": "CACHED", "k2": "TWO", "k3": "THREE", "k4": "FOUR"}
    assert cache.get_many(["k2", "k3", "k4"]) == {"k2": "TWO", "k3": "THREE", "k4": "FOUR"}  # stored
    assert cached_batch(cache, jobs, shout) == found and len(calls) == 1  # every key a hit: no model call


def test_cached_batch_keeps_finished_batches_of_a_failed_call_and_refuses_read_only(tmp_path, monkeypatch):
    cache = Cache(tmp_path / "calls.sqlite", table="lm")

    def first_then_fail(todo: dict[str, int]):
        yield {"a": todo["a"] * 10}
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError, match="killed"):
        cached_batch(cache, [("a", 1), ("b", 2)], first_then_fail)
    assert cache.get_many(["a", "b"]) == {"a": 10}  # the finished batch was committed; the next run resumes
    monkeypatch.setenv("COVLIB_CACHE_READONLY", "1")
    ran: list[dict] = []
    with pytest.raises(CacheError, match="read-only.*1 new results are not in it"):
        cached_batch(cache, [("a", 1), ("b", 2)], lambda todo: ran.append(todo) or [])
    assert not ran, "refused before the model runs"
    assert cached_batch(cache, [("a", 1)], lambda todo: ran.append(todo) or []) == {"a": 10}


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    from covlib.generation import LM

    return LM(cache=Cache(tmp_path_factory.mktemp("lm") / "calls.sqlite", table="lm"), batch_size=4)


def test_notebook_rerun_is_served_from_a_read_only_cache(lm, monkeypatch):
    from covlib.generation import LM

    done = lm.generate(["Question: Who wrote Hamlet?\nAnswer:"], max_new_tokens=6, progress=False)
    monkeypatch.setenv("COVLIB_CACHE_READONLY", "1")
    shared = LM(cache=Cache(lm.cache.path, table="lm"))
    assert shared.generate(["Question: Who wrote Hamlet?\nAnswer:"], max_new_tokens=6, progress=False) == done
    with pytest.raises(CacheError, match="read-only.*1 new results are not in it"):
        shared.generate(["Question: Who wrote Macbeth?\nAnswer:"], max_new_tokens=6, progress=False)
    assert shared.forward_calls == 0  # refused before any model work


def test_cache_in_a_read_only_folder_reads_and_refuses_writes(tmp_path):
    """A folder this process cannot write to. As root (this machine, CI), permissions are enforced by dropping
    root's override capabilities with setpriv for the child process."""
    import shutil
    import subprocess
    import sys

    folder = tmp_path / "shared"
    folder.mkdir()
    cache = Cache(folder / "calls.sqlite")
    cache.put("a", 1)
    cache.close()
    prefix: list[str] = []
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("running as root without setpriv: permissions cannot be enforced")
        prefix = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]
    script = f"""
from covlib.core.cache import Cache, CacheError, cached_batch
done = Cache({str(folder / "calls.sqlite")!r})
missing = Cache({str(folder / "missing.sqlite")!r})
print(done.readonly, done.get("a"), missing.readonly, missing.get("a"))
try:
    missing.put("b", 2)
except CacheError as err:
    print("refused:", err)
"""
    folder.chmod(0o555)
    try:
        out = subprocess.run([*prefix, sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                             cwd=paths.code_root())
    finally:
        folder.chmod(0o755)
    assert out.returncode == 0, out.stderr
    first, refused = out.stdout.strip().splitlines()
    assert first == "True 1 True None" and "is read-only" in refused and "1 new results" in refused
    assert not (folder / "missing.sqlite").exists()


def test_cache_folder_that_cannot_be_created_is_an_error(tmp_path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(CacheError, match="cannot create its folder"):
        Cache(tmp_path / "afile" / "sub" / "calls.sqlite").get("a")


def test_full_disk_says_the_cache_is_intact_and_to_free_space(tmp_path):
    """SQLite's own SQLITE_FULL ("database or disk is full"), raised for real by capping the file's page count."""
    cache = Cache(tmp_path / "calls.sqlite")
    cache.put_many({"done": [1.0, 2.0]})
    cache._db().execute("PRAGMA max_page_count = 1")  # the file may not grow: the next sizeable write is SQLITE_FULL
    with pytest.raises(CacheError) as err:
        cache.put_many({str(i): "value " * 500 for i in range(50)})
    message = str(err.value)
    assert str(tmp_path / "calls.sqlite") in message and "disk is full" in message
    assert "intact" in message and "kept" in message and "Free space" in message
    assert "not a usable" not in message and "delete the file" not in message
    assert Cache(tmp_path / "calls.sqlite").get_many(["done", "0"]) == {"done": [1.0, 2.0]}  # finished work kept
    cache._db().execute("PRAGMA max_page_count = 1000000")  # space freed: the same cache object writes again
    cache.put("new", 1)
    cache.close()
    assert Cache(tmp_path / "calls.sqlite").get_many(["done", "new"]) == {"done": [1.0, 2.0], "new": 1}


def test_full_disk_reported_at_the_connection_says_the_same(tmp_path, monkeypatch):
    """Whatever the statement, an OperationalError "database or disk is full" gets the full-disk message."""
    import sqlite3

    class FullConnection:
        def __init__(self, conn):
            self._conn = conn

        def executemany(self, *args):
            raise sqlite3.OperationalError("database or disk is full")

        def __getattr__(self, name):
            return getattr(self._conn, name)

    connect = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda *a, **kw: FullConnection(connect(*a, **kw)))
    with pytest.raises(CacheError, match=r"calls.sqlite: writing failed \(database or disk is full\); the disk is full"
                                         r".*intact.*kept.*Free space"):
        Cache(tmp_path / "calls.sqlite").put("a", 1)


def _overwrite(cache: Cache, key: str, value) -> None:
    import json

    db = cache._db()
    db.execute(f"UPDATE {cache.table} SET value = ? WHERE key = ?", (json.dumps(value), key))
    db.commit()



def test_wrong_shaped_lm_entries_name_the_file_table_and_remedy(lm):
    from covlib.generation import LM

    keys = lambda: {k for (k,) in lm.cache._db().execute("SELECT key FROM lm")}  # noqa: E731
    before = keys()
    prompt = "Question: What colour is the sky?\nAnswer:"
    lm.generate([prompt], max_new_tokens=4, progress=False)
    (gen_key,) = keys() - before
    before = keys()
    lm.score([prompt], [" Blue"], progress=False)
    (score_key,) = keys() - before
    good = lm.cache.get(gen_key)
    where = rf"{lm.cache.path}, table 'lm': entry (?s:.*)make clean-cache(?s:.*)delete this entry(?s:.*)COVLIB_CACHE"
    try:
        for wrong in ({**good, "tokens": {"0": "x"}}, [good["text"]], {**good, "logprob": 1.0}, "text"):
            _overwrite(lm.cache, gen_key, wrong)
            with pytest.raises(CacheError, match=where):
                LM(cache=Cache(lm.cache.path, table="lm")).generate([prompt], max_new_tokens=4, progress=False)
        for wrong in ([-1.5], {"value": -1.5}, None):
            _overwrite(lm.cache, score_key, wrong)
            with pytest.raises(CacheError, match=where):
                LM(cache=Cache(lm.cache.path, table="lm")).score([prompt], [" Blue"], progress=False)
    finally:
        lm.cache._db().execute("DELETE FROM lm WHERE key IN (?, ?)", (gen_key, score_key))
        lm.cache._db().commit()


def test_wrong_shaped_nli_entries_name_the_file_table_and_remedy(isolated_cache):
    from covlib import nli
    from covlib.nli.scoring import CACHE_TABLE

    premises, hypotheses = ["The sky is blue.", "Grass is green."], ["The sky has a colour.", "Grass is red."]
    good = nli.probabilities(premises, hypotheses, judge="overlap", progress=False)
    cache = Cache(table=CACHE_TABLE)
    assert cache.path.parent == isolated_cache
    key = next(k for (k,) in cache._db().execute(f"SELECT key FROM {CACHE_TABLE}"))
    where = rf"{cache.path}, table 'nli': entry {key} has the wrong shape(?s:.*)make clean-cache"
    for wrong in ({"entailment": 0.2, "neutral": 0.5, "contradiction": 0.3}, [0.2, 0.8], [[0.2], 0.5, 0.3], "0.2"):
        _overwrite(cache, key, wrong)  # a dict for a list, a ragged or short row: TypeError or numpy's error before
        with pytest.raises(CacheError, match=where):
            nli.probabilities(premises, hypotheses, judge="overlap", progress=False)
    cache.clear()
    assert (nli.probabilities(premises, hypotheses, judge="overlap", progress=False) == good).all()  # recomputed


_FILE_SIZE_LIMITED_WRITER = """
import sys
from covlib.core.cache import Cache, CacheError, cached_batch
try:
    Cache(sys.argv[1]).put_many({str(i): "value " * 500 for i in range(200)})
    print("no error")
except CacheError as err:
    print(err)
"""


def _write_under_file_size_limit(path, limit: int) -> str:
    """What a real process whose RLIMIT_FSIZE (`ulimit -f`) is `limit` bytes prints when it writes to the cache."""
    import resource
    import signal
    import subprocess
    import sys
    from pathlib import Path

    def limited():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, not a signal
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-B", "-c", _FILE_SIZE_LIMITED_WRITER, str(path)], preexec_fn=limited,
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


def _integrity(path) -> str:
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        return "; ".join(row[0] for row in conn.execute("PRAGMA integrity_check"))
    finally:
        conn.close()


@pytest.mark.skipif(os.name != "posix", reason="RLIMIT_FSIZE is POSIX")
def test_file_size_limit_keeps_the_intact_cache_and_names_the_limit(tmp_path):
    """SQLite reports EFBIG (`ulimit -f`) as "disk I/O error": the cache is intact, so it must not advise deleting."""
    path = tmp_path / "calls.sqlite"
    done = {f"done{i}": [float(i), "finished"] for i in range(20)}
    cache = Cache(path)
    cache.put_many(done)
    cache.close()
    message = _write_under_file_size_limit(path, 64 * 1024)  # 64 KiB: the -shm fits, the batch's WAL frames do not
    assert message.startswith(f"cache {path}: writing failed (")
    assert "file-size limit" in message and "ulimit -f" in message and "65,536 bytes" in message
    assert "intact" in message and "kept" in message and "do not delete it" in message
    assert "delete the file" not in message and "not a usable" not in message
    assert _integrity(path) == "ok"
    resumed = Cache(path)  # without the limit, the next run resumes from what was committed and finishes
    assert resumed.get_many(done) == done
    resumed.put_many({str(i): "value " * 500 for i in range(200)})
    assert len(resumed) == 220 and _integrity(path) == "ok"
    resumed.close()


def _damage_an_overflow_page(path) -> None:
    """Point one overflow page of an old entry at a page that does not exist: real damage that a new write does not
    touch, but that PRAGMA quick_check finds."""
    blob = bytearray(path.read_bytes())
    page_size = int.from_bytes(blob[16:18], "big")
    for start in range(page_size, len(blob), page_size):
        if blob[start + 4 : start + 40] in (b"old " * 9, b"ld o" * 9, b"d ol" * 9, b" old" * 9):
            blob[start : start + 4] = (2**31 - 1).to_bytes(4, "big")
            path.write_bytes(bytes(blob))
            return
    raise AssertionError("no overflow page found")


def test_a_full_write_on_a_damaged_cache_still_advises_deleting_it(tmp_path):
    """A write that finds no room on a file quick_check finds damaged gets the delete advice, naming the damage."""
    path = tmp_path / "calls.sqlite"
    cache = Cache(path)
    cache.put_many({f"old{i}": "old " * 3000 for i in range(10)})  # 12 KB values: each spills onto overflow pages
    cache.close()
    _damage_an_overflow_page(path)
    assert _integrity(path) != "ok"
    cache = Cache(path)
    pages = cache._db().execute("PRAGMA page_count").fetchall()[0][0]
    cache._db().execute(f"PRAGMA max_page_count = {pages}")  # the file may not grow: SQLITE_FULL, a lack of room
    with pytest.raises(CacheError) as err:
        cache.put_many({str(i): "value " * 500 for i in range(50)})
    message = str(err.value)
    assert "database or disk is full" in message and "quick_check" in message
    assert "not a usable SQLite cache" in message and "delete the file" in message and "intact" not in message
    cache.close()


def test_an_entries_table_of_another_schema_says_another_version_wrote_it(tmp_path, monkeypatch):
    import sqlite3

    path = tmp_path / "calls.sqlite"
    old = sqlite3.connect(path)
    old.execute("CREATE TABLE entries (id INTEGER PRIMARY KEY, k TEXT, v BLOB, created REAL)")
    old.execute("INSERT INTO entries (k, v, created) VALUES ('a', x'00', 0)")
    old.commit()
    old.close()
    message = (rf"cache {path}: its table 'entries' has the columns \(id, k, v, created\), not \(key, value\): the "
               r"file was written by another version of covlib\. Start a new cache: delete .*make clean-cache")
    with pytest.raises(CacheError, match=message):
        Cache(path).get("a")
    monkeypatch.setenv("COVLIB_CACHE_READONLY", "1")  # a shared copy, opened read-only: the same message
    with pytest.raises(CacheError, match=message):
        Cache(path).get_many(["a"])


def test_an_entry_that_is_not_json_is_a_miss_recomputed_with_a_warning(tmp_path):
    path = tmp_path / "calls.sqlite"
    cache = Cache(path, table="lm")
    cache.put_many({"good": [1.0], "bad": [2.0]})
    cache._db().execute("UPDATE lm SET value = ? WHERE key = 'bad'", ('[2.0, "trunc',))  # a torn or foreign write
    cache._db().commit()
    asked: list[str] = []
    with pytest.warns(UserWarning, match=rf"cache {path}, table 'lm': entry bad is not JSON \(.*\); it is treated as "
                                         "missing: recomputed and stored again"):
        found = cached_batch(cache, [("good", 1), ("bad", 2)], lambda todo: [{k: [float(j)] for k, j in todo.items()
                                                                              if not asked.append(k)}])
    assert found == {"good": [1.0], "bad": [2.0]} and asked == ["bad"]  # only the broken entry is computed again
    assert Cache(path, table="lm").get_many(["good", "bad"]) == {"good": [1.0], "bad": [2.0]}  # stored over it
