# SPDX-License-Identifier: BSD-3-Clause
"""Tests of sparseclust.datasets: bundled KOS corpus, bag-of-words readers, image patches."""

import gzip
import re
from collections import Counter
from importlib import resources

import numpy as np
import pytest
import scipy.sparse as sp

from sparseclust.datasets import (
    extract_patches,
    load_image_patches,
    load_kos,
    load_ldac,
    load_sample_patches,
    load_text_folder,
    load_text_lines,
    load_uci_bow,
    save_uci_bow,
)
from sparseclust.datasets._bow import (
    _MAX_DIGITS,
    _counts_matrix,
    _load_ldac,
    _load_uci,
    _parse_ldac_fast,
    _parse_uci_fast,
    _parse_uci_header,
    _tokenize,
)

DATA = resources.files("sparseclust.datasets").joinpath("data")


# --------------------------------------------------------------------------------------
# KOS
# --------------------------------------------------------------------------------------


def _plain_python_kos():
    """Independent parse of the bundled files: dict (doc, word) -> count, header, words."""
    with gzip.open(DATA.joinpath("docword.kos.txt.gz").open("rb"), "rt") as fh:
        lines = fh.read().splitlines()
    header = [int(x) for x in lines[:3]]
    entries = [tuple(int(x) for x in line.split()) for line in lines[3:] if line.strip()]
    words = DATA.joinpath("vocab.kos.txt").read_text().split()
    return header, entries, words


@pytest.fixture(scope="module")
def kos_reference():
    return _plain_python_kos()


def test_load_kos_matches_plain_python_parse(kos_reference):
    (D, W, NNZ), entries, words = kos_reference
    bunch = load_kos()
    X = bunch.data
    assert sp.issparse(X) and X.format == "csr"
    assert X.dtype == np.float64
    assert X.shape == (D, W) == (3430, 6906)
    assert X.nnz == NNZ == 353160 == len(entries)
    assert X.sum() == sum(c for _, _, c in entries) == 467714
    first, last = entries[0], entries[-1]
    assert X[first[0] - 1, first[1] - 1] == first[2]
    assert X[last[0] - 1, last[1] - 1] == last[2]
    arr = np.array(entries)
    np.testing.assert_array_equal(np.asarray(X[arr[:, 0] - 1, arr[:, 1] - 1]).ravel(), arr[:, 2])
    assert bunch.feature_names.dtype == object
    assert list(bunch.feature_names) == words
    assert "CC BY 4.0" in bunch.DESCR and "Newman" in bunch.DESCR


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
def test_load_kos_dtype(dtype):
    X = load_kos(dtype=dtype).data
    assert X.dtype == dtype
    assert X.sum() == 467714


def _reference_scan(body, allow_colon):
    """The scanner's language, written independently: only digits, blanks, newlines and
    (optionally) colons between two digits; numbers of at most _MAX_DIGITS digits."""
    import re

    allowed = rb"[0-9 \t\r\n:]*" if allow_colon else rb"[0-9 \t\r\n]*"
    if re.fullmatch(allowed, body) is None:
        return None
    if any(len(m.group()) > _MAX_DIGITS for m in re.finditer(rb"[0-9]+", body)):
        return None
    if allow_colon and re.search(rb"(?<![0-9]):|:(?![0-9])", body):
        return None
    found = list(re.finditer(rb"[0-9]+", body))
    return (np.array([int(m.group()) for m in found], dtype=np.int64),
            np.array([body.count(b"\n", 0, m.start()) for m in found], dtype=np.int64),
            np.array([m.start() > 0 and body[m.start() - 1:m.start()] == b":"
                      for m in found], dtype=bool))


def test_byte_scanner_accepts_exactly_its_language():
    rng = np.random.default_rng(0)
    alphabet = [b"0", b"1", b"5", b"9", b"00", b" ", b"\t", b"\r", b"\n", b":", b"x", b"-"]
    for _ in range(4000):
        weights = rng.dirichlet(np.full(len(alphabet), 0.5))
        body = b"".join(alphabet[i] for i in rng.choice(len(alphabet), rng.integers(0, 40),
                                                         p=weights))
        if rng.random() < 0.1:  # numbers around the longest allowed
            body += b"7" * int(rng.integers(_MAX_DIGITS - 2, _MAX_DIGITS + 3))
        for allow_colon in (False, True):
            got, ref = _tokenize(body, allow_colon), _reference_scan(body, allow_colon)
            if ref is None:
                assert got is None, (body, allow_colon)
                continue
            assert got is not None, (body, allow_colon)
            for g, r in zip(got, ref, strict=True):
                assert g.dtype == r.dtype
                np.testing.assert_array_equal(g, r)
    assert _tokenize(b"9" * _MAX_DIGITS, False)[0][0] == 10**_MAX_DIGITS - 1


def _reference_uci(body, D, W, prev_doc, in_order, max_entries):
    """The UCI block's rules, written line by line: three numbers or only blanks a line,
    1 <= doc <= D, 1 <= word <= W, count >= 1, docs non-decreasing from ``prev_doc`` (0-based)
    when ``in_order``, at most ``max_entries`` entries."""
    import re

    if re.fullmatch(rb"[0-9 \t\r\n]*", body) is None:
        return None
    docs, words, counts, last = [], [], [], -1
    for i, line in enumerate(body.split(b"\n")):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 3 or any(len(f) > _MAX_DIGITS for f in fields):
            return None
        d, w, c = (int(f) for f in fields)
        if not (1 <= d <= D and 1 <= w <= W and c >= 1) or len(docs) >= max_entries:
            return None
        if in_order and d - 1 < prev_doc:
            return None
        prev_doc = d - 1
        docs.append(d - 1), words.append(w - 1), counts.append(c)
        last = i
    return docs, words, counts, last


def test_uci_scanner_accepts_exactly_valid_entry_blocks():
    from sparseclust._kernels._text_scan import scan_uci

    rng = np.random.default_rng(1)
    pieces = [b"0", b"1", b"2", b"3", b"4", b"007", b" ", b"  ", b"\t", b"\r", b"x"]
    for trial in range(4000):
        lines = []
        for _ in range(rng.integers(0, 8)):
            n = rng.choice([0, 2, 4] + [3] * 12)  # numbers on the line
            nums = [str(int(rng.integers(0 if rng.random() < 0.05 else 1, 6))).encode()
                    for _ in range(n)]
            if rng.random() < 0.05:
                nums.append(b"9" * int(rng.integers(_MAX_DIGITS - 1, _MAX_DIGITS + 2)))
            lines.append(b" ".join(nums) + (rng.choice(pieces) if rng.random() < 0.05 else b""))
        body = b"\n".join(lines)
        D, W = int(rng.integers(3, 7)), int(rng.integers(3, 7))
        prev, in_order = int(rng.integers(-1, 2)), bool(trial % 2)
        cap = int(rng.integers(0, 12))
        got = scan_uci(np.frombuffer(body, dtype=np.uint8), D, W, prev, in_order, cap,
                       _MAX_DIGITS)
        ref = _reference_uci(body, D, W, prev, in_order, cap)
        if ref is None:
            assert got is None, body
            continue
        assert got is not None, body
        for g, r in zip(got[:3], ref[:3], strict=True):
            assert g.dtype == np.int64
            np.testing.assert_array_equal(g, np.array(r, dtype=np.int64))
        assert got[3] == ref[3]


def test_csr_layout_accepts_exactly_csr_ordered_entries():
    """The compiled layout equals numpy's (bincount of the rows, columns as int32) when the
    entries are in CSR order with rows in range, and refuses every other order."""
    from sparseclust._kernels._text_scan import csr_layout

    rng = np.random.default_rng(2)
    for trial in range(3000):
        n_rows, n = int(rng.integers(1, 8)), int(rng.integers(0, 12))
        rows = np.sort(rng.integers(-1 if trial % 7 == 0 else 0,
                                    n_rows + (1 if trial % 5 == 0 else 0), n))
        cols = rng.integers(-1 if trial % 11 == 0 else 0, 6, n)
        if trial % 2:  # mostly strictly increasing columns within a row
            order = np.lexsort((cols, rows))
            rows, cols = rows[order], cols[order]
        if trial % 13 == 0 and n > 1:
            rows = rows[::-1].copy()
        same = rows[1:] == rows[:-1]
        ok = bool((rows >= 0).all() and (rows < n_rows).all() and (rows[1:] >= rows[:-1]).all()
                  and (cols[1:][same] > cols[:-1][same]).all() and (cols >= 0).all())
        got = csr_layout(rows.astype(np.int64), cols.astype(np.int64), n_rows)
        if not ok:
            assert got is None, (rows, cols)
            continue
        assert got is not None, (rows, cols)
        indptr, indices = got
        assert indptr.dtype == indices.dtype == np.int32
        np.testing.assert_array_equal(
            indptr, np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n_rows))]))
        np.testing.assert_array_equal(indices, cols)


def test_kos_fast_and_line_by_line_parsers_agree():
    docword, vocab = DATA.joinpath("docword.kos.txt.gz"), DATA.joinpath("vocab.kos.txt")
    # the vectorized parser accepts the file on its own (no fallback)
    (D, W, nnz), body = _parse_uci_header(gzip.decompress(docword.read_bytes()), "kos")
    docs, words, counts = _parse_uci_fast(body, D, W, nnz)
    assert counts.sum() == 467714 and docs.max() == D - 1 and words.max() <= W - 1
    fast = _load_uci(docword, vocab)
    slow = _load_uci(docword, vocab, fast=False)
    assert (fast.data != slow.data).nnz == 0
    np.testing.assert_array_equal(fast.feature_names, slow.feature_names)


# --------------------------------------------------------------------------------------
# UCI bag of words
# --------------------------------------------------------------------------------------


def _random_counts(rng, shape=(23, 17), density=0.3):
    X = sp.random(*shape, density=density, random_state=rng, format="csr")
    X.data = rng.integers(1, 9, size=X.nnz).astype(np.float64)
    X = X.tolil()
    X[3, :] = 0  # an empty document
    X[:, -1] = 0
    X[5, -1] = 4  # last word used once
    return X.tocsr()


@pytest.mark.parametrize("suffix", ["txt", "txt.gz"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_uci_round_trip(tmp_path, suffix, dtype):
    rng = np.random.default_rng(0)
    X = _random_counts(rng)
    X_before = X.copy()
    words = [f"w{j}" for j in range(X.shape[1])]
    docword, vocab = tmp_path / f"docword.{suffix}", tmp_path / "vocab.txt"
    save_uci_bow(X, docword, vocab, feature_names=words)
    assert (X != X_before).nnz == 0
    raw = docword.read_bytes()
    assert (raw[:2] == b"\x1f\x8b") == suffix.endswith("gz")
    bunch = load_uci_bow(docword, vocab, dtype=dtype)
    assert bunch.data.dtype == dtype and bunch.data.shape == X.shape
    np.testing.assert_array_equal(bunch.data.toarray(), X.toarray())
    assert list(bunch.feature_names) == words
    assert load_uci_bow(docword).feature_names is None


def test_save_uci_bow_format_and_dense_input(tmp_path):
    X = np.array([[0, 2, 0], [0, 0, 0], [1, 0, 3]])
    path = tmp_path / "d.txt"
    save_uci_bow(X, path)
    assert path.read_text() == "3\n3\n3\n1 2 2\n3 1 1\n3 3 3\n"
    np.testing.assert_array_equal(load_uci_bow(path).data.toarray(), X)


def test_uci_duplicates_are_summed_and_blank_lines_ignored(tmp_path):
    path = tmp_path / "d.txt"
    path.write_text("2\n3\n4\n1 2 1\n\n2 3 5\n1 2 2\n2 1 1\n")
    expected = np.array([[0, 3, 0], [1, 0, 5]])
    np.testing.assert_array_equal(load_uci_bow(path).data.toarray(), expected)
    np.testing.assert_array_equal(_load_uci(path, fast=False).data.toarray(), expected)


def test_uci_crlf_line_endings(tmp_path):
    path = tmp_path / "d.txt"
    path.write_bytes(b"1\r\n2\r\n1\r\n1 2 7\r\n")
    np.testing.assert_array_equal(load_uci_bow(path).data.toarray(), [[0, 7]])


_GOOD = ["2", "3", "4", "1 1 1", "1 2 3", "2 1 2", "2 3 1"]


def _replace(lines, index, new):
    lines = list(lines)
    lines[index] = new
    return lines


UCI_MALFORMED = [
    # (lines, 1-based line of the error, message fragment)
    (_replace(_GOOD, 0, "two"), 1, "bad header"),
    (_replace(_GOOD, 1, "3 4"), 2, "bad header"),
    (_replace(_GOOD, 2, "-4"), 3, "bad header"),
    (["2", "3"], 3, "bad header"),
    (_replace(_GOOD, 4, "1 2"), 5, "expected 3 integers 'docID wordID count', got '1 2'"),
    (_replace(_GOOD, 5, "2 1 2 9"), 6, "expected 3 integers"),
    (_replace(_GOOD, 6, "2 x 1"), 7, "wordID is not an integer"),
    (_replace(_GOOD, 3, "1 1 1.5"), 4, "count is not an integer"),
    (_replace(_GOOD, 3, "+1 1 1"), 4, "docID is not an integer"),
    (_replace(_GOOD, 5, "3 1 2"), 6, "docID 3 out of range 1..2"),
    (_replace(_GOOD, 5, "0 1 2"), 6, "docID 0 out of range 1..2"),
    (_replace(_GOOD, 4, "1 4 3"), 5, "wordID 4 out of range 1..3"),
    (_replace(_GOOD, 6, "2 3 0"), 7, "count must be >= 1, got 0"),
    (_replace(_GOOD, 6, "2 3 -2"), 7, "count must be >= 1, got -2"),
    (_replace(_GOOD, 3, "1 1 1234567890123456789"), 4, "more than 18 digits"),
    (_GOOD + ["1 3 1"], 8, "more entries than the NNZ=4"),
    (_GOOD[:-1], 7, "file ends after 3 entries, but the header"),
    (_GOOD[:-1] + ["", ""], 7, "file ends after 3 entries"),
    (_replace(_GOOD, 2, "0"), 4, "more entries than the NNZ=0"),
    (_replace(_GOOD[:5] + [""] + _GOOD[5:], 7, "2 1"), 8, "expected 3 integers"),
]


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("lines, lineno, fragment", UCI_MALFORMED)
def test_uci_malformed_reports_file_and_line(tmp_path, lines, lineno, fragment, compress):
    text = ("\n".join(lines) + "\n").encode()
    path = tmp_path / ("docword.bad.txt" + (".gz" if compress else ""))
    path.write_bytes(gzip.compress(text) if compress else text)
    pattern = re.escape(f"{path}, line {lineno}:") + ".*" + re.escape(fragment)
    with pytest.raises(ValueError, match=pattern):
        load_uci_bow(path)
    with pytest.raises(ValueError, match=pattern):
        _load_uci(path, fast=False)


@pytest.mark.parametrize(
    "words, lineno, fragment",
    [
        (["a", "b"], 3, "ends after 2 words, but"),
        (["a", "b", "c", "d"], 4, "more words than the W=3"),
        (["a", "", "c"], 2, "empty word"),
        (["a", "b", "a"], 3, "'a' already on line 1"),
    ],
)
def test_uci_vocab_errors(tmp_path, words, lineno, fragment):
    docword, vocab = tmp_path / "docword.txt", tmp_path / "vocab.bad.txt"
    docword.write_text("\n".join(_GOOD) + "\n")
    vocab.write_text("\n".join(words) + "\n")
    pattern = re.escape(f"{vocab}, line {lineno}:") + ".*" + re.escape(fragment)
    with pytest.raises(ValueError, match=pattern):
        load_uci_bow(docword, vocab)


def test_uci_vocab_trailing_blank_lines_and_whitespace(tmp_path):
    docword, vocab = tmp_path / "docword.txt", tmp_path / "vocab.txt"
    docword.write_text("\n".join(_GOOD) + "\n")
    vocab.write_text("a\r\n b\nc\n\n\n")
    assert list(load_uci_bow(docword, vocab).feature_names) == ["a", "b", "c"]


@pytest.mark.parametrize("seed", range(6))
def test_uci_random_corruption_located(tmp_path, seed):
    """A valid file with one entry line replaced by garbage: that line is reported."""
    rng = np.random.default_rng(seed)
    path = tmp_path / "docword.txt"
    save_uci_bow(_random_counts(rng, shape=(40, 30)), path)
    lines = path.read_text().splitlines()
    k = int(rng.integers(3, len(lines)))
    garbage = ["7", "1 1", "a b c", "1 1 1 1", "1 99 1", "1 1 0", "1 1 -3", "1:1 1"]
    lines[k] = garbage[int(rng.integers(len(garbage)))]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=re.escape(f"{path}, line {k + 1}:")):
        load_uci_bow(path)


def test_uci_bad_arguments(tmp_path):
    path = tmp_path / "d.txt"
    path.write_text("\n".join(_GOOD) + "\n")
    with pytest.raises(ValueError, match="dtype"):
        load_uci_bow(path, dtype=object)
    path.write_bytes(b"\x1f\x8b not really gzip")
    with pytest.raises(ValueError, match="not a valid gzip file"):
        load_uci_bow(path)
    big = tmp_path / "big.txt"
    big.write_text("1\n1\n1\n1 1 300\n")
    with pytest.raises(ValueError, match="does not fit in dtype int8"):
        load_uci_bow(big, dtype=np.int8)


def test_save_uci_bow_rejects_bad_input(tmp_path):
    path = tmp_path / "d.txt"
    with pytest.raises(ValueError, match="non-negative"):
        save_uci_bow(np.array([[1.0, -1.0]]), path)
    with pytest.raises(ValueError, match="integer counts"):
        save_uci_bow(np.array([[1.5, 0.0]]), path)
    with pytest.raises(ValueError, match="together"):
        save_uci_bow(np.eye(2), path, feature_names=["a", "b"])
    with pytest.raises(ValueError, match="has 1 words but X has 2"):
        save_uci_bow(np.eye(2), path, tmp_path / "v.txt", ["a"])
    with pytest.raises(ValueError, match="line breaks"):
        save_uci_bow(np.eye(2), path, tmp_path / "v.txt", ["a", "b\nc"])
    with pytest.raises(ValueError, match="distinct"):
        save_uci_bow(np.eye(2), path, tmp_path / "v.txt", ["a", "a"])
    with pytest.raises(ValueError):
        save_uci_bow(np.array([[np.nan, 1.0]]), path)


# --------------------------------------------------------------------------------------
# LDA-C
# --------------------------------------------------------------------------------------


def _write_ldac_plain(X, path):
    """Reference writer in plain Python: one line 'N id:count ...' per document."""
    dense = np.asarray(X.toarray(), dtype=np.int64)
    with open(path, "w") as fh:
        for row in dense:
            pairs = [f"{j}:{c}" for j, c in enumerate(row) if c]
            fh.write(" ".join([str(len(pairs))] + pairs) + "\n")


@pytest.mark.parametrize("compress", [False, True])
def test_ldac_round_trip(tmp_path, compress):
    rng = np.random.default_rng(1)
    X = _random_counts(rng)
    plain = tmp_path / "corpus.ldac"
    _write_ldac_plain(X, plain)
    path = plain
    if compress:
        path = tmp_path / "corpus.ldac.gz"
        path.write_bytes(gzip.compress(plain.read_bytes()))
    bunch = load_ldac(path, n_features=X.shape[1])
    assert bunch.data.shape == X.shape and bunch.data.dtype == np.float64
    np.testing.assert_array_equal(bunch.data.toarray(), X.toarray())
    assert bunch.feature_names is None
    # without n_features: the largest id + 1 (last column is used by document 5)
    np.testing.assert_array_equal(load_ldac(path).data.toarray(), X.toarray())
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("".join(f"w{j}\n" for j in range(X.shape[1])))
    bunch = load_ldac(path, vocab, dtype=np.float32)
    assert bunch.data.dtype == np.float32 and bunch.feature_names[-1] == f"w{X.shape[1] - 1}"
    slow = _load_ldac(path, n_features=X.shape[1], fast=False)
    np.testing.assert_array_equal(slow.data.toarray(), X.toarray())
    body = plain.read_bytes().rstrip()
    docs, ids, counts = _parse_ldac_fast(body, X.shape[0])  # no fallback needed
    assert counts.sum() == X.sum() and np.unique(docs).size == np.diff(X.indptr).astype(bool).sum()


def test_ldac_empty_documents_duplicates_and_width(tmp_path):
    path = tmp_path / "c.ldac"
    path.write_text("2 0:1 2:3\n0\n3 1:1 1:4 0:2\n\n\n")
    expected = np.array([[1, 0, 3, 0, 0], [0, 0, 0, 0, 0], [2, 5, 0, 0, 0]])
    np.testing.assert_array_equal(load_ldac(path, n_features=5).data.toarray(), expected)
    np.testing.assert_array_equal(load_ldac(path).data.toarray(), expected[:, :3])
    assert load_ldac(path).data.shape == (3, 3)


_LDAC_GOOD = ["2 0:1 2:3", "0", "1 1:4"]

LDAC_MALFORMED = [
    (_replace(_LDAC_GOOD, 0, "3 0:1 2:3"), 1, "N=3 but the line holds 2 'id:count' pairs"),
    (_replace(_LDAC_GOOD, 1, "1"), 2, "N=1 but the line holds 0"),
    (_replace(_LDAC_GOOD, 2, "2 1:2:3 4"), 3, "expected a pair 'id:count', got '1:2:3'"),
    (_replace(_LDAC_GOOD, 2, "1 1 :4"), 3, "N=1 but the line holds 2"),
    (_replace(_LDAC_GOOD, 2, "1 1:"), 3, "count is not an integer"),
    (_replace(_LDAC_GOOD, 2, "1 a:4"), 3, "word id is not an integer"),
    (_replace(_LDAC_GOOD, 2, "x 1:4"), 3, "number of pairs N is not an integer"),
    (_replace(_LDAC_GOOD, 2, "1 1:0"), 3, "count must be >= 1, got 0"),
    (_replace(_LDAC_GOOD, 0, "2 0:1 -2:3"), 1, "word id must be >= 0"),
    (_replace(_LDAC_GOOD, 2, "1 7:4"), 3, "word id 7 out of range 0..4"),
    (_LDAC_GOOD[:1] + [""] + _LDAC_GOOD[1:], 2, "empty line"),
]


@pytest.mark.parametrize("lines, lineno, fragment", LDAC_MALFORMED)
def test_ldac_malformed_reports_file_and_line(tmp_path, lines, lineno, fragment):
    path = tmp_path / "bad.ldac"
    path.write_text("\n".join(lines) + "\n")
    pattern = re.escape(f"{path}, line {lineno}:") + ".*" + re.escape(fragment)
    with pytest.raises(ValueError, match=pattern):
        load_ldac(path, n_features=5)
    with pytest.raises(ValueError, match=pattern):
        _load_ldac(path, n_features=5, fast=False)


def test_ldac_vocab_and_n_features_checks(tmp_path):
    path, vocab = tmp_path / "c.ldac", tmp_path / "vocab.txt"
    path.write_text("\n".join(_LDAC_GOOD) + "\n")
    vocab.write_text("a\nb\n")
    with pytest.raises(ValueError, match=re.escape(f"{path}, line 1:") + ".*out of range 0..1"):
        load_ldac(path, vocab)
    vocab.write_text("a\nb\nc\n")
    with pytest.raises(ValueError, match="3 words, but n_features=4"):
        load_ldac(path, vocab, n_features=4)
    with pytest.raises(ValueError, match="n_features"):
        load_ldac(path, n_features=-1)
    with pytest.raises(ValueError, match="n_features"):
        load_ldac(path, n_features=2.5)
    assert list(load_ldac(path, vocab).feature_names) == ["a", "b", "c"]


# --------------------------------------------------------------------------------------
# Folder of text files
# --------------------------------------------------------------------------------------


def _tokens(text):
    # CountVectorizer's default token pattern: words of 2+ word characters, lowercased
    return re.findall(r"(?u)\b\w\w+\b", text.lower())


def test_load_text_folder(tmp_path):
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    docs = {
        "b/2.txt": "Apple banana the apple and cherry",
        "a.txt": "banana Banana banana; of durian",
        "b/1.TXT": "The cherry is not an apple",
        "c/skip.md": "kiwi kiwi kiwi",
    }
    for name, text in docs.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    bunch = load_text_folder(tmp_path)
    order = ["a.txt", "b/1.TXT", "b/2.txt"]
    assert list(bunch.filenames) == [str(tmp_path / n) for n in order]
    counts = [Counter(t for t in _tokens(docs[n]) if t not in ENGLISH_STOP_WORDS) for n in order]
    vocab = sorted(set().union(*counts))
    assert list(bunch.feature_names) == vocab
    expected = np.array([[c[w] for w in vocab] for c in counts], dtype=np.float64)
    assert bunch.data.dtype == np.float64 and sp.issparse(bunch.data)
    np.testing.assert_array_equal(bunch.data.toarray(), expected)
    assert "kiwi" not in bunch.feature_names
    # the fitted vectorizer maps new text to the same columns
    new = bunch.vectorizer.transform(["durian durian apple"]).toarray()
    assert new[0, vocab.index("durian")] == 2 and new.sum() == 3

    kept = load_text_folder(tmp_path, stop_words=None, dtype=np.int64)
    assert "the" in kept.feature_names and kept.data.dtype == np.int64


def test_load_text_folder_errors(tmp_path):
    with pytest.raises(ValueError, match="no .txt files"):
        load_text_folder(tmp_path)
    with pytest.raises(ValueError, match="not a directory"):
        load_text_folder(tmp_path / "missing")
    (tmp_path / "ok.txt").write_text("hello world")
    with pytest.raises(ValueError, match="input"):
        load_text_folder(tmp_path, input="filename")
    bad = tmp_path / "z.txt"
    bad.write_bytes(b"fine line\nbad \xff byte\n")
    with pytest.raises(ValueError, match=re.escape(f"{bad}, line 2:")):
        load_text_folder(tmp_path)
    assert load_text_folder(tmp_path, decode_error="ignore").data.shape[0] == 2


# --------------------------------------------------------------------------------------
# Image patches
# --------------------------------------------------------------------------------------


def _naive_patches(images, p, s, remove_mean, grayscale):
    """Double-loop reference of extract_patches."""
    rows = []
    for img in images:
        img = np.asarray(img)
        x = img / 255.0 if img.dtype == np.uint8 else img.astype(np.float64)
        if x.ndim == 3 and grayscale:
            x = 0.299 * x[:, :, 0] + 0.587 * x[:, :, 1] + 0.114 * x[:, :, 2]
        H, W = x.shape[:2]
        for r in range(0, H - p + 1, s):
            for c in range(0, W - p + 1, s):
                patch = x[r : r + p, c : c + p].reshape(-1)
                if remove_mean:
                    patch = patch - patch.mean()
                rows.append(patch)
    return np.array(rows)


@pytest.mark.parametrize("patch_size, stride", [(3, 1), (4, 2), (5, 3), (8, 4)])
@pytest.mark.parametrize("remove_mean", [True, False])
@pytest.mark.parametrize("kind", ["gray_uint8", "gray_float", "rgb_to_gray", "rgb"])
def test_extract_patches_matches_double_loop(patch_size, stride, remove_mean, kind):
    rng = np.random.default_rng(2)
    shapes = [(17, 13), (12, 20)]
    if kind.startswith("rgb"):
        shapes = [s + (3,) for s in shapes]
    if kind == "gray_float":
        images = [rng.standard_normal(s) for s in shapes]
    else:
        images = [rng.integers(0, 256, size=s, dtype=np.uint8) for s in shapes]
    copies = [im.copy() for im in images]
    grayscale = kind != "rgb"
    got = extract_patches(images, patch_size, stride, remove_mean, grayscale)
    ref = _naive_patches(images, patch_size, stride, remove_mean, grayscale)
    channels = 3 if kind == "rgb" else 1
    assert got.shape == ref.shape
    assert got.shape[1] == patch_size * patch_size * channels
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)
    for im, copy in zip(images, copies, strict=True):
        np.testing.assert_array_equal(im, copy)
    if remove_mean:
        np.testing.assert_allclose(got.mean(axis=1), 0.0, atol=1e-12)


def test_extract_patches_float32_stack_and_no_aliasing():
    rng = np.random.default_rng(3)
    stack = rng.random((3, 10, 9))
    before = stack.copy()
    got = extract_patches(stack, patch_size=4, stride=2, dtype=np.float32)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, _naive_patches(list(stack), 4, 2, True, True), atol=1e-6)
    np.testing.assert_allclose(got.mean(axis=1), 0.0, atol=1e-6)
    # one patch covering a whole float64 image: the output is not a view of the input
    whole = extract_patches([stack[0]], patch_size=9, stride=1, remove_mean=True)
    assert whole.shape == (2, 81)
    np.testing.assert_array_equal(stack, before)
    whole[:] = 0
    np.testing.assert_array_equal(stack, before)


def test_extract_patches_max_patches_subset():
    rng = np.random.default_rng(4)
    images = [rng.random((20, 16)), rng.random((15, 15))]
    full = extract_patches(images, 4, 2)
    sub = extract_patches(images, 4, 2, max_patches=17, random_state=0)
    again = extract_patches(images, 4, 2, max_patches=17, random_state=0)
    assert sub.shape == (17, 16)
    np.testing.assert_array_equal(sub, again)
    # every sampled row is a distinct row of the full grid, in grid order
    idx = [int(np.flatnonzero((full == row).all(axis=1))[0]) for row in sub]
    assert idx == sorted(set(idx))
    np.testing.assert_array_equal(extract_patches(images, 4, 2, max_patches=10**6), full)


@pytest.mark.parametrize(
    "images, kwargs, message",
    [
        ([np.zeros((5, 9))], {"patch_size": 6}, "larger than image 0"),
        ([np.zeros((9, 9)), np.zeros((9, 5))], {"patch_size": 6}, "larger than image 1"),
        ([np.zeros((9, 9))], {"stride": 0}, "stride must be an integer >= 1"),
        ([np.zeros((9, 9))], {"patch_size": 2.0}, "patch_size must be an integer"),
        ([np.zeros((9, 9))], {"patch_size": True}, "patch_size must be an integer"),
        ([np.zeros((9, 9))], {"max_patches": 0}, "max_patches"),
        ([np.zeros((9, 9))], {"dtype": np.int32}, "float32 or float64"),
        ([np.zeros((9, 9, 4))], {}, r"expected \(H, W\) or \(H, W, 3\)"),
        ([np.zeros((9, 9), dtype=np.int64)], {}, "dtype int64"),
        ([np.full((9, 9), np.nan)], {}, "NaN"),
        ([np.zeros((9, 9, 3)), np.zeros((9, 9))], {"grayscale": False}, "channel"),
        (np.zeros((9, 9)), {}, "wrap a single image in a list"),
        ([], {}, "no images"),
    ],
)
def test_extract_patches_validation(images, kwargs, message):
    with pytest.raises(ValueError, match=message):
        extract_patches(images, **kwargs)


def test_load_sample_patches():
    pytest.importorskip("PIL", reason="scikit-learn reads its sample images with Pillow")
    from sklearn.datasets import load_sample_images

    bunch = load_sample_patches()
    assert bunch.data.shape == (2 * 105 * 159, 64)
    np.testing.assert_allclose(bunch.data.mean(axis=1), 0.0, atol=1e-12)
    china = load_sample_images().images[0]
    n = 7  # patch 7 of the first image: grid row 0, column 7
    ref = _naive_patches([china[0:8, 28:36]], 8, 4, True, True)[0]
    np.testing.assert_allclose(bunch.data[n], ref, atol=1e-12)
    np.testing.assert_array_equal(bunch.positions[n], [0, 28])
    assert bunch.image_index[n] == 0 and bunch.image_index[-1] == 1
    rgb = load_sample_patches(patch_size=6, stride=10, remove_mean=False, grayscale=False)
    assert rgb.data.shape[1] == 108 and rgb.data.min() >= 0 and rgb.data.max() <= 1


def test_load_image_patches_from_png_folder(tmp_path):
    Image = pytest.importorskip("PIL.Image")
    rng = np.random.default_rng(5)
    rgb = rng.integers(0, 256, size=(14, 11, 3), dtype=np.uint8)
    gray = rng.integers(0, 256, size=(9, 12), dtype=np.uint8)
    Image.fromarray(rgb).save(tmp_path / "b.png")
    Image.fromarray(gray).save(tmp_path / "a.PNG")
    (tmp_path / "notes.txt").write_text("not an image")
    bunch = load_image_patches(tmp_path, patch_size=4, stride=3)
    assert [f.rsplit("/", 1)[-1] for f in bunch.filenames] == ["a.PNG", "b.png"]
    np.testing.assert_allclose(bunch.data, _naive_patches([gray, rgb], 4, 3, True, True))
    assert bunch.image_index.tolist() == [0] * 6 + [1] * 12  # 2x3 and 4x3 grids
    first = load_image_patches(tmp_path, patch_size=4, stride=3, max_images=1)
    np.testing.assert_array_equal(first.data, bunch.data[:6])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no .jpg, .jpeg or .png"):
        load_image_patches(tmp_path / "empty")
    with pytest.raises(ValueError, match="larger than image 0"):
        load_image_patches(tmp_path, patch_size=10)


@pytest.mark.slow
def test_load_image_patches_bsds(shared_data):
    pytest.importorskip("PIL")
    folder = shared_data / "bsds500" / "images" / "train"
    bunch = load_image_patches(folder, max_images=3, dtype=np.float32)
    assert len(bunch.filenames) == 3
    from PIL import Image

    expected = 0
    for f in bunch.filenames:
        w, h = Image.open(f).size
        assert {w, h} == {481, 321}
        expected += ((h - 8) // 4 + 1) * ((w - 8) // 4 + 1)
    assert bunch.data.shape == (expected, 64) and bunch.data.dtype == np.float32
    np.testing.assert_allclose(bunch.data.mean(axis=1), 0.0, atol=1e-5)
    assert np.abs(bunch.data).max() <= 1.0
    image = np.asarray(Image.open(bunch.filenames[0]).convert("RGB"))
    ref = _naive_patches([image[:12, :12]], 8, 4, True, True)
    np.testing.assert_allclose(bunch.data[0], ref[0], atol=1e-5)


def test_empty_corpora(tmp_path):
    uci, ldac = tmp_path / "d.txt", tmp_path / "c.ldac"
    uci.write_text("2\n3\n0\n")
    assert load_uci_bow(uci).data.shape == (2, 3) and load_uci_bow(uci).data.nnz == 0
    ldac.write_text("0\n0\n")
    assert load_ldac(ldac).data.shape == (2, 0)
    assert load_ldac(ldac, n_features=4).data.nnz == 0
    ldac.write_text("")
    assert load_ldac(ldac).data.shape == (0, 0)


def test_load_text_lines(tmp_path):
    from sklearn.feature_extraction.text import CountVectorizer

    lines = ["The cat sat on the mat", "", "dogs and cats", "a dog, a cat; a mat", "naïve café"]
    path = tmp_path / "docs.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    b = load_text_lines(path)
    ref = CountVectorizer(stop_words="english").fit(lines)
    assert b.data.shape == (5, len(ref.vocabulary_))  # line i is row i, blank lines included
    np.testing.assert_array_equal(b.data.toarray(), ref.transform(lines).toarray())
    np.testing.assert_array_equal(b.feature_names, ref.get_feature_names_out())
    assert b.data[1].nnz == 0 and b.data.dtype == np.float64
    gz = tmp_path / "docs.txt.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    assert (load_text_lines(gz).data != b.data).nnz == 0
    (tmp_path / "bin.txt").write_bytes(b"ok line\nbad \x00 line\n")
    with pytest.raises(ValueError, match="bin.txt, line 2: contains NUL bytes"):
        load_text_lines(tmp_path / "bin.txt")
    (tmp_path / "latin.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    with pytest.raises(ValueError, match="line 1: cannot decode"):
        load_text_lines(tmp_path / "latin.txt")
    assert load_text_lines(tmp_path / "latin.txt", encoding="latin-1").data.shape == (1, 1)
    # rows are the lines between "\n": a form feed, NEL or line separator inside a line
    # (where str.splitlines would break) does not add rows; CRLF endings are lines too
    odd = ["page one\x0cpage two", "next\x85line", "sep\u2028arated", "last line"]
    (tmp_path / "odd.txt").write_bytes("\r\n".join(odd).encode("utf-8") + b"\r\n")
    got = load_text_lines(tmp_path / "odd.txt", stop_words=None)
    ref = CountVectorizer().fit(odd)
    assert got.data.shape == (4, len(ref.vocabulary_))
    np.testing.assert_array_equal(got.data.toarray(), ref.transform(odd).toarray())


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32])
def test_counts_matrix_in_file_order_equals_the_sorted_and_summed_entries(dtype):
    """Entries in CSR order are laid out directly; the result equals that of sorting the
    entries and summing duplicates (scipy's COO to CSR), arrays and their dtypes alike."""
    rng = np.random.RandomState(0)
    dtype = np.dtype(dtype)
    for trial in range(60):
        D, W, n = rng.randint(1, 30), rng.randint(1, 30), rng.randint(0, 80)
        rows, cols = np.sort(rng.randint(0, D, n)), rng.randint(0, W, n)
        if trial % 3 == 0:  # in CSR order, no repeated (row, column) pair
            key = np.unique(rows * W + cols)
            rows, cols = key // W, key % W
        elif trial % 3 == 1:  # rows out of order
            perm = rng.permutation(rows.size)
            rows, cols = rows[perm], cols[perm]
        counts = rng.randint(1, 5, rows.size)
        got = _counts_matrix(rows, cols, counts, (D, W), dtype, "x")
        ref = sp.csr_matrix((counts.astype(np.int64), (rows, cols)), shape=(D, W),
                            dtype=np.int64)
        ref.sum_duplicates()
        ref = ref.astype(dtype)
        for f in ("data", "indices", "indptr"):
            a, b = getattr(got, f), getattr(ref, f)
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(got.toarray(), np.asarray(
            sp.coo_matrix((counts, (rows, cols)), shape=(D, W)).toarray(), dtype=dtype))
    with pytest.raises(ValueError, match="does not fit in dtype"):
        _counts_matrix(np.array([0]), np.array([1]), np.array([300]), (1, 2),
                       np.dtype(np.int8), "x")
