# SPDX-License-Identifier: BSD-3-Clause
"""Tests of the ``sparseclust topics`` command, run in-process on tiny generated corpora."""

import gzip
import json
import math
import re
import subprocess
import sys

import numpy as np
import pytest

from sparseclust.cli import _split_documents, main

N_TOPICS = 3
BLOCK = 6  # words per planted topic


def planted_counts(n_docs=60, seed=0):
    """Each document draws its tokens from one or two of three disjoint word blocks."""
    rng = np.random.default_rng(seed)
    V = N_TOPICS * BLOCK
    X = np.zeros((n_docs, V), dtype=np.int64)
    for d in range(n_docs):
        topics = rng.choice(N_TOPICS, size=rng.integers(1, 3), replace=False)
        for _ in range(40):
            k = rng.choice(topics)
            X[d, k * BLOCK + rng.integers(BLOCK)] += 1
    return X


def vocab_words():
    names = [
        "sun",
        "moon",
        "star",
        "comet",
        "orbit",
        "planet",
        "bread",
        "cheese",
        "butter",
        "flour",
        "yeast",
        "oven",
        "guitar",
        "violin",
        "piano",
        "drums",
        "flute",
        "cello",
    ]
    assert len(names) == N_TOPICS * BLOCK
    return names


def write_uci(folder, X, name="tiny", gz=False, vocab=True):
    rows, cols = np.nonzero(X)
    lines = [str(X.shape[0]), str(X.shape[1]), str(len(rows))]
    lines += [f"{d + 1} {v + 1} {X[d, v]}" for d, v in zip(rows, cols, strict=True)]
    text = "\n".join(lines) + "\n"
    path = folder / f"docword.{name}.txt{'.gz' if gz else ''}"
    if gz:
        with gzip.open(path, "wt") as fh:
            fh.write(text)
    else:
        path.write_text(text)
    if vocab:
        (folder / f"vocab.{name}.txt").write_text("\n".join(vocab_words()) + "\n")
    return path


def block_of(word):
    return vocab_words().index(word) // BLOCK


def run(argv, capsys):
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def heldout_score(out):
    m = re.search(r"held-out document completion: (-?\d+\.\d+)", out)
    assert m is not None, out
    return float(m.group(1))


# ---------------------------------------------------------------------------------------


def test_topics_on_uci_corpus_recovers_planted_blocks(tmp_path, capsys):
    X = planted_counts()
    path = write_uci(tmp_path, X, gz=True)
    out_json = tmp_path / "result.json"
    code, out, err = run(
        [
            "topics",
            str(path),
            "--n-topics",
            "3",
            "--local-step",
            "variational",
            "--L",
            "2",
            "--max-iter",
            "15",
            "--top-n",
            "4",
            "--seed",
            "1",
            "--output",
            str(out_json),
        ],
        capsys,
    )
    assert code == 0, err
    assert "Topics (K=3, L=2)" in out
    score = heldout_score(out)
    # planted topics give each held-out token probability ~1/6 (one block of 6 words) at
    # best; a model that learned nothing predicts ~1/18
    assert math.isfinite(score) and score > math.log(1 / 18) + 0.3
    assert "UMass coherence" in out and "timings: load" in out
    payload = json.loads(out_json.read_text())
    assert payload["corpus"]["n_documents"] == 60
    assert payload["corpus"]["n_heldout"] == 6
    assert payload["scores"]["heldout_document_completion"] == pytest.approx(score, abs=1e-4)
    topics = payload["topics"]
    assert len(topics) == 3
    # vocabulary read from the sibling vocab.tiny.txt; every topic is one planted block
    blocks = set()
    for t in topics:
        assert len(t["words"]) == 4
        b = {block_of(w) for w in t["words"]}
        assert len(b) == 1, t["words"]
        blocks |= b
    assert blocks == {0, 1, 2}
    assert sum(t["share"] for t in topics) == pytest.approx(1.0)
    assert all(math.isfinite(t["coherence"]) for t in topics)
    assert payload["timings"]["fit"] > 0


def test_topics_hdp_default_truncation_is_the_estimators(tmp_path, capsys):
    # without --n-topics the HDP starts from HDPTopicModel's own truncation (capped at the
    # number of documents), not from the LDA default of 20 topics, which would cap what it
    # can learn
    from sparseclust import HDPTopicModel
    from sparseclust.cli import _HDP_TRUNCATION

    assert _HDP_TRUNCATION == HDPTopicModel().max_components
    X = planted_counts(n_docs=40)
    path = write_uci(tmp_path, X)
    code, out, err = run(
        ["topics", str(path), "--model", "hdp", "--L", "3", "--max-iter", "3", "--top-n", "4",
         "--seed", "0", "-q"],
        capsys,
    )
    assert code == 0, err
    assert "learned from a truncation of 40" in out  # min(200, 40 documents)
    code, out, err = run(
        ["topics", str(path), "--L", "3", "--max-iter", "3", "--top-n", "4", "--seed", "0",
         "-q", "--output", str(tmp_path / "lda.json")],
        capsys,
    )
    assert code == 0, err
    assert json.loads((tmp_path / "lda.json").read_text())["n_topics"] == 20


def test_topics_hdp_learns_the_planted_number_of_topics(tmp_path, capsys):
    X = planted_counts(n_docs=120)
    path = write_uci(tmp_path, X)
    out_json = tmp_path / "hdp.json"
    code, out, err = run(
        ["topics", str(path), "--model", "hdp", "--n-topics", "10", "--L", "3",
         "--max-iter", "20", "--top-n", "4", "--seed", "0", "-q", "--output", str(out_json)],
        capsys,
    )
    assert code == 0, err
    payload = json.loads(out_json.read_text())
    assert payload["model"] == "HDPTopicModel"
    # three planted blocks, from a truncation of 10 topics
    assert payload["n_topics"] == 3, out
    assert "learned from a truncation of 10" in out
    blocks = set()
    for t in payload["topics"]:
        b = {block_of(w) for w in t["words"]}
        assert len(b) == 1, t["words"]
        blocks |= b
    assert blocks == {0, 1, 2}
    assert heldout_score(out) > math.log(1 / 18) + 0.3


def test_topics_sem_recovers_the_planted_blocks(tmp_path, capsys):
    X = planted_counts(n_docs=120)
    path = write_uci(tmp_path, X)
    out_json = tmp_path / "sem.json"
    code, out, err = run(
        ["topics", str(path), "--model", "sem", "--n-topics", "3", "--max-iter", "50",
         "--top-n", "4", "--seed", "0", "--output", str(out_json)],
        capsys,
    )
    assert code == 0, err
    payload = json.loads(out_json.read_text())
    assert payload["model"] == "StochasticEMLDA"
    assert "L" not in payload["params"] and payload["params"]["algorithm"] == "batch"
    assert "log joint" in err and "stochastic-EM sweeps" in out and "(50 sweeps)" in out
    blocks = set()
    for t in payload["topics"]:
        b = {block_of(w) for w in t["words"]}
        assert len(b) == 1, t["words"]
        blocks |= b
    assert blocks == {0, 1, 2}
    assert heldout_score(out) > math.log(1 / 18) + 0.3
    assert len(payload["trace"]) == 50 and "log_joint" in payload["trace"][0]


def test_topics_sem_online_and_l_warning(tmp_path, capsys):
    path = write_uci(tmp_path, planted_counts(n_docs=60))
    code, out, err = run(
        ["topics", str(path), "--model", "sem", "--n-topics", "3", "--L", "2", "--algorithm",
         "stochastic", "--batch-size", "20", "--max-iter", "3", "-q"],
        capsys,
    )
    assert code == 0, err
    assert "--L does not apply" in err
    assert "online stochastic-EM minibatch steps" in out


def test_topics_on_text_folder(tmp_path, capsys):
    X = planted_counts(n_docs=30, seed=3)
    words = vocab_words()
    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    for d, row in enumerate(X):
        text = " ".join(w for w, c in zip(words, row, strict=True) for _ in range(c))
        # "the" and "and" are English stop words and must not become topic words
        target = folder / ("sub" if d % 2 else "") / f"doc{d:02d}.txt"
        target.write_text("The and " + text + "\n")
    (folder / "notes.md").write_text("ignored: not a .txt file zebra zebra zebra")
    code, out, err = run(
        [
            "topics",
            str(folder),
            "-k",
            "3",
            "--max-iter",
            "10",
            "--quiet",
            "--heldout-fraction",
            "0.2",
        ],
        capsys,
    )
    assert code == 0, err
    assert err == ""  # --quiet: no progress, no status
    assert math.isfinite(heldout_score(out))
    topic_lines = [ln for ln in out.splitlines() if re.match(r"^\s+\d+\s+\d+\.\d%", ln)]
    assert len(topic_lines) == 3
    shown = set(" ".join(topic_lines).split())
    assert "the" not in shown and "zebra" not in shown
    assert shown & set(words)


def test_topics_on_ldac_with_vocab(tmp_path, capsys):
    X = planted_counts(n_docs=40, seed=5)
    lines = []
    for row in X:
        nz = np.flatnonzero(row)
        lines.append(" ".join([str(len(nz))] + [f"{v}:{row[v]}" for v in nz]))
    path = tmp_path / "corpus.ldac"
    path.write_text("\n".join(lines) + "\n")
    vocab = tmp_path / "words.txt"
    vocab.write_text("\n".join(vocab_words()) + "\n")
    out_json = tmp_path / "o.json"
    code, out, err = run(
        [
            "topics",
            str(path),
            "--vocab",
            str(vocab),
            "-k",
            "3",
            "--max-iter",
            "8",
            "-q",
            "--algorithm",
            "stochastic",
            "--batch-size",
            "10",
            "-o",
            str(out_json),
        ],
        capsys,
    )
    assert code == 0, err
    payload = json.loads(out_json.read_text())
    assert payload["params"]["algorithm"] == "stochastic"
    assert payload["params"]["batch_size"] == 10
    assert all(w in vocab_words() for t in payload["topics"] for w in t["words"])


def test_uci_without_vocab_uses_word_ids(tmp_path, capsys):
    path = write_uci(tmp_path, planted_counts(n_docs=30), vocab=False)
    code, out, err = run(
        ["topics", str(path), "-k", "2", "--max-iter", "3", "-q", "--heldout-fraction", "0"],
        capsys,
    )
    assert code == 0, err
    assert "word" in out
    assert "held-out document completion" not in out  # fraction 0 skips the score


def test_default_corpus_is_bundled_kos(capsys):
    code, out, err = run(
        ["topics", "-k", "4", "--max-iter", "2", "--L", "2", "--top-n", "5"], capsys
    )
    assert code == 0, err
    assert "KOS" in err and "3430 documents" in err
    assert math.isfinite(heldout_score(out))
    # progress on stderr, one line per pass (stderr is not a terminal under pytest)
    assert re.search(r"pass\s+1\b", err) and re.search(r"pass\s+2\b", err)


def test_progress_bar_is_fed_by_the_fit_callback(tmp_path, capsys, monkeypatch):
    import sparseclust.topics
    from sparseclust.topics import SparseLDA

    calls = []

    class WithCallback(SparseLDA):
        def fit(self, X, y=None, callback=None):
            super().fit(X)
            for entry in self.trace_:  # replay the passes through the callback
                info = dict(entry, n_passes=self.max_iter)
                calls.append(callback(info))
            return self

    monkeypatch.setattr(sparseclust.topics, "SparseLDA", WithCallback)
    path = write_uci(tmp_path, planted_counts(n_docs=30))
    code, out, err = run(["topics", str(path), "-k", "2", "--max-iter", "3"], capsys)
    assert code == 0, err
    assert calls and not any(calls)  # the bar never asks to stop
    assert re.search(r"^\[WithCallback\] pass 1/3  ELBO", err, re.M)


def test_split_documents_is_seeded_and_disjoint():
    tr, te = _split_documents(50, 0.1, seed=3)
    assert len(te) == 5 and len(tr) == 45
    assert not set(tr) & set(te) and set(tr) | set(te) == set(range(50))
    tr2, te2 = _split_documents(50, 0.1, seed=3)
    assert te.tolist() == te2.tolist()
    assert _split_documents(50, 0.1, seed=4)[1].tolist() != te.tolist()
    assert len(_split_documents(50, 0.0, seed=0)[1]) == 0


# ---------------------------------------------------------------------------------------
# errors: exit status 2 with a message


@pytest.mark.parametrize(
    "argv, message",
    [
        (["topics", "/definitely/not/here.txt"], "no such file or directory"),
        (["topics", "{tmp}/data.csv"], "unrecognised corpus format"),
        (
            ["topics", "{tmp}/docword.x.txt", "--vocab", "{tmp}/missing.txt"],
            "vocabulary file not found",
        ),
        (["topics", "{tmp}/docword.bad.txt"], "cannot read corpus"),
        (["topics", "{tmp}/docword.x.txt", "-k", "500"], "exceeds the number of documents"),
        (["topics", "{tmp}/docword.x.txt", "--top-n", "1"], "--top-n must be at least 2"),
        (
            [
                "topics",
                "{tmp}/docword.x.txt",
                "--output",
                "{tmp}/no/such/dir/o.json",
                "--max-iter",
                "1",
            ],
            "cannot write",
        ),
        (["topics", "--vocab", "{tmp}/vocab.x.txt"], "--vocab needs a corpus PATH"),
    ],
)
def test_errors_exit_2(tmp_path, capsys, argv, message):
    write_uci(tmp_path, planted_counts(n_docs=20), name="x")
    (tmp_path / "data.csv").write_text("a,b\n1,2\n")
    (tmp_path / "docword.bad.txt").write_text("2\n3\n1\n1 9 1\n")  # word id out of range
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    code, out, err = run(argv + ["-q"], capsys)
    assert code == 2
    assert message in err
    assert err.startswith("sparseclust: error:")


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["topics", "--n-topics", "0"],
        ["topics", "--heldout-fraction", "1.5"],
        ["topics", "--threads", "0"],
        ["topics", "--algorithm", "gibbs"],
        ["nonsense"],
    ],
)
def test_usage_errors_exit_2(capsys, argv):
    code, out, err = run(argv, capsys)
    assert code == 2
    assert "usage:" in err


def test_help_and_version_exit_0(capsys):
    assert main(["--version"]) == 0
    assert "sparseclust" in capsys.readouterr().out
    assert main(["topics", "--help"]) == 0
    assert "--n-topics" in capsys.readouterr().out


def test_python_dash_m_entry_point(tmp_path):
    # run outside the repository: `python -m` puts the working directory first on sys.path,
    # and the repository's sources are not the built package
    proc = subprocess.run(
        [sys.executable, "-m", "sparseclust", "topics", "/no/such/corpus"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,  # a guard against a hang; a loaded machine can take minutes to import
    )
    assert proc.returncode == 2
    assert "no such file or directory" in proc.stderr


# ---------------------------------------------------------------------------------------
# text lines, binary input, warnings, baseline, convergence, saved outputs


def _lines_corpus(path, X):
    words = vocab_words()
    lines = [" ".join(w for w, c in zip(words, row, strict=True) for _ in range(c)) for row in X]
    lines[4] = ""  # an empty document keeps its row
    lines[0] = "The and " + lines[0]  # stop words
    path.write_text("\n".join(lines) + "\n")
    return lines


def test_topics_on_one_document_per_line(tmp_path, capsys):
    X = planted_counts(n_docs=40, seed=7)
    path = tmp_path / "posts.txt"
    lines = _lines_corpus(path, X)
    theta_path = tmp_path / "theta.csv"
    model_path = tmp_path / "model.pkl"
    code, out, err = run(
        ["topics", str(path), "-k", "3", "--max-iter", "20", "--seed", "2", "--top-n", "4",
         "--doc-topics", str(theta_path), "--save-model", str(model_path)],
        capsys,
    )
    assert code == 0, err
    assert "one document per line" in err and "40 documents" in err
    theta = np.loadtxt(theta_path, delimiter=",", skiprows=1)
    assert theta.shape == (len(lines), 3)
    np.testing.assert_allclose(theta.sum(1), 1.0, rtol=1e-5)
    from sklearn.pipeline import Pipeline

    import sparseclust

    pipe = sparseclust.load(model_path, expected=Pipeline)
    model = pipe.named_steps["model"]
    assert isinstance(model, sparseclust.SparseLDA)
    from sparseclust.datasets import load_text_lines

    X_lines = load_text_lines(path).data
    # the saved vectorizer counts the lines as the training corpus was counted
    assert (pipe.named_steps["vectorizer"].transform(lines) != X_lines).nnz == 0
    # the saved matrix is the saved model's transform of every line, in order
    np.testing.assert_allclose(theta, model.transform(X_lines), rtol=1e-5, atol=1e-6)
    # every topic is one planted block
    blocks = [{block_of(w) for w in ws} for ws in
              [[w for w in ln.split()[2:] if w in vocab_words()]
               for ln in out.splitlines() if re.match(r"^\s+\d+\s+\d+\.\d%", ln)]]
    assert all(len(b) == 1 for b in blocks) and set().union(*blocks) == {0, 1, 2}


def test_doc_topics_npy_and_bad_suffix(tmp_path, capsys):
    path = write_uci(tmp_path, planted_counts(n_docs=30))
    npy = tmp_path / "theta.npy"
    code, out, err = run(["topics", str(path), "-k", "2", "--max-iter", "3", "-q",
                          "--doc-topics", str(npy)], capsys)
    assert code == 0, err
    assert np.load(npy).shape == (30, 2)
    code, out, err = run(["topics", str(path), "-q", "--doc-topics", str(tmp_path / "t.xlsx")],
                         capsys)
    assert code == 2 and "expected a file ending in .npy" in err


def test_heldout_score_has_a_unigram_baseline(tmp_path, capsys):
    from sparseclust.metrics import document_completion_score, split_document_types

    X = planted_counts(n_docs=60, seed=8)
    path = write_uci(tmp_path, X)
    out_json = tmp_path / "o.json"
    code, out, err = run(["topics", str(path), "-k", "3", "--max-iter", "15", "-q", "--seed",
                          "4", "-o", str(out_json)], capsys)
    assert code == 0, err
    payload = json.loads(out_json.read_text())
    base = payload["scores"]["heldout_unigram_baseline"]
    assert f"unigram baseline on the same held-out words: {base:.4f}" in out
    # the baseline by hand: held-out words of the same split, scored by the smoothed training
    # word frequencies
    train_idx, test_idx = _split_documents(60, 0.1, 4)
    counts = X[train_idx].sum(0) + 0.1
    p = counts / counts.sum()
    import scipy.sparse as sp

    Xt = sp.csr_array(X[test_idx].astype(float))
    _, held, _ = split_document_types(Xt, heldout_fraction=0.2, random_state=4)
    manual = float((held.data * np.log(p[held.indices])).sum() / held.data.sum())
    assert base == pytest.approx(manual, rel=1e-9)
    assert base == pytest.approx(
        document_completion_score(p[None, :], Xt, random_state=4, doc_topic_prior=1.0)
    )
    # planted topics beat the unigram model
    assert payload["scores"]["heldout_document_completion"] > base + 0.3


def test_convergence_is_reported(tmp_path, capsys):
    path = write_uci(tmp_path, planted_counts(n_docs=40))
    out_json = tmp_path / "o.json"
    code, out, err = run(["topics", str(path), "-k", "3", "--max-iter", "200", "--tol", "1e-3",
                          "-q", "-o", str(out_json)], capsys)
    assert code == 0, err
    payload = json.loads(out_json.read_text())
    assert payload["converged"] and payload["n_iter"] < 200
    assert f"converged after {payload['n_iter']} passes" in out
    assert payload["last_elbo_change_per_token"] < 1e-3
    code, out, err = run(["topics", str(path), "-k", "3", "--max-iter", "2", "--tol", "1e-9",
                          "-q"], capsys)
    assert code == 0 and "without converging" in out and "ConvergenceWarning" not in err


def test_warnings_for_missing_vocabulary_and_clamped_L(tmp_path, capsys):
    path = write_uci(tmp_path, planted_counts(n_docs=30), vocab=False)
    code, out, err = run(["topics", str(path), "-k", "3", "--L", "5", "--max-iter", "2", "-q",
                          "--heldout-fraction", "0", "--local-step", "variational"], capsys)
    assert code == 0, err
    assert "warning: no vocabulary" in err and "vocab.tiny.txt" in err
    assert "warning: --L 5 exceeds --n-topics 3: using L = 3" in err
    assert "Topics (K=3, L=3)" in out
    # --L with the default gibbs step: it does not apply, and the output has no L
    code, out, err = run(["topics", str(path), "-k", "3", "--L", "2", "--max-iter", "2", "-q",
                          "--heldout-fraction", "0"], capsys)
    assert code == 0, err
    assert "warning: --L applies to --local-step variational only" in err
    assert "Topics (K=3)" in out and "ran the 2 passes asked for (tol = 0" in out
    # no warning for the default L with few topics, nor with a vocabulary
    path = write_uci(tmp_path, planted_counts(n_docs=30), name="v")
    code, out, err = run(["topics", str(path), "-k", "3", "--max-iter", "2", "-q"], capsys)
    assert code == 0 and "warning" not in err


@pytest.mark.parametrize("name", ["docword.bin.txt", "blob.dat", "posts.txt", "folder"])
def test_binary_input_is_refused(tmp_path, capsys, name):
    blob = bytes(range(256)) * 8
    if name == "folder":
        (tmp_path / "folder").mkdir()
        (tmp_path / "folder" / "a.txt").write_text("fine text")
        (tmp_path / "folder" / "b.txt").write_bytes(blob)
        target = tmp_path / "folder"
    else:
        target = tmp_path / name
        target.write_bytes(gzip.compress(blob) if name.endswith(".dat") else blob)
    code, out, err = run(["topics", str(target), "-q"], capsys)
    assert code == 2
    assert "looks like a binary file" in err and "NUL bytes" in err


def test_left_to_right_and_npmi_on_request(tmp_path, capsys):
    import scipy.sparse as sp

    from sparseclust.metrics import left_to_right_score, npmi_coherence

    X = planted_counts(n_docs=60, seed=3)
    path = write_uci(tmp_path, X)
    out_json = tmp_path / "o.json"
    model_path = tmp_path / "m.pkl"
    argv = ["topics", str(path), "-k", "3", "--max-iter", "15", "-q", "--seed", "2",
            "--top-n", "4", "-o", str(out_json), "--save-model", str(model_path)]
    code, out, err = run(argv + ["--left-to-right", "5", "--npmi"], capsys)
    assert code == 0, err
    payload = json.loads(out_json.read_text())
    scores = payload["scores"]
    l2r = scores["heldout_left_to_right"]
    assert f"held-out left-to-right log-likelihood: {l2r:.4f}" in out
    assert scores["left_to_right_particles"] == 5 and scores["heldout_left_to_right_std"] > 0
    assert f"NPMI coherence (top 4 words, training documents): " \
           f"mean {scores['npmi_coherence_mean']:.3f}" in out
    # the same numbers by the library on the same split and model
    import sparseclust

    model = sparseclust.load(model_path).named_steps["model"]
    train_idx, test_idx = _split_documents(60, 0.1, 2)
    Xs = sp.csr_array(X.astype(float))
    expected = left_to_right_score(model, Xs[test_idx], n_particles=5, random_state=2)
    assert l2r == pytest.approx(expected, rel=1e-12)
    npmi = npmi_coherence(model, Xs[train_idx], top_n=4)
    got = {t["index"]: t["npmi"] for t in payload["topics"]}
    np.testing.assert_allclose([got[k] for k in range(3)], npmi, rtol=1e-12)
    # planted blocks: topics' top words co-occur, and the topics beat the unigram model
    assert scores["npmi_coherence_mean"] > 0
    assert l2r > math.log(1 / 18) + 0.3
    # without the options: neither is computed
    code, out, err = run(argv, capsys)
    assert code == 0, err
    scores = json.loads(out_json.read_text())["scores"]
    assert scores["heldout_left_to_right"] is None and scores["npmi_coherence_mean"] is None
    assert "left-to-right" not in out and "NPMI" not in out
    # asked for, but without held-out documents to score: an error, not a silent null
    code, out, err = run(argv + ["--left-to-right", "5", "--heldout-fraction", "0"], capsys)
    assert code != 0 and "--left-to-right scores the held-out documents" in err


def test_html_report_matches_the_json_record_and_the_model(tmp_path, capsys):
    import html as html_mod
    import json

    import sparseclust

    path = write_uci(tmp_path, planted_counts(n_docs=60))
    rep, js, mod = tmp_path / "r.html", tmp_path / "r.json", tmp_path / "m.model"
    code, out, err = run(
        ["topics", str(path), "-k", "3", "--max-iter", "15", "--seed", "1", "--top-n", "5",
         "--report", str(rep), "--output", str(js), "--save-model", str(mod)],
        capsys,
    )
    assert code == 0, err
    page = rep.read_text(encoding="utf-8")
    record = json.loads(js.read_text())
    model = sparseclust.load(mod).named_steps["model"]
    phi = model.topic_word_distribution_
    vocab = vocab_words()
    # self-contained: no script, nothing fetched from elsewhere
    assert "<script" not in page and "http://" not in page.replace(
        "http://www.w3.org/2000/svg", "") and "https://" not in page
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    # the scores of the record, the training trace as a drawn line
    assert f"{record['scores']['heldout_document_completion']:.4f}" in page
    assert f"{record['scores']['heldout_unigram_baseline']:.4f}" in page
    assert "<polyline" in page and page.count("<circle") == len(record["trace"])
    # every topic with its words, in the record's order, each word with its probability
    pos = 0
    for topic in record["topics"]:
        for w in topic["words"]:
            p = phi[topic["index"], vocab.index(w)]
            cell = (f"<span class='word'>{html_mod.escape(w)}</span></td><td>"
                    f"<span class='bar' style='width:")
            pos = page.index(cell, pos)
            assert f"<td class='num'>{p:.3f}</td>" in page[pos:pos + 200]


def test_report_plots_the_objective_per_training_token(tmp_path, capsys, monkeypatch):
    from sparseclust import _report

    path = write_uci(tmp_path, planted_counts(n_docs=60))
    js, rep = tmp_path / "r.json", tmp_path / "r.html"
    seen = {}
    original = _report._trace_svg

    def spy(xs, ys, xlabel, ylabel):
        seen.update(ys=ys, label=ylabel)
        return original(xs, ys, xlabel, ylabel)

    monkeypatch.setattr(_report, "_trace_svg", spy)
    code, out, err = run(["topics", str(path), "-k", "3", "--max-iter", "4", "--seed", "2",
                          "--heldout-fraction", "0.3", "-q", "--output", str(js),
                          "--report", str(rep)], capsys)
    assert code == 0, err
    record = json.loads(js.read_text())
    X = planted_counts(n_docs=60)
    train, test = _split_documents(60, 0.3, 2)
    n_train = float(X[train].sum())
    assert record["corpus"]["n_train_tokens"] == n_train < record["corpus"]["n_tokens"]
    assert seen["label"] == "ELBO per training token"
    np.testing.assert_allclose(seen["ys"], [e["elbo"] / n_train for e in record["trace"]])


def test_seed_out_of_range_is_a_usage_error(tmp_path, capsys):
    path = write_uci(tmp_path, planted_counts(n_docs=30))
    for seed in ("-1", str(2**32)):
        code, out, err = run(["topics", str(path), "--seed", seed], capsys)
        assert code == 2
        assert "expected a seed from 0 to 2**32 - 1" in err


def test_online_sem_progress_counts_passes(tmp_path, capsys):
    path = write_uci(tmp_path, planted_counts(n_docs=40))
    code, out, err = run(["topics", str(path), "--model", "sem", "--algorithm", "stochastic",
                          "--batch-size", "8", "-k", "3", "--max-iter", "3"], capsys)
    assert code == 0, err
    lines = [ln.split()[1:3] for ln in err.splitlines()
             if ln.startswith("[StochasticEMLDA] pass ")]
    assert lines == [["pass", "1/3"], ["pass", "2/3"], ["pass", "3/3"]], err
    assert "nan" not in err


def test_heldout_lines_count_the_documents_scored(tmp_path, capsys):
    # blank lines are empty documents and one-word lines cannot be split: the held-out lines
    # say how many documents each score is over
    rng = np.random.default_rng(0)
    words = vocab_words()
    lines = []
    for i in range(60):
        if i % 3 == 0:
            lines.append("")
        elif i % 3 == 1:
            lines.append(words[i % len(words)])
        else:
            lines.append(" ".join(rng.choice(words, 12)))
    path = tmp_path / "posts.txt"
    path.write_text("\n".join(lines) + "\n")
    code, out, err = run(["topics", str(path), "-k", "2", "--max-iter", "3", "-q",
                          "--heldout-fraction", "0.5", "--left-to-right", "2",
                          "--output", str(tmp_path / "o.json")], capsys)
    assert code == 0, err
    from sparseclust.datasets import load_text_lines

    X = load_text_lines(path).data
    _, test = _split_documents(60, 0.5, 0)
    types = np.asarray((X[test] > 0).sum(axis=1)).ravel()
    n_split, n_nonempty = int((types >= 2).sum()), int((types >= 1).sum())
    assert 0 < n_split < n_nonempty < len(test)
    assert (f"({n_split} of the {len(test)} held-out documents (those with 2 or more word "
            "types)") in out
    assert f"({n_nonempty} of the {len(test)} held-out documents (those not empty)" in out
    corpus = json.loads((tmp_path / "o.json").read_text())["corpus"]
    assert (corpus["n_heldout_scored"], corpus["n_heldout_nonempty"]) == (n_split, n_nonempty)


def test_options_that_do_not_apply(tmp_path, capsys):
    # --format / --min-df without a PATH (the bundled corpus takes neither): an error
    for extra in (["--format", "ldac"], ["--min-df", "5"]):
        code, out, err = run(["topics", "-k", "2", "--max-iter", "1", *extra], capsys)
        assert code == 2
        assert "describe a corpus PATH" in err
    # --n-batches with --model sem: a warning
    path = write_uci(tmp_path, planted_counts(n_docs=30))
    code, out, err = run(["topics", str(path), "--model", "sem", "-k", "3", "--max-iter", "2",
                          "--n-batches", "3", "-q"], capsys)
    assert code == 0, err
    assert "warning: --n-batches does not apply to --model sem" in err
    # training documents that are all empty: an error, not a fit on no tokens
    two = tmp_path / "two.txt"
    two.write_text("sun moon star\n\n")
    # a seed whose training document is the blank line (row 1)
    seed = next(s for s in range(100) if _split_documents(2, 0.5, s)[0].tolist() == [1])
    code, out, err = run(["topics", str(two), "-k", "1", "--heldout-fraction", "0.5",
                          "--seed", str(seed)], capsys)
    assert code == 2
    assert "training documents are all empty" in err
