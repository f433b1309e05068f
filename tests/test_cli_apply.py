# SPDX-License-Identifier: BSD-3-Clause
"""Saved CLI models that know their words, and the one-line errors for empty input and
vocabulary filters that remove every word."""


import numpy as np
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
