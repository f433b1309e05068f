# SPDX-License-Identifier: BSD-3-Clause
"""One pass over the bytes of a bag-of-words text block. :func:`scan` reads any such block
(UCI ``docword`` lines, LDA-C ``word:count`` pairs): the unsigned integers, the line each
starts on, and whether a ``:`` directly precedes it
(:func:`sparseclust.datasets._bow._tokenize`). :func:`scan_uci` reads and checks the UCI
entries themselves, and :func:`csr_layout` lays out entries already in CSR order as a CSR
matrix's row pointers and column indices.

:func:`scan` accepts a block only when it holds nothing but digits, spaces, tabs, ``\\r``,
``\\n`` and (with ``allow_colon``) colons that sit between two digits, and no number has
more than ``max_digits`` digits; otherwise it returns None and the caller parses line by
line to report the fault. A number is a maximal run of digits, read in base 10 (leading zeros
allowed); its line is the number of ``\\n`` before its first digit.
"""

import numpy as np

cimport numpy as cnp
from libc.stdint cimport int64_t, uint8_t

cnp.import_array()


def scan(const uint8_t[::1] b, bint allow_colon, int max_digits):
    """``(values int64, line int64, after_colon bool)`` of the numbers of ``b``, or None
    when ``b`` holds anything else (see the module docstring)."""
    cdef Py_ssize_t n = b.shape[0]
    cdef Py_ssize_t cap = n // 2 + 1  # a number and its separator take two bytes at least
    values_a = np.empty(cap, dtype=np.int64)
    line_a = np.empty(cap, dtype=np.int64)
    colon_a = np.zeros(cap, dtype=np.uint8)
    cdef int64_t[::1] values = values_a
    cdef int64_t[::1] line = line_a
    cdef uint8_t[::1] colon = colon_a
    cdef Py_ssize_t i, m = 0
    cdef int64_t v = 0, cur_line = 0
    cdef int digits = 0
    cdef uint8_t c
    cdef bint bad = False, after = False
    with nogil:
        for i in range(n):
            c = b[i]
            if c >= 48 and c <= 57:
                if digits == 0:
                    v = 0
                    line[m] = cur_line
                    colon[m] = after
                    after = False
                digits += 1
                if digits > max_digits:
                    bad = True
                    break
                v = v * 10 + (c - 48)
                continue
            if digits:
                values[m] = v
                m += 1
                digits = 0
            if c == 10:
                cur_line += 1
            elif c == 58 and allow_colon:
                # between two digits: a digit just ended here (i > 0) and one follows
                if i == 0 or i + 1 >= n or not (b[i - 1] >= 48 and b[i - 1] <= 57) \
                        or not (b[i + 1] >= 48 and b[i + 1] <= 57):
                    bad = True
                    break
                after = True
            elif c != 32 and c != 9 and c != 13:
                bad = True
                break
        if not bad and digits:
            values[m] = v
            m += 1
    if bad:
        return None
    return values_a[:m].copy(), line_a[:m].copy(), colon_a[:m].astype(bool)


def scan_uci(const uint8_t[::1] b, int64_t D, int64_t W, int64_t prev_doc, bint in_order,
             int64_t max_entries, int max_digits):
    """The entries of a block of UCI ``docword`` lines in one pass: ``(docs, words, counts,
    last_line)``, docs and words 0-based (int64), counts int64, ``last_line`` the 0-based
    line of the last entry (-1 when there is none); or None when the block is not exactly
    that.

    The block is accepted when every line holds three numbers or only whitespace (spaces,
    tabs, ``\\r``), with 1 <= docID <= D, 1 <= wordID <= W, count >= 1, no number longer
    than ``max_digits`` digits and at most ``max_entries`` entries; with ``in_order`` the
    docIDs (0-based) must also be non-decreasing, starting from ``prev_doc``. These are the
    checks of the generic scan (:func:`scan`) followed by the callers' checks, so a block
    that fails goes to the line-by-line parser, which names the fault.
    """
    cdef Py_ssize_t n = b.shape[0]
    cdef Py_ssize_t cap = n // 6 + 1  # an entry and its newline take six bytes at least
    docs_a = np.empty(cap, dtype=np.int64)
    words_a = np.empty(cap, dtype=np.int64)
    counts_a = np.empty(cap, dtype=np.int64)
    cdef int64_t[::1] docs = docs_a
    cdef int64_t[::1] words = words_a
    cdef int64_t[::1] counts = counts_a
    cdef Py_ssize_t m = 0
    cdef int64_t v = 0, cur_line = 0, last_line = -1
    cdef int64_t vals[3]
    cdef int digits = 0, nf = 0
    cdef uint8_t c
    cdef bint bad = False
    cdef const uint8_t* p = NULL
    cdef const uint8_t* end = NULL
    if n:
        p = &b[0]
        end = p + n
    with nogil:
        # a line at a time: its fields are read by a tight loop over each run of digits
        while True:
            nf = 0
            while True:
                c = p[0] if p != end else 10  # the block's end closes its last line
                if c >= 48 and c <= 57:
                    if nf == 3:
                        bad = True
                        break
                    v = 0
                    digits = 0
                    while p != end and p[0] >= 48 and p[0] <= 57:
                        digits += 1
                        if digits > max_digits:
                            bad = True
                            break
                        v = v * 10 + (p[0] - 48)
                        p += 1
                    if bad:
                        break
                    vals[nf] = v
                    nf += 1
                elif c == 10:
                    break
                elif c == 32 or c == 9 or c == 13:
                    p += 1
                else:
                    bad = True
                    break
            if bad:
                break
            if nf == 3:
                if (m >= max_entries or vals[0] < 1 or vals[0] > D or vals[1] < 1
                        or vals[1] > W or vals[2] < 1
                        or (in_order and vals[0] - 1 < prev_doc)):
                    bad = True
                    break
                docs[m] = vals[0] - 1
                words[m] = vals[1] - 1
                counts[m] = vals[2]
                prev_doc = vals[0] - 1
                last_line = cur_line
                m += 1
            elif nf:
                bad = True
                break
            cur_line += 1
            if p == end:
                break
            p += 1  # the newline
    if bad:
        return None
    return docs_a[:m].copy(), words_a[:m].copy(), counts_a[:m].copy(), last_line


def csr_layout(const int64_t[::1] rows, const int64_t[::1] cols, Py_ssize_t n_rows):
    """``(indptr, indices)`` (int32) of the CSR matrix with ``n_rows`` rows whose entries are
    ``(rows[i], cols[i])`` in the given order, when that order is CSR order (rows
    non-decreasing and within ``[0, n_rows)``, columns non-negative and strictly increasing
    within a row); else None. One pass; the caller checks that ``n_rows``, the number of
    columns and the number of entries fit in int32.

    Equivalent to ``np.cumsum(np.bincount(rows, minlength=n_rows))`` (with a leading 0) and
    ``cols.astype(np.int32)`` after that order check.
    """
    cdef Py_ssize_t n = rows.shape[0]
    indptr_a = np.zeros(n_rows + 1, dtype=np.int32)
    indices_a = np.empty(n, dtype=np.int32)
    cdef int[::1] indptr = indptr_a
    cdef int[::1] indices = indices_a
    cdef Py_ssize_t i, r = 0
    cdef int64_t row, prev_row = -1, prev_col = -1
    cdef bint bad = False
    with nogil:
        for i in range(n):
            row = rows[i]
            if i == 0 or row != prev_row:
                if row < prev_row or row < 0 or row >= n_rows or cols[i] < 0:
                    bad = True
                    break
                # rows prev_row + 1 .. row start here; those before end at entry i
                while r <= row:
                    indptr[r] = <int> i
                    r += 1
                prev_row = row
            elif cols[i] <= prev_col:
                bad = True
                break
            prev_col = cols[i]
            indices[i] = <int> cols[i]
        if not bad:
            while r <= n_rows:
                indptr[r] = <int> n
                r += 1
    if bad:
        return None
    return indptr_a, indices_a
