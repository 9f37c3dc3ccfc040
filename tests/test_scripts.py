"""The command-line scripts (make reproduce, make judge) refuse bad arguments before any work and name a failing notebook and cell."""

from __future__ import annotations

import os

import pytest

from covlib.core import paths


@pytest.mark.parametrize("args, message", [
    (["--only", "00,99"], "no notebook numbered 99; choose from 00, 00b"),
    (["--model", "nq/x.jsnl"], "does not exist, and it is not a hub id"),
    (["--model", "scripts"], "model folder 'scripts' holds no config.json"),  # a folder, but no model's
    (["--device", "gpu"], "DEVICE='gpu': use cpu, cuda"),
    (["--profile", "bogus"], "unknown profile 'bogus'"),
    (["--judge", "no-such-judge"], "JUDGE='no-such-judge': "),
])
def test_reproduce_refuses_bad_arguments_before_any_notebook(args, message):
    import subprocess
    import sys

    script = paths.code_root() / "scripts" / "reproduce.py"
    done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and message in done.stderr and "===" not in done.stdout


def test_reproduce_names_an_output_folder_it_cannot_write_before_any_notebook(tmp_path):
    import subprocess
    import sys

    root = tmp_path / "root"
    root.mkdir()
    (root / "notebooks").write_text("a file where the executed notebooks' folder should be")  # blocks root too
    env = {**os.environ, "COVLIB_ROOT": str(root), "COVLIB_CACHE": str(tmp_path / "cache")}
    script = paths.code_root() / "scripts" / "reproduce.py"
    done = subprocess.run([sys.executable, str(script), "--only", "01", "--profile", "smoke", "--device", "cpu"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode != 0 and "===" not in done.stdout, done.stdout + done.stderr
    assert (f"{root / 'notebooks' / 'executed'} cannot be written: {root / 'notebooks'} is a file, not a folder"
            in done.stderr)
    assert "point COVLIB_ROOT at a writable folder" in done.stderr and "Traceback" not in done.stderr


def test_build_judge_refuses_bad_arguments_before_training():
    import subprocess
    import sys

    script = paths.code_root() / "scripts" / "build_judge.py"
    done = subprocess.run([sys.executable, str(script), "--name", "../x", "--batch-size", "0", "--val-fraction", "1.5"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    for part in ("--name '../x': a plain folder name", "--batch-size 0: must be >= 1", "--val-fraction 1.5"):
        assert part in done.stderr


@pytest.mark.notebook
def test_reproduce_names_the_failing_notebook_and_cell(tmp_path, monkeypatch):
    import subprocess
    import sys

    empty_model = tmp_path / "not-a-model"  # a folder with a config.json (the argument check's test), and no model
    empty_model.mkdir()
    (empty_model / "config.json").write_text("{}")
    env = {**os.environ, "COVLIB_ROOT": str(tmp_path), "COVLIB_DATA": str(paths.data_dir()),
           "COVLIB_MODELS": str(paths.models_dir()), "COVLIB_CACHE": str(tmp_path / "cache"), "MPLBACKEND": "Agg"}
    if not paths.dataset_path("hotpotqa_adv", "sim_dev.json").exists():
        pytest.skip(f"real data not found under {paths.data_dir()}")
    script = paths.code_root() / "scripts" / "reproduce.py"
    done = subprocess.run([sys.executable, str(script), "--only", "01", "--profile", "smoke", "--model", str(empty_model)],
                          capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode != 0
    assert "01_consistency_kde.ipynb failed in cell" in done.stderr and "Could not load model" in done.stderr
    assert "run the same command again to resume" in done.stderr


def test_the_decoder_benchmark_runs_on_a_tiny_shape_and_its_paths_agree(tmp_path, monkeypatch):
    """`make bench`'s decoder benchmark (scripts/bench_decoder.py), on a random 2-layer model: covlib's decoder with
    and without the shared prefix, and at fixed shapes or not, gives the same sampled completions, and every figure is
    there beside the limit."""
    import importlib.util
    import json

    monkeypatch.setenv("COVLIB_CACHE", str(tmp_path / "cache"))
    spec = importlib.util.spec_from_file_location("bench_decoder", paths.code_root() / "scripts" / "bench_decoder.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    r = bench.run("tiny", "cpu", prompts=3, n=2, tokens=6, compare_graphs=True)
    assert r["identical_with_and_without_sharing"] is True
    assert r["same_texts_fixed_and_dynamic"] == 1.0 and r["greedy_steps_s_fixed"] > 0  # fixed shapes, eager on a CPU
    assert "against the dynamic path" in bench.report(r)
    assert all(r[k] > 0 for k in ("cot_sc_tok_s_shared", "cot_sc_tok_s_unshared", "hf_generate_tok_s", "greedy_steps_s"))
    assert r["limits"]["fp32_gemm_flops"] > 1e8 and 0 < r["cot_sc_share_of_gemm_peak"] < 1
    assert "% of it on CoT-SC" in bench.report(r)
    out = tmp_path / "bench.json"
    assert bench.main(["--device", "cpu", "--shapes", "tiny", "--prompts", "2", "--tokens", "4", "--json", str(out)]) == 0
    assert json.loads(out.read_text())[0]["shape"] == "tiny"
    with pytest.raises(ValueError, match="unknown shape"):
        bench.random_model("13b", "cpu", "float32")


def test_the_decoder_identity_checks_pass_on_a_tiny_shape_and_fail_when_a_path_differs(tmp_path, monkeypatch, capsys):
    """scripts/decoder_identity.py (what a GPU machine runs, the weights being random there): in fp32 the in-place cache,
    batching and the shared prefix change no completion; a decoder whose shared-prefix path differs is caught."""
    import importlib.util

    monkeypatch.setenv("COVLIB_CACHE", str(tmp_path / "cache"))
    spec = importlib.util.spec_from_file_location("decoder_identity", paths.code_root() / "scripts" / "decoder_identity.py")
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    assert check.main(["--shape", "tiny", "--prompts", "3", "--tokens", "8"]) == 0
    assert "FAILED" not in capsys.readouterr().out
    from covlib.generation import prefix

    real = prefix.cascade_attention
    monkeypatch.setattr(prefix, "cascade_attention", lambda *a, **k: (lambda o: (o[0] * 1.5, o[1]))(real(*a, **k))
                        if k.get("prefix_kv") is not None else real(*a, **k))
    monkeypatch.setattr(prefix, "CASCADE", "covlib_shared_prefix_broken")  # registered anew with the broken function
    assert check.main(["--shape", "tiny", "--prompts", "3", "--tokens", "8"]) == 1
    assert "FAILED" in capsys.readouterr().out


def test_the_decoder_identity_checks_catch_fixed_shape_decoding_that_differs(tmp_path, monkeypatch, capsys):
    """The fixed-shape path (CUDA graphs on a GPU) is checked against the dynamic one: a mask that lets each row attend
    to the whole cache buffer, the columns not written yet included, is caught."""
    import importlib.util

    from covlib.generation import decoding

    monkeypatch.setenv("COVLIB_CACHE", str(tmp_path / "cache"))
    spec = importlib.util.spec_from_file_location("decoder_identity", paths.code_root() / "scripts" / "decoder_identity.py")
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    real = decoding.fixed_state

    def shifted(*args, **kwargs):
        state = real(*args, **kwargs)
        state.state["mask"].fill_(True)
        return state

    monkeypatch.setattr(decoding, "fixed_state", shifted)
    assert check.main(["--shape", "tiny", "--prompts", "3", "--tokens", "8"]) == 1
    assert "fixed shapes - dynamic" in capsys.readouterr().out.split("FAILED")[0]


def test_reproduce_judge_reaches_the_notebooks_that_take_a_judge():
    """JUDGE=overlap: 04-07's oracle `judge`; 00b's judges with it in the trained judge's place; no other notebook."""
    import sys

    sys.path.insert(0, str(paths.code_root() / "scripts"))
    from reproduce import judge_parameters

    notebooks = paths.code_root() / "notebooks"
    assert judge_parameters(notebooks / "00b_nli_judges.ipynb", "overlap") == {"judges": "overlap,llm"}
    assert judge_parameters(notebooks / "00b_nli_judges.ipynb", "true") == {"judges": "true,overlap,llm"}
    for stem in ("04_credibility_models", "05_knowledge_precision", "06_knowledge_recall", "07_reflection_completion"):
        assert judge_parameters(notebooks / f"{stem}.ipynb", "overlap") == {"judge": "overlap"}
    assert judge_parameters(notebooks / "03_verify_and_edit_tables.ipynb", "overlap") == {}
    assert judge_parameters(notebooks / "04_credibility_models.ipynb", "") == {}  # no JUDGE: the notebook's default


@pytest.mark.notebook
def test_make_planted_runs_a_seed_again_when_other_code_wrote_it(tmp_path, monkeypatch):
    """`make planted` never tallies a seed of another version of the chain unasked: a ledger whose commit is not
    HEAD runs again (`--reuse` keeps it), the seed's executed notebooks stay in its own root, and planted.md names
    the commits."""
    import json
    import subprocess
    import sys

    from covlib.report import results

    if not paths.dataset_path("hotpotqa_adv", "sim_dev.json").exists():
        pytest.skip(f"real data not found under {paths.data_dir()}")
    script = [sys.executable, str(paths.code_root() / "scripts" / "planted.py"), "--seeds", "1", "--profile", "smoke",
              "--behaviours", "null", "--only", "12", "--out", str(tmp_path)]
    env = {**os.environ, "COVLIB_DATA": str(paths.data_dir()), "COVLIB_MODELS": str(paths.models_dir()),
           "COVLIB_CACHE": str(paths.cache_dir())}
    ledger = tmp_path / "smoke" / "null-1" / "results" / "12_claims.json"

    def run(*extra: str) -> str:
        done = subprocess.run([*script, *extra], env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        return done.stdout

    assert "sim:null@1:" in run() and (tmp_path / "smoke" / "null-1" / "notebooks" / "executed" / "12_claims.ipynb").is_file()
    head = results.git_commit()
    assert head in (tmp_path / "smoke" / "planted.md").read_text()
    record = json.loads(ledger.read_text())
    record["meta"]["git_commit"] = "0" * 40  # as if an older version of the chain wrote this seed
    ledger.write_text(json.dumps(record))
    assert "sim:null@1:" not in run("--reuse") and "0" * 40 in (tmp_path / "smoke" / "planted.md").read_text()
    assert "sim:null@1:" in run()  # run again by this code
    assert json.loads(ledger.read_text())["meta"]["git_commit"] == head


def _lab_script():
    """scripts/lab.py as a module (what `make lab` runs)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("lab", paths.code_root() / "scripts" / "lab.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_make_lab_passes_allow_root_only_as_root():
    """JupyterLab refuses to start as root (a container's usual user) without --allow-root."""
    lab = _lab_script()
    assert "--allow-root" in lab.command(root_user=True)
    assert "--allow-root" not in lab.command(root_user=False)


@pytest.mark.server
def test_make_lab_autosave_leaves_the_checkout_clean():
    """Opening and autosaving a notebook (outputs, an edited line) in `make lab` writes the git-ignored copy only: the
    tracked .ipynb and .py twins keep their bytes, `git status` is as before, and the browser lists one file each."""
    import json
    import shutil
    import socket
    import subprocess
    import time
    import urllib.request

    lab, root = _lab_script(), paths.code_root()
    folder = root / "build" / f"lab-test-{os.getpid()}"  # inside the repository, where its pyproject pairs formats
    tracked = {p: p.read_bytes() for p in (root / "notebooks").glob("[0-9]*_*.*")}
    status = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True).stdout
    copies = lab.prepare(folder)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        port = listener.getsockname()[1]
    server = subprocess.Popen([*lab.command(folder), "--no-browser", f"--port={port}", "--ServerApp.token=t0k",
                               "--ServerApp.port_retries=0"], cwd=folder, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}/api/contents/01_consistency_kde.ipynb?token=t0k"
    try:
        for _ in range(240):
            try:
                model = json.load(urllib.request.urlopen(url + "&content=1", timeout=5))
                break
            except OSError:
                assert server.poll() is None, server.stderr.read()[-3000:]
                time.sleep(0.5)
        cell = next(c for c in model["content"]["cells"] if c["cell_type"] == "code")
        cell["source"] += "\nprofile = 'smoke'  # an explorer's edit"
        cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "explored\n"}]
        cell["execution_count"] = 1
        put = urllib.request.Request(url, method="PUT", headers={"Content-Type": "application/json"},
                                     data=json.dumps({"type": "notebook", "format": "json",
                                                      "content": model["content"]}).encode())
        assert urllib.request.urlopen(put, timeout=30).status == 200
    finally:
        server.terminate()
        server.wait(timeout=30)
    try:
        assert {p: p.read_bytes() for p in tracked} == tracked
        assert subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True,
                              text=True).stdout == status
        assert "explored" in (folder / "01_consistency_kde.ipynb").read_text()  # the save landed, in the copy
        assert not list(folder.glob("*.py")) and len(copies) == len(list(folder.glob("*.ipynb")))
    finally:
        shutil.rmtree(folder)
