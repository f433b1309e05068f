# SPDX-License-Identifier: BSD-3-Clause
"""``sparseclust mixture X -k K``: labels and the saved model."""

import numpy as np

import sparseclust
from sparseclust.cli import main


def run(argv, capsys):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _blobs():
    rng = np.random.default_rng(0)
    return np.vstack([rng.normal(c, 0.3, size=(40, 2)) for c in ([0, 0], [5, 0], [0, 5])])


def test_mixture_writes_labels_and_a_model_that_predicts_them(tmp_path, capsys):
    X = _blobs()
    np.save(tmp_path / "x.npy", X)
    labels, model_path = tmp_path / "labels.csv", tmp_path / "gm.model"
    code, out, err = run(["mixture", tmp_path / "x.npy", "-k", "3", "--labels", labels,
                          "--save-model", model_path], capsys)
    assert code == 0, err
    assert "rows per component" in out and "150" not in out
    got = np.loadtxt(labels, skiprows=1, dtype=int)
    assert got.shape == (120,)
    # the three blobs are three clusters
    assert sorted(np.bincount(got).tolist()) == [40, 40, 40]
    model = sparseclust.load(model_path, expected=sparseclust.SparseGaussianMixture)
    np.testing.assert_array_equal(model.predict(X), got)
    assert getattr(model, "_svi_state", None) is None
    # the same data as CSV with a header line, labels as .npy
    np.savetxt(tmp_path / "x.csv", X, delimiter=",", header="a,b", comments="")
    code, _, err = run(["mixture", tmp_path / "x.csv", "-k", "3", "-q", "--labels",
                        tmp_path / "l.npy"], capsys)
    assert code == 0, err
    np.testing.assert_array_equal(np.load(tmp_path / "l.npy"), got)


def test_mixture_bad_input_is_one_line(tmp_path, capsys):
    X = _blobs()
    np.save(tmp_path / "x.npy", X)
    bad = X.copy()
    bad[3, 1] = np.nan
    np.save(tmp_path / "nan.npy", bad)
    (tmp_path / "empty.csv").write_text("")
    np.save(tmp_path / "flat.npy", X[:, 0])
    cases = [
        (["mixture", tmp_path / "x.npy", "-k", "500"], "exceeds the number of rows"),
        (["mixture", tmp_path / "nan.npy", "-k", "2"], "NaN"),
        (["mixture", tmp_path / "empty.csv", "-k", "2"], "empty"),
        (["mixture", tmp_path / "flat.npy", "-k", "2"], "2-D"),
        (["mixture", tmp_path / "x.json", "-k", "2"], "no such file"),
        (["mixture", tmp_path / "x.npy", "-k", "2", "--labels", tmp_path / "l.json"],
         "--labels"),
    ]
    for argv, needle in cases:
        code, _, err = run(argv, capsys)
        assert code == 2, (argv, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("sparseclust: error:"), err
        assert needle in lines[0], err


def test_mixture_shows_progress_unless_quiet(tmp_path, capsys):
    np.save(tmp_path / "x.npy", _blobs())
    code, _, err = run(["mixture", tmp_path / "x.npy", "-k", "3", "--max-iter", "3"], capsys)
    assert code == 0, err
    # stderr is not a terminal under pytest: one line per pass
    passes = [ln.split()[2] for ln in err.splitlines()
              if ln.startswith("[SparseGaussianMixture] pass ")]
    assert passes and passes == [f"{i}/3" for i in range(1, len(passes) + 1)], err
    code, _, err = run(["mixture", tmp_path / "x.npy", "-k", "3", "--max-iter", "3", "-q"],
                       capsys)
    assert code == 0 and "[SparseGaussianMixture]" not in err
