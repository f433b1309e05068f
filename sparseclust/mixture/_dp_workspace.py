# SPDX-License-Identifier: BSD-3-Clause
"""The whole-data workspace of a round of the Dirichlet-process mixture's moves
(:mod:`._dp_moves`): the proposals of a merge, a delete and a birth, each evaluated on the
whole-data statistics and kept only when the ELBO increases."""

import numpy as np

from .._engine import SuffStats
from .._moves import ACCEPT_RTOL, MoveWorkspace
from . import _gaussian
from ._dp_rows import (
    _fetch_rows,
    _fresh_clusters,
    _merge_into,
    _move_stats,
    _pad,
    _pad_support,
    _rerun_local,
    _used_stats,
    _zero,
    restrict,
)


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
        return _gaussian.optimal_value(stats["N"][alive], stats["entropy"][alive], comp[alive],
                                       self.prior)

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
        value = _gaussian.optimal_value(N[alive], ent[alive], comp[alive], self.prior)
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
            rows = np.searchsorted(moved, ids)
            _move_stats(sub, rows, before, rows, after)
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
        """Fit fresh clusters to the rows ``targets`` of a birth at k (up to
        ``birth_fit_rows`` of them) and re-run the local step on those rows under the live
        clusters plus the fresh ones; returns
        ``(n_new, {batch: (clusters before, their statistics, clusters after, their
        statistics, new values, new indices)})`` when the whole-data ELBO increases (the
        fresh clusters then occupy the last ``n_new`` slots; :func:`._dp_rows._move_stats`
        applies the statistics)."""
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
        # the screen only when the fresh clusters see every row of the target (a subsample
        # carries their cost on fewer rows than the whole-data test does)
        fresh = _fresh_clusters(m, fit, J, rng, opts["birth_iters"],
                                screen=fit.shape[0] == n)
        if fresh is None:
            return None
        live = np.flatnonzero(self.alive)
        # the fresh clusters as the local step sees them: scaled to the rows they stand for
        cand = SuffStats(**{f: np.concatenate([self.stats[f][live],
                                               fresh[f] * (n / fit.shape[0])])
                            for f in self.stats.keys()})
        params = _gaussian.global_step(cand, self.prior)
        # the re-inferred responsibilities replace the gathered ones in place: no wider than
        # them (any responsibilities give a valid ELBO)
        width = min(rnd.batch[bb]["values"].shape[1] for bb in rows)
        plain = m.plain_model(cand["N"].shape[0], max_L=width)
        slot = np.concatenate([live, K0 + np.arange(J)])  # local cluster -> workspace slot
        # a batch's rows change the statistics of the clusters they use only: those are
        # computed on those clusters alone, and the proposal updated there
        olds = {}
        for bb, (Xt, t) in rows.items():
            g = rnd.batch[bb]
            vals_old = np.ascontiguousarray(g["values"][t])
            idx_old = np.ascontiguousarray(g["indices"][t])
            olds[bb] = (vals_old, idx_old) + _used_stats(m, vals_old, idx_old, Xt)
        best = prop = None
        for it in range(1 + opts["birth_refine"]):
            if it:
                # refinement: the global step of the proposal's statistics (k and its
                # neighbours without the rows they lost, the fresh clusters with the rows they
                # took), then the targets' local step again; every round is a valid proposal
                params = _gaussian.global_step(restrict(prop, slot), self.prior)
            prop = _pad(self.stats, J)
            out = {}
            changed = {k}
            for bb, (Xt, _) in rows.items():
                vals_old, idx_old, ids_old, before = olds[bb]
                vals_new, loc = _rerun_local(plain, Xt, params, vals_old.dtype)
                idx_new = slot[loc].astype(np.int32)
                vals_new, idx_new = _pad_support(vals_new, idx_new, vals_old.shape[1], K0)
                ids_new, after = _used_stats(m, vals_new, idx_new, Xt)
                _move_stats(prop, ids_old, before, ids_new, after)
                changed.update(ids_old.tolist())
                changed.update(ids_new.tolist())
                out[bb] = (ids_old, before, ids_new, after, vals_new, idx_new)
            value, comp = self._proposal_value(prop, changed, J)
            if best is None or value > best[0]:
                best = (value, comp, prop, out)
        value, comp, prop, out = best
        if not self.accepts(value):
            return None
        self.grow(J)
        self.stats, self.comp, self.value = prop, comp, value
        self._posterior = None  # new slots
        self._stale.clear()
        return J, out

    def _proposal_value(self, prop, changed, J):
        """The whole-data ELBO of birth statistics ``prop`` (``J`` fresh clusters appended)
        and their component terms; ``changed``: the clusters whose statistics moved."""
        alive = np.concatenate([self.alive, np.ones(J, dtype=bool)])
        ch = np.array(sorted(c for c in changed if alive[c]), dtype=np.int64)
        comp = np.concatenate([self.comp, np.zeros(J)])
        comp[ch] = self._component_terms(prop, ch)
        return self._value(prop, alive, comp), comp

    def compact(self, batch_stats):
        """Drop the removed clusters from the whole-data and every batch's statistics."""
        idx = np.flatnonzero(self.alive)
        for b in range(len(batch_stats)):
            batch_stats[b] = restrict(batch_stats[b], idx)
        self.stats = restrict(self.stats, idx)
        return self.stats
