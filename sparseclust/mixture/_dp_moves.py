# SPDX-License-Identifier: BSD-3-Clause
"""Memoized merge, delete, birth and sort moves of the Dirichlet-process Gaussian mixture.

The moves follow Hughes & Sudderth (2013) and Hughes, Kim & Sudderth (2015) and use the
machinery HDPTopicModel uses (:mod:`sparseclust._moves`: candidate selection, the pair
lookup table, the round log, compaction; the pair-entropy kernel of
``sparseclust._kernels._hdp_stats``). A round spans one pass of memoized (or batch) training,
from the ``start``-th pass on (the second, the earliest: a round chooses its candidates from
the previous pass's co-usage; births can split again a cluster that merges joined too early):

1. **before the pass** (:meth:`MixtureMoves.before_pass`) delete candidates are chosen: the
   smallest clusters (expected counts N_k) whose samples fit in a budget of rows to revisit;
   the birth targets are max(``max_births``, ``birth_fraction`` K) clusters whose births
   were not rejected recently, those rejected the fewest times first and the largest among
   them (:func:`sparseclust._moves.select_births`: successive rounds visit every cluster,
   not the same largest ones), tried in
   the first round (after its merges, at the clusters they left untouched), then only after
   a round that tried merges or deletes and accepted none, and after rounds of rejected
   births only once their wait is over (:meth:`sparseclust._moves.MoveBook.due`), and
   likewise a round of deletes after rounds whose deletes were all rejected;
2. **during the pass** every batch visit gathers, besides its statistics, the entropy change
   of merging every two clusters that share a row, ``PH_ab = sum_n h(r_na, r_nb)`` with
   ``h(x, y) = x log x + y log y - (x + y) log(x + y)`` over the rows whose L-sparse support
   holds both a and b (a sparse sum with at most L (L - 1) / 2 entries per row; for every
   other pair merging changes no entropy term, PH_ab = 0), the responsibilities of the rows
   that use a delete candidate, and those of the rows in which a birth target holds at
   least :data:`BIRTH_SHARE` of the responsibility (its rows, and those it shares with its
   neighbours);
3. **after the pass** (:meth:`MixtureMoves.after_pass`) the merge candidates are chosen:
   each cluster's ``near`` nearest clusters by the symmetric Kullback-Leibler divergence of
   their point-estimate Gaussians and its ``corr_near`` most correlated ones by the pass's
   co-usage (the correlation across samples of the responsibilities r_nk,
   :func:`sparseclust._moves.usage_correlation`). The whole-data ELBO gain of each merge on
   its own is known in closed form from the pass's statistics (the merged cluster's data
   terms, ``PH_ab``, and the allocation terms,
   :func:`sparseclust.mixture._gaussian.merge_allocation_gain`), so the candidates are tried
   in decreasing gain and those that cannot raise the ELBO on their own are rejected without
   further work. The proposals are evaluated on the whole-data statistics and each is
   accepted only if the whole-data ELBO increases:

   - merge a, b: ``N, Sx, Sxx`` add, the entropy of the merged cluster is
     ``H_a + H_b + PH_ab``; only the merged cluster's data terms and the allocation terms
     (which depend on every N_k through the sticks) are re-evaluated;
   - delete j: the statistics of the rows using j are subtracted, the local step is re-run on
     those rows under the current clusters without j, and the new statistics added;
   - birth at k (Hughes & Sudderth 2013): the target is every row in which k holds at least
     :data:`BIRTH_SHARE` of the responsibility, so the fresh clusters may take rows from k's
     neighbours as well as from k; ``birth_components`` fresh clusters are fit to the target's
     rows, up to ``birth_fit_rows`` of them drawn at random (the better, by its ELBO on those
     rows, of two starts: k-means++ seeds on the rows, and the rows grouped by the axis along
     which they lie from their mean; each followed by iterations of the local and global steps
     of a plain mixture on those rows until they converge). When those rows are all of the
     target's, the birth is rejected at once unless the fresh clusters' ELBO on them beats
     that of one cluster holding them all (:func:`._dp_rows._fresh_clusters` states the
     stopping rules and this screen). Otherwise the local step is re-run on the target's rows
     (all of them up to :data:`BIRTH_VALUES` / n_features rows, or the delete budget if
     larger; no wider than their gathered responsibilities) under the current clusters plus
     the fresh ones, and the statistics of those rows are replaced; ``birth_refine`` times
     more, the global step of the proposal's statistics (k and its neighbours without the rows
     they lost, the fresh clusters with those they took) and the local step of the rows again,
     the best round being the proposal. Any responsibilities of any subset of rows give a
     valid ELBO, so the proposal is accepted, like the others, only when the whole-data ELBO
     increases; the fresh clusters are appended at the end of the sticks;
   - sort: the clusters are reordered by decreasing N_k when that raises the allocation
     terms (the stick-breaking prior depends on the order; nothing else does).

   Accepted edits are applied to every batch's cached statistics as well, so memoized
   training stays exact and its objective monotone; removed clusters are then dropped
   (:func:`sparseclust._moves.compaction`). A cluster touched by an accepted move takes part
   in no other move of the round, except that a cluster which absorbed clusters by merges may
   absorb another, c, when the gathered pair entropy between c and each cluster it absorbed is
   exactly 0 (no row holds both, so the merged entropy stays exact), and a rejected proposal
   waits ``cooldown * 2 ** (n - 1)`` passes after its n-th rejection before it is tried
   again (the bookkeeping of :class:`sparseclust._moves.MoveBook`, shared with
   HDPTopicModel).

The row and statistics helpers are in :mod:`._dp_rows`, the workspace that evaluates the
proposals on the whole-data statistics in :mod:`._dp_workspace`.
"""

import copy

import numpy as np

from .._moves import (
    MoveBook,
    MoveRound,
    RoundLog,
    compaction,
    improves,
    select_births,
    select_deletes,
    subsample_targets,
    usage_correlation,
)
from . import _gaussian
from ._dp_rows import (
    _block_pair_entropy,
    _csr,
    _fold_merged,
    _merge_into,
    _move_stats,
    _own,
    _pad,
    _pair_lookup,
    _reinfer_rows_all,
    _sum_pairs,
    _zero,
    reinfer_rows,
    restrict,
)
from ._dp_workspace import _Workspace

__all__ = ["MixtureMoves"]

#: values (rows x features) a birth re-infers at most: every row of the target up to
#: ``BIRTH_VALUES // n_features`` rows (or the delete budget if larger). Re-inferring a
#: subsample of a large cluster leaves the rest in it, and the proposal then loses (three blobs
#: of 1,000 points from one cluster stayed one cluster with the 500-row subsample of an earlier
#: default). The target's rows are gathered in one dense array (on Dask, fetched to the client):
#: at most 80 MB of float64 by this bound.
BIRTH_VALUES = 10_000_000

#: a birth at k targets the rows in which k holds at least this share of the responsibility
BIRTH_SHARE = 0.01

#: pairs of the merge order scanned at once for the data terms of chained merges
CHAIN_BATCH = 64

#: a chained merge whose ELBO change, computed for several at once, is below
#: ``-CHAIN_MARGIN * S`` is rejected without the exact evaluation (which it cannot pass);
#: S = |L| + sum_k |data terms_k| + sum_k |entropy_k| bounds the magnitude that rounds
CHAIN_MARGIN = 1e-9


def _birth_rows(values, indices, clusters):
    """bool (n,): the rows in which one of ``clusters`` holds at least :data:`BIRTH_SHARE` of
    the responsibility (compared in float64, whatever the values' dtype)."""
    share = np.asarray(values, dtype=np.float64)
    return (np.isin(indices, clusters) & (share >= BIRTH_SHARE)).any(axis=1)


class MixtureMoves(MoveBook):
    """Merge / delete / sort moves for a mixture model of the engine (a mixin).

    The host class provides ``n_components``, ``prior``, ``dtype``, ``n_threads``,
    ``local_step``, ``stats_from_responsibilities``, ``global_step``, the ``_collect`` hook of
    its local step, ``plain_model(K)`` (a model without moves over K clusters) and
    ``set_n_components(K, new_of_old)`` and ``renumber_candidates(new_of_old)``.

    ``move_opts``, fixed: ``start`` (first pass whose end runs moves), ``near`` (nearest
    clusters by divergence and ``corr_near`` by co-usage examined per cluster as merge
    partners), ``max_deletes`` (the most per round; a round that accepted none halves the
    next round's number), ``cooldown`` (passes), ``birth_components`` (fresh clusters per
    birth), ``birth_fit_rows`` (rows the fresh clusters are fit to), ``birth_iters`` (the
    most iterations of that fit, which stops earlier once converged), ``birth_refine``
    (rounds of the global step of the proposal's statistics and the targets' local step
    after the first re-inference; the best round is the proposal), ``max_births`` and
    ``birth_fraction`` (targets per round: the larger of ``max_births`` and that fraction of
    the clusters). A pass's deletes revisit 10% of the samples, at least 500 rows; a birth
    re-infers up to :data:`BIRTH_VALUES` / n_features rows of its target, or the delete
    budget if larger (a uniform subsample of the target's rows beyond it).
    """

    def init_moves(self, moves):
        self.moves = tuple(moves)
        self.move_opts = dict(start=2, near=64, corr_near=4, max_deletes=20, cooldown=3,
                              birth_components=3, birth_fit_rows=20000, birth_iters=20,
                              birth_refine=3, max_births=4, birth_fraction=0.25)
        # cluster identities, rejected-proposal memo with its cool-down, co-usage, round logs
        self.init_book()

    @property
    def _gathers(self):
        return "merge" in self.moves or "delete" in self.moves or "birth" in self.moves

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
            rnd = rnd.candidates_only()
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
        gather_ph = rnd is not None and rnd.pair_entropy
        side = dict(pair_keys=[], pair_h=[], rows=[], values=[], indices=[], usage=None)
        if want_usage:
            side["usage"] = dict(n_users=np.zeros(K), sum_p=np.zeros(K),
                                 sum_pp=np.zeros((K, K)), n=0.0)
        usage = side["usage"]

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
            if gather_ph and Lk > 1:
                keys, h = _block_pair_entropy(v, idx, K)
                side["pair_keys"].append(keys)
                side["pair_h"].append(h)
            if rnd is not None and (rnd.deletes.size or rnd.births.size):
                m = (np.isin(idx, rnd.deletes) & (v > 0)).any(axis=1)
                if rnd.births.size:
                    m |= _birth_rows(v, idx, rnd.births)
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
        out = dict(pair_keys=a["pair_keys"] + b["pair_keys"], pair_h=a["pair_h"] + b["pair_h"],
                   rows=a["rows"] + b["rows"],
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
                PH=_sum_pairs(side["pair_keys"], side["pair_h"]),
                rows=np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64),
                values=np.vstack(side["values"]) if rows else None,
                indices=np.vstack(side["indices"]) if rows else None,
            )

    def reinfer(self, batches, targets, old, plain, params0, idx):
        """Re-run the local step of ``plain`` under ``params0`` (the clusters ``idx``) on the
        rows ``targets[b]`` (positions in batch b) with their old responsibilities
        ``old[b] = (values, indices)``: {b: (clusters used, their statistics before, after,
        new values, new indices)} (:func:`reinfer_rows`). On the batches' own ``map_rows``
        when they have one (the partitions of a Dask collection: the rows are re-inferred
        where they are), else here."""
        run = getattr(batches, "map_rows", None)
        if run is not None and targets:
            # per partition on the K clusters, so that the partitions' statistics add
            got = run(_reinfer_rows_all, targets, (self.worker_model(), plain, params0, idx,
                                                   self.n_components), row_args=old)
            out = {}
            for bb, (before, after, vals_new, idx_new) in got.items():
                ids = np.union1d(old[bb][1], idx_new).astype(np.int64)
                out[bb] = (ids, restrict(before, ids), restrict(after, ids), vals_new, idx_new)
            return out
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
                or u["n_users"].size != K):
            return
        opts = self.move_opts
        # a single cluster can only grow: births alone
        single = K < 2
        merge = "merge" in self.moves and not single
        dels = np.zeros(0, dtype=np.int64)
        if "delete" in self.moves and not single and self.due("deletes"):
            n_total = float(np.sum(stats["N"]))
            budget = max(500, int(0.1 * n_total))
            dels = select_deletes(u["n_users"], max_items=budget,
                                  max_candidates=self.delete_budget.value,
                                  allowed=self.deletable(),
                                  size=stats["N"])
        births = np.zeros(0, dtype=np.int64)
        if ("birth" in self.moves and self.due("births")
                and self.births_settled(single=single, require_tried=True, first=True)):
            # births in the first round, beside its merges, then once the merges and deletes
            # are absorbed: after a round that tried them and accepted none
            # (MoveBook.births_settled, the schedule shared with the topics)
            # a larger model has more clusters that may split: a quarter of them, at least
            # max_births
            n_births = max(opts["max_births"], int(np.ceil(opts["birth_fraction"] * K)))
            births = select_births(stats["N"], max_candidates=n_births,
                                   allowed=self.birthable(),
                                   min_size=4.0 * opts["birth_components"],
                                   tried=self.birth_rejections())
        if merge or dels.size or births.size:
            # batch -> dict(PH, rows, values, indices); the merge pairs are chosen after the
            # pass, from the pair entropies of every two clusters that share a row
            self.round = MoveRound(K, np.zeros((0, 2), dtype=np.int32), dels, births)
            self.round.pair_entropy = merge

    def _merge_candidates(self, stats, params, corr):
        """Merge candidates (a, b), a < b, examined after the pass: each cluster's ``near``
        nearest clusters by the symmetric KL divergence of the point-estimate Gaussians
        N(m_k, E[Lambda_k]^-1) and its ``corr_near`` most correlated ones by co-usage,
        without the pairs rejected recently."""
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
        keep = np.isfinite(self.block_rejected_pairs(np.zeros((K, K)))[pa, pb])
        return pa[keep], pb[keep]

    def can_stop(self):
        """Training may stop (``tol``) only after ``cooldown + 1`` move rounds without an
        accepted merge, delete or birth: a rejected proposal is tried again after its
        cool-down, and a pass that follows accepted moves has not yet seen their
        consequences. Before the moves start, the passes do not count."""
        if not self._gathers:
            return True
        opts = self.move_opts
        if getattr(self, "_pass", None) is None or self._pass < opts["start"] + opts["cooldown"]:
            return False
        return self.quiet_for(opts["cooldown"] + 1)

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
            if rnd.pair_entropy:
                self._merges(work, rnd, batch_stats, log, params)
            if log.merges_accepted:
                # the gathered rows in the cluster space after this round's merges, so that
                # a delete or a birth may revisit rows that also use a merged cluster
                for g in rnd.batch.values():
                    if g["values"] is not None:
                        g["values"], g["indices"] = _fold_merged(g["values"], g["indices"],
                                                                 work.merge_map)
            if rnd.deletes.size:
                self._deletes(work, rnd, batch_stats, state["batches"], log)
                self.end_deletes(log)
                self.end_kind("deletes", log.deletes_tried, log.deletes_accepted)
            if rnd.births.size:
                self._births(work, rnd, batch_stats, state["batches"], log)
                self.end_kind("births", log.births_tried, log.births_accepted)
            if log.merges_accepted or log.deletes_accepted or log.births_accepted:
                stats = work.compact(batch_stats)
                new = compaction(work.alive)
                M = work.merge_map
                new_of_old = np.where(M >= 0, new[np.maximum(M, 0)], -1)
                self.grow_book(work.K - self.uid.size)
                self.end_round(work.ops, work.alive, new_of_old)
                # born clusters invalidate the cached candidate sets (new clusters)
                self.set_n_components(int(work.alive.sum()),
                                      None if log.births_accepted else new_of_old)
                changed = True
        if "sort" in self.moves:
            if self._sort(stats, batch_stats, log):
                changed = True
        if changed:
            params = self.global_step(stats)
        self.round_logs.append(dict(log.as_dict(), n_components=int(self.n_components)))
        return stats, params

    def _merges(self, work, rnd, batch_stats, log, params):
        K = rnd.K
        st = work.stats
        PH = _sum_pairs([g["PH"][0] for g in rnd.batch.values()],
                        [g["PH"][1] for g in rnd.batch.values()])
        u = self.usage
        if u is None or u["n_users"].size != K or K < 2:
            return
        pa, pb = self._merge_candidates(st, params,
                                        usage_correlation(u["sum_p"], u["sum_pp"], u["n"]))
        if pa.size == 0:
            return
        # the exact gain of each merge on its own, in closed form from the pass's statistics:
        # the merged cluster's data terms, the pair entropy, the allocation terms
        ph = _pair_lookup(PH, pa * K + pb)
        comp_ab = _gaussian.merged_component_terms(st, pa, pb, self.prior)
        gain = (comp_ab - work.comp[pa] - work.comp[pb] + ph
                + _gaussian.merge_allocation_gain(st["N"], self.prior, pa, pb))
        # the pairs in decreasing gain; one that does not raise the ELBO on its own is
        # rejected in closed form (and waits its cool-down like any rejected proposal)
        # unless one of its clusters absorbed others this round
        order = np.argsort(-gain, kind="stable")
        pairs = np.stack([pa[order], pb[order]], axis=1)

        def apply(a, b):
            key = np.array([min(a, b) * K + max(a, b)])
            for bb, stb in enumerate(batch_stats):
                _merge_into(stb, a, b, float(_pair_lookup(rnd.batch[bb]["PH"], key)[0]))
            work.merged(a, b)
            work.ops.append(("merge", a, b))

        # a cluster that already absorbed clusters this round may absorb another, c, when no
        # row holds c together with any of them: the gathered pair entropy between c and
        # each of them is then exactly 0 (h(x, y) < 0 whenever x, y > 0, and every pair that
        # shares a row is gathered), no row holds three merged clusters, and the merged
        # entropy stays H_a + H_c + PH_ac exactly
        absorbed = {}

        def may_chain(q, a, b):
            if a in log.touched and b in log.touched:
                return False
            x, y = (a, b) if a in log.touched else (b, a)
            if x not in absorbed:  # x was absorbed itself, or deleted: not a survivor
                return False
            z = np.asarray(absorbed[x], dtype=np.int64)
            keys = np.minimum(z, y) * K + np.maximum(z, y)
            return not np.any(_pair_lookup(PH, keys) != 0.0)

        # the data terms of chained merges are computed for the next chained pairs of the
        # order at once (one call, one Cholesky factor each) and used while neither cluster
        # has changed since (``version``), so each equals its one-by-one evaluation
        version = np.zeros(K, dtype=np.int64)
        chained_terms = {}
        pair_list = pairs.tolist()

        def chained_sel(q):
            return [(r, x, y) for r, (x, y) in enumerate(pair_list[q:q + CHAIN_BATCH], q)
                    if work.alive[x] and work.alive[y]
                    and (x in log.touched) != (y in log.touched)]

        def chained_comp(q, a, b):
            hit = chained_terms.get((a, b))
            if hit is None or hit[0] != version[a] or hit[1] != version[b]:
                sel = chained_sel(q)
                ia = np.array([x for _, x, _ in sel], dtype=np.int64)
                ib = np.array([y for _, _, y in sel], dtype=np.int64)
                values = work.pooled_component_terms(ia, ib)
                for (_, x, y), v in zip(sel, values.tolist(), strict=True):
                    chained_terms[(x, y)] = (version[x], version[y], v)
                hit = chained_terms[(a, b)]
            return hit[2]

        # the ELBO change of the next chained merges, each on the current state, in one
        # vectorized step (valid until a merge is accepted: ``accepted``); a merge whose
        # change is below -CHAIN_MARGIN S cannot pass the exact test of
        # ``_Workspace.try_merge``: both sum the same terms, whose magnitudes add up to S, so
        # their rounding is many orders of magnitude below the margin (even where the ELBO
        # itself is near 0), and every decision is the one the exact test makes
        accepted = [0]
        chained_gains = {}
        alive0 = work.alive
        margin = CHAIN_MARGIN * (abs(work.value) + float(np.sum(np.abs(work.comp[alive0])))
                                 + float(np.sum(np.abs(st["entropy"][alive0]))))

        def chained_gain(q, a, b):
            hit = chained_gains.get((a, b))
            if hit is None or hit[0] != accepted[0]:
                sel = chained_sel(q)
                ia = np.array([x for _, x, _ in sel], dtype=np.int64)
                ib = np.array([y for _, _, y in sel], dtype=np.int64)
                comp = np.array([chained_comp(q, x, y) for _, x, y in sel])
                alive = work.alive
                pos = np.cumsum(alive) - 1
                g = (comp - work.comp[ia] - work.comp[ib]
                     + ph[order[[r for r, _, _ in sel]]]
                     + _gaussian.merge_allocation_gain(st["N"][alive], self.prior, pos[ia],
                                                       pos[ib]))
                for (_, x, y), v in zip(sel, g.tolist(), strict=True):
                    chained_gains[(x, y)] = (accepted[0], v)
                hit = chained_gains[(a, b)]
            return hit[1]

        batched = self.prior.covariance_type == "full"
        gain_list = gain[order].tolist()

        def try_merge(q, a, b):
            p = order[q]
            chained = a in log.touched or b in log.touched
            if not chained:
                if not gain_list[q] > 0.0:
                    return False
                return work.try_merge(a, b, ph[p], comp_ab[p])
            if not batched:
                return work.try_merge(a, b, ph[p])
            if chained_gain(q, a, b) < -margin:
                return False
            return work.try_merge(a, b, ph[p], chained_comp(q, a, b))

        def apply_and_record(q, a, b):
            apply(a, b)
            version[a] += 1
            version[b] += 1
            accepted[0] += 1
            absorbed.setdefault(a, []).append(b)
            absorbed[a].extend(absorbed.pop(b, []))

        self.run_merges(pairs, lambda: work.alive, log, try_merge, apply_and_record, may_chain)

    def _deletes(self, work, rnd, batch_stats, batches, log):
        for j in rnd.deletes:
            j = int(j)
            if not work.alive[j] or j in log.touched:
                continue
            targets = {}
            for bb, g in rnd.batch.items():
                if g["values"] is None:
                    continue
                m = ((g["indices"] == j) & (g["values"] > 0)).any(axis=1)
                if m.any():
                    targets[bb] = np.flatnonzero(m)
            log.deletes_tried += 1
            res = work.try_delete(j, targets, rnd, batches)
            if res is None:
                self.reject_delete(j)
                continue
            log.deletes_accepted += 1
            log.touched.add(j)
            for bb, (ids, before, after, values, indices) in res.items():
                st = _own(batch_stats[bb])
                _move_stats(st, ids, before, ids, after)
                _zero(st, j)
                batch_stats[bb] = st
                g = rnd.batch[bb]
                g["values"][targets[bb]] = values
                g["indices"][targets[bb]] = indices
            for bb, st in enumerate(batch_stats):
                if bb not in res:
                    _zero(st, j)
            work.removed(j)
            work.ops.append(("delete", j))

    def _births(self, work, rnd, batch_stats, batches, log):
        opts = self.move_opts
        n_total = float(np.sum(work.stats["N"]))
        # every row of the target, up to a cap: rows left in the target keep it large and
        # broad, and the fresh clusters, holding only the re-inferred rows, then pay a small
        # weight for each of them, so a birth re-inferring a subsample of a large cluster is
        # rejected even where the clusters are plainly separated
        budget = max(BIRTH_VALUES // max(int(self.prior.n_features), 1),
                     max(500, int(0.1 * n_total)))

        def select(k, rng):
            targets = {}
            for bb, g in rnd.batch.items():
                if g["values"] is None:
                    continue
                m = _birth_rows(g["values"], g["indices"], k)
                if m.any():
                    targets[bb] = np.flatnonzero(m)
            if sum(t.size for t in targets.values()) < 2 * opts["birth_components"]:
                return None
            # a uniform subsample of the target's rows (any subset gives a valid ELBO)
            return subsample_targets(targets, budget, rng)

        def try_birth(k, targets, rng):
            return work.try_birth(k, targets, rnd, batches, opts, rng)

        def apply(k, targets, res):
            n_new, out = res
            log.touched.update(range(work.K - n_new, work.K))
            for bb in range(len(batch_stats)):
                st = _pad(batch_stats[bb], n_new)
                if bb in out:
                    ids_old, before, ids_new, after, values, indices = out[bb]
                    _move_stats(st, ids_old, before, ids_new, after)
                    g = rnd.batch[bb]
                    g["values"][targets[bb]] = values
                    g["indices"][targets[bb]] = indices
                batch_stats[bb] = st
            work.ops.append(("birth", k, n_new))

        self.run_births(rnd.births, lambda: work.alive, log, select, try_birth, apply)

    def _sort(self, stats, batch_stats, log):
        N = stats["N"]
        order = np.argsort(-N, kind="stable")
        if np.array_equal(order, np.arange(N.size)):
            return False
        prior = self.prior
        old = _gaussian.optimal_allocation_terms(N, prior)
        new = _gaussian.optimal_allocation_terms(N[order], prior)
        if not improves(new, old):
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
    D = prior.n_features
    if prior.covariance_type == "full":
        # E[Lambda_k]^-1 = Psi_k / nu_k, from the global step's scale matrices (no inverse)
        Sig = params.scale_inv / params.nu[:, None, None]
        K = Sig.shape[0]
        tr = Sig.reshape(K, -1) @ params.precisions.reshape(K, -1).T  # tr(S_a P_b)
        out = tr + tr.T - 2.0 * D
        if not prior.zero_mean:
            out = out + _mean_terms(params.precisions, params.means)
        return out
    P = params.precisions
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


def _mean_terms(P, m):
    """(K, K) ``Q_ab + Q_ba`` with ``Q_ab = (m_a - m_b)^T P_a (m_a - m_b)`` for full
    precisions ``P`` (K, D, D) and means ``m`` (K, D)."""
    K = P.shape[0]
    Pm = np.einsum("kij,kj->ki", P, m)
    q = (Pm * m).sum(1)
    cross = Pm @ m.T
    mm = (m[:, :, None] * m[:, None, :]).reshape(K, -1)
    mPm = P.reshape(K, -1) @ mm.T
    Q = q[:, None] - 2.0 * cross + mPm
    return Q + Q.T
