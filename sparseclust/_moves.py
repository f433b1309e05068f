# SPDX-License-Identifier: BSD-3-Clause
"""Model-agnostic pieces of memoized merge / delete moves (Hughes, Kim & Sudderth 2015).

A move *round* has the shape memoized training gives it:

1. before a pass, choose candidates from what the previous pass gathered (:func:`
   select_merge_pairs` from the components' co-usage across items, or from the similarity
   of their parameters (:func:`top_weight_cosine`), which finds duplicates that split the
   items between them and so are never used together; :func:`select_deletes`
   from how many items use each component, :func:`select_births` the components whose items
   a birth move re-explains with fresh components);
2. during the pass, every batch visit gathers what evaluating the candidates needs (for a
   merge of a and b: the terms of the objective that are not linear in the responsibilities,
   e.g. the entropy of r_a + r_b, through :func:`pair_lookup` tables and the compiled kernels
   of ``sparseclust._kernels._hdp_stats``; for a delete or a birth, the items that use the
   target), so no extra pass over the data is needed;
3. after the pass, proposals are evaluated on the whole-data statistics and accepted one by
   one, each only if the whole-data objective increases; a component touched by an accepted
   move takes part in no other move of the round (:class:`RoundLog` keeps score), and the
   accepted edits are applied to every batch's cached statistics so that memoized training
   stays exact.

Models supply the statistics arithmetic; this module supplies candidate selection and the
bookkeeping shared by the topic model and the mixture (:class:`MoveBook`: component
identities across passes, the memo of rejected proposals with its exponential cool-down, the
co-usage gathered for candidate selection, the merge loop of a round).
"""

import copy
import warnings
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

__all__ = [
    "parse_moves",
    "usage_correlation",
    "top_weight_cosine",
    "select_merge_pairs",
    "merge_pair_union",
    "pair_lookup",
    "select_deletes",
    "select_births",
    "subsample_targets",
    "fetch_rows",
    "improves",
    "cannot_pass",
    "TruncationWarning",
    "warn_if_lower_bound",
    "ACCEPT_RTOL",
    "compaction",
    "RoundLog",
    "MoveRound",
    "MoveBook",
    "MoveWorkspace",
]

#: a proposal is accepted when it raises the objective by more than this fraction of |L|
ACCEPT_RTOL = 1e-12


def improves(new, old):
    """The acceptance test of every move: ``new > old + ACCEPT_RTOL * |old|``."""
    return new > old + ACCEPT_RTOL * abs(old)


def cannot_pass(values, n_left, old):
    """Early stop of a proposal refined in rounds of alternating optimization, whose
    objective ``values`` after each round so far rise with shrinking gains: True when even the last
    round's gain, repeated in each of the ``n_left`` rounds left, would not lift the value to
    pass :func:`improves` against ``old``. With gains that do not grow this is exact (the
    last round then decides no differently); where a later gain exceeds the last one it can
    stop a proposal the last round would have accepted, so it is a cut of cost. False with
    fewer than two values or no round left (the last round's own test decides)."""
    if len(values) < 2 or n_left <= 0:
        return False
    gain = max(values[-1] - values[-2], 0.0)
    return not improves(values[-1] + n_left * gain, old)


class TruncationWarning(UserWarning):
    """A model that learns its number of components ended with at least as many as it
    started from, so the number it learned is a lower bound (:func:`warn_if_lower_bound`)."""


def warn_if_lower_bound(whom, trace, start, learned, param, noun, stacklevel=3, *,
                        used=None, cap=None, advice=None):
    """Warn (:class:`TruncationWarning`) when a fit whose merge or delete moves ran ended with
    ``learned >= start`` components.

    The moves accept a proposal only when the objective rises, so training ends at a local
    optimum near its start. Merges and deletes remove what a large start does not need; births
    add components to a small start, but only part of the way. A fit that kept every component
    it started from (or grew) therefore found a lower bound on the number the data support, and
    a larger start lets merges and deletes choose it. ``trace`` is the fit's per-pass trace:
    no warning when no round tried a merge or a delete (moves off, or a fit too short for
    them), since the number was then not learned. ``used``: the components the fit started
    from when fewer than ``param`` (``start``), with ``cap`` saying why; the message then
    names both, and ``advice`` replaces the advice to fit from a larger ``param``."""
    ran = any(e.get("merges_tried", 0) or e.get("deletes_tried", 0) for e in trace)
    if not ran or learned < start:
        return
    grew = (f"grew to {learned}" if learned > (start if used is None else used)
            else "kept all of them")
    started = (f"started from {param}={start} {noun}" if used is None
               else f"started from {used} {noun} ({param}={start}, {cap})")
    if advice is None:
        advice = (f"Fit again from a larger {param} to let the merge and delete moves choose "
                  f"the number.")
    warnings.warn(
        f"{whom} {started} and {grew}, so the number it learned is a lower bound: births grow "
        f"a small start only part of the way. {advice}",
        TruncationWarning, stacklevel=stacklevel)


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


def top_weight_cosine(W, n_top=50, shift=0.0, block=64):
    """Cosine similarity of the rows of W - shift (W: (K, V)), each row cut to its ``n_top``
    largest entries (the rest set to 0), so that the cost is O(K V + K^2 n_top) rather than
    O(K^2 V). The rows are cut ``block`` at a time, so the extra memory is O(block V + K n_top)
    and no (K, V) temporary is made.

    For topics, W = lambda and shift = tau (the topic-word counts): two topics that share their
    most frequent words score near 1 however the documents are split between them.

    Returns
    -------
    sim : ndarray (K, K), zero diagonal, entries in [0, 1] when W >= shift.
    """
    W = np.asarray(W)
    K, V = W.shape
    n = int(min(max(n_top, 1), V))
    if K < 2:
        return np.zeros((K, K))
    idx = np.empty((K, n), dtype=np.int64)
    for lo in range(0, K, block):
        rows = W[lo:lo + block]
        idx[lo:lo + block] = (np.argpartition(-rows, n - 1, axis=1)[:, :n] if n < V
                              else np.arange(V))
    vals = np.maximum(np.take_along_axis(W, idx, axis=1).astype(float) - shift, 0.0)
    norm = np.sqrt((vals * vals).sum(axis=1))
    norm[norm == 0] = 1.0
    vals /= norm[:, None]
    M = sp.csr_array((vals.ravel(), idx.ravel(), np.arange(0, K * n + 1, n)), shape=(K, V))
    sim = (M @ M.T).toarray()
    np.fill_diagonal(sim, 0.0)
    return sim


def merge_pair_union(*pair_lists, max_pairs):
    """Candidate pairs of several criteria in order, each pair once, at most ``max_pairs``."""
    seen, out = set(), []
    for pairs in pair_lists:
        for a, b in np.asarray(pairs, dtype=np.int64).reshape(-1, 2):
            key = (min(a, b), max(a, b))
            if key not in seen and len(out) < max_pairs:
                seen.add(key)
                out.append(key)
    return np.asarray(out, dtype=np.int32).reshape(-1, 2)


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


def select_births(size, *, max_candidates, allowed=None, min_size=0.0, tried=None):
    """Birth targets: the components (of at least ``min_size``, by ``size``, e.g. the
    expected counts N_k) whose births were rejected the fewest times (``tried``, e.g.
    :meth:`MoveBook.birth_rejections`), the largest first among equals; at most
    ``max_candidates`` of them.

    A birth move (Hughes & Sudderth 2013) re-explains the items of a target with fresh
    components fit to a subsample of them; the largest components hold the most items a
    single component may explain poorly, and their items are the most informative sample.
    Ranking by rejections first makes successive rounds of births visit every component
    instead of proposing again at the same largest ones while the smaller ones, which may
    hold several groups, are never tried. Without ``tried``: the largest first.

    Returns
    -------
    candidates : ndarray of int
    """
    size = np.asarray(size, dtype=float)
    tried = np.zeros(size.size) if tried is None else np.asarray(tried, dtype=float)
    out = []
    # primary key: rejections, ascending; then size, descending (stable on ties)
    for k in np.lexsort((-size, tried)):
        if len(out) >= max_candidates:
            break
        if size[k] < min_size or (allowed is not None and not allowed[k]):
            continue
        out.append(int(k))
    return np.asarray(out, dtype=np.int64)


def subsample_targets(targets, budget, rng):
    """A uniform subsample of at most ``budget`` of the items ``targets`` ({batch: positions
    in the batch}) across batches, drawn with ``rng``; ``targets`` itself when it fits.

    Any subset of a birth's target items gives a valid proposal (the objective is exact for
    any local parameters of any subset), so a birth may re-infer a sample of its target.
    """
    n = sum(t.size for t in targets.values())
    if n <= budget:
        return targets
    flat = np.concatenate([np.full(t.size, bb) for bb, t in targets.items()])
    pos = np.concatenate([t for t in targets.values()])
    pick = np.sort(rng.choice(n, int(budget), replace=False))
    out = {bb: pos[pick][flat[pick] == bb] for bb in targets}
    return {bb: t for bb, t in out.items() if t.size}


def fetch_rows(batches, sel, *, take, pack, unpack):
    """{b: the rows ``sel[b]`` (positions in batch b) of batch b, in that order}: the items a
    birth fits its fresh components to.

    In process ``take(batches[b], ids)``; when the batches are those of a Dask collection
    (their ``map_rows``) the rows come from the partitions that hold them: ``pack(X_rows)``
    runs there and returns a tuple of arrays (concatenated along their first axis over the
    partitions, in row order), ``unpack(tuple)`` rebuilds the rows here.
    """
    sel = {bb: np.asarray(ids) for bb, ids in sel.items() if len(ids)}
    run = getattr(batches, "map_rows", None)
    if run is None:
        return {bb: take(batches[bb], ids) for bb, ids in sel.items()}
    order = {bb: np.argsort(ids, kind="stable") for bb, ids in sel.items()}
    got = run(pack, {bb: ids[order[bb]] for bb, ids in sel.items()}, ())
    out = {}
    for bb, o in order.items():
        inv = np.empty_like(o)
        inv[o] = np.arange(o.size)
        out[bb] = unpack(got[bb])[inv]
    return out


class AdaptiveBudget:
    """How many proposals of one kind a move round makes, adapted to how many were accepted.

    After a round that tried proposals and accepted none the budget halves (down to ``low``);
    after a round that accepted all it tried it grows to at least twice the number accepted
    and at least doubles (up to ``high``). A round that accepted some but not all follows
    ``rule``:

    - ``"grow"``: as a round that accepted all;
    - ``"follow"``: twice the number accepted, but at least half the current budget, i.e.
      the budget tracks twice the demand the last round showed and falls by at most half per
      round. One cheap acceptance among many rejections (an empty component) then no longer
      restores the full budget.

    A model whose small components are all needed then pays for about ``low`` rejected
    proposals per pass instead of ``high``, while a round of accepted proposals restores the
    full budget within a few passes. Which proposals are made is unchanged: only their
    number is.
    """

    RULES = ("grow", "follow")

    def __init__(self, high, low=1, rule="grow"):
        if rule not in self.RULES:
            raise ValueError(f"rule must be one of {self.RULES}, got {rule!r}")
        self.high = max(int(high), 0)
        self.low = min(max(int(low), 0), self.high)
        self.rule = rule
        self.value = self.high

    def update(self, tried, accepted):
        if tried <= 0:
            return
        accepted = int(accepted)
        if accepted <= 0:
            value = self.value // 2
        elif accepted >= tried or self.rule == "grow":
            value = max(2 * self.value, 2 * accepted)
        else:
            value = max(self.value // 2, 2 * accepted)
        self.value = min(self.high, max(self.low, value))


def compaction(alive):
    """Index map after removing the components with ``alive == False``: ``new[k]`` is the
    new index of component k, or -1."""
    alive = np.asarray(alive, dtype=bool)
    new = np.full(alive.size, -1, dtype=np.int64)
    new[alive] = np.arange(int(alive.sum()))
    return new


class MoveRound:
    """The candidates of one pass and what the pass gathered for them, per batch (each model
    stores its own fields in ``batch[b]``)."""

    def __init__(self, K, pairs, deletes, births=()):
        self.K = K
        self.pairs = np.asarray(pairs, dtype=np.int32).reshape(-1, 2)
        self.pair_of = pair_lookup(self.pairs, K) if self.pairs.shape[0] else None
        self.deletes = np.asarray(deletes, dtype=np.int64)
        self.births = np.asarray(births, dtype=np.int64)
        # whether the visits gather the pair entropy of every two components that share an
        # item (a host that chooses its merge pairs after the pass sets it)
        self.pair_entropy = False
        self.batch = {}

    def candidates_only(self):
        """A copy with the candidates and none of what the pass gathered (what a visit that
        runs elsewhere, e.g. on a Dask worker, needs to read)."""
        lite = copy.copy(self)
        lite.batch = {}
        return lite


@dataclass
class RoundLog:
    """Counts of one move round, and the components it touched."""

    merges_tried: int = 0
    merges_accepted: int = 0
    deletes_tried: int = 0
    deletes_accepted: int = 0
    births_tried: int = 0
    births_accepted: int = 0
    sorted: bool = False
    touched: set = field(default_factory=set)

    def as_dict(self):
        return {
            "merges_tried": self.merges_tried,
            "merges_accepted": self.merges_accepted,
            "deletes_tried": self.deletes_tried,
            "deletes_accepted": self.deletes_accepted,
            "births_tried": self.births_tried,
            "births_accepted": self.births_accepted,
            "sorted": self.sorted,
        }


class MoveBook:
    """Bookkeeping of memoized moves shared by the models that have them (a mixin).

    The host sets ``self.moves`` and ``self.move_opts`` (with ``cooldown``, in passes) and calls
    :meth:`init_book` once; its ``before_pass`` calls :meth:`begin_pass`, its ``after_pass``
    evaluates the proposals with its own objective and reports rejections through
    :meth:`reject_pair` / :meth:`reject_delete`.

    State:

    - ``uid``: an identity per component, kept through compaction and sorting and renewed
      by a merge (the merged component is a new one), so that a memo about a proposal
      outlives the renumbering of the components;
    - ``rejected_pairs`` / ``rejected_deletes`` / ``rejected_births``: per proposal, the pass
      of its last rejection and how often it was rejected. After its n-th rejection a
      proposal waits ``cooldown * 2 ** (n - 1)`` passes (at most 8 cool-downs) before it is
      tried again;
    - ``usage`` (the previous pass's co-usage: ``n_users``, ``sum_p``, ``sum_pp``, ``n``) and
      ``_usage_acc`` (the current pass's, being gathered);
    - ``round_waits``: per kind of proposal (``'births'``; ``'deletes'`` for a host that asks),
      the memo of its rounds, kept like a rejected proposal's: after the n-th round in a row
      whose proposals of that kind were all rejected, the next round of that kind waits
      ``cooldown * 2 ** (n - 1)`` passes (:meth:`due`, :meth:`end_kind`; an accepted proposal
      clears it), so that a model no such proposal improves stops paying for one every pass;
    - ``delete_budget``: how many delete proposals the next round may make
      (:class:`AdaptiveBudget` up to ``max_deletes``, with the rule ``delete_budget`` of
      ``move_opts``, 'grow' when absent; the host passes its ``value`` to
      :func:`select_deletes` and reports each round through :meth:`end_deletes`);
    - ``round``: the candidates of the current pass; ``round_logs``: one dict per pass.

    The moves edit the batches' cached statistics in place (``edits_batch_stats``), so the
    engine keeps them in memory for these models (``fit_engine``'s ``memo_dir`` refused).
    """

    edits_batch_stats = True

    def init_book(self):
        self.round = None
        self.usage = None
        self._usage_acc = None
        self.round_logs = []
        self.uid = None
        self._next_uid = 0
        self._pass = 0
        self.rejected_pairs = {}
        self.rejected_deletes = {}
        self.rejected_births = {}
        self.round_waits = {}
        # delete proposals per round (at most ``max_deletes``): fewer while they are rejected
        self.delete_budget = AdaptiveBudget(self.move_opts["max_deletes"],
                                           rule=self.move_opts.get("delete_budget", "grow"))

    def begin_pass(self, pass_, K):
        """Start pass ``pass_`` over ``K`` components: forget the last round, give the
        components identities if they have none (first pass, or a new truncation)."""
        self.round = None
        self._pass = int(pass_)
        if self.uid is None or self.uid.size != K:
            self.uid = np.arange(self._next_uid, self._next_uid + K)
            self._next_uid += K

    # ------------------------------------------------------------------ rejected proposals
    def _recent(self, memo, key):
        """Was a proposal about ``key`` rejected recently? After its n-th rejection a
        proposal waits ``cooldown * 2 ** (n - 1)`` passes (at most 8 cool-downs)."""
        rec = memo.get(key)
        if rec is None:
            return False
        last, n = rec
        return self._pass - last <= self.move_opts["cooldown"] * 2 ** min(n - 1, 3)

    def _reject(self, memo, key):
        rec = memo.get(key)
        memo[key] = (self._pass, 1 if rec is None else rec[1] + 1)

    def reject_pair(self, a, b):
        self._reject(self.rejected_pairs, (int(self.uid[a]), int(self.uid[b])))

    def reject_delete(self, j):
        self._reject(self.rejected_deletes, int(self.uid[j]))

    def reject_birth(self, k):
        self._reject(self.rejected_births, int(self.uid[k]))

    def block_rejected_pairs(self, score):
        """Set ``score[a, b]`` (both orders) to -inf for the pairs rejected recently; forget
        the memo of pairs one of whose components is gone. Edits ``score`` in place."""
        pos = {int(u): i for i, u in enumerate(self.uid.tolist())}
        for (ua, ub) in list(self.rejected_pairs):
            if ua not in pos or ub not in pos:
                del self.rejected_pairs[(ua, ub)]
                continue
            if not self._recent(self.rejected_pairs, (ua, ub)):
                continue
            ia, ib = pos[ua], pos[ub]
            score[ia, ib] = score[ib, ia] = -np.inf
        return score

    def deletable(self):
        """bool (K,): the components whose deletion was not rejected recently."""
        return np.array([not self._recent(self.rejected_deletes, int(x)) for x in self.uid],
                        dtype=bool)

    def birthable(self):
        """bool (K,): the components whose birth proposal was not rejected recently."""
        return np.array([not self._recent(self.rejected_births, int(x)) for x in self.uid],
                        dtype=bool)

    def birth_rejections(self):
        """int (K,): how often each component's birth proposal was rejected (the rank of
        :func:`select_births`)."""
        return np.array([self.rejected_births.get(int(x), (0, 0))[1] for x in self.uid],
                        dtype=np.int64)

    def grow_book(self, n_new):
        """Append ``n_new`` components born in this round (before :meth:`end_round`): new
        identities, and zero co-usage (the next pass gathers theirs)."""
        n_new = int(n_new)
        if n_new <= 0:
            return
        self.uid = np.concatenate([self.uid, np.arange(self._next_uid, self._next_uid + n_new)])
        self._next_uid += n_new
        u = self.usage
        if u is None:
            return
        pp = u["sum_pp"]
        if sp.issparse(pp):
            pp = sp.csr_array(sp.block_diag([pp, sp.csr_array((n_new, n_new))], format="csr"))
        else:
            pp = np.pad(np.asarray(pp), ((0, n_new), (0, n_new)))
        self.usage = dict(n_users=np.pad(u["n_users"], (0, n_new)),
                          sum_p=np.pad(u["sum_p"], (0, n_new)), n=u["n"], sum_pp=pp)

    def due(self, kind):
        """May this pass's round make proposals of ``kind`` (no recent round of them that
        was all rejected)?"""
        return not self._recent(self.round_waits, kind)

    def end_kind(self, kind, tried, accepted):
        """Report a round's proposals of ``kind``: a round that tried some and accepted none
        starts (or lengthens) the wait of :meth:`due`; an accepted one clears it."""
        if tried <= 0:
            return
        if accepted:
            self.round_waits.pop(kind, None)
        else:
            self._reject(self.round_waits, kind)

    def end_deletes(self, log):
        """Report a round's delete proposals (``log.deletes_tried`` / ``deletes_accepted``)
        to the delete budget."""
        self.delete_budget.update(log.deletes_tried, log.deletes_accepted)

    def quiet_for(self, n_passes):
        """True when the last ``n_passes`` rounds exist and accepted no merge, delete or
        birth."""
        recent = self.round_logs[-n_passes:]
        if len(recent) < n_passes:
            return False
        return not any(r["merges_accepted"] or r["deletes_accepted"]
                       or r.get("births_accepted", 0) for r in recent)

    # ------------------------------------------------------------------------- births
    def births_settled(self, *, single=False, require_tried=False, first=False):
        """May this pass's round propose births (the schedule shared by the models)?

        Births wait until the model has absorbed its merges and deletes: the last round must
        exist and have accepted none of them (a round that shrank the model is not followed by
        one that grows it again). With ``require_tried`` the last round must also have tried
        some (when the model has merge or delete moves). With ``first`` the first round that
        proposes moves also proposes births, after its merges and deletes, at the components
        they left untouched: a start with too few components then splits the ones that hold
        several groups while it merges duplicates, instead of shrinking first and growing back
        only after the merges settle. A model of a single component has nothing to absorb: it
        may try a birth from the first round on, and again after every round that did not
        accept one. Births that were all rejected also wait (:meth:`due`).
        """
        last = self.round_logs[-1] if self.round_logs else None
        if single:
            return last is None or not last["births_accepted"]
        if first and not any(r["merges_tried"] or r["deletes_tried"]
                             or r.get("births_tried", 0) for r in self.round_logs):
            return True
        settled = last is not None and not (last["merges_accepted"] or last["deletes_accepted"])
        if require_tried and {"merge", "delete"} & set(self.moves):
            settled = settled and bool(last["merges_tried"] or last["deletes_tried"])
        return settled

    def birth_rng(self, k):
        """The random stream of a birth at component k in this pass (seeded by k's identity
        and the pass, so that a proposal does not depend on which others were made)."""
        return np.random.RandomState((int(self.uid[k]) * 7919 + self._pass) % (2 ** 31))

    def run_births(self, candidates, alive, log, select, try_birth, apply):
        """The birth loop of a round: the targets ``candidates`` in order, skipping removed or
        already touched ones. ``select(k, rng)`` returns the target items of k (None to skip
        k without trying it), ``try_birth(k, items, rng)`` evaluates the proposal on the
        whole-data objective (None when rejected, else what ``apply(k, items, result)``
        needs to edit the cached statistics). A rejected target waits its cool-down (:meth:
        `reject_birth`)."""
        for k in np.asarray(candidates).tolist():
            if not alive()[k] or k in log.touched:
                continue
            rng = self.birth_rng(k)
            items = select(k, rng)
            if items is None:
                continue
            log.births_tried += 1
            res = try_birth(k, items, rng)
            if res is None:
                self.reject_birth(k)
                continue
            log.births_accepted += 1
            log.touched.add(k)
            apply(k, items, res)

    # ------------------------------------------------------------------------- a round
    def run_merges(self, pairs, alive, log, try_merge, apply, may_chain=None):
        """The merge loop of a round: the pairs in order, skipping those with a removed or
        already touched component; ``try_merge(p, a, b)`` evaluates pair p on the
        whole-data objective (True when accepted), ``apply(p, a, b)`` then edits the
        cached statistics. ``alive`` (bool (K,)) is read at every step. ``may_chain(p, a,
        b)``, when given, may still allow a pair one of whose components was touched (a
        model that can evaluate such a merge exactly)."""
        touched = log.touched
        for p, (a, b) in enumerate(np.asarray(pairs).tolist()):
            live = alive()
            if not (live[a] and live[b]):
                continue
            if (a in touched or b in touched) and (
                    may_chain is None or not may_chain(p, a, b)):
                continue
            log.merges_tried += 1
            if not try_merge(p, a, b):
                self.reject_pair(a, b)
                continue
            log.merges_accepted += 1
            log.touched.update((a, b))
            apply(p, a, b)

    def end_round(self, ops, alive, merge_map):
        """After a round's accepted merges/deletes: renew the identity of merged components,
        drop removed ones, and carry the pass's usage to the compacted components (merged
        usage adds; ``merge_map[k]`` is the index after compaction of the component that
        component k's usage now belongs to, -1 when removed)."""
        uid = self.uid.copy()
        for op in ops:
            if op[0] == "merge":
                uid[op[1]] = self._next_uid
                self._next_uid += 1
        self.uid = uid[alive]
        u = self.usage
        M = np.asarray(merge_map)
        if u is None or u["n_users"].size != M.size:
            self.usage = None
            return
        keep = M >= 0
        R = sp.csr_array((np.ones(int(keep.sum())), (M[keep], np.flatnonzero(keep))),
                         shape=(int(np.count_nonzero(alive)), M.size))
        pp = R @ u["sum_pp"] @ R.T
        self.usage = dict(n_users=R @ u["n_users"], sum_p=R @ u["sum_p"], n=u["n"],
                          sum_pp=sp.csr_array(pp) if sp.issparse(u["sum_pp"])
                          else np.asarray(pp))

    def permute_book(self, order):
        """Renumber the components as ``order`` (sorting) in the identities and the usage."""
        K = order.size
        if self.uid is not None and self.uid.size == K:
            self.uid = self.uid[order]
        u = self.usage
        if u is not None and u["n_users"].size == K:
            pp = u["sum_pp"]
            dense = pp.toarray() if sp.issparse(pp) else pp
            pp = dense[np.ix_(order, order)]
            self.usage = dict(n_users=u["n_users"][order], sum_p=u["sum_p"][order], n=u["n"],
                              sum_pp=sp.csr_array(pp) if sp.issparse(u["sum_pp"]) else pp)


class MoveWorkspace:
    """What a move round's workspace holds whatever the model (the base of the mixture's and
    the topic model's workspaces): the whole-data objective ``value`` of the current state,
    the components of the pass's space (``K``, plus those born in the round) with their
    ``alive`` flags (a removed component is flagged, not dropped, until the model compacts),
    ``merge_map`` (component k's statistics now belong to ``merge_map[k]``, -1 when removed)
    and ``ops``, the accepted moves in order."""

    def init_space(self, K):
        self.K = int(K)
        self.alive = np.ones(self.K, dtype=bool)
        self.merge_map = np.arange(self.K)
        self.ops = []

    def accepts(self, value):
        """Does ``value`` improve on the current objective (:func:`improves`)?"""
        return improves(value, self.value)

    def merged(self, a, b):
        """Record that b was merged into a."""
        self.merge_map[self.merge_map == b] = a

    def removed(self, j):
        """Record that j was removed (its statistics moved to other components)."""
        self.merge_map[self.merge_map == j] = -1

    def grow(self, n_new):
        """Append ``n_new`` components born in the round (the last ``n_new`` slots)."""
        K0 = self.K
        self.alive = np.concatenate([self.alive, np.ones(n_new, dtype=bool)])
        self.merge_map = np.concatenate([self.merge_map, K0 + np.arange(n_new)])
        self.K = K0 + int(n_new)
