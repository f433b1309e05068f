# SPDX-License-Identifier: BSD-3-Clause
"""The statistics edits of the HDP topic model's moves and their whole-data workspace
(:mod:`._hdp_model`).

The topic-word statistics S of a batch, dense or sparse, edited alike (``_s_*``); the
statistics of a few saved documents recomputed in numpy (:func:`_numpy_bundle`); the edits
of a merge, a delete and a sort applied to statistics (:func:`_merge_fields`,
:func:`_fold_delete`, :func:`_replay`, :func:`_sub_bundle`, :func:`_add_expanded`,
:func:`_permute`); and :class:`_Workspace`, which evaluates the proposals of a round on the
whole-data statistics.
"""

import numpy as np
import scipy.sparse as sp
from scipy.special import gammaln, psi

from .._kernels import _hdp_stats
from .._moves import MoveWorkspace, compaction, pair_lookup
from .._stickbreak import expected_beta, optimize_hdp_sticks, sticks_from_weights
from ._hdp_params import HDPParams, _row_parts, _terms_from_parts, stick_value, topic_terms

# ---- the topic-word statistics S of a batch: a dense (K, V) array or a (K, V) CSR array of
# the (k, v) pairs the batch touched. The moves edit both alike; every sparse operation below
# computes, entry by entry, the same floating-point values as its dense counterpart.


def _s_merge_rows(S, a, b):
    """S[a] += S[b]; S[b] = 0 (returns S, a new array when sparse)."""
    if not sp.issparse(S):
        S[a] += S[b]
        S[b] = 0.0
        return S
    K = S.shape[0]
    rows = np.arange(K)
    rows[b] = a
    R = sp.csr_array((np.ones(K), (rows, np.arange(K))), shape=(K, K))
    return sp.csr_array(R @ S)


def _s_zero_row(S, j):
    """S[j] = 0."""
    if not sp.issparse(S):
        S[j] = 0.0
        return S
    S = S.copy()
    S.data[S.indptr[j]:S.indptr[j + 1]] = 0.0
    S.eliminate_zeros()
    return S


def _s_take_rows(S, idx):
    """S[idx] (rows in the order of ``idx``)."""
    if not sp.issparse(S):
        return np.ascontiguousarray(S[idx])
    return sp.csr_array(S[np.asarray(idx)])


def _s_sub_block(S, cols, Sb):
    """S[:, cols] -= Sb for a dense block Sb (K, len(cols))."""
    if not sp.issparse(S):
        S[:, cols] -= Sb
        return S
    B = sp.csr_array(Sb)
    B = sp.csr_array((B.data, np.asarray(cols)[B.indices], B.indptr), shape=S.shape)
    return sp.csr_array(S - B)


def _s_add_rows(S, idx, small):
    """S[idx] += small, ``small`` (len(idx), V) dense or sparse."""
    if not sp.issparse(S):
        S[idx] += small.toarray() if sp.issparse(small) else small
        return S
    n = len(idx)
    P = sp.csr_array((np.ones(n), (np.asarray(idx), np.arange(n))), shape=(S.shape[0], n))
    return sp.csr_array(S + P @ sp.csr_array(small))


def _numpy_bundle(rows, alpha_all, K, V, pairs):
    """Statistics of a few saved documents computed in numpy from their local-step outputs.

    ``rows`` holds, for n documents: ``N`` (n, K), ``psi_sum`` (n,), ``elbo`` (n,) the
    kernel's local ELBO terms, ``indptr``/``indices``/``data``/``r``/``idx`` of their entries.
    Returns a dict with the statistics (S as a column block ``Sb`` over ``cols``) and the merge
    terms ``PG``, ``PT``, ``PH``, ``PA`` of ``pairs``.
    """
    N, ps = rows["N"], rows["psi_sum"]
    n = N.shape[0]
    a = alpha_all[:K]
    arem = alpha_all[K]
    theta = N + a
    T = np.empty(K + 1)
    T[:K] = (psi(theta) - ps[:, None]).sum(axis=0)
    T[K] = float(np.sum(psi(arem) - ps))
    G = np.empty(K + 1)
    G[:K] = gammaln(theta).sum(axis=0)
    G[K] = n * gammaln(arem)
    A = alpha_all * T
    sum_all = float(alpha_all.sum())
    stheta = N.sum(axis=1) + sum_all
    LS = float(np.sum(gammaln(stheta)))
    cdir_alpha = gammaln(sum_all) - float(np.sum(gammaln(alpha_all)))
    cdir_theta = gammaln(stheta) - gammaln(theta).sum(axis=1) - gammaln(arem)
    H = float(np.sum(rows["elbo"] - cdir_alpha + cdir_theta))
    # S over the word types of these documents
    idx, r = rows["idx"], rows["r"]
    ent = np.repeat(np.arange(idx.shape[0]), idx.shape[1])
    keep = idx.ravel() >= 0
    cols, inv = np.unique(rows["indices"], return_inverse=True)
    Sb = np.zeros((K, cols.size))
    np.add.at(Sb, (idx.ravel()[keep], inv[ent[keep]]),
              (rows["data"][ent] * r.ravel())[keep])
    out = dict(cols=cols, Sb=Sb, T=T, G=G, A=A, LS=LS, H=H, D=float(n))
    P = pairs.shape[0]
    if P:
        x0 = a[pairs[:, 0]] + a[pairs[:, 1]]
        x = N[:, pairs[:, 0]] + N[:, pairs[:, 1]] + x0
        out["PT"] = (psi(x) - ps[:, None]).sum(axis=0)
        out["PG"] = gammaln(x).sum(axis=0)
        out["PA"] = x0 * out["PT"]
        PH = np.zeros(P)
        _hdp_stats.pair_entropy_sparse(
            rows["indptr"], rows["data"], r, idx, np.zeros(n, dtype=np.int32),
            pair_lookup(pairs, K), K, PH, 1,
        )
        out["PH"] = PH
    return out


def _take_rows(rows, m):
    """The saved rows of the documents selected by the boolean mask m."""
    sel = np.flatnonzero(m)
    ip = rows["indptr"]
    take = np.concatenate([np.arange(ip[d], ip[d + 1]) for d in sel])
    sub_ptr = np.zeros(sel.size + 1, dtype=np.int64)
    np.cumsum(ip[sel + 1] - ip[sel], out=sub_ptr[1:])
    return dict(N=rows["N"][sel], psi_sum=rows["psi_sum"][sel], elbo=rows["elbo"][sel],
                indptr=sub_ptr, indices=rows["indices"][take], data=rows["data"][take],
                r=np.ascontiguousarray(rows["r"][take]),
                idx=np.ascontiguousarray(rows["idx"][take]))


def _merge_fields(st, a, b, PT, PG, PA, PH):
    """Merge topic b into a in statistics (SuffStats or bundle dict) given the pair terms."""
    if "S" in st:
        st["S"] = _s_merge_rows(st["S"], a, b)
    else:
        st["Sb"][a] += st["Sb"][b]
        st["Sb"][b] = 0.0
    for f, v in (("T", PT), ("G", PG), ("A", PA)):
        arr = st[f]
        arr[a] = v
        arr[b] = 0.0
    st["H"] = st["H"] + PH


def _fold_delete(st, j, groups):
    """Fold topic j of documents that do not use it into the remainder entry K + 1.

    ``groups`` lists (alpha^used (K + 1,), number of documents); for each such document
    theta_{d,rem} becomes alpha_j + alpha_rem, sum_k theta_dk is unchanged.
    """
    T, G, A = st["T"], st["G"], st["A"]
    K = T.size - 1
    A[K] += A[j]
    for alpha, n in groups:
        if n == 0:
            continue
        aj, ar = alpha[j], alpha[K]
        if aj <= 0:
            continue
        s = aj + ar
        T[K] += n * (psi(s) - psi(ar))
        G[K] += n * (gammaln(s) - gammaln(ar))
        A[K] += n * (s * psi(s) - aj * psi(aj) - ar * psi(ar))
    T[j] = G[j] = A[j] = 0.0
    if "S" in st:
        st["S"] = _s_zero_row(st["S"], j)
    else:
        st["Sb"][j] = 0.0


def _replay(bundle, ops, sub_alpha, K):
    """Apply the round's accepted moves so far to a bundle of visit-time statistics."""
    n = bundle["D"]
    for op in ops:
        if op[0] == "merge":
            _, a, b, p = op
            _merge_fields(bundle, a, b, bundle["PT"][p], bundle["PG"][p], bundle["PA"][p],
                          bundle["PH"][p])
            sub_alpha[a] += sub_alpha[b]
            sub_alpha[b] = 0.0
        else:
            j = op[1]
            _fold_delete(bundle, j, [(sub_alpha.copy(), int(n))])
            sub_alpha[K] += sub_alpha[j]
            sub_alpha[j] = 0.0


def _sub_bundle(st, bundle):
    st["S"] = _s_sub_block(st["S"], bundle["cols"], bundle["Sb"])
    for f in ("T", "G", "A"):
        st[f] = st[f] - bundle[f]
    for f in ("LS", "H", "D"):
        st[f] = st[f] - bundle[f]


def _add_expanded(st, small, alive, cols=None):
    """Add statistics computed over the topics ``alive`` (plus the remainder), and over the
    word types ``cols`` (all if None), to full-space statistics."""
    idx = np.flatnonzero(alive)
    K = alive.size
    S_small = small["S"]
    if cols is None:
        st["S"] = _s_add_rows(st["S"], idx, S_small)
    elif sp.issparse(st["S"]):
        # the block over the word types ``cols`` as rows of a (len(idx), V) sparse array
        C = sp.coo_array(S_small)
        S_small = sp.csr_array((C.data, (C.row, np.asarray(cols)[C.col])),
                               shape=(idx.size, st["S"].shape[1]))
        st["S"] = _s_add_rows(st["S"], idx, S_small)
    else:
        st["S"][np.ix_(idx, cols)] += (S_small.toarray() if sp.issparse(S_small)
                                       else S_small)
    for f in ("T", "G", "A"):
        arr = st[f].copy()
        arr[idx] += small[f][:-1]
        arr[K] += small[f][-1]
        st[f] = arr
    for f in ("LS", "H", "D"):
        st[f] = st[f] + small[f]


def _permute(st, order):
    K = order.size
    full = np.concatenate([order, [K]])
    st["S"] = _s_take_rows(st["S"], order)
    for f in ("T", "G", "A"):
        st[f] = st[f][full]


class _Workspace(MoveWorkspace):
    """Whole-data statistics and parameters during a move round, in the topic space of the
    pass (removed topics are flagged, not dropped, until :meth:`compact`; born topics are
    appended; the state every model's workspace holds is
    :class:`sparseclust._moves.MoveWorkspace`'s)."""

    def __init__(self, model, stats, params):
        self.m = model
        if sp.issparse(stats["S"]):  # the statistics of a single batch
            stats["S"] = stats["S"].toarray()
        self.stats = stats
        for f in ("T", "G", "A"):
            stats[f] = stats[f].copy()
        self.init_space(params.lam.shape[0])
        self.V = params.lam.shape[1]
        self.lam = params.lam.copy()
        self.El = params.Elogphi.copy()
        self.tterm = (params.tterm if params.tterm is not None
                      else topic_terms(stats["S"], params.lam, params.Elogphi, model.tau)).copy()
        self.Q, self.E, self.Lam = _row_parts(stats["S"], self.lam, model.tau)
        self.rho, self.omega = params.rho.copy(), params.omega.copy()
        self.alive_after_j = None
        self.value = self._value(self.stats, self.alive, self.tterm, self.rho, self.omega)

    def _value(self, st, alive, tterm, rho, omega):
        full = np.concatenate([np.flatnonzero(alive), [self.K]])
        m = self.m
        D = float(st["D"])
        out = float(tterm[alive].sum())
        out += -st["LS"] + float(st["G"][full].sum()) - float(st["A"][full].sum()) + st["H"]
        out += stick_value(D, st["T"][full], m.alpha, m.gamma, rho, omega)
        return out

    def _stick_start(self, alive, beta_full):
        """Sticks for the topics ``alive`` with E[beta] = beta_full (indexed like the
        original topics plus the remainder) and the current omega."""
        full = np.concatenate([np.flatnonzero(alive), [self.K]])
        beta = beta_full[full]
        om = np.zeros(self.K)
        om[self.alive] = self.omega
        return sticks_from_weights(beta / beta.sum(), np.maximum(om[alive], 1e-3))

    def _sticks(self, st, alive, beta_full, start=None):
        """Re-optimized sticks for the topics ``alive`` from :meth:`_stick_start` (or from
        ``start``)."""
        full = np.concatenate([np.flatnonzero(alive), [self.K]])
        rho0, omega0 = start if start is not None else self._stick_start(alive, beta_full)
        rho, omega, _ = optimize_hdp_sticks(float(st["D"]), st["T"][full], self.m.alpha,
                                            self.m.gamma, rho0, omega0, maxiter=100)
        return rho, omega

    def _beta_full(self):
        b = np.zeros(self.K + 1)
        full = np.concatenate([np.flatnonzero(self.alive), [self.K]])
        b[full] = expected_beta(self.rho)
        return b

    def try_merge(self, a, b, PT, PG, PA, PH):
        st = self.stats
        tau = self.m.tau
        S_ab = st["S"][a] + st["S"][b]
        lam_ab = tau + np.maximum(S_ab, 0.0)
        El_ab = psi(lam_ab) - psi(lam_ab.sum())
        tt_ab = topic_terms(S_ab[None], lam_ab[None], El_ab[None], tau)[0]
        prop = {f: st[f].copy() for f in ("T", "G", "A")}
        prop["T"][a], prop["G"][a], prop["A"][a] = PT, PG, PA
        prop["T"][b] = prop["G"][b] = prop["A"][b] = 0.0
        prop.update(LS=st["LS"], H=st["H"] + PH, D=st["D"])
        alive = self.alive.copy()
        alive[b] = False
        tterm = self.tterm.copy()
        tterm[a] = tt_ab
        beta = self._beta_full()
        beta[a] += beta[b]
        start = self._stick_start(alive, beta)
        # the merged objective at the warm-start sticks (a + b's weight on a); optimizing the
        # sticks from there adds a few nats (at most 2e-3 D measured), so a shortfall of more
        # than ``merge_screen`` D cannot be made up: reject without optimizing
        start_value = self._value(prop, alive, tterm, *start)
        if start_value < self.value - self.m.move_opts["merge_screen"] * float(st["D"]):
            return False
        rho, omega = self._sticks(prop, alive, beta, start)
        value = self._value(prop, alive, tterm, rho, omega)
        if not self.accepts(value):
            return False
        st["S"][a] = S_ab
        st["S"][b] = 0.0
        for f in ("T", "G", "A"):
            st[f] = prop[f]
        st["H"] = prop["H"]
        self.alive, self.tterm, self.rho, self.omega, self.value = alive, tterm, rho, omega, value
        self.lam[a], self.El[a] = lam_ab, El_ab
        q, e, lsum = _row_parts(S_ab[None], lam_ab[None], tau)
        self.Q[a], self.E[a], self.Lam[a] = q[0], e[0], lsum[0]
        self.merged(a, b)
        return True

    def refresh_parts(self):
        """The per-topic parts of the data term (:func:`_row_parts`) from scratch."""
        self.Q, self.E, self.Lam = _row_parts(self.stats["S"], self.lam, self.m.tau)

    def try_delete(self, j, befores, tmask, groups, batches):
        """Objective of the model without topic j: its target documents re-inferred without
        it, every other document's theta_dj folded into the remainder.

        Only the word types of the target documents (``cols``) change in S, so the
        re-inference runs on those columns of E[log phi] and the data term is updated from
        the per-topic parts of :func:`_row_parts` over those columns (exact up to rounding;
        :meth:`compact` recomputes it from scratch).
        """
        m = self.m
        st = self.stats
        K, tau = self.K, m.tau
        bundles = [b for lst in befores.values() for b in lst]
        # the target documents' word types: their saved rows (the same CSR entries as the
        # documents themselves, so the re-inference below sees all their words)
        pieces = [b["cols"] for b in bundles]
        cols = (np.unique(np.concatenate(pieces)).astype(np.int64) if pieces
                else np.zeros(0, dtype=np.int64))
        S_old = st["S"][:, cols]
        Sc = S_old.copy()
        rest = {f: st[f].copy() for f in ("T", "G", "A")}
        rest.update(Sb=Sc, LS=st["LS"], H=st["H"], D=st["D"])
        for bundle in bundles:
            Sc[:, np.searchsorted(cols, bundle["cols"])] -= bundle["Sb"]
            for f in ("T", "G", "A", "LS", "H", "D"):
                rest[f] = rest[f] - bundle[f]
        fold = []
        for bb, gl in groups.items():
            for g in gl:
                fold.append((g["alpha"], int(np.count_nonzero(g["docs"] & ~tmask[bb]))))
        _fold_delete(rest, j, fold)
        alive = self.alive.copy()
        alive[j] = False
        idx = np.flatnonzero(alive)
        # parameters for re-inferring the targets: the current topics without j on the
        # targets' word types, and the current sticks with j's weight moved to the remainder
        beta = self._beta_full()
        beta[K] += beta[j]
        beta[j] = 0.0
        full = np.concatenate([idx, [K]])
        om = np.zeros(K)
        om[self.alive] = self.omega
        rho0, omega0 = sticks_from_weights(beta[full] / beta[full].sum(), om[idx])
        sub = np.ix_(idx, cols)
        params0 = HDPParams(self.lam[sub], rho0, omega0, m.alpha, self.El[sub])
        after = {}
        for bb, (small, doc_topic) in sorted(m.reinfer(batches, tmask, cols,
                                                       params0).items()):
            after[bb] = dict(stats=small, doc_topic=doc_topic, cols=cols)
            Sc[idx] += small["S"].toarray() if sp.issparse(small["S"]) else small["S"]
            for f in ("T", "G", "A"):
                rest[f][idx] += small[f][:-1]
                rest[f][K] += small[f][-1]
            for f in ("LS", "H", "D"):
                rest[f] = rest[f] + small[f]
        lam_c = tau + np.maximum(Sc, 0.0)
        q0, e0, l0 = _row_parts(S_old, self.lam[:, cols], tau)
        q1, e1, l1 = _row_parts(Sc, lam_c, tau)
        Q, E, Lam = self.Q - q0 + q1, self.E - e0 + e1, self.Lam - l0 + l1
        tterm = _terms_from_parts(Q, E, Lam, self.V, tau)
        rho, omega = self._sticks(rest, alive, beta)
        value = self._value(rest, alive, tterm, rho, omega)
        if not self.accepts(value):
            return None
        self._pending = (cols, Sc, lam_c, rest, alive, Q, E, Lam, tterm, rho, omega, value)
        self.alive_after_j = alive
        return after, params0

    def commit_delete(self, j):
        cols, Sc, lam_c, rest, alive, Q, E, Lam, tterm, rho, omega, value = self._pending
        st = self.stats
        S = st["S"]
        S[:, cols] = Sc
        S[j] = 0.0
        for f in ("T", "G", "A", "LS", "H", "D"):
            st[f] = rest[f]
        # E[log phi_kv] = psi(lambda_kv) - psi(Lambda_k): shift the rows whose total changed,
        # then recompute the changed columns
        shift = psi(self.Lam) - psi(Lam)
        rows = np.flatnonzero(shift != 0.0)
        if rows.size:
            self.El[rows] += shift[rows, None]
        self.lam[:, cols] = lam_c
        self.El[:, cols] = psi(lam_c) - psi(Lam)[:, None]
        self.Q, self.E, self.Lam = Q, E, Lam
        self.alive, self.tterm = alive, tterm
        self.rho, self.omega, self.value = rho, omega, value
        self.removed(j)
        self._pending = None

    def compact(self, batch_stats):
        """Drop the removed topics from the whole-data and every batch's statistics."""
        idx = np.flatnonzero(self.alive)
        full = np.concatenate([idx, [self.K]])

        def shrink(st):
            st["S"] = _s_take_rows(st["S"], idx)
            for f in ("T", "G", "A"):
                st[f] = st[f][full]

        shrink(self.stats)
        for st in batch_stats:
            shrink(st)
        new = compaction(self.alive)
        mm = self.merge_map
        self.merge_map = np.where(mm >= 0, new[np.maximum(mm, 0)], -1)
        # lambda, E[log phi] and the data term from scratch, so the rounding of the
        # column-wise updates during the round does not accumulate
        lam = self.m.tau + np.maximum(self.stats["S"], 0.0)
        params = HDPParams(lam, self.rho, self.omega, self.m.alpha)
        return self.stats, params


def reinfer_rows(X, model, cols, params):
    """Local step of the documents X restricted to the word types ``cols`` (all their words
    are there) under ``params`` (defined on ``cols``): (statistics, doc-topic counts,
    counter increments) as :meth:`HDPModel.reinfer` uses them. ``model.counters`` are left
    as they were (they count the passes' local steps)."""
    X = sp.csr_array(X)
    used = X.indices[X.data != 0]
    if used.size and not np.isin(used, cols).all():
        raise RuntimeError("a re-inferred document has words outside the delete's word types")
    before = dict(model.counters)
    stats, acc = model._local(X[:, cols], params, return_doc_topic=True)
    counters = {k: v - before.get(k, 0) for k, v in model.counters.items()}
    model.counters.update(before)  # a re-inference is not a pass's local step
    return stats, acc["doc_topic"], counters
