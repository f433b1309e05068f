# SPDX-License-Identifier: BSD-3-Clause
"""Memoized merge, delete and sort moves of the Dirichlet-process Gaussian mixture.

The moves follow Hughes & Sudderth (2013) and Hughes, Kim & Sudderth (2015) and use the
machinery HDPTopicModel uses (:mod:`sparseclust._moves`: candidate selection, the pair
lookup table, the round log, compaction; the pair-entropy kernel of
``sparseclust._kernels._hdp_stats``). A round spans one pass of memoized (or batch) training:

1. **before the pass** (:meth:`MixtureMoves.before_pass`) merge candidates are chosen: each
   cluster's nearest clusters by the symmetric Kullback-Leibler divergence of their
   point-estimate Gaussians, and its most correlated ones by the previous pass's co-usage
   (the correlation across samples of the responsibilities r_nk,
   :func:`sparseclust._moves.usage_correlation`), ranked by an upper bound on the gain of
   merging them computed from the statistics alone (the change of the data terms; merging
   can only lower the entropy term); delete candidates are the smallest clusters (expected
   counts N_k) whose samples fit in a budget of rows to revisit;
2. **during the pass** every batch visit gathers, besides its statistics, the entropy change
   of merging each candidate pair, ``PH_ab = sum_n h(r_na, r_nb)`` with
   ``h(x, y) = x log x + y log y - (x + y) log(x + y)`` over the rows whose L-sparse support
   holds both a and b (for the others merging changes no entropy term), and the
   responsibilities of the rows that use a delete candidate;
3. **after the pass** (:meth:`MixtureMoves.after_pass`) the proposals are evaluated on the
   whole-data statistics and each is accepted only if the whole-data ELBO increases:

   - merge a, b: ``N, Sx, Sxx`` add, the entropy of the merged cluster is
     ``H_a + H_b + PH_ab``; only the merged cluster's data terms and the allocation terms
     (which depend on every N_k through the sticks) are re-evaluated;
   - delete j: the statistics of the rows using j are subtracted, the local step is re-run on
     those rows under the current clusters without j, and the new statistics added;
   - sort: the clusters are reordered by decreasing N_k when that raises the allocation
     terms (the stick-breaking prior depends on the order; nothing else does).

   Accepted edits are applied to every batch's cached statistics as well, so memoized
   training stays exact and its objective monotone; removed clusters are then dropped
   (:func:`sparseclust._moves.compaction`). A cluster touched by an accepted move takes part
   in no other move of the round, and a rejected proposal waits ``cooldown * 2 ** (n - 1)``
   passes after its n-th rejection before it is tried again (the bookkeeping of
   :class:`sparseclust._moves.MoveBook`, shared with HDPTopicModel).
"""

import copy

import numpy as np

from .._engine import SuffStats
from .._kernels import _hdp_stats
from .._moves import (
    MoveBook,
    MoveRound,
    RoundLog,
    compaction,
    select_deletes,
    select_merge_pairs,
    usage_correlation,
)
from ..utils import effective_n_threads
from . import _gaussian

__all__ = ["MixtureMoves"]

#: a proposal is accepted when it raises the objective by more than this fraction of |L|
ACCEPT_RTOL = 1e-12


def restrict(stats, idx):
    """The statistics of the clusters ``idx`` only (a new SuffStats)."""
    return SuffStats(**{k: np.ascontiguousarray(v[idx]) for k, v in stats.items()})


def _zero(stats, j):
    for _k, v in stats.items():
        v[j] = 0.0


def _own(stats):
    """A SuffStats whose arrays may be edited in place."""
    return stats.copy()


class MixtureMoves(MoveBook):
    """Merge / delete / sort moves for a mixture model of the engine (a mixin).

    The host class provides ``n_components``, ``prior``, ``dtype``, ``n_threads``,
    ``local_step``, ``stats_from_responsibilities``, ``global_step``, the ``_collect`` hook of
    its local step, ``plain_model(K)`` (a model without moves over K clusters) and
    ``set_n_components(K, new_of_old)`` and ``renumber_candidates(new_of_old)``.

    ``move_opts``: ``start`` (first pass whose end runs moves, >= 2), ``near`` (nearest
    clusters by divergence and ``corr_near`` by co-usage examined per cluster),
    ``pairs_per_component``, ``max_pairs`` (None: 2 K), ``delete_rows`` (rows to revisit per
    pass; None: 10% of the samples, at least 500), ``max_deletes`` (the most per round; a
    round that accepted none halves the next round's number), ``cooldown`` (passes).
    """

    def init_moves(self, moves, move_opts=None):
        self.moves = tuple(moves)
        opts = dict(start=2, near=16, corr_near=4, pairs_per_component=3, max_pairs=None,
                    delete_rows=None, max_deletes=20, cooldown=3)
        opts.update(move_opts or {})
        self.move_opts = opts
        # cluster identities, rejected-proposal memo with its cool-down, co-usage, round logs
        self.init_book()

    @property
    def _gathers(self):
        return "merge" in self.moves or "delete" in self.moves

    # ------------------------------------------------------------------------- the pass
    def visit(self, X, params, batch):
        if not self._gathers:
            return self.local_step(X, params)
        stats, side = self.visit_local(X, params, self.visit_context())
        self.record_visit(batch, side, params)
        return stats

    # The visit is split so that it can run where the data are (sparseclust._dask maps
    # visit_local over the partitions of a batch): visit_local is pure given the context and
    # returns the statistics and the "side" results of the moves; combine_sides joins those of
    # consecutive parts of a batch; record_visit keeps them (here, on the client).

    def visit_context(self):
        """What :meth:`visit_local` reads besides the data and parameters: the candidates of
        the current round (without what the pass gathered so far), whether co-usage is
        gathered."""
        rnd = self.round
        if rnd is not None:
            lite = MoveRound.__new__(MoveRound)
            lite.K, lite.pairs, lite.pair_of, lite.deletes = (rnd.K, rnd.pairs, rnd.pair_of,
                                                              rnd.deletes)
            lite.batch = {}
            rnd = lite
        return dict(round=rnd, usage=self._usage_acc is not None)

    def worker_model(self):
        """A copy with this model's local-step settings and none of its move bookkeeping or
        cached candidate sets (what a task that runs the visit elsewhere needs)."""
        m = copy.copy(self)
        m.init_book()
        m.reset_candidates()
        m._collect = None
        return m

    def visit_local(self, X, params, context, doc_offset=0):
        """Local step of the batch (or part of a batch) X: (statistics, side). The side holds
        the entropy change of merging each candidate pair (PH), the co-usage (n_users,
        sum_p, sum_pp, n) and the rows that use a delete candidate (positions shifted by
        ``doc_offset``, the position of X's first row in its batch) with their
        responsibilities."""
        K = self.n_components
        rnd, want_usage = context["round"], context["usage"]
        P = rnd.pairs.shape[0] if rnd is not None else 0
        side = dict(PH=np.zeros(P), rows=[], values=[], indices=[], usage=None)
        if want_usage:
            side["usage"] = dict(n_users=np.zeros(K), sum_p=np.zeros(K),
                                 sum_pp=np.zeros((K, K)), n=0.0)
        usage = side["usage"]
        nt = effective_n_threads(self.n_threads)

        def collect(start, values, indices, Xc):
            n, Lk = values.shape
            v = np.ascontiguousarray(values, dtype=np.float64)
            idx = np.ascontiguousarray(indices, dtype=np.int32)
            if usage is not None:
                used = v > 0
                usage["n_users"] += np.bincount(idx[used], minlength=K)[:K]
                R = _csr(v, idx, K)
                usage["sum_pp"] += (R.T @ R).toarray()
                usage["n"] += n
            if P and Lk > 1:
                _hdp_stats.pair_entropy_sparse(
                    np.arange(n + 1, dtype=np.int64), np.ones(n), v, idx,
                    np.zeros(n, dtype=np.int32), rnd.pair_of, K, side["PH"], nt,
                )
            if rnd is not None and rnd.deletes.size:
                m = (np.isin(idx, rnd.deletes) & (v > 0)).any(axis=1)
                if m.any():
                    side["rows"].append(doc_offset + start + np.flatnonzero(m))
                    side["values"].append(np.asarray(values)[m].copy())
                    side["indices"].append(idx[m].copy())

        self._collect = collect
        try:
            stats = self.local_step(X, params)
        finally:
            self._collect = None
        if usage is not None:
            usage["sum_p"] += stats["N"]
        return stats, side

    @staticmethod
    def combine_sides(a, b):
        """The side results of two consecutive parts of a batch as those of their union."""
        out = dict(PH=a["PH"] + b["PH"], rows=a["rows"] + b["rows"],
                   values=a["values"] + b["values"], indices=a["indices"] + b["indices"])
        out["usage"] = (None if a["usage"] is None
                        else {k: a["usage"][k] + b["usage"][k] for k in a["usage"]})
        return out

    def record_visit(self, batch, side, params):
        """Keep what the visit of batch number ``batch`` gathered for the moves."""
        if side["usage"] is not None and self._usage_acc is not None:
            for k, v in side["usage"].items():
                self._usage_acc[k] += v
        if self.round is not None:
            rows = side["rows"]
            self.round.batch[batch] = dict(
                PH=side["PH"],
                rows=np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64),
                values=np.vstack(side["values"]) if rows else None,
                indices=np.vstack(side["indices"]) if rows else None,
            )

    def reinfer(self, batches, targets, old, plain, params0, idx):
        """Re-run the local step of ``plain`` under ``params0`` (the clusters ``idx``) on the
        rows ``targets[b]`` (positions in batch b) with their old responsibilities
        ``old[b] = (values, indices)``: {b: (statistics before, after, new values, new
        indices)} (:func:`reinfer_rows`). On the batches' own ``map_rows`` when they have one
        (the partitions of a Dask collection: the rows are re-inferred where they are), else
        here."""
        run = getattr(batches, "map_rows", None)
        if run is not None and targets:
            return run(reinfer_rows, targets, (self.worker_model(), plain, params0, idx,
                                               self.n_components), row_args=old)
        return {bb: reinfer_rows(batches[bb][ids], self, plain, params0, idx,
                                 self.n_components, *old[bb])
                for bb, ids in targets.items()}

    def before_pass(self, stats, params, state):
        self.round = None
        self._pass = state["pass"]
        if not self._gathers:
            return
        K = self.n_components
        self.begin_pass(state["pass"], K)
        self._usage_acc = dict(n_users=np.zeros(K), sum_p=np.zeros(K),
                               sum_pp=np.zeros((K, K)), n=0.0)
        u = self.usage
        if (state["pass"] < self.move_opts["start"] or u is None or stats is None
                or u["n_users"].size != K or K < 2):
            return
        opts = self.move_opts
        pairs = np.zeros((0, 2), dtype=np.int32)
        if "merge" in self.moves:
            corr = usage_correlation(u["sum_p"], u["sum_pp"], u["n"])
            score = self.block_rejected_pairs(self._merge_scores(stats, params, corr))
            max_pairs = opts["max_pairs"] if opts["max_pairs"] is not None else 2 * K
            pairs, _ = select_merge_pairs(
                score, max_per_component=opts["pairs_per_component"], max_pairs=max_pairs,
                min_score=-np.finfo(np.float64).max,
            )
        dels = np.zeros(0, dtype=np.int64)
        if "delete" in self.moves:
            n_total = float(np.sum(stats["N"]))
            budget = opts["delete_rows"]
            if budget is None:
                budget = max(500, int(0.1 * n_total))
            dels = select_deletes(u["n_users"], max_items=budget,
                                  max_candidates=self.delete_budget.value,
                                  allowed=self.deletable(),
                                  size=stats["N"])
        if pairs.shape[0] or dels.size:
            self.round = MoveRound(K, pairs, dels)  # batch -> dict(PH, rows, values, indices)

    def _merge_scores(self, stats, params, corr):
        """(K, K) ranking of merge candidates, -inf for pairs not examined.

        Each cluster's ``near`` nearest clusters by the symmetric KL divergence of the
        point-estimate Gaussians N(m_k, E[Lambda_k]^-1) and its ``corr_near`` most correlated
        ones by co-usage are examined; their score is the change of the data terms
        (:func:`_gaussian.component_terms`) when their statistics are pooled, an upper bound on
        the change of the ELBO up to the allocation terms, since merging never raises the
        entropy term.
        """
        K = stats["N"].shape[0]
        opts = self.move_opts
        kl = _symmetric_kl(params, self.prior)
        np.fill_diagonal(kl, np.inf)
        near = np.argsort(kl, axis=1)[:, : min(opts["near"], K - 1)]
        c = corr.copy()
        np.fill_diagonal(c, -np.inf)
        cnear = np.argsort(-c, axis=1)[:, : min(opts["corr_near"], K - 1)]
        a = np.repeat(np.arange(K), near.shape[1] + cnear.shape[1])
        b = np.concatenate([near, cnear], axis=1).ravel()
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        keys = np.unique(lo * K + hi)
        pa, pb = keys // K, keys % K
        comp = _gaussian.component_terms(stats, params, self.prior)
        score = np.full((K, K), -np.inf)
        for s0 in range(0, pa.size, 256):
            ia, ib = pa[s0:s0 + 256], pb[s0:s0 + 256]
            pooled = SuffStats(**{k: v[ia] + v[ib] for k, v in stats.items()})
            gain = (_gaussian.component_terms(
                pooled, _gaussian.global_step(pooled, self.prior), self.prior)
                - comp[ia] - comp[ib])
            score[ia, ib] = score[ib, ia] = gain
        return score

    def can_stop(self):
        """Training may stop (``tol``) only after ``cooldown + 1`` passes without an accepted
        merge or delete: a rejected proposal is tried again after its cool-down, and a pass
        that follows accepted moves has not yet seen their consequences."""
        if not self._gathers:
            return True
        return self.quiet_for(self.move_opts["cooldown"] + 1)

    # ------------------------------------------------------------------------- the moves
    def after_pass(self, stats, params, state):
        log = RoundLog()
        if self._usage_acc is not None:
            self.usage = self._usage_acc
            self._usage_acc = None
        batch_stats = state["batch_stats"]
        stats = _own(stats)
        rnd, self.round = self.round, None
        changed = False
        if rnd is not None and len(rnd.batch) == len(batch_stats):
            for b in range(len(batch_stats)):
                batch_stats[b] = _own(batch_stats[b])
            work = _Workspace(self, stats)
            if rnd.pairs.shape[0]:
                self._merges(work, rnd, batch_stats, log)
            if rnd.deletes.size:
                self._deletes(work, rnd, batch_stats, state["batches"], log)
                self.end_deletes(log)
            if log.merges_accepted or log.deletes_accepted:
                stats = work.compact(batch_stats)
                new = compaction(work.alive)
                M = work.merge_map
                new_of_old = np.where(M >= 0, new[np.maximum(M, 0)], -1)
                self.end_round(work.ops, work.alive, new_of_old)
                self.set_n_components(int(work.alive.sum()), new_of_old)
                changed = True
        if "sort" in self.moves:
            if self._sort(stats, batch_stats, log):
                changed = True
        if changed:
            params = self.global_step(stats)
        self.round_logs.append(dict(log.as_dict(), n_components=int(self.n_components)))
        return stats, params

    def _merges(self, work, rnd, batch_stats, log):
        PH = sum(rnd.batch[b]["PH"] for b in rnd.batch)
        # the data terms of every proposed merged cluster, in one batched global step: a pair
        # is tried only while neither of its clusters was touched, so its pooled statistics
        # are those of the pass (only the allocation terms change with earlier merges)
        st = work.stats
        pa, pb = rnd.pairs[:, 0], rnd.pairs[:, 1]
        pooled = SuffStats(**{k: v[pa] + v[pb] for k, v in st.items()})
        comp_ab = _gaussian.component_terms(pooled, _gaussian.global_step(pooled, self.prior),
                                            self.prior)

        def apply(p, a, b):
            for bb, st in enumerate(batch_stats):
                _merge_into(st, a, b, rnd.batch[bb]["PH"][p])
            work.merge_map[work.merge_map == b] = a
            work.ops.append(("merge", a, b))

        self.run_merges(rnd.pairs, lambda: work.alive, log,
                        lambda p, a, b: work.try_merge(a, b, PH[p], comp_ab[p]), apply)

    def _deletes(self, work, rnd, batch_stats, batches, log):
        touched_by_merge = np.array(sorted(log.touched), dtype=np.int64)
        for j in rnd.deletes:
            j = int(j)
            if not work.alive[j] or j in log.touched:
                continue
            targets, ok = {}, True
            for bb, g in rnd.batch.items():
                if g["values"] is None:
                    continue
                m = ((g["indices"] == j) & (g["values"] > 0)).any(axis=1)
                if not m.any():
                    continue
                # rows that also use a merged cluster hold merged statistics in the cache
                if touched_by_merge.size and np.isin(g["indices"][m], touched_by_merge).any():
                    ok = False
                    break
                targets[bb] = np.flatnonzero(m)
            if not ok:
                continue
            log.deletes_tried += 1
            res = work.try_delete(j, targets, rnd, batches)
            if res is None:
                self.reject_delete(j)
                continue
            log.deletes_accepted += 1
            log.touched.add(j)
            for bb, (before, after, values, indices) in res.items():
                st = batch_stats[bb] - before + after
                _zero(st, j)
                batch_stats[bb] = st
                g = rnd.batch[bb]
                g["values"][targets[bb]] = values
                g["indices"][targets[bb]] = indices
            for bb, st in enumerate(batch_stats):
                if bb not in res:
                    _zero(st, j)
            work.merge_map[work.merge_map == j] = -1
            work.ops.append(("delete", j))

    def _sort(self, stats, batch_stats, log):
        N = stats["N"]
        order = np.argsort(-N, kind="stable")
        if np.array_equal(order, np.arange(N.size)):
            return False
        prior = self.prior
        old = _gaussian.optimal_allocation_terms(N, prior)
        new = _gaussian.optimal_allocation_terms(N[order], prior)
        if not new > old + ACCEPT_RTOL * abs(old):
            return False
        log.sorted = True
        for st in [stats, *batch_stats]:
            for k, v in list(st.items()):
                st[k] = np.ascontiguousarray(v[order])
        self.permute_book(order)
        inv = np.empty_like(order)
        inv[order] = np.arange(order.size)
        self.renumber_candidates(inv)
        return True


def _symmetric_kl(params, prior):
    """(K, K) symmetric KL divergence KL(a || b) + KL(b || a) between the point-estimate
    Gaussians N(m_k, E[Lambda_k]^-1): tr(P_b S_a) + tr(P_a S_b) - 2 D
    + (m_a - m_b)^T (P_a + P_b) (m_a - m_b), up to the factor 1/2 (log determinants cancel)."""
    P = params.precisions
    K = P.shape[0]
    D = prior.n_features
    if P.ndim == 1:  # spherical
        P = P[:, None] * np.ones(D)
    if P.ndim == 2:  # diagonal
        Sig = 1.0 / P
        tr = P @ Sig.T  # tr(P_a S_b) = sum_d P_ad / P_bd
        out = tr + tr.T - 2.0 * D
        if not prior.zero_mean:
            m = params.means
            q = (P * m * m).sum(1)
            cross = (P * m) @ m.T  # m_a^T P_a m_b
            mPm = P @ (m * m).T  # m_b^T P_a m_b
            Q = q[:, None] - 2.0 * cross + mPm  # (m_a - m_b)^T P_a (m_a - m_b)
            out = out + Q + Q.T
        return out
    Sig = np.linalg.inv(P)
    Pf = P.reshape(K, -1)
    tr = Pf @ Sig.reshape(K, -1).T  # tr(P_a S_b)
    out = tr + tr.T - 2.0 * D
    if not prior.zero_mean:
        m = params.means
        Pm = np.einsum("kij,kj->ki", P, m)
        q = (Pm * m).sum(1)
        cross = Pm @ m.T
        mm = (m[:, :, None] * m[:, None, :]).reshape(K, -1)
        mPm = Pf @ mm.T
        Q = q[:, None] - 2.0 * cross + mPm
        out = out + Q + Q.T
    return out


def reinfer_rows(X, model, plain, params0, idx, K, vals_old, idx_old):
    """The delete move's re-inference of the rows X (their old responsibilities ``vals_old``
    over clusters ``idx_old``) by the local step of ``plain`` under ``params0``, defined on
    the clusters ``idx`` of the K: (statistics before, after, new values, new indices),
    statistics by ``model.stats_from_responsibilities``."""
    Xt = np.ascontiguousarray(X)
    vals_old = np.ascontiguousarray(vals_old)
    idx_old = np.ascontiguousarray(idx_old)
    before = model.stats_from_responsibilities(vals_old, idx_old, Xt)
    got = []

    def keep(start, values, indices, Xc):
        got.append((start, np.array(values), np.array(indices)))

    plain = copy.copy(plain)
    plain._collect = keep
    plain.local_step(Xt, params0)
    plain._collect = None
    got.sort(key=lambda t: t[0])
    vals_new = np.vstack([t[1] for t in got]).astype(vals_old.dtype)
    idx_new = idx[np.vstack([t[2] for t in got])].astype(np.int32)
    # the re-inferred rows keep their support width: when L had to shrink (fewer clusters
    # than L) they are padded with zero responsibilities on other clusters, which change no
    # statistic
    if vals_new.shape[1] < vals_old.shape[1]:
        pad = vals_old.shape[1] - vals_new.shape[1]
        vals_new = np.hstack([vals_new, np.zeros((vals_new.shape[0], pad),
                                                 dtype=vals_new.dtype)])
        extra = np.empty((idx_new.shape[0], pad), dtype=np.int32)
        for r in range(idx_new.shape[0]):
            extra[r] = np.setdiff1d(np.arange(K), idx_new[r])[:pad]
        idx_new = np.hstack([idx_new, extra])
    after = model.stats_from_responsibilities(vals_new, idx_new, Xt)
    return before, after, vals_new, idx_new


def _csr(v, idx, K):
    import scipy.sparse as sp

    n, Lk = v.shape
    return sp.csr_array((v.ravel(), idx.ravel(), np.arange(0, n * Lk + 1, Lk)), shape=(n, K))


def _merge_into(st, a, b, ph):
    """Merge cluster b into a in statistics (in place): N, Sx, Sxx add; the entropy of the
    merged cluster is H_a + H_b + ph."""
    for k, v in st.items():
        if k == "entropy":
            v[a] = v[a] + v[b] + ph
        else:
            v[a] = v[a] + v[b]
        v[b] = 0.0


class _Workspace:
    """Whole-data statistics during a move round, in the cluster space of the pass (removed
    clusters are flagged, not dropped, until :meth:`compact`), with the per-cluster data
    terms cached so that a proposal re-evaluates only the clusters it changes."""

    def __init__(self, model, stats):
        self.m = model
        self.prior = model.prior
        self.stats = stats
        K = stats["N"].shape[0]
        self.K = K
        self.alive = np.ones(K, dtype=bool)
        self.comp = self._component_terms(stats, np.arange(K))
        self.value = self._value(stats, self.alive, self.comp)
        self.merge_map = np.arange(K)
        self.ops = []

    def _component_terms(self, stats, idx):
        sub = restrict(stats, idx)
        return _gaussian.component_terms(sub, _gaussian.global_step(sub, self.prior), self.prior)

    def _value(self, stats, alive, comp):
        """The ELBO of the clusters ``alive`` at their optimal global parameters."""
        N = stats["N"][alive]
        return (_gaussian.optimal_allocation_terms(N, self.prior)
                + float(np.sum(stats["entropy"][alive])) + float(np.sum(comp[alive])))

    def try_merge(self, a, b, ph, comp_ab=None):
        """Merge b into a if that raises the whole-data ELBO; ``comp_ab``: the merged
        cluster's data terms when already computed (they do not depend on ``ph``)."""
        st = self.stats
        prop = SuffStats(**{k: v[[a]] + v[[b]] for k, v in st.items()})
        prop["entropy"] = prop["entropy"] + ph
        if comp_ab is None:
            comp_ab = _gaussian.component_terms(prop, _gaussian.global_step(prop, self.prior),
                                                self.prior)[0]
        alive = self.alive.copy()
        alive[b] = False
        N = st["N"].copy()
        N[a] = prop["N"][0]
        ent = st["entropy"].copy()
        ent[a] = prop["entropy"][0]
        comp = self.comp.copy()
        comp[a] = comp_ab
        value = (_gaussian.optimal_allocation_terms(N[alive], self.prior)
                 + float(np.sum(ent[alive])) + float(np.sum(comp[alive])))
        if not value > self.value + ACCEPT_RTOL * abs(self.value):
            return False
        _merge_into(st, a, b, ph)
        self.alive, self.comp, self.value = alive, comp, value
        return True

    def try_delete(self, j, targets, rnd, batches):
        """Re-run the local step without j on the rows that use it; returns per batch
        (before, after, new values, new indices) when the whole-data ELBO increases."""
        m = self.m
        alive = self.alive.copy()
        alive[j] = False
        idx = np.flatnonzero(alive)
        if idx.size == 0:
            return None
        params0 = _gaussian.global_step(restrict(self.stats, idx), self.prior)
        plain = m.plain_model(idx.size)
        prop = self.stats.copy()
        changed = {j}
        ids = {bb: rnd.batch[bb]["rows"][rows] for bb, rows in targets.items()}
        old = {bb: (np.ascontiguousarray(rnd.batch[bb]["values"][rows]),
                    np.ascontiguousarray(rnd.batch[bb]["indices"][rows]))
               for bb, rows in targets.items()}
        out = m.reinfer(batches, ids, old, plain, params0, idx)
        for bb in targets:
            before, after, vals_new, idx_new = out[bb]
            prop = prop - before + after
            changed.update(np.unique(old[bb][1]).tolist())
            changed.update(np.unique(idx_new).tolist())
        _zero(prop, j)
        ch = np.array(sorted(k for k in changed if alive[k]), dtype=np.int64)
        comp = self.comp.copy()
        comp[j] = 0.0
        if ch.size:
            comp[ch] = self._component_terms(prop, ch)
        value = self._value(prop, alive, comp)
        # a cluster no row uses is removed when that costs nothing: at the end of the sticks
        # it contributes exactly zero (q = prior), so the objective ties up to rounding
        slack = ACCEPT_RTOL * abs(self.value)
        if not (value > self.value + slack or (not targets and value >= self.value - slack)):
            return None
        self.stats, self.alive, self.comp, self.value = prop, alive, comp, value
        return out

    def compact(self, batch_stats):
        """Drop the removed clusters from the whole-data and every batch's statistics."""
        idx = np.flatnonzero(self.alive)
        for b in range(len(batch_stats)):
            batch_stats[b] = restrict(batch_stats[b], idx)
        self.stats = restrict(self.stats, idx)
        return self.stats
