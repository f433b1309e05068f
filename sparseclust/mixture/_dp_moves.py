# SPDX-License-Identifier: BSD-3-Clause
"""Memoized merge, delete, birth and sort moves of the Dirichlet-process Gaussian mixture.

The moves follow Hughes & Sudderth (2013) and Hughes, Kim & Sudderth (2015) and use the
machinery HDPTopicModel uses (:mod:`sparseclust._moves`: candidate selection, the pair
lookup table, the round log, compaction; the pair-entropy kernel of
``sparseclust._kernels._hdp_stats``). A round spans one pass of memoized (or batch) training:

1. **before the pass** (:meth:`MixtureMoves.before_pass`) delete candidates are chosen: the
   smallest clusters (expected counts N_k) whose samples fit in a budget of rows to revisit;
   the birth target is the largest cluster whose birth was not rejected recently
   (:func:`sparseclust._moves.select_births`), tried only after a round that tried merges or
   deletes and accepted none, and after rounds of rejected births only once their wait is over
   (:meth:`sparseclust._moves.MoveBook.due`), and likewise a round of deletes after rounds
   whose deletes were all rejected;
2. **during the pass** every batch visit gathers, besides its statistics, the entropy change
   of merging every two clusters that share a row, ``PH_ab = sum_n h(r_na, r_nb)`` with
   ``h(x, y) = x log x + y log y - (x + y) log(x + y)`` over the rows whose L-sparse support
   holds both a and b (a sparse sum with at most L (L - 1) / 2 entries per row; for every
   other pair merging changes no entropy term, PH_ab = 0), the responsibilities of the rows
   that use a delete candidate, and those of the rows whose responsibility for the birth
   target is at least 1/2;
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
   - birth at k (Hughes & Sudderth 2013): ``birth_components`` fresh clusters are fit to a
     subsample of k's rows (k-means++ seeds, then a few iterations of the local and global
     steps of a plain mixture on the subsample), the local step is re-run on k's rows (all of
     them, up to ``birth_rows``; by default :data:`BIRTH_VALUES` / n_features rows or the
     delete budget if larger) under the current clusters plus the fresh ones, and the
     statistics of those rows are replaced. Any responsibilities of any subset of rows give a
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
"""

import copy

import numpy as np

from .._engine import SuffStats
from .._moves import (
    ACCEPT_RTOL,
    MoveBook,
    MoveRound,
    MoveWorkspace,
    RoundLog,
    compaction,
    fetch_rows,
    improves,
    select_births,
    select_deletes,
    subsample_targets,
    usage_correlation,
)
from . import _gaussian

__all__ = ["MixtureMoves"]

#: values (rows x features) a birth re-infers at most: every row of the target up to
#: ``BIRTH_VALUES // n_features`` rows (or the delete budget if larger). Re-inferring a
#: subsample of a large cluster leaves the rest in it, and the proposal then loses (three blobs
#: of 1,000 points from one cluster stayed one cluster with the 500-row subsample of an earlier
#: default). The target's rows are gathered in one dense array (on Dask, fetched to the client):
#: at most 80 MB of float64 by this bound.
BIRTH_VALUES = 10_000_000

#: pairs of the merge order scanned at once for the data terms of chained merges
CHAIN_BATCH = 64

#: a chained merge whose ELBO change, computed for several at once, is below
#: ``-CHAIN_MARGIN * S`` is rejected without the exact evaluation (which it cannot pass);
#: S = |L| + sum_k |data terms_k| + sum_k |entropy_k| bounds the magnitude that rounds
CHAIN_MARGIN = 1e-9


def restrict(stats, idx):
    """The statistics of the clusters ``idx`` only (a new SuffStats)."""
    return SuffStats(**{k: np.ascontiguousarray(v[idx]) for k, v in stats.items()})


def _update_rows(stats, rows, before, after):
    """``stats[rows] = stats[rows] - before + after`` for every field, in place (``before`` and
    ``after`` hold the statistics of the clusters ``rows`` only)."""
    for k, v in stats.items():
        v[rows] = v[rows] - before[k] + after[k]


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

    ``move_opts``, fixed: ``start`` (first pass whose end runs moves), ``near`` (nearest
    clusters by divergence and ``corr_near`` by co-usage examined per cluster as merge
    partners), ``max_deletes`` (the most per round; a round that accepted none halves the
    next round's number), ``cooldown`` (passes), ``birth_components`` (fresh clusters per
    birth), ``birth_fit_rows`` (rows the fresh clusters are fit to), ``birth_iters``
    (iterations of that fit), ``max_births`` (targets per round). A pass's deletes revisit
    10% of the samples, at least 500 rows; a birth re-infers up to :data:`BIRTH_VALUES` /
    n_features rows of its target, or the delete budget if larger (a uniform subsample of
    the target's rows beyond it).
    """

    def init_moves(self, moves):
        self.moves = tuple(moves)
        self.move_opts = dict(start=2, near=64, corr_near=4, max_deletes=20, cooldown=3,
                              birth_components=3, birth_fit_rows=1000, birth_iters=10,
                              max_births=1)
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
                    m |= (np.isin(idx, rnd.births) & (v >= 0.5)).any(axis=1)
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
                and self.births_settled(single=single, require_tried=True)):
            # births once the merges and deletes are absorbed: after a round that tried them
            # and accepted none (MoveBook.births_settled, the schedule shared with the topics)
            births = select_births(stats["N"], max_candidates=opts["max_births"],
                                   allowed=self.birthable(),
                                   min_size=4.0 * opts["birth_components"])
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
                _update_rows(st, ids, before, after)
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
                m = ((g["indices"] == k) & (g["values"] >= 0.5)).any(axis=1)
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
                    before, after, values, indices = out[bb]
                    st = st - before + after
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


def reinfer_rows(X, model, plain, params0, idx, K, vals_old, idx_old):
    """The delete move's re-inference of the rows X (their old responsibilities ``vals_old``
    over clusters ``idx_old``) by the local step of ``plain`` under ``params0``, defined on
    the clusters ``idx`` of the K: (the clusters ``ids`` the rows use before or after, their
    statistics before, after, new values, new indices). The statistics are those of
    ``model.stats_from_responsibilities`` restricted to ``ids`` (every other cluster's are
    zero), computed on ``ids`` alone."""
    Xt = np.ascontiguousarray(X)
    vals_old = np.ascontiguousarray(vals_old)
    idx_old = np.ascontiguousarray(idx_old)
    vals_new, loc = _rerun_local(copy.copy(plain), Xt, params0, vals_old.dtype)
    idx_new = idx[loc].astype(np.int32)
    # the re-inferred rows keep their support width (when L had to shrink)
    vals_new, idx_new = _pad_support(vals_new, idx_new, vals_old.shape[1], K)
    ids = np.union1d(idx_old, idx_new).astype(np.int64)
    local = model.plain_model(ids.size)
    before = local.stats_from_responsibilities(
        vals_old, np.searchsorted(ids, idx_old).astype(np.int32), Xt)
    after = local.stats_from_responsibilities(
        vals_new, np.searchsorted(ids, idx_new).astype(np.int32), Xt)
    return ids, before, after, vals_new, idx_new


def _reinfer_rows_all(X, model, plain, params0, idx, K, vals_old, idx_old):
    """:func:`reinfer_rows` with the statistics on all K clusters (zero outside the clusters
    used): (before, after, new values, new indices)."""
    ids, before, after, vals_new, idx_new = reinfer_rows(X, model, plain, params0, idx, K,
                                                         vals_old, idx_old)
    full = []
    for st in (before, after):
        f = model.empty_stats()
        for k, v in st.items():
            f[k][ids] = v
        full.append(f)
    return full[0], full[1], vals_new, idx_new


def _own_rows(X):
    return (np.ascontiguousarray(X),)


def _fetch_rows(batches, sel):
    """{b: the rows ``sel[b]`` of batch b, in that order, dense}
    (:func:`sparseclust._moves.fetch_rows`)."""
    return fetch_rows(batches, sel, take=lambda X, ids: np.ascontiguousarray(X[ids]),
                      pack=_own_rows, unpack=lambda got: got[0])


def _csr(v, idx, K):
    import scipy.sparse as sp

    n, Lk = v.shape
    return sp.csr_array((v.ravel(), idx.ravel(), np.arange(0, n * Lk + 1, Lk)), shape=(n, K))


def _fold_merged(values, indices, merge_map):
    """Rows' responsibilities after merges: index k becomes ``merge_map[k]`` (b -> a for a
    merge of b into a), and the entries a row then holds twice are summed into one (the
    other keeps its old index, a removed cluster, with value 0). The statistics of the
    folded rows are the rows' share of the merged statistics: N, Sx, Sxx add, and the
    entropy of the merged entry is -(r_a + r_b) log(r_a + r_b), which is what
    ``H_a + H_b + PH_ab`` holds for the row."""
    indices = np.asarray(indices)
    idx = np.asarray(merge_map)[indices].astype(np.int32)
    vals = np.array(values, copy=True)
    # rows holding one target twice or more: the first such entry keeps the target and the
    # sum, the others the merged-away indices of the group (removed, distinct in the row)
    srt = np.sort(idx, axis=1)
    for r in np.flatnonzero((srt[:, 1:] == srt[:, :-1]).any(axis=1)):
        row, orig = idx[r].copy(), indices[r]
        for t in np.unique(row):
            cols = np.flatnonzero(row == t)
            if cols.size < 2:
                continue
            keep = cols[0]
            spare = [int(o) for o in orig[cols] if o != t]
            vals[r, keep] = vals[r, cols].sum()
            idx[r, keep] = t
            for c, o in zip(cols[1:], spare, strict=False):
                vals[r, c] = 0
                idx[r, c] = o
    return vals, idx


def _row_pair_entropy(values, indices, K):
    """Pair entropies of the rows' L-sparse supports: for every two entries x = r_na,
    y = r_nb > 0 of a row, ``h(x, y) = x log x + y log y - (x + y) log(x + y)`` (< 0) keyed
    ``min(a, b) * K + max(a, b)``; returns (keys, h), one entry per such pair of a row."""
    v = np.asarray(values, dtype=np.float64)
    idx = np.asarray(indices, dtype=np.int64)
    Lk = v.shape[1]
    i, j = np.triu_indices(Lk, 1)
    x, y = v[:, i], v[:, j]
    a, b = idx[:, i], idx[:, j]
    m = (x > 0) & (y > 0) & (a != b)
    x, y, a, b = x[m], y[m], a[m], b[m]
    xy = x + y
    h = x * np.log(x) + y * np.log(y) - xy * np.log(xy)
    return np.minimum(a, b) * K + np.maximum(a, b), h


#: pair entries (rows x L(L - 1)/2) per chunk of :func:`_block_pair_entropy`
PAIR_CHUNK = 1 << 16


def _block_pair_entropy(values, indices, K):
    """:func:`_row_pair_entropy` of a block of rows summed per pair key (sorted unique keys,
    sums), computed over chunks of at most about :data:`PAIR_CHUNK` pair entries: with dense
    responsibilities (``L=None``) a row has K(K - 1)/2 pairs, and holding every row's pairs
    until the end of the pass took memory in proportion to rows x K^2 (about 7 GB for 5,000
    rows at K = 200); summed per block it is at most K(K - 1)/2 entries per block."""
    n, Lk = values.shape
    step = max(1, PAIR_CHUNK // max(1, Lk * (Lk - 1) // 2))
    keys, hs = [], []
    for s in range(0, n, step):
        k, h = _row_pair_entropy(values[s:s + step], indices[s:s + step], K)
        k, h = _sum_pairs([k], [h])
        keys.append(k)
        hs.append(h)
    return _sum_pairs(keys, hs)


def _sum_pairs(keys, values):
    """The sparse sum of lists of (keys, values): (sorted unique keys, summed values)."""
    if not len(keys):
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    k = np.concatenate(keys)
    v = np.concatenate(values)
    uk, inv = np.unique(k, return_inverse=True)
    return uk, np.bincount(inv.ravel(), weights=v, minlength=uk.size)


def _pair_lookup(pairs, keys):
    """The values of the sparse pair sum ``pairs = (sorted keys, values)`` at ``keys`` (0
    where absent)."""
    pk, pv = pairs
    keys = np.asarray(keys, dtype=np.int64)
    if pk.size == 0:
        return np.zeros(keys.shape)
    pos = np.minimum(np.searchsorted(pk, keys), pk.size - 1)
    return np.where(pk[pos] == keys, pv[pos], 0.0)


def _pad(stats, n_new):
    """``stats`` with ``n_new`` empty clusters appended (a new SuffStats)."""
    return SuffStats(**{k: np.concatenate([v, np.zeros((n_new,) + v.shape[1:], dtype=v.dtype)])
                        for k, v in stats.items()})


def _pad_support(vals, idx, width, K):
    """Rows re-inferred with a narrower support than ``width`` (fewer clusters than L) padded
    with zero responsibilities on other clusters (of ``range(K)``), which change no
    statistic."""
    if vals.shape[1] >= width:
        return vals, idx
    pad = width - vals.shape[1]
    vals = np.hstack([vals, np.zeros((vals.shape[0], pad), dtype=vals.dtype)])
    extra = np.empty((idx.shape[0], pad), dtype=np.int32)
    for r in range(idx.shape[0]):
        extra[r] = np.setdiff1d(np.arange(K), idx[r])[:pad]
    return vals, np.hstack([idx, extra])


def _rerun_local(plain, Xt, params, dtype):
    """The local step of ``plain`` on ``Xt``: (values, indices in ``plain``'s clusters)."""
    got = []

    def keep(start, values, indices, Xc):
        got.append((start, np.array(values), np.array(indices)))

    plain._collect = keep
    try:
        plain.local_step(Xt, params)
    finally:
        plain._collect = None
    got.sort(key=lambda t: t[0])
    return (np.vstack([t[1] for t in got]).astype(dtype),
            np.vstack([t[2] for t in got]).astype(np.int64))


def _fresh_clusters(model, X, J, rng, n_iter):
    """Statistics of ``J`` clusters fit to the rows ``X`` by a plain mixture: k-means++ seeds
    (Arthur & Vassilvitskii 2007), each row to its nearest seed, then ``n_iter`` iterations of
    the local and global steps. None when fewer than two clusters keep mass."""
    from sklearn.cluster import kmeans_plusplus

    Xd = np.asarray(X, dtype=np.float64)
    centers, _ = kmeans_plusplus(Xd, J, random_state=rng)
    d2 = (Xd ** 2).sum(1)[:, None] - 2.0 * Xd @ centers.T + (centers ** 2).sum(1)[None]
    labels = d2.argmin(1).astype(np.int32)
    plain = model.plain_model(J)
    stats = plain.stats_from_responsibilities(
        np.ones((X.shape[0], 1), dtype=X.dtype), labels[:, None], X)
    for _ in range(n_iter):
        stats = plain.local_step(X, plain.global_step(stats))
    if np.count_nonzero(stats["N"] >= 1.0) < 2:
        return None
    return stats


def _merge_into(st, a, b, ph):
    """Merge cluster b into a in statistics (in place): N, Sx, Sxx add; the entropy of the
    merged cluster is H_a + H_b + ph."""
    for k, v in st.items():
        if k == "entropy":
            v[a] = v[a] + v[b] + ph
        else:
            v[a] = v[a] + v[b]
        v[b] = 0.0


class _Workspace(MoveWorkspace):
    """Whole-data statistics during a move round, in the cluster space of the pass (removed
    clusters are flagged, not dropped, until :meth:`compact`; the state every model's
    workspace holds is :class:`sparseclust._moves.MoveWorkspace`'s), with the per-cluster
    data terms cached so that a proposal re-evaluates only the clusters it changes."""

    def __init__(self, model, stats):
        self.m = model
        self.prior = model.prior
        self.stats = stats
        K = stats["N"].shape[0]
        self.init_space(K)
        self.comp = self._component_terms(stats, np.arange(K))
        self.value = self._value(stats, self.alive, self.comp)
        # the per-component posterior of every slot (_gaussian.component_posterior), built on
        # the first delete and refreshed where the statistics changed since
        self._posterior = None
        self._stale = set()

    def _params_of(self, idx):
        """``global_step(restrict(stats, idx))`` from the cached per-component posterior (the
        same numbers: each component's posterior depends on its own statistics only)."""
        prior = self.prior
        if self._posterior is None:
            self._posterior = _gaussian.component_posterior(self.stats, prior)
        elif self._stale:
            ch = np.array(sorted(self._stale), dtype=np.int64)
            fresh = _gaussian.component_posterior(restrict(self.stats, ch), prior)
            for f in _gaussian.COMPONENT_FIELDS:
                self._posterior[f][ch] = fresh[f]
        self._stale.clear()
        comp = {f: self._posterior[f][idx] for f in _gaussian.COMPONENT_FIELDS}
        return _gaussian.assemble_params(comp, self.stats["N"][idx], prior)

    def _component_terms(self, stats, idx):
        sub = restrict(stats, idx)
        return _gaussian.optimal_component_terms(sub, self.prior)

    def _value(self, stats, alive, comp):
        """The ELBO of the clusters ``alive`` at their optimal global parameters."""
        N = stats["N"][alive]
        return (_gaussian.optimal_allocation_terms(N, self.prior)
                + float(np.sum(stats["entropy"][alive])) + float(np.sum(comp[alive])))

    def pooled_component_terms(self, ia, ib):
        """The data terms of the clusters ``ia[p] + ib[p]`` pooled, for every p (one Cholesky
        factor each); :meth:`try_merge` computes a single pair's the same way."""
        st = self.stats
        if self.prior.covariance_type == "full":
            return _gaussian.merged_component_terms(st, ia, ib, self.prior)
        prop = {k: v[ia] + v[ib] for k, v in st.items() if k != "entropy"}
        return _gaussian.optimal_component_terms(prop, self.prior)

    def try_merge(self, a, b, ph, comp_ab=None):
        """Merge b into a if that raises the whole-data ELBO; ``comp_ab``: the merged
        cluster's data terms when already computed (they do not depend on ``ph``)."""
        st = self.stats
        if comp_ab is None:
            comp_ab = self.pooled_component_terms([a], [b])[0]
        alive = self.alive.copy()
        alive[b] = False
        N = st["N"].copy()
        N[a] = st["N"][a] + st["N"][b]
        ent = st["entropy"].copy()
        ent[a] = (st["entropy"][a] + st["entropy"][b]) + ph
        comp = self.comp.copy()
        comp[a] = comp_ab
        value = (_gaussian.optimal_allocation_terms(N[alive], self.prior)
                 + float(np.sum(ent[alive])) + float(np.sum(comp[alive])))
        if not self.accepts(value):
            return False
        _merge_into(st, a, b, ph)
        self.alive, self.comp, self.value = alive, comp, value
        self._stale.update((a, b))
        return True

    def try_delete(self, j, targets, rnd, batches):
        """Re-run the local step without j on the rows that use it; returns per batch
        (clusters used, their statistics before, after, new values, new indices;
        :func:`reinfer_rows`) when the whole-data ELBO increases."""
        m = self.m
        alive = self.alive.copy()
        alive[j] = False
        idx = np.flatnonzero(alive)
        if idx.size == 0:
            return None
        params0 = self._params_of(idx)
        plain = m.plain_model(idx.size)
        changed = {j}
        ids = {bb: rnd.batch[bb]["rows"][rows] for bb, rows in targets.items()}
        old = {bb: (np.ascontiguousarray(rnd.batch[bb]["values"][rows]),
                    np.ascontiguousarray(rnd.batch[bb]["indices"][rows]))
               for bb, rows in targets.items()}
        out = m.reinfer(batches, ids, old, plain, params0, idx)
        for bb in targets:
            changed.update(out[bb][0].tolist())
        # the statistics change only on the clusters the rows used before or after: the
        # proposal is computed on those, batch by batch as the whole-data update would be
        moved = np.array(sorted(changed), dtype=np.int64)
        sub = restrict(self.stats, moved)
        for bb in targets:
            ids, before, after = out[bb][:3]
            _update_rows(sub, np.searchsorted(moved, ids), before, after)
        _zero(sub, int(np.searchsorted(moved, j)))
        prop = {f: self.stats[f].copy() for f in ("N", "entropy")}
        for f in prop:
            prop[f][moved] = sub[f]
        keep = alive[moved]
        ch = moved[keep]
        comp = self.comp.copy()
        comp[j] = 0.0
        if ch.size:
            comp[ch] = _gaussian.optimal_component_terms(restrict(sub, np.flatnonzero(keep)),
                                                         self.prior)
        value = self._value(prop, alive, comp)
        # a cluster no row uses is removed when that costs nothing: at the end of the sticks
        # it contributes exactly zero (q = prior), so the objective ties up to rounding
        slack = ACCEPT_RTOL * abs(self.value)
        if not (value > self.value + slack or (not targets and value >= self.value - slack)):
            return None
        stats = self.stats.copy()
        for f, v in sub.items():
            stats[f][moved] = v
        self.stats, self.alive, self.comp, self.value = stats, alive, comp, value
        self._stale.update(moved.tolist())
        return out

    def try_birth(self, k, targets, rnd, batches, opts, rng):
        """Fit fresh clusters to a subsample of k's rows ``targets`` and re-run the local
        step on those rows under the live clusters plus the fresh ones; returns
        ``(n_new, {batch: (before, after, new values, new indices)})`` when the whole-data
        ELBO increases (the fresh clusters then occupy the last ``n_new`` slots)."""
        m = self.m
        K0 = self.K
        got = _fetch_rows(batches, {bb: rnd.batch[bb]["rows"][t] for bb, t in targets.items()})
        rows = {bb: (got[bb], t) for bb, t in targets.items() if bb in got}
        Xall = np.vstack([x for x, _ in rows.values()])
        n = Xall.shape[0]
        fit = Xall if n <= opts["birth_fit_rows"] else Xall[
            np.sort(rng.choice(n, opts["birth_fit_rows"], replace=False))]
        J = int(min(opts["birth_components"], fit.shape[0] // 2))
        if J < 2:
            return None
        fresh = _fresh_clusters(m, fit, J, rng, opts["birth_iters"])
        if fresh is None:
            return None
        live = np.flatnonzero(self.alive)
        # the fresh clusters as the local step sees them: scaled to the rows they stand for
        cand = SuffStats(**{f: np.concatenate([self.stats[f][live],
                                               fresh[f] * (n / fit.shape[0])])
                            for f in self.stats.keys()})
        params0 = _gaussian.global_step(cand, self.prior)
        plain = m.plain_model(cand["N"].shape[0])
        slot = np.concatenate([live, K0 + np.arange(J)])  # local cluster -> workspace slot
        Kt = K0 + J
        wide = m.plain_model(Kt)
        prop = _pad(self.stats, J)
        out = {}
        changed = {k}
        for bb, (Xt, t) in rows.items():
            g = rnd.batch[bb]
            vals_old = np.ascontiguousarray(g["values"][t])
            idx_old = np.ascontiguousarray(g["indices"][t])
            vals_new, loc = _rerun_local(plain, Xt, params0, vals_old.dtype)
            idx_new = slot[loc].astype(np.int32)
            vals_new, idx_new = _pad_support(vals_new, idx_new, vals_old.shape[1], K0)
            before = wide.stats_from_responsibilities(vals_old, idx_old, Xt)
            after = wide.stats_from_responsibilities(vals_new, idx_new, Xt)
            prop = prop - before + after
            changed.update(np.unique(idx_old).tolist())
            changed.update(np.unique(idx_new).tolist())
            out[bb] = (before, after, vals_new, idx_new)
        alive = np.concatenate([self.alive, np.ones(J, dtype=bool)])
        ch = np.array(sorted(c for c in changed if alive[c]), dtype=np.int64)
        comp = np.concatenate([self.comp, np.zeros(J)])
        comp[ch] = self._component_terms(prop, ch)
        value = self._value(prop, alive, comp)
        if not self.accepts(value):
            return None
        self.grow(J)
        self.stats, self.comp, self.value = prop, comp, value
        self._posterior = None  # new slots
        self._stale.clear()
        return J, out

    def compact(self, batch_stats):
        """Drop the removed clusters from the whole-data and every batch's statistics."""
        idx = np.flatnonzero(self.alive)
        for b in range(len(batch_stats)):
            batch_stats[b] = restrict(batch_stats[b], idx)
        self.stats = restrict(self.stats, idx)
        return self.stats
