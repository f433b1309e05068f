# SPDX-License-Identifier: BSD-3-Clause
"""The HDP topic model as local step + global step, with memoized merge and delete moves.

Model (Teh et al. 2006; variational family of Hughes, Kim & Sudderth 2015): topic weights
by stick-breaking, u_k ~ Beta(1, gamma), beta_k = u_k prod_{l<k} (1 - u_l) (k = 1..K) and the
remainder beta_{K+1} = prod_{l<=K} (1 - u_l); documents pi_d ~ Dir(alpha beta_1, ...,
alpha beta_{K+1}), z_dn ~ Cat(pi_d), x_dn ~ Cat(phi_{z_dn}), phi_k ~ Dir(tau).
q(u_k) = Beta(rho_k omega_k, (1 - rho_k) omega_k), q(pi_d) = Dir(theta_d) over K + 1 entries,
q(z_dn) = Cat(r_dn) over K topics with at most L non-zeros per word type, q(phi_k) = Dir(lambda_k).

Objective (supplement Eq. 1, 2, 17, 20; theta_d = N_d + alpha^used as the local step leaves it):

    L = sum_k [c_D(tau) - c_D(lambda_k) + sum_v (S_kv + tau - lambda_kv) E[log phi_kv]]   (data)
        + H                                                  (assignment entropy -sum c r log r)
        - LS + sum_{k<=K+1} G_k - sum_{k<=K+1} A_k           (-sum_d c_D(theta_d) - ...)
        + D K log alpha + K c_B(1, gamma) + L_G(rho, omega)  (surrogate bound and sticks)

with the additive statistics of the documents

    S_kv = sum_{d,u: v_du = v} c_du r_duk,  T_k = sum_d E[log pi_dk],
    G_k = sum_d log Gamma(theta_dk),  A_k = sum_d alpha^used_k E[log pi_dk],
    LS = sum_d log Gamma(sum_k theta_dk),  H,  D,

(k = 1..K + 1 for T, G, A; alpha^used is the prior the local step used), and L_G of
:func:`sparseclust._stickbreak.hdp_objective`, which contains alpha sum_k E[beta_k] T_k. Because
the theta-dependent terms are kept as statistics, the objective is exact for any (rho, omega),
so the global step may change alpha E[beta] without a new local step, and memoized training
is monotone.

Moves (memoized and batch training): a **merge** of topics a and b adds their responsibilities
(r'_a = r_a + r_b, theta'_a = theta_a + theta_b); its statistics need, per candidate pair,
sum_d log Gamma(theta_da + theta_db), sum_d E[log pi'_da] and the entropy change, gathered
during the pass. A **delete** of topic j re-runs the local step, without j, on the documents
that use it (N_dj > 0), and folds theta_dj = alpha^used_j into the remainder entry in every
other document (their theta_d keeps its sum, so no other term changes). Each proposal is
accepted only if the whole-data objective increases. A **birth** at topic k re-infers the
documents that use k most with fresh topics fit to them and splits the remainder entry of
every other document (:mod:`._hdp_birth`, which states the exact bookkeeping). A **sort**
reorders the topics by size when that increases the objective (the stick-breaking prior
depends on the order).

Schedule of a round (one memoized pass; :class:`sparseclust._moves.MoveBook`): merge pairs and
delete candidates are chosen before the pass, and birth targets (the largest topics whose
birth was not rejected recently) when the previous round accepted no merge or delete
(:meth:`~sparseclust._moves.MoveBook.births_settled`), when the last rounds of births were
not all rejected (:meth:`~sparseclust._moves.MoveBook.due`) and when K + ``birth_topics``
fits under the cap ``max_topics``. After the pass the merges are tried, then the deletes,
then the births, but only if this round accepted no merge or delete: a round either shrinks
the model or grows it, never both, and the round after a birth sees the new topics through a
whole pass before a merge or delete can remove them. Every accepted move strictly raises the
objective, so births and merges cannot undo each other indefinitely; a rejected proposal
waits ``cooldown * 2 ** (n - 1)`` passes after its n-th rejection.

The parameters and objective terms are in :mod:`._hdp_params`, the statistics edits of the
moves and their whole-data workspace in :mod:`._hdp_workspace`.
"""

import numpy as np
import scipy.sparse as sp
from scipy.special import gammaln, psi

from .._engine import SuffStats, VariationalModel
from .._kernels import _hdp_stats
from .._moves import (
    MoveBook,
    MoveRound,  # batch -> dict(PT, PG, PH, PA, alpha, D, targets)
    RoundLog,
    improves,
    merge_pair_union,
    select_births,
    select_deletes,
    select_merge_pairs,
    subsample_targets,
    top_weight_cosine,
    usage_correlation,
)
from .._stickbreak import optimize_hdp_sticks, sticks_from_weights
from ..utils._threads import threads_for_work
from ._hdp_birth import apply_birth, birth_groups, propose_birth
from ._hdp_params import HDPParams, stick_value, topic_terms
from ._hdp_workspace import (
    _add_expanded,
    _fold_delete,
    _merge_fields,
    _numpy_bundle,
    _permute,
    _replay,
    _sub_bundle,
    _take_rows,
    _Workspace,
    reinfer_rows,
)
from ._local import _NNZ_PER_THREAD, local_step


def combine_sides(a, b):
    """The side results of two consecutive parts of a batch (:meth:`HDPModel.visit_local`)
    as those of their union: merge terms and co-usage add, delete-target rows concatenate
    (``a``'s documents first)."""
    out = {k: (None if a[k] is None else a[k] + b[k]) for k in ("PT", "PG", "PH", "PA")}
    out["D"] = a["D"] + b["D"]
    if a["usage"] is None:
        out["usage"] = None
    else:
        out["usage"] = {k: a["usage"][k] + b["usage"][k] for k in a["usage"]}
    out["targets"] = list(a["targets"]) + list(b["targets"])
    dl = [x.get("doc_len") for x in (a, b)]
    out["doc_len"] = None if dl[0] is None else np.concatenate(dl)
    return out


def empty_stats(K, V):
    """Statistics of no documents (the shape every additive combination needs)."""
    z = np.zeros(K + 1)
    return SuffStats(S=np.zeros((K, V)), T=z.copy(), G=z.copy(), A=z.copy(), LS=0.0, H=0.0,
                     D=0.0)


class HDPModel(MoveBook, VariationalModel):
    """HDP topic model for :func:`sparseclust._engine.fit_engine` (see the module docstring).

    Parameters
    ----------
    alpha, gamma, tau : float
        Document concentration, top-level stick concentration, topic-word prior.
    L : int or None
        Sparsity level of the local step.
    local_opts : dict
        ``max_iter``, ``tol``, ``restarts`` of the local step.
    n_threads : int or None
    moves : tuple of str
        Subset of ``("merge", "delete", "birth", "sort")``.
    max_topics : int or None
        Cap of the truncation: a birth is proposed only when the truncation plus
        ``birth_topics`` fits under it (None: no births).

    The options of the moves are fixed (``move_opts``): ``start`` (first pass whose end runs
    moves), ``max_pairs``, ``pairs_per_topic``, ``min_corr`` (pairs by co-usage),
    ``word_pairs_per_topic``, ``min_word_cos``, ``word_top`` (pairs by the cosine of the
    topics' ``word_top`` largest counts), ``delete_docs`` (budget of documents to revisit
    per pass), ``max_deletes`` (the most delete proposals per round; a round that accepted
    none halves the next round's number), ``delete_budget`` (the rule of that number after a
    round that accepted some but not all: 'follow', twice the number accepted but at least
    half the last number; see :class:`AdaptiveBudget`), ``cooldown`` (passes) and
    ``merge_screen`` (nats per document: a merge whose objective at the warm-start sticks is
    more than ``merge_screen * D`` below the current one is rejected without optimizing its
    sticks). The births' options (:mod:`._hdp_birth`): ``birth_topics`` (fresh topics per
    birth, J), ``birth_docs`` (target documents re-inferred at most), ``birth_iters``
    (iterations of the fresh topics' own fit), ``birth_refine`` (re-inferences of the
    targets with the fresh topics), ``max_births`` (targets tried per round, largest first;
    each accepted one leaves the documents it re-inferred out of the later targets, which
    wait for the next round when that makes them smaller than ``birth_docs`` or than all of
    their documents). A birth is proposed only while the truncation plus ``birth_topics``
    fits under ``max_topics``.

    With births the local step always runs the L-sparse routine (with L = K while L >= K),
    whose per-document rows the moves save.
    """

    def __init__(self, alpha, gamma, tau, L, local_opts, n_threads, moves=(),
                 max_topics=None):
        self.alpha = float(alpha)
        self.gamma = float(gamma)
        self.tau = float(tau)
        self.L = L
        self.local_opts = dict(local_opts)
        self.n_threads = n_threads
        self.moves = tuple(moves)
        self.move_opts = dict(start=2, max_pairs=400, pairs_per_topic=4, min_corr=0.05,
                              word_pairs_per_topic=2, min_word_cos=0.3, word_top=50,
                              delete_docs=500, max_deletes=20, delete_budget="follow",
                              cooldown=3, merge_screen=0.05, birth_topics=3,
                              birth_docs=2000, birth_iters=30, birth_refine=6,
                              max_births=3)
        self.max_topics = max_topics
        self._birth_possible = False
        # births need the saved rows of the L-sparse routine at any K
        self.sparse_rows = "birth" in self.moves
        self.rho = None
        self.omega = None
        #: objective of the last memoized/batch pass before its moves (see after_pass)
        self.pre_move_elbo = None
        # topic identities, rejected-proposal memo with its cool-down, co-usage, round logs
        self.init_book()
        # the local step of the passes; delete_local_iters: that of the delete proposals'
        # re-inferred documents (kept apart so local_iters compares with SparseLDA's)
        self.counters = {"restarts_tried": 0, "restarts_accepted": 0, "local_iters": 0,
                         "delete_local_iters": 0, "birth_local_iters": 0}

    # ---------------------------------------------------------------------------------
    # local step

    def _local(self, X, params, rnd=None, want_usage=False, return_doc_topic=False):
        """Local step of X under params; returns (SuffStats, extras)."""
        K = params.K
        nnz = X.nnz if hasattr(X, "nnz") else X.size
        nt = threads_for_work(self.n_threads, nnz, _NNZ_PER_THREAD, cap_explicit=False)
        alpha_vec, alpha_rem = params.alpha_vec, params.alpha_rem
        alpha_all = params.alpha_all()
        sum_all = float(alpha_all.sum())
        pairs = rnd.pairs if rnd is not None else np.zeros((0, 2), dtype=np.int32)
        P = pairs.shape[0]
        dels = rnd.deletes if rnd is not None else np.zeros(0, dtype=np.int64)
        births = rnd.births if rnd is not None else np.zeros(0, dtype=np.int64)
        acc = dict(G=np.zeros(K), Trem=0.0, LS=0.0, PG=np.zeros(P), PT=np.zeros(P),
                   PH=np.zeros(P), targets=[])
        if want_usage:
            acc.update(n_users=np.zeros(K), sum_p=np.zeros(K), sum_pp=sp.csr_array((K, K)),
                       n=0.0)
        psi_rem = float(psi(alpha_rem))

        def extra(piece):
            out = piece["out"]
            skip = np.ascontiguousarray(piece["skip"], dtype=np.int32)
            N, ps = out["N"], out["psi_sum"]
            keep = skip == 0
            data = np.ascontiguousarray(piece["data"], dtype=np.float64)
            _hdp_stats.topic_lgamma(N, alpha_vec, skip, acc["G"], nt)
            acc["Trem"] += float(np.sum(psi_rem - ps[keep]))
            acc["LS"] += float(np.sum(gammaln(N[keep].sum(axis=1) + sum_all)))
            if P:
                _hdp_stats.pair_theta(N, alpha_vec, ps, skip, pairs, acc["PG"], acc["PT"], nt)
                if piece["Lk"] > 0:
                    _hdp_stats.pair_entropy_sparse(
                        piece["indptr"], data, out["r"], out["idx"], skip, rnd.pair_of, K,
                        acc["PH"], nt,
                    )
                else:
                    _hdp_stats.pair_entropy_dense(
                        piece["indptr"], piece["indices"], data, out["expP"], out["zs"],
                        piece["ET"], skip, pairs, acc["PH"], nt,
                    )
            if want_usage:
                Nk = N[keep]
                nd = Nk.sum(axis=1)
                acc["n_users"] += (Nk > 0).sum(axis=0)
                acc["n"] += float(np.count_nonzero(nd > 0))
                Pm = sp.csr_array(Nk / np.where(nd > 0, nd, 1.0)[:, None])
                acc["sum_p"] += np.asarray(Pm.sum(axis=0)).ravel()
                acc["sum_pp"] = acc["sum_pp"] + (Pm.T @ Pm)
            if (dels.size or births.size) and piece["Lk"] > 0:
                want = (N[:, dels] > 0).any(axis=1)
                if births.size:
                    want |= (N[:, births] > 0).any(axis=1)
                sel = np.flatnonzero(keep & want)
                if sel.size:
                    ip = piece["indptr"]
                    take = np.concatenate([np.arange(ip[d], ip[d + 1]) for d in sel])
                    sub_ptr = np.zeros(sel.size + 1, dtype=np.int64)
                    np.cumsum(ip[sel + 1] - ip[sel], out=sub_ptr[1:])
                    acc["targets"].append(dict(
                        doc_ids=piece["doc_ids"][sel], N=N[sel].copy(), psi_sum=ps[sel].copy(),
                        elbo=out["elbo"][sel].copy(), indptr=sub_ptr,
                        indices=piece["indices"][take].copy(), data=data[take],
                        r=out["r"][take].copy(), idx=out["idx"][take].copy(),
                    ))

        res = local_step(
            X, params.tables, alpha_vec, L=self.L, n_threads=self.n_threads,
            alpha_rem=alpha_rem, init_weights=params.P0, extra=extra,
            return_doc_topic=return_doc_topic, force_sparse=self.sparse_rows,
            **self.local_opts,
        )
        self.counters["restarts_tried"] += res.n_restarts_tried
        self.counters["restarts_accepted"] += res.n_restarts_accepted
        self.counters["local_iters"] += res.n_iter_total
        D = float(X.shape[0])
        T = np.concatenate([res.sum_Elogpi, [acc["Trem"]]])
        G = np.concatenate([acc["G"], [D * gammaln(alpha_rem)]])
        A = alpha_all * T
        cdir_alpha = gammaln(sum_all) - float(np.sum(gammaln(alpha_all)))
        H = res.elbo_local - D * cdir_alpha + acc["LS"] - float(G.sum())
        # a batch's S: (K, V) CSR of the (k, v) pairs it touched
        stats = SuffStats(S=res.topic_word_csr, T=T, G=G, A=A, LS=acc["LS"], H=H, D=D)
        acc["PA"] = (alpha_vec[pairs[:, 0]] + alpha_vec[pairs[:, 1]]) * acc["PT"] if P else None
        acc["alpha"] = alpha_all
        acc["doc_topic"] = res.doc_topic
        return stats, acc

    combine_sides = staticmethod(combine_sides)

    def local_step(self, X, params):
        return self._local(X, params)[0]

    def visit(self, X, params, batch):
        stats, side = self.visit_local(X, params, self.visit_context())
        self.record_visit(batch, side, params)
        return stats

    # The visit of a batch in memoized/batch training is split so that it can run where the
    # data are (sparseclust._dask maps visit_local over the partitions of a batch): the pure
    # part (visit_local, given the pass's candidates in the context) returns the statistics
    # and the "side" results the moves need; sides of parts of a batch combine with
    # combine_sides (sums, and the concatenated rows of the delete targets); the client
    # records the combined side (record_visit).

    def visit_context(self):
        """What :meth:`visit_local` reads besides the data and parameters: the candidates
        of the current round (without the per-batch results gathered so far) and whether
        co-usage is gathered."""
        rnd = self.round
        if rnd is not None:
            rnd = rnd.candidates_only()
        return dict(round=rnd, usage=self._gathers, doc_len="birth" in self.moves)

    @property
    def _gathers(self):
        return bool({"merge", "delete", "birth"} & set(self.moves))

    def worker_model(self):
        """A copy with this model's local-step settings and none of its move bookkeeping
        (what a task that runs the local step elsewhere needs)."""
        m = HDPModel(self.alpha, self.gamma, self.tau, self.L, self.local_opts,
                     self.n_threads, ())
        m.sparse_rows = self.sparse_rows
        return m

    def visit_local(self, X, params, context, doc_offset=0):
        """Local step of the batch (or part of a batch) X with the context of
        :meth:`visit_context`: (statistics, side). The side holds the merge terms of the
        round's candidate pairs (PT, PG, PH, PA), the co-usage (n_users, sum_p, sum_pp, n)
        and the saved rows of the documents that use a delete candidate (their ``doc_ids``
        shifted by ``doc_offset``, the position of X's first row in its batch)."""
        rnd, want_usage = context["round"], context["usage"]
        stats, acc = self._local(X, params, rnd=rnd, want_usage=want_usage)
        side = {k: acc[k] for k in ("PT", "PG", "PH", "PA")}
        side["D"] = int(X.shape[0])
        side["usage"] = ({k: acc[k] for k in ("n_users", "sum_p", "sum_pp", "n")}
                         if want_usage else None)
        targets = acc["targets"]
        if doc_offset:
            for t in targets:
                t["doc_ids"] = t["doc_ids"] + int(doc_offset)
        side["targets"] = targets
        # the documents' token counts N_d (a birth extends every document's q(pi_d))
        side["doc_len"] = (np.asarray(X.sum(axis=1), dtype=np.float64).ravel()
                           if context.get("doc_len") else None)
        return stats, side

    def record_visit(self, batch, side, params):
        """Keep what the visit of batch number ``batch`` gathered for the moves."""
        if side["usage"] is not None and self._usage_acc is not None:
            u, a = self._usage_acc, side["usage"]
            for key in ("n_users", "sum_p", "n", "sum_pp"):
                u[key] = u[key] + a[key]
        if self.round is not None:
            alpha = params.alpha_all()
            self.round.batch[batch] = dict(
                PT=side["PT"], PG=side["PG"], PH=side["PH"], PA=side["PA"], alpha=alpha,
                alpha0=alpha.copy(), D=side["D"], targets=side["targets"],
                doc_len=side.get("doc_len"),
            )

    def reinfer(self, batches, tmask, cols, params0, counter="delete_local_iters"):
        """The local step under ``params0`` (the topics without a delete candidate, on the
        word types ``cols``) of the documents ``tmask[b]`` of every batch b: a dict
        b -> (statistics, doc-topic counts). On the batches' own ``map_rows`` when they have
        one (the partitions of a Dask collection: the documents are re-inferred where they
        are), else here."""
        rows = {bb: np.flatnonzero(m) for bb, m in tmask.items() if m.any()}
        run = getattr(batches, "map_rows", None)
        out = {}
        if run is not None and rows:
            res = run(reinfer_rows, rows, (self.worker_model(), cols, params0.for_local()))
        else:
            res = {bb: reinfer_rows(batches[bb][sel], self, cols, params0)
                   for bb, sel in rows.items()}
        for bb, (stats, doc_topic, counters) in res.items():
            self.counters[counter] += counters["local_iters"]
            out[bb] = (stats, doc_topic)
        return out

    # ---------------------------------------------------------------------------------
    # global step and objective

    def _sticks_for(self, stats, K):
        D = float(stats["D"])
        if self.rho is None or self.rho.size != K:
            # no sticks yet (initialization) or a new truncation: E[beta] proportional to
            # the topic sizes, remainder 1 / (K + 1); known sticks are kept while there are
            # no document statistics to optimize them on
            sizes = np.maximum(stats["S"].sum(axis=1), 0.0) + 1e-3
            beta = np.concatenate([sizes / sizes.sum() * K / (K + 1.0), [1.0 / (K + 1.0)]])
            rho0, omega0 = sticks_from_weights(beta)
        else:
            rho0, omega0 = self.rho, self.omega
        if D <= 0:
            return rho0, omega0
        rho, omega, _ = optimize_hdp_sticks(D, stats["T"], self.alpha, self.gamma, rho0,
                                            omega0)
        return rho, omega

    def global_step(self, stats):
        S = stats["S"]
        if sp.issparse(S):  # statistics of a single batch
            S = S.toarray()
        lam = self.tau + np.maximum(S, 0.0)
        rho, omega = self._sticks_for(stats, S.shape[0])
        self.rho, self.omega = rho, omega
        return HDPParams(lam, rho, omega, self.alpha)

    def elbo(self, stats, params):
        tt = params.tterm
        if tt is None:
            tt = params.tterm = topic_terms(stats["S"], params.lam, params.Elogphi, self.tau)
        total = float(tt.sum())
        D = float(stats["D"])
        if D <= 0:
            return total
        total += -stats["LS"] + float(stats["G"].sum()) - float(stats["A"].sum()) + stats["H"]
        total += stick_value(D, stats["T"], self.alpha, self.gamma, params.rho, params.omega)
        return total

    # ---------------------------------------------------------------------------------
    # moves

    def before_pass(self, stats, params, state):
        self.round = None
        self._pass = state["pass"]
        if not self._gathers:
            return
        K = params.K
        self.begin_pass(state["pass"], K)
        self._usage_acc = dict(n_users=np.zeros(K), sum_p=np.zeros(K), n=0.0,
                               sum_pp=sp.csr_array((K, K)))
        if state["pass"] < self.move_opts["start"] or self.usage is None:
            return
        u = self.usage
        if u["n_users"].size != K:
            return
        pairs = np.zeros((0, 2), dtype=np.int32)
        if "merge" in self.moves and K > 1:
            corr = usage_correlation(u["sum_p"], u["sum_pp"], u["n"])
            self.block_rejected_pairs(corr)
            pairs, _ = select_merge_pairs(
                corr, max_per_component=self.move_opts["pairs_per_topic"],
                max_pairs=self.move_opts["max_pairs"], min_score=self.move_opts["min_corr"],
            )
            # duplicates that split the documents between them have no co-usage; they share
            # their frequent words
            sim = top_weight_cosine(params.lam, self.move_opts["word_top"], self.tau)
            self.block_rejected_pairs(sim)
            wpairs, _ = select_merge_pairs(
                sim, max_per_component=self.move_opts["word_pairs_per_topic"],
                max_pairs=self.move_opts["max_pairs"],
                min_score=self.move_opts["min_word_cos"])
            pairs = merge_pair_union(pairs, wpairs, max_pairs=self.move_opts["max_pairs"])
        dels = np.zeros(0, dtype=np.int64)
        if "delete" in self.moves and K > 1 and (
                self.sparse_rows or (self.L is not None and self.L < K)):
            dels = select_deletes(u["n_users"], max_items=self.move_opts["delete_docs"],
                                  max_candidates=self.delete_budget.value,
                                  allowed=self.deletable())
        births = np.zeros(0, dtype=np.int64)
        sizes = np.asarray(stats["S"].sum(axis=1)).ravel()
        min_size = 4.0 * self.move_opts["birth_topics"]
        self._birth_possible = bool(np.any(sizes >= min_size))
        if self.birth_room(K) and self.due("births") and self.births_settled():
            # largest first, whatever the earlier rejections (select_births without
            # ``tried``): a topic that holds several groups stays the largest until a birth
            # splits it
            births = select_births(sizes, max_candidates=self.move_opts["max_births"],
                                   allowed=self.birthable(), min_size=min_size)
        if pairs.shape[0] or dels.size or births.size:
            self.round = MoveRound(K, pairs, dels, births)

    def birth_room(self, K):
        """May a birth add ``birth_topics`` topics to a truncation of K (the cap)?"""
        return ("birth" in self.moves and self.max_topics is not None
                and K + self.move_opts["birth_topics"] <= self.max_topics)

    def birth_pending(self):
        """Are births still to be tried (training does not stop while they are)? True with
        births on, room under the cap and a topic large enough to be a target, until two
        rounds of births in a row were all rejected: a round rejected while the topics are
        still settling is followed, after its wait, by another."""
        if not self.round_logs or self.uid is None or not self.birth_room(self.uid.size):
            return False
        if not getattr(self, "_birth_possible", False):
            return False
        rec = self.round_waits.get("births")
        return rec is None or rec[1] < 2

    def after_pass(self, stats, params, state):
        if not isinstance(state, dict):
            # stochastic training (a StochasticState): no moves, no batch statistics
            return stats, params
        log = RoundLog()
        # the objective after the pass's local and global steps, before any move: the
        # stopping rule measures the progress of those steps alone (an accepted move's jump
        # is not convergence progress)
        self.pre_move_elbo = float(self.elbo(stats, params))
        if self._usage_acc is not None:
            self.usage = self._usage_acc
            self._usage_acc = None
        batch_stats = state["batch_stats"]
        if any(st is stats for st in batch_stats):
            stats = stats.copy()
        rnd, self.round = self.round, None
        changed = False
        if rnd is not None and len(rnd.batch) == len(batch_stats):
            work = _Workspace(self, stats, params)
            if rnd.pairs.shape[0]:
                self._merges(work, rnd, batch_stats, log)
            if rnd.deletes.size:
                self._deletes(work, rnd, batch_stats, state["batches"], log)
                self.end_deletes(log)
            if rnd.births.size and not (log.merges_accepted or log.deletes_accepted):
                # a round shrinks the model or grows it, never both
                self._births(work, rnd, batch_stats, state["batches"], log)
                self.end_kind("births", log.births_tried, log.births_accepted)
            if log.merges_accepted or log.deletes_accepted or log.births_accepted:
                alive = work.alive.copy()
                stats, params = work.compact(batch_stats)
                self.grow_book(work.K - self.uid.size)
                self.end_round(work.ops, alive, work.merge_map)
                changed = True
        if "sort" in self.moves:
            res = self._sort(stats, params, batch_stats, log)
            if res is not None:
                stats, params = res
                changed = True
        self.round_logs.append(log.as_dict())
        if changed:
            self.rho, self.omega = params.rho, params.omega
        return stats, params

    def _merges(self, work, rnd, batch_stats, log):
        tot = {f: sum(rnd.batch[b][f] for b in rnd.batch) for f in ("PT", "PG", "PH", "PA")}

        def try_merge(p, a, b):
            return work.try_merge(a, b, tot["PT"][p], tot["PG"][p], tot["PA"][p], tot["PH"][p])

        def apply(p, a, b):
            for bb, st in enumerate(batch_stats):
                g = rnd.batch[bb]
                _merge_fields(st, a, b, g["PT"][p], g["PG"][p], g["PA"][p], g["PH"][p])
                g["alpha"] = g["alpha"].copy()
                g["alpha"][a] += g["alpha"][b]
                g["alpha"][b] = 0.0
            work.ops.append(("merge", a, b, p))

        self.run_merges(rnd.pairs, lambda: work.alive, log, try_merge, apply)

    def _deletes(self, work, rnd, batch_stats, batches, log):
        K = rnd.K
        reinferred = {bb: np.zeros(rnd.batch[bb]["D"], dtype=bool) for bb in rnd.batch}
        after_topics = {bb: [] for bb in rnd.batch}   # (doc mask, N rows in original space)
        groups = {bb: [dict(alpha=rnd.batch[bb]["alpha"].copy(),
                            docs=np.ones(rnd.batch[bb]["D"], dtype=bool))]
                  for bb in rnd.batch}
        for j in rnd.deletes:
            j = int(j)
            if np.count_nonzero(work.alive) < 2:
                break  # the last live topic: no other topic can take its documents
            if not work.alive[j] or j in log.touched:
                continue
            # target documents of j in every batch, from the rows saved during the pass
            targets, befores, ok = {}, {}, True
            for bb in rnd.batch:
                for rows in rnd.batch[bb]["targets"]:
                    m = rows["N"][:, j] > 0
                    if not m.any():
                        continue
                    ids = rows["doc_ids"][m]
                    if reinferred[bb][ids].any():
                        ok = False
                        break
                    sub = _take_rows(rows, m)
                    alpha0 = rnd.batch[bb]["alpha0"]
                    bundle = _numpy_bundle(sub, alpha0, K, work.V, rnd.pairs)
                    _replay(bundle, work.ops, alpha0.copy(), K)
                    targets.setdefault(bb, []).append(ids)
                    befores.setdefault(bb, []).append(bundle)
                if not ok:
                    break
            if not ok:
                continue
            # documents re-inferred by an earlier delete must not use j
            for bb in after_topics:
                for _mask, Nrows in after_topics[bb]:
                    if np.any(Nrows[:, j] > 0):
                        ok = False
            if not ok:
                continue
            log.deletes_tried += 1
            tmask = {bb: np.zeros(rnd.batch[bb]["D"], dtype=bool) for bb in rnd.batch}
            for bb, lst in targets.items():
                for ids in lst:
                    tmask[bb][ids] = True
            res = work.try_delete(j, befores, tmask, groups, batches)
            if res is None:
                self.reject_delete(j)
                continue
            log.deletes_accepted += 1
            log.touched.add(j)
            after, params0 = res
            for bb, st in enumerate(batch_stats):
                for bundle in befores.get(bb, []):
                    _sub_bundle(st, bundle)
                _fold_delete(st, j, [(g["alpha"], int(np.count_nonzero(g["docs"] & ~tmask[bb])))
                                     for g in groups[bb]])
                if bb in after:
                    _add_expanded(st, after[bb]["stats"], work.alive_after_j, after[bb]["cols"])
            new_alpha = np.zeros(K + 1)
            new_alpha[np.flatnonzero(work.alive_after_j)] = params0.alpha_vec
            new_alpha[K] = params0.alpha_rem
            for bb in rnd.batch:
                for g in groups[bb]:
                    g["alpha"] = g["alpha"].copy()
                    g["alpha"][K] += g["alpha"][j]
                    g["alpha"][j] = 0.0
                    g["docs"] = g["docs"] & ~tmask[bb]
                if tmask[bb].any():
                    groups[bb].append(dict(alpha=new_alpha.copy(), docs=tmask[bb].copy()))
                    reinferred[bb] |= tmask[bb]
                    Nfull = np.zeros((after[bb]["doc_topic"].shape[0], K))
                    Nfull[:, np.flatnonzero(work.alive_after_j)] = after[bb]["doc_topic"]
                    after_topics[bb].append((tmask[bb].copy(), Nfull))
            work.commit_delete(j)
            work.ops.append(("delete", j))

    def _births(self, work, rnd, batch_stats, batches, log):
        """Birth proposals at the round's targets (:mod:`._hdp_birth`); each accepted one
        edits every batch's cached statistics. A later target's documents are those that
        use it among the documents no earlier birth of the round re-inferred (whose saved
        rows are still their local parameters), and it is tried only when as many are left
        as a round of its own would take (``birth_docs``, or every user); it replaces its
        topic only when no re-inferred document uses that topic either."""

        opts = self.move_opts
        state = dict(groups=None, reinferred=[])

        def reused(bb, k):
            # the documents of batch bb that earlier births re-inferred (those outside the
            # first prior group, see birth_groups), and whether one of them uses k
            done = ~state["groups"][bb][0]["docs"]
            uses = False
            for r in state["reinferred"]:
                dt = r["doc_topic"].get(bb)
                pos = np.flatnonzero(r["slots"] == k)
                if dt is not None and pos.size:
                    col = dt[:, [int(pos[0])]]
                    uses = uses or bool((col.toarray() if sp.issparse(col) else col).any())
            return done, uses

        def select(k, rng):
            pos, found = {}, {}
            whole, n_pass = True, 0
            for bb in rnd.batch:
                done, uses = reused(bb, k) if state["reinferred"] else (None, False)
                whole = whole and not uses
                for i, rows in enumerate(rnd.batch[bb]["targets"]):
                    N = rows["N"]
                    m = N[:, k] > 0
                    n_pass += int(np.count_nonzero(m))
                    if done is not None:
                        m &= ~done[rows["doc_ids"]]
                    if m.any():
                        found.setdefault(bb, []).append((i, m))
                        pos.setdefault(bb, []).append(rows["doc_ids"][m])
            pos = {bb: np.concatenate(p) for bb, p in pos.items()}
            n_users = sum(p.size for p in pos.values())
            if n_users < 2 * opts["birth_topics"]:
                return None
            if n_users < min(n_pass, opts["birth_docs"]):
                # earlier births re-inferred documents that would have been targets: the
                # target would be smaller than it is in a round of its own, so it waits
                # for the next round (untried, so without a cool-down)
                return None
            # a uniform sample when there are more (on KOS from 25 topics a uniform sample
            # of 500 came closer to acceptance than the 500 documents of largest N_dk / N_d)
            pos = subsample_targets(pos, opts["birth_docs"], rng)
            whole = whole and sum(p.size for p in pos.values()) == n_users
            sel = {}
            for bb, lst in found.items():
                if bb not in pos:
                    continue
                for i, m in lst:
                    rows = rnd.batch[bb]["targets"][i]
                    mm = m & np.isin(rows["doc_ids"], pos[bb])
                    if mm.any():
                        sel.setdefault(bb, []).append(_take_rows(rows, mm) | dict(
                            doc_ids=rows["doc_ids"][mm]))
            return sel, whole

        def try_birth(k, sel, rng):
            return propose_birth(work, k, sel, rnd, batches, rng, state["groups"])

        def apply(k, items, res):
            J, edits, cols, prior, whole, reinferred = res
            log.touched.update(range(work.K - J, work.K))
            for bb, edit in edits.items():
                apply_birth(batch_stats[bb], edit, cols, prior, work.alive, k, whole)
            state["groups"] = birth_groups(state["groups"], rnd, k, prior, whole,
                                           reinferred)
            state["reinferred"].append(reinferred)
            work.ops.append(("birth", k, J))

        self.run_births(rnd.births, lambda: work.alive, log, select, try_birth, apply)

    def _sort(self, stats, params, batch_stats, log):
        K = params.K
        if K < 2 or float(stats["D"]) <= 0:
            return None
        order = np.argsort(-stats["S"].sum(axis=1), kind="stable")
        if np.array_equal(order, np.arange(K)):
            return None
        full = np.concatenate([order, [K]])
        T = stats["T"][full]
        beta = params.Ebeta[full]
        rho0, omega0 = sticks_from_weights(beta, params.omega[order])
        rho, omega, _ = optimize_hdp_sticks(float(stats["D"]), T, self.alpha, self.gamma, rho0,
                                            omega0)
        D = float(stats["D"])
        old = stick_value(D, stats["T"], self.alpha, self.gamma, params.rho, params.omega)
        new = stick_value(D, T, self.alpha, self.gamma, rho, omega)
        if not improves(new, old):
            return None
        log.sorted = True
        self.permute_book(order)
        for st in batch_stats:
            _permute(st, order)
        stats = stats.copy()
        _permute(stats, order)
        tterm = None if params.tterm is None else params.tterm[order]
        newp = HDPParams(params.lam[order], rho, omega, self.alpha, params.Elogphi[order], tterm)
        return stats, newp
