# SPDX-License-Identifier: BSD-3-Clause
"""Saved CLI models that know their words, ``sparseclust apply``, and the one-line errors for
empty input and vocabulary filters that remove every word."""

import subprocess
import sys

import numpy as np
import pytest
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.pipeline import Pipeline

import sparseclust
from sparseclust import SparseLDA
from sparseclust._saved import WordIdVocabulary, slim_copy, topic_pipeline
from sparseclust.cli import main
from sparseclust.datasets import load_text_folder

BLOCKS = (
    ["sun", "moon", "star", "comet", "orbit", "planet"],
    ["bread", "cheese", "butter", "flour", "yeast", "oven"],
    ["river", "lake", "ocean", "rain", "cloud", "storm"],
)


def _texts(n_docs, seed):
    rng = np.random.default_rng(seed)
    docs = []
    for _ in range(n_docs):
        block = BLOCKS[rng.integers(3)]
        words = [block[i] for i in rng.integers(len(block), size=25)]
        # stop words, punctuation and case: the vectorizer must treat them as in training
        docs.append("The " + ", ".join(words[:5]) + ". And " + " ".join(words[5:]).upper())
    return docs


def _folder(path, docs):
    path.mkdir()
    for i, doc in enumerate(docs):
        (path / f"doc{i:03d}.txt").write_text(doc)
    return path


def run(argv, capsys):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


FIT = ["-k", "3", "--max-iter", "5", "-q", "--seed", "1", "--heldout-fraction", "0"]


def test_saved_model_is_a_pipeline_that_counts_as_in_training(tmp_path, capsys):
    train = _folder(tmp_path / "train", _texts(30, 0))
    model_path = tmp_path / "m.model"
    code, _, err = run(["topics", train, *FIT, "--save-model", model_path], capsys)
    assert code == 0, err
    pipe = sparseclust.load(model_path, expected=Pipeline)
    assert list(pipe.named_steps) == ["vectorizer", "model"]
    vec, model = pipe.named_steps["vectorizer"], pipe.named_steps["model"]
    assert isinstance(vec, CountVectorizer) and isinstance(model, SparseLDA)
    assert getattr(vec, "stop_words_", None) is None  # introspection only, not saved
    # the saved vectorizer reproduces the training counts of the training documents
    bunch = load_text_folder(train, decode_error="replace")
    texts = [f.read_text() for f in sorted(train.glob("*.txt"))]
    assert (vec.transform(texts) != bunch.data).nnz == 0
    np.testing.assert_array_equal(vec.get_feature_names_out(), bunch.feature_names)
    theta = pipe.transform(texts)
    assert theta.shape == (30, 3)
    np.testing.assert_allclose(theta.sum(axis=1), 1.0, rtol=1e-6)


def test_slim_copy_drops_training_state_and_keeps_transform(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.poisson(1.0, size=(40, 18)).astype(float)
    for algorithm in ("memoized", "stochastic"):
        model = SparseLDA(3, max_iter=3, algorithm=algorithm, random_state=0).fit(X)
        live = dict(vars(model))
        pipe = topic_pipeline(WordIdVocabulary([f"w{j}" for j in range(18)]).fit(), model)
        sparseclust.save(slim_copy(pipe), tmp_path / "m")
        # the live model is untouched
        assert vars(model).keys() == live.keys()
        assert all(vars(model)[k] is v for k, v in live.items())
        back = sparseclust.load(tmp_path / "m")
        loaded = back.named_steps["model"]
        assert getattr(loaded, "_svi_state", None) is None
        np.testing.assert_array_equal(back.transform(X), model.transform(X))
        for name in ("components_", "exp_dirichlet_component_", "topic_word_distribution_"):
            np.testing.assert_array_equal(getattr(loaded, name), getattr(model, name))
        assert back.named_steps["vectorizer"].vocabulary_["w5"] == 5
        # the smaller file: no cached K x V arrays, no stochastic state
        slim_size = (tmp_path / "m").stat().st_size
        sparseclust.save(model, tmp_path / "full")
        assert slim_size < (tmp_path / "full").stat().st_size


def test_apply_text_folder_equals_the_pipeline_transform(tmp_path, capsys):
    train = _folder(tmp_path / "train", _texts(30, 0))
    new_docs = _texts(7, 5) + ["", "only unknown words zebra"]
    new = _folder(tmp_path / "new", new_docs)
    model_path, out = tmp_path / "m.model", tmp_path / "theta.npy"
    assert run(["topics", train, *FIT, "--save-model", model_path], capsys)[0] == 0
    code, stdout, err = run(["apply", model_path, new, "--out", out], capsys)
    assert code == 0, err
    assert "9 documents" in stdout and str(out) in stdout
    expected = sparseclust.load(model_path).transform(new_docs)
    np.testing.assert_array_equal(np.load(out), expected)
    # one document per line, CSV
    lines = tmp_path / "new.txt"
    lines.write_text("\n".join(new_docs[:7]) + "\n")
    csv = tmp_path / "theta.csv"
    code, _, err = run(["apply", model_path, lines, "-o", csv, "-q"], capsys)
    assert code == 0, err
    got = np.loadtxt(csv, delimiter=",", skiprows=1)
    np.testing.assert_allclose(got, expected[:7], rtol=1e-5, atol=1e-6)


def test_apply_round_trip_through_a_subprocess(tmp_path):
    train = _folder(tmp_path / "train", _texts(30, 0))
    new_docs = _texts(5, 9)
    new = _folder(tmp_path / "new", new_docs)
    model_path = tmp_path / "m.model"
    cmd = [sys.executable, "-m", "sparseclust"]
    # (in tmp_path: from the repository root, python -m would import the uncompiled sources)
    proc = subprocess.run(cmd + ["topics", str(train), *FIT, "--save-model", str(model_path)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    # default output: doc_topics.csv in the working directory
    proc = subprocess.run(cmd + ["apply", str(model_path), str(new)], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "doc_topics.csv" in proc.stdout
    got = np.loadtxt(tmp_path / "doc_topics.csv", delimiter=",", skiprows=1)
    expected = sparseclust.load(model_path).transform(new_docs)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def _write_uci(folder, X, words, name):
    rows, cols = np.nonzero(X)
    lines = [str(X.shape[0]), str(X.shape[1]), str(len(rows))]
    lines += [f"{d + 1} {v + 1} {int(X[d, v])}" for d, v in zip(rows, cols, strict=True)]
    path = folder / f"docword.{name}.txt"
    path.write_text("\n".join(lines) + "\n")
    (folder / f"vocab.{name}.txt").write_text("\n".join(words) + "\n")
    return path


def test_word_id_model_keeps_its_vocabulary_and_maps_new_words(tmp_path, capsys):
    words = [w for block in BLOCKS for w in block]
    rng = np.random.default_rng(3)
    X = rng.poisson(0.8, size=(40, len(words)))
    train = _write_uci(tmp_path, X, words, "train")
    model_path = tmp_path / "m.model"
    code, _, err = run(["topics", train, *FIT, "--save-model", model_path], capsys)
    assert code == 0, err
    pipe = sparseclust.load(model_path)
    vec = pipe.named_steps["vectorizer"]
    assert isinstance(vec, WordIdVocabulary)
    np.testing.assert_array_equal(vec.get_feature_names_out(), words)
    assert not hasattr(pipe.named_steps["model"], "feature_names_in_")
    # new documents with their own vocabulary: reversed order plus an unknown word
    new_words = words[::-1] + ["zebra"]
    Y = rng.poisson(0.8, size=(6, len(new_words)))
    Y[:, -1] = 2
    new = _write_uci(tmp_path, Y, new_words, "new")
    out = tmp_path / "t.npy"
    code, stdout, err = run(["apply", model_path, new, "--out", out], capsys)
    assert code == 0, err
    assert "12 tokens of words the model does not know" in stdout
    X_mapped = Y[:, :-1][:, ::-1].astype(float)
    np.testing.assert_array_equal(np.load(out), pipe.named_steps["model"].transform(X_mapped))
    # a text folder cannot be counted by a word-id model
    folder = _folder(tmp_path / "txt", ["sun moon"])
    code, _, err = run(["apply", model_path, folder], capsys)
    assert code == 2 and "fitted on word ids" in err


def _one_line_error(code, err, *needles):
    assert code == 2
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sparseclust: error:"), err
    for needle in needles:
        assert needle in lines[0], err


def test_empty_inputs_and_filters_that_remove_every_word(tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    _one_line_error(*run(["topics", empty, "-q"], capsys)[::2], str(empty), "empty")
    blank = tmp_path / "blank.txt"
    blank.write_text("\n\n  \n")
    _one_line_error(*run(["topics", blank, "-q"], capsys)[::2], str(blank), "empty")
    folder = tmp_path / "nothing"
    folder.mkdir()
    _one_line_error(*run(["topics", folder, "-q"], capsys)[::2], str(folder), "no .txt")
    (folder / "a.txt").write_text("")
    (folder / "b.txt").write_text("")
    _one_line_error(*run(["topics", folder, "-q"], capsys)[::2], str(folder), "empty")
    # only stop words
    stops = tmp_path / "stops.txt"
    stops.write_text("the and of\nit is a\n")
    _one_line_error(*run(["topics", stops, "-q"], capsys)[::2], str(stops), "stop words")
    # --min-df larger than the corpus, --max-df below every word's document frequency
    docs = _folder(tmp_path / "docs", _texts(6, 1))
    _one_line_error(*run(["topics", docs, "-q", "--min-df", "50"], capsys)[::2],
                    str(docs), "--min-df 50")
    _one_line_error(*run(["topics", docs, "-q", "--max-df", "0.01"], capsys)[::2],
                    str(docs), "--max-df 0.01")
    # --max-df takes a fraction or a count
    assert run(["topics", docs, "-q", "--max-df", "1.5"], capsys)[0] == 2
    assert run(["topics", docs, "-q", "--max-df", "0"], capsys)[0] == 2


def test_apply_refuses_what_the_cli_did_not_save(tmp_path, capsys):
    from sklearn.preprocessing import StandardScaler

    other = tmp_path / "scaler.model"
    sparseclust.save(StandardScaler().fit(np.ones((3, 2))), other)
    docs = _folder(tmp_path / "docs", ["sun moon"])
    _one_line_error(*run(["apply", other, docs], capsys)[::2], "StandardScaler",
                    "not a topic model saved by 'sparseclust topics --save-model'")
    junk = tmp_path / "junk.model"
    junk.write_bytes(b"not a model")
    _one_line_error(*run(["apply", junk, docs], capsys)[::2], "not a sparseclust model file")
    _one_line_error(*run(["apply", tmp_path / "missing", docs], capsys)[::2], "no such model")
    # a bare topic model (an earlier release's --save-model) has no words to count text with
    bare = tmp_path / "bare.model"
    sparseclust.save(SparseLDA(2, max_iter=2, tol=0).fit(np.ones((4, 3))), bare)
    capsys.readouterr()
    _one_line_error(*run(["apply", bare, docs], capsys)[::2], "without its vocabulary")
    # an empty DOCS file, an unknown --out suffix
    train = _folder(tmp_path / "train", _texts(20, 0))
    model_path = tmp_path / "m.model"
    assert run(["topics", train, *FIT, "--save-model", model_path], capsys)[0] == 0
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    _one_line_error(*run(["apply", model_path, empty], capsys)[::2], str(empty), "empty")
    _one_line_error(*run(["apply", model_path, docs, "--out", tmp_path / "t.json"],
                         capsys)[::2], "--out")


@pytest.mark.parametrize("fmt,model", [("folder", "lda"), ("lines", "lda"),
                                       ("lines", "hdp"), ("lines", "sem")])
def test_apply_on_the_training_documents_reproduces_fit_doc_topics(tmp_path, capsys, fmt,
                                                                    model):
    docs = _texts(25, 2)
    if fmt == "folder":
        path = _folder(tmp_path / "train", docs)
    else:
        path = tmp_path / "train.txt"
        path.write_text("\n".join(docs) + "\n")
    model_path, theta_fit, theta_apply = (tmp_path / "m", tmp_path / "a.npy",
                                          tmp_path / "b.npy")
    code, _, err = run(["topics", path, *FIT, "--model", model, "--save-model", model_path,
                        "--doc-topics", theta_fit], capsys)
    assert code == 0, err
    code, _, err = run(["apply", model_path, path, "-o", theta_apply, "-q"], capsys)
    assert code == 0, err
    np.testing.assert_array_equal(np.load(theta_apply), np.load(theta_fit))
