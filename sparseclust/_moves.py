# SPDX-License-Identifier: BSD-3-Clause
"""Model-agnostic pieces of memoized merge / delete moves (Hughes, Kim & Sudderth 2015).

A move *round* has the shape memoized training gives it:

1. before a pass, choose candidates from what the previous pass gathered (:func:`
   select_merge_pairs` from the components' co-usage across items, :func:`select_deletes`
   from how many items use each component);
2. during the pass, every batch visit gathers what evaluating the candidates needs (for a
   merge of a and b: the terms of the objective that are not linear in the responsibilities,
   e.g. the entropy of r_a + r_b, through :func:`pair_lookup` tables and the compiled kernels
   of ``sparseclust._kernels._hdp_stats``), so no extra pass over the data is needed;
3. after the pass, proposals are evaluated on the whole-data statistics and accepted one by
   one, each only if the whole-data objective increases; a component touched by an accepted
   move takes part in no other move of the round (:class:`RoundLog` keeps score), and the
   accepted edits are applied to every batch's cached statistics so that memoized training
   stays exact.

Models supply the statistics arithmetic; this module supplies candidate selection and the
bookkeeping shared by the topic model and the mixture.
"""

from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "parse_moves",
    "usage_correlation",
    "select_merge_pairs",
    "pair_lookup",
    "select_deletes",
    "compaction",
    "RoundLog",
]


def parse_moves(moves, allowed):
    """The ``moves`` parameter of an estimator as a tuple, in the order of ``allowed``.

    ``'all'`` means every move in ``allowed``, ``'none'`` or None no move; otherwise a tuple
    (or list) of names or a ``'+'``-joined string such as ``'merge+delete'``.
    """
    if moves is None or (isinstance(moves, str) and moves == "none"):
        return ()
    if isinstance(moves, str):
        if moves == "all":
            return tuple(allowed)
        moves = tuple(m.strip() for m in moves.split("+"))
    moves = tuple(moves)
    bad = [m for m in moves if m not in allowed]
    if bad:
        raise ValueError(
            f"moves must be 'all', 'none', or a combination of {tuple(allowed)} (a tuple or a "
            f"'+'-joined string such as 'merge+delete'); got {bad!r}."
        )
    return tuple(m for m in allowed if m in moves)


def usage_correlation(sum_p, sum_pp, n_items):
    """Correlation across items of the components' usage proportions.

    Parameters
    ----------
    sum_p : ndarray (K,)
        sum_d p_dk, with p_dk the share of item d's mass on component k.
    sum_pp : ndarray or sparse matrix (K, K)
        sum_d p_dj p_dk.
    n_items : float

    Returns
    -------
    corr : ndarray (K, K), zero diagonal; 0 where a component has no variance.
    """
    n = max(float(n_items), 1.0)
    M = np.asarray(sum_pp.toarray() if hasattr(sum_pp, "toarray") else sum_pp, dtype=float)
    mean = np.asarray(sum_p, dtype=float) / n
    cov = M / n - np.outer(mean, mean)
    var = np.maximum(np.diag(cov).copy(), 0.0)
    sd = np.sqrt(var)
    with np.errstate(divide="ignore", invalid="ignore"):
        corr = cov / np.outer(sd, sd)
    corr[~np.isfinite(corr)] = 0.0
    np.fill_diagonal(corr, 0.0)
    return corr


def select_merge_pairs(score, *, max_per_component, max_pairs, min_score, allowed=None):
    """Candidate pairs (a, b), a < b, of largest ``score[a, b]`` (at least ``min_score``).

    Each component enters at most ``max_per_component`` pairs and at most ``max_pairs`` are
    returned, in decreasing score order (the order in which they are then tried).
    ``allowed`` (bool (K,)) excludes components from every pair.

    Returns
    -------
    pairs : ndarray (P, 2) int32
    scores : ndarray (P,)
    """
    S = np.asarray(score, dtype=float)
    K = S.shape[0]
    iu, ju = np.triu_indices(K, 1)
    vals = S[iu, ju]
    keep = vals >= min_score
    if allowed is not None:
        keep &= allowed[iu] & allowed[ju]
    iu, ju, vals = iu[keep], ju[keep], vals[keep]
    order = np.lexsort((ju, iu, -vals))  # score descending, ties by index
    count = np.zeros(K, dtype=np.int64)
    out, sc = [], []
    for t in order:
        a, b = iu[t], ju[t]
        if count[a] >= max_per_component or count[b] >= max_per_component:
            continue
        count[a] += 1
        count[b] += 1
        out.append((a, b))
        sc.append(vals[t])
        if len(out) >= max_pairs:
            break
    return np.asarray(out, dtype=np.int32).reshape(-1, 2), np.asarray(sc, dtype=float)


def pair_lookup(pairs, K):
    """(K * K,) int32 table: entry a * K + b (and b * K + a) holds the pair's index, else -1."""
    table = np.full(K * K, -1, dtype=np.int32)
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    idx = np.arange(pairs.shape[0], dtype=np.int32)
    table[pairs[:, 0] * K + pairs[:, 1]] = idx
    table[pairs[:, 1] * K + pairs[:, 0]] = idx
    return table


def select_deletes(n_users, *, max_items, max_candidates, allowed=None, size=None):
    """Delete candidates: the components used by the fewest items, as many as fit in a total
    budget of ``max_items`` items to revisit (Hughes, Kim & Sudderth 2015, supplement F.3).

    Components used by no item are candidates too (they cost nothing to revisit). With
    ``size`` (e.g. the expected counts N_k) the components are taken in increasing ``size``
    instead, the budget still counting the items that use them; a component over the
    remaining budget is then skipped rather than ending the selection.

    Returns
    -------
    candidates : ndarray of int, in increasing usage (or size) order.
    """
    n_users = np.asarray(n_users)
    if size is not None:
        out, budget = [], int(max_items)
        for k in np.argsort(np.asarray(size), kind="stable"):
            if allowed is not None and not allowed[k]:
                continue
            if len(out) >= max_candidates:
                break
            if n_users[k] > budget:
                continue
            out.append(int(k))
            budget -= int(n_users[k])
        return np.asarray(out, dtype=np.int64)
    order = np.argsort(n_users, kind="stable")
    out, budget = [], int(max_items)
    for k in order:
        if allowed is not None and not allowed[k]:
            continue
        if n_users[k] > budget or len(out) >= max_candidates:
            break
        out.append(int(k))
        budget -= int(n_users[k])
    return np.asarray(out, dtype=np.int64)


def compaction(alive):
    """Index map after removing the components with ``alive == False``: ``new[k]`` is the
    new index of component k, or -1."""
    alive = np.asarray(alive, dtype=bool)
    new = np.full(alive.size, -1, dtype=np.int64)
    new[alive] = np.arange(int(alive.sum()))
    return new


@dataclass
class RoundLog:
    """Counts of one move round, and the components it touched."""

    merges_tried: int = 0
    merges_accepted: int = 0
    deletes_tried: int = 0
    deletes_accepted: int = 0
    sorted: bool = False
    touched: set = field(default_factory=set)

    def as_dict(self):
        return {
            "merges_tried": self.merges_tried,
            "merges_accepted": self.merges_accepted,
            "deletes_tried": self.deletes_tried,
            "deletes_accepted": self.deletes_accepted,
            "sorted": self.sorted,
        }
