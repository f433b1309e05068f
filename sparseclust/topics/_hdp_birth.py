# SPDX-License-Identifier: BSD-3-Clause
r"""The birth move of HDPTopicModel: new topics from a short fit on target documents,
accepted only when the whole-data objective increases.

A birth at topic k (Hughes, Kim & Sudderth 2015; the targeted births of Hughes & Sudderth
2013, with the machinery of the DP mixture's, :mod:`sparseclust._moves`) runs at the end of
a memoized pass, on the statistics the pass cached:

1. **target**: the documents that use k (N_dk > 0), whose rows the pass saved; a uniform
   sample of ``birth_docs`` of them when there are more
   (:func:`sparseclust._moves.subsample_targets`, seeded by k's identity and the pass);
2. **proposal**: J = ``birth_topics`` fresh topics fit to the target documents alone, on
   their word types (KL k-means++ seeds and KL k-means, then ``birth_iters`` iterations of
   the LDA local step with lambda_j = tau + S_j). When every document that uses k is a
   target the fresh topics *replace* k (a split: k is left to no document and removed, and
   its entry of every other document's q(pi_d) folds into the remainder, as in a delete);
   otherwise k stays. Then ``birth_refine`` times: the target documents are re-inferred by
   the HDP local step under the current topics (k without the targets' counts, the first
   time) and the fresh ones, every topic is refit on the targets' word types
   (lambda = tau + S_rest + S_targets) and the sticks are re-optimized to the proposal's
   statistics, whose prior the next re-inference uses. Each round re-optimizes the targets'
   local parameters (from a cold start, to the local step's tolerance) and then the global
   ones, so the proposal's value rises round by round, with gains that shrink as the rounds
   converge, as a rule rather than by construction. From the second round on the value is
   computed (from per-topic sums over the word types outside the targets', which the proposal
   leaves as they were, in O((K + J) x columns)), and the proposal is dropped as soon as that
   value, raised by the last round's gain in every round left, would still not pass the
   current objective (:func:`sparseclust._moves.cannot_pass`): a cut of cost that decides as
   the last round would have wherever the gains do not grow;
3. **exact evaluation**: the objective is a sum over documents of terms of their local
   parameters plus terms of the whole-data statistics (:mod:`._hdp_model`), and it is a
   valid bound for *any* local parameters. The proposal keeps every other document's
   q(z_d), changes only the target documents' q(z_d), and gives every document a q(pi_d)
   over K + J + 1 entries, so its statistics are

       stats' = stats - sum_{d in target} stats_d(old q) + sum_{d in target} stats_d(new q)
                + the change of the other documents' q(pi_d),

   where stats_d(old q) is recomputed from the saved rows (:func:`._hdp_workspace._numpy_bundle`)
   and stats_d(new q) comes from the re-inference. A document outside the target had
   theta_d = N_d + a (a = alpha^used of its batch's pass, no token on the remainder entry
   K + 1); it gets theta'_d = (theta_{d,1..K}, a'_1..a'_J, a'_{J+1}) with a' the prior of the
   re-inference on the new topics and the new remainder (the q(pi_d) a local step that
   gives the new topics no token would leave). With t_d = N_d + sum_k a_k and
   t'_d = t_d - a_{K+1} + sum_j a'_j its old and new totals, the change is, in closed form
   from the documents' token counts (:func:`extend_prior`),

       T_k += sum_d [psi(t_d) - psi(t'_d)],  A_k += a_k sum_d [psi(t_d) - psi(t'_d)]  (k <= K),
       T'_j = sum_d [psi(a'_j) - psi(t'_d)],  G'_j = n log Gamma(a'_j),  A'_j = a'_j T'_j,
       LS += sum_d [log Gamma(t'_d) - log Gamma(t_d)],

   the old remainder entry replaced by the new one (j = J + 1) and H unchanged. A document
   that does not use a new topic then pays for it only the gap of the surrogate bound: its
   q(pi_d) entry equals the prior. The topics' data terms are recomputed from the new S over
   all K + J topics (lambda at its optimum tau + S), the sticks re-optimized for K + J
   topics, and the proposal is accepted iff L(stats', lambda', rho', omega') > L + 1e-12 |L|.
   Every batch's cached statistics get the same edit, so memoized training stays exact and
   its objective monotone;
4. **several births in a round**: after an accepted birth, the documents it did not
   re-infer keep their saved rows (their q(z_d)) with a q(pi_d) extended by its prior, and
   the re-inferred ones hold the prior of their re-inference: the round keeps, per batch,
   groups of documents that share a prior (:func:`birth_groups`). A later target is drawn
   from the documents no birth of the round re-inferred, so step 3 holds for it with its
   documents' old statistics taken under their extended prior
   (:func:`_target_bundle`) and every group's documents extended (and folded, when it
   replaces its topic) with their own prior. It replaces its topic only when no re-inferred
   document uses it.
"""

import numpy as np
import scipy.sparse as sp
from scipy.special import gammaln, psi

from .._engine import SuffStats
from .._moves import cannot_pass, fetch_rows
from .._stickbreak import optimize_hdp_sticks, sticks_from_weights
from ._hdp_params import HDPParams, _row_parts, _terms_from_parts, stick_value, topic_terms
from ._hdp_workspace import _add_expanded, _fold_delete, _numpy_bundle, _sub_bundle, reinfer_rows
from ._lda_init import _KMEANS_ITERS, _kl_kmeans, _kl_kmeanspp_seeds
from ._local import local_step

__all__ = ["extend_prior", "fresh_topics", "propose_birth", "apply_birth", "birth_groups"]


def extend_prior(st, groups, a_new, a_rem):
    """T, G, A and LS of statistics over K topics + remainder extended to K + J topics +
    remainder, for documents that get the prior ``a_new`` (J,) on the new topics and ``a_rem``
    on the new remainder entry (their tokens stay where they were).

    ``groups`` lists (alpha^used (K + 1,), token counts N_d of the documents) of the documents
    whose q(pi_d) is extended, one group per prior; their old remainder entries are all that
    ``st`` holds on entry K + 1 (it is replaced). Returns (T, G, A) of K + J + 1 entries and
    LS; see the module docstring.
    """
    T, G, A = st["T"], st["G"], st["A"]
    K = T.size - 1
    J = a_new.size
    out = [np.zeros(K + J + 1) for _ in range(3)]
    for arr, old in zip(out, (T, G, A), strict=True):
        arr[:K] = old[:K]
    T2, G2, A2 = out
    LS = st["LS"]
    add = float(a_new.sum()) + a_rem
    for alpha, lens in groups:
        n = lens.size
        if n == 0:
            continue
        tot = lens + float(alpha.sum())
        tot2 = tot - alpha[K] + add
        p, p2 = psi(tot), psi(tot2)
        delta = float(np.sum(p - p2))
        s2 = float(np.sum(p2))
        T2[:K] += delta
        A2[:K] += alpha[:K] * delta
        t_new = n * psi(a_new) - s2
        T2[K:K + J] += t_new
        G2[K:K + J] += n * gammaln(a_new)
        A2[K:K + J] += a_new * t_new
        t_rem = n * psi(a_rem) - s2
        T2[K + J] += t_rem
        G2[K + J] += n * gammaln(a_rem)
        A2[K + J] += a_rem * t_rem
        LS = LS + float(np.sum(gammaln(tot2) - gammaln(tot)))
    return T2, G2, A2, LS


def _elogphi(lam, rest):
    """E[log phi] on a block of word types: psi(lambda_kv) - psi(Lambda_k), with Lambda_k the
    row total over all word types (``rest``: the total of the word types outside the block)."""
    return psi(lam) - psi(lam.sum(axis=1) + rest)[:, None]


def fresh_topics(Xt, J, tau, V, alpha, rng, n_iter, L, n_threads):
    """Topic-word counts (J, n_cols) of J topics fit to the documents ``Xt`` (restricted to
    their word types, V in all): KL k-means++ seeds and KL k-means (the initializer of
    SparseLDA), then ``n_iter`` iterations of the LDA local step with document prior
    alpha / J and lambda = tau + S. None when fewer than two topics keep a token."""

    n_cols = Xt.shape[1]
    seeds = _kl_kmeanspp_seeds(Xt, J, tau, rng, n_threads)
    S = _kl_kmeans(Xt, seeds, tau, _KMEANS_ITERS, n_threads)
    outside = tau * (V - n_cols)
    for _ in range(n_iter):
        lam = tau + S
        res = local_step(Xt, _elogphi(lam, outside), np.full(J, alpha / J), L=L,
                         n_threads=n_threads, max_iter=100, tol=0.05, restarts=0)
        S = res.topic_word_stats
    if np.count_nonzero(S.sum(axis=1) >= 1.0) < 2:
        return None
    return S


def _round_value(work, idx, cols, parts_out, S_blk, stats, full, rho, omega):
    """The whole-data objective of a birth's proposal after a refinement round: the kept
    topics ``idx`` and the fresh ones with the statistics ``S_blk`` ((K + J) x ``cols``) on the
    targets' word types and their parts ``parts_out`` (Q, E, Lambda of
    :func:`._hdp_params._row_parts`) elsewhere, the documents' statistics ``stats`` =
    (T, G, A, LS, H, D) and the sticks (rho, omega) over the live entries ``full``."""
    tau = work.m.tau
    q1, e1, l1 = _row_parts(S_blk, tau + np.maximum(S_blk, 0.0), tau)
    tt = _terms_from_parts(parts_out[0] + q1, parts_out[1] + e1, parts_out[2] + l1, work.V,
                           tau)
    return _proposal_value(float(tt.sum()), stats, full, work.m, rho, omega)


def _proposal_value(data_terms, stats, full, m, rho, omega):
    """The objective of a proposal over K + J topics from the sum of its topics' data terms,
    the documents' statistics ``stats`` = (T, G, A, LS, H, D) and the sticks (rho, omega) over
    the live entries ``full`` (the remainder last)."""
    T, G, A, LS, H, D = stats
    return (data_terms - LS + float(G[full].sum()) - float(A[full].sum()) + H
            + stick_value(float(D), T[full], m.alpha, m.gamma, rho, omega))


def _target_bundle(rows, alpha0, alpha, alive, V):
    """The statistics of target documents that no earlier birth of the round re-inferred:
    their saved rows (over the pass's K0 topics, prior ``alpha0``) with the q(pi_d) of their
    current prior ``alpha`` (over the round's K >= K0 topics + remainder, earlier births'
    entries added as :func:`extend_prior` added them; a removed topic has no entry). The
    pass's statistics (:func:`._hdp_workspace._numpy_bundle`) when no birth came before."""
    K0, K = alpha0.size - 1, alpha.size - 1
    nopairs = np.zeros((0, 2), dtype=np.int32)
    b = _numpy_bundle(rows, alpha0, K0, V, nopairs)
    if K == K0 and np.array_equal(alpha, alpha0):
        return b
    # the entropy term H and the topic-word block do not depend on the prior
    N = rows["N"]
    n = N.shape[0]
    live = np.flatnonzero(alive)
    tot = N.sum(axis=1) + float(alpha.sum())
    ps = psi(tot)
    theta = np.zeros((n, K))
    theta[:, :K0] = N
    theta = theta[:, live] + alpha[live]
    T, G = np.zeros(K + 1), np.zeros(K + 1)
    T[live] = (psi(theta) - ps[:, None]).sum(axis=0)
    G[live] = gammaln(theta).sum(axis=0)
    T[K] = float(np.sum(psi(alpha[K]) - ps))
    G[K] = n * gammaln(alpha[K])
    Sb = np.zeros((K, b["Sb"].shape[1]))
    Sb[:K0] = b["Sb"]
    return dict(b, Sb=Sb, T=T, G=G, A=alpha * T, LS=float(np.sum(gammaln(tot))))


def _pass_groups(rnd):
    """Every batch's documents as one group with the pass's prior."""
    return {bb: [dict(alpha=g["alpha0"], docs=np.ones(g["D"], dtype=bool))]
            for bb, g in rnd.batch.items()}


def birth_groups(groups, rnd, k, prior, whole, reinferred):
    """The documents' priors after an accepted birth at k (J new topics, ``prior`` (a'_1..J,
    a'_{J+1}) for the documents it did not re-infer): every group's prior gets the new
    entries (k folded into the remainder when the birth replaced it) and loses the
    re-inferred targets, which form a group of their own with the prior of their
    re-inference. ``groups`` as :func:`propose_birth` takes it (None: the pass's)."""
    if groups is None:
        groups = _pass_groups(rnd)
    a_new, a_rem = prior
    tmask = reinferred["tmask"]
    out = {}
    for bb, lst in groups.items():
        out[bb] = []
        for g in lst:
            a = g["alpha"].copy()
            K = a.size - 1
            if whole:
                a[K] += a[k]
                a[k] = 0.0
            out[bb].append(dict(alpha=np.concatenate([a[:K], a_new, [a_rem]]),
                                docs=g["docs"] & ~tmask[bb]))
        if tmask[bb].any():
            out[bb].append(dict(alpha=reinferred["alpha"], docs=tmask[bb].copy()))
    return out


def propose_birth(work, k, items, rnd, batches, rng, groups=None):
    """The birth proposal at topic k, evaluated on the whole-data objective (module
    docstring, step 3).

    Parameters
    ----------
    work : ``_Workspace`` of :mod:`._hdp_workspace`
        The round's whole-data statistics and parameters; edited only when accepted.
    k : int
        The target topic.
    items : tuple (dict, bool)
        The target documents' saved rows per batch ({batch: [rows]}) and whether they are
        every document that uses k (the fresh topics then replace k).
    rnd : MoveRound
        The round, with what the pass gathered per batch (prior alpha^used, token counts).
    batches : list
        The batches (or a Dask collection's, with ``map_rows``).
    rng : RandomState
        The birth's stream (:meth:`sparseclust._moves.MoveBook.birth_rng`).
    groups : dict or None
        After earlier births of the round: {batch: [{"alpha": alpha^used over the current
        topics + remainder, "docs": bool mask of the documents with that prior}]} (the
        first group holds the documents no birth of the round re-inferred, which every
        target is); None: one group per batch, its documents with the pass's prior.

    Returns
    -------
    None when rejected, else ``(J, edits, cols, prior, whole, reinferred)``: ``edits[b]`` is
    batch b's (old statistics of its targets, their re-inferred statistics, [(alpha^used,
    token counts)] of its other documents before and after the fold of k) for
    :func:`apply_birth`, ``cols`` the targets' word types, ``prior`` (a'_1..J, a'_{J+1})
    and ``reinferred`` what :func:`birth_groups` needs of the re-inference (the targets,
    their prior, their doc-topic counts over the topics ``slots``). The workspace then holds the
    proposal's statistics and parameters over K + J topics (k removed when ``whole``).
    """

    sel, whole = items
    m = work.m
    opts = m.move_opts
    st = work.stats
    K, V, tau = work.K, work.V, m.tau
    if groups is None:
        groups = _pass_groups(rnd)
    bundles = {bb: [_target_bundle(rows, rnd.batch[bb]["alpha0"], groups[bb][0]["alpha"],
                                   work.alive, V) for rows in lst] for bb, lst in sel.items()}
    doc_ids = {bb: np.concatenate([rows["doc_ids"] for rows in lst]) for bb, lst in sel.items()}
    cols = np.unique(np.concatenate([b["cols"] for lst in bundles.values()
                                     for b in lst])).astype(np.int64)
    # the rest of the data: the whole-data statistics without the target documents
    Sc = st["S"][:, cols].copy()
    rest = {f: st[f].copy() for f in ("T", "G", "A")}
    rest.update(LS=st["LS"], H=st["H"], D=st["D"])
    for lst in bundles.values():
        for b in lst:
            Sc[:, np.searchsorted(cols, b["cols"])] -= b["Sb"]
            for f in ("T", "G", "A", "LS", "H", "D"):
                rest[f] = rest[f] - b[f]
    # fresh topics from the target documents alone
    docs = _fetch_docs(batches, doc_ids, V)
    Xt = sp.csr_array(sp.vstack([docs[bb] for bb in sorted(docs)]), dtype=np.float64)
    Xt = sp.csr_array(Xt[:, cols])
    J = int(min(opts["birth_topics"], Xt.shape[0] // 2))
    if J < 2:
        return None
    Sf = fresh_topics(Xt, J, tau, V, m.alpha, rng, opts["birth_iters"], m.L, m.n_threads)
    if Sf is None:
        return None
    J = Sf.shape[0]
    tmask = {bb: np.zeros(rnd.batch[bb]["D"], dtype=bool) for bb in rnd.batch}
    for bb, ids in doc_ids.items():
        tmask[bb][ids] = True
    # the other documents, by batch and prior: their prior and their token counts
    others = {bb: [(g["alpha"].copy(), rnd.batch[bb]["doc_len"][g["docs"] & ~tmask[bb]])
                   for g in groups[bb]] for bb in rnd.batch}
    unfolded = {bb: [(a.copy(), lens) for a, lens in lst] for bb, lst in others.items()}
    keep = work.alive.copy()
    if whole:
        # every document that uses k is a target: the fresh topics replace k, which no
        # document uses after, and the other documents' theta_dk folds into the remainder
        keep[k] = False
        fold = dict(T=rest["T"], G=rest["G"], A=rest["A"], Sb=np.zeros((K, 1)))
        _fold_delete(fold, k, [(a, lens.size) for lst in others.values() for a, lens in lst])
        for lst in others.values():
            for a, _ in lst:
                a[K] += a[k]
                a[k] = 0.0
    idx = np.flatnonzero(keep)
    # prior of the first re-inference: the fresh topics take half of k's weight, in
    # proportion to their sizes (any prior gives a valid proposal; the sticks are
    # re-optimized after each re-inference)
    beta = work._beta_full()
    sizes = Sf.sum(axis=1) + 1e-3
    fresh_beta = 0.5 * beta[k] * sizes / sizes.sum()
    beta[k] *= 0.5
    beta_new = np.concatenate([beta[idx], fresh_beta, [beta[K]]])
    beta_new /= beta_new.sum()
    om = np.zeros(K)
    om[work.alive] = work.omega
    omega0 = np.concatenate([np.maximum(om[idx], 1e-3), np.full(J, float(np.median(om[idx])))])
    rho0, omega0 = sticks_from_weights(beta_new, omega0)
    outside_old = work.Lam[idx] - work.lam[np.ix_(idx, cols)].sum(axis=1)
    outside = np.concatenate([outside_old, np.full(J, tau * (V - cols.size))])
    # the first re-inference: the current topics (k without the targets' counts) and the
    # fresh ones
    S_old = st["S"][np.ix_(idx, cols)].copy()
    S_old[idx == k] = np.maximum(Sc[k], 0.0)
    S_blk = np.vstack([S_old, Sf])
    K2 = K + J
    slots = np.concatenate([idx, K + np.arange(J)])
    alive = np.concatenate([keep, np.ones(J, dtype=bool)])
    full = np.concatenate([np.flatnonzero(alive), [K2]])
    n_refine = opts["birth_refine"]
    # the data-term parts (:func:`._hdp_params._row_parts`) of the kept topics outside the
    # targets' word types, which the proposal does not change, and of the fresh topics there:
    # the objective after a round of refinement then costs O((K + J) x columns)
    q0, e0, l0 = _row_parts(st["S"][np.ix_(idx, cols)], work.lam[np.ix_(idx, cols)], tau)
    n_out = V - cols.size
    parts_out = (np.concatenate([work.Q[idx] - q0, np.full(J, n_out * gammaln(tau))]),
                 np.concatenate([work.E[idx] - e0, np.zeros(J)]),
                 np.concatenate([work.Lam[idx] - l0, np.full(J, n_out * tau)]))
    values = []
    for it in range(n_refine):
        # re-infer the targets under the current proposal, then refit every topic on the
        # targets' word types and the sticks to the proposal's statistics (the next
        # re-inference, and the q(pi_d) of the other documents, use those sticks' prior)
        lam_blk = tau + S_blk
        params0 = HDPParams(lam_blk, rho0, omega0, m.alpha, _elogphi(lam_blk, outside))
        if it < n_refine - 1:
            # only the totals count until the last re-inference: all targets at once, here
            # (the documents were fetched for the fresh topics' fit)
            small, _, counters = reinfer_rows(Xt, m, np.arange(cols.size), params0)
            m.counters["birth_local_iters"] += counters["local_iters"]
            after = {None: (small, None)}
        else:
            # the last one per batch: its statistics edit every batch's cache
            after = m.reinfer(batches, tmask, cols, params0, counter="birth_local_iters")
        # every other document: its q(pi_d) gets the re-inference's prior on the new entries
        alpha_all = params0.alpha_all()
        prior = (alpha_all[idx.size:idx.size + J], float(alpha_all[-1]))
        T, G, A, LS = extend_prior(rest, [g for lst in others.values() for g in lst], *prior)
        H, D = rest["H"], rest["D"]
        S_blk = np.vstack([Sc[idx], np.zeros((J, cols.size))])
        for small, _ in after.values():
            S_blk += small["S"].toarray() if sp.issparse(small["S"]) else small["S"]
            for arr, f in ((T, "T"), (G, "G"), (A, "A")):
                arr[slots] += small[f][:-1]
                arr[K2] += small[f][-1]
            LS, H, D = LS + small["LS"], H + small["H"], D + small["D"]
        rho, omega, _ = optimize_hdp_sticks(float(D), T[full], m.alpha, m.gamma, rho0, omega0,
                                            maxiter=100)
        rho0, omega0 = rho, omega
        if 0 < it < n_refine - 1:
            # the objective of this round's proposal; stop when the rounds left cannot lift
            # it past the current one at its last gain (:func:`sparseclust._moves.cannot_pass`)
            values.append(_round_value(work, idx, cols, parts_out, S_blk,
                                       (T, G, A, LS, H, D), full, rho, omega))
            if cannot_pass(values, n_refine - 1 - it, work.value):
                return None
        S_blk = np.maximum(S_blk, 0.0)
    # the proposal's whole-data statistics over K + J topics (the sticks of the last
    # re-inference's statistics)
    S = np.zeros((K2, V))
    S[:K] = st["S"]
    S[:K, cols] = Sc
    if whole:
        S[k] = 0.0
    for small, _ in after.values():
        S[np.ix_(slots, cols)] += (small["S"].toarray() if sp.issparse(small["S"])
                                   else small["S"])
    lam = tau + np.maximum(S, 0.0)
    El = psi(lam) - psi(lam.sum(axis=1))[:, None]
    tterm = topic_terms(S, lam, El, tau)
    value = _proposal_value(float(tterm[alive].sum()), (T, G, A, LS, H, D), full, m, rho, omega)
    if not work.accepts(value):
        return None
    work.grow(J)
    if whole:
        work.alive[k] = False
        work.removed(k)
    work.stats = SuffStats(S=S, T=T, G=G, A=A, LS=LS, H=H, D=D)
    work.lam, work.El, work.tterm = lam, El, tterm
    work.refresh_parts()
    work.rho, work.omega, work.value = rho, omega, value
    edits = {bb: (bundles.get(bb, []), after[bb][0] if bb in after else None,
                  unfolded[bb], others[bb]) for bb in rnd.batch}
    alpha_t = np.zeros(K2 + 1)
    alpha_t[slots] = alpha_all[:-1]
    alpha_t[K2] = alpha_all[-1]
    reinferred = dict(tmask=tmask, alpha=alpha_t, slots=slots,
                      doc_topic={bb: res[1] for bb, res in after.items()})
    return J, edits, cols, prior, whole, reinferred


def apply_birth(st, edit, cols, prior, alive, k, whole):
    """The birth's edit of one batch's cached statistics ``st`` (in place): its target
    documents' old statistics out, the prior of the new entries given to its other
    documents (:func:`extend_prior`), the re-inferred statistics in (over the topics
    ``alive`` of the K + J)."""

    bundles, small, unfolded, folded = edit
    for b in bundles:
        _sub_bundle(st, b)
    if whole:
        _fold_delete(st, k, [(a, lens.size) for a, lens in unfolded])
    st["T"], st["G"], st["A"], st["LS"] = extend_prior(st, folded, *prior)
    J = prior[0].size
    S = st["S"]
    if sp.issparse(S):
        st["S"] = sp.csr_array(sp.vstack([S, sp.csr_array((J, S.shape[1]))]))
    else:
        st["S"] = np.vstack([S, np.zeros((J, S.shape[1]))])
    if small is not None:
        _add_expanded(st, small, alive, cols)


def _own_docs(X):
    """The rows X as CSR arrays (data, indices, row lengths), which the partitions' results
    concatenate."""
    X = sp.csr_array(X)
    return (np.asarray(X.data, dtype=np.float64), np.asarray(X.indices, dtype=np.int64),
            np.diff(X.indptr).astype(np.int64))


def _fetch_docs(batches, sel, V):
    """{b: the documents ``sel[b]`` of batch b, in that order, as CSR (n, V)}
    (:func:`sparseclust._moves.fetch_rows`)."""
    def unpack(got):
        data, indices, lens = got
        indptr = np.concatenate([[0], np.cumsum(lens)])
        return sp.csr_array((data, indices, indptr), shape=(lens.size, V))

    return {bb: sp.csr_array(X) for bb, X in fetch_rows(
        batches, sel, take=lambda X, ids: sp.csr_array(X[ids]), pack=_own_docs,
        unpack=unpack).items()}
