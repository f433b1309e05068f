# SPDX-License-Identifier: BSD-3-Clause
"""Checkpoints of long fits: save the global parameters every few passes, resume from them."""

import json
import numbers
import os
import secrets

import numpy as np
from sklearn.base import clone

__all__ = ["Checkpoint"]

#: the parameters a callback reports, per kind of model
_FIELDS = {"topics": ("components",), "mixture": ("weights", "means", "precisions_cholesky")}


class Checkpoint:
    """Save a fit's global parameters every ``every`` passes, and resume a fit from them.

    Pass an instance as the ``callback`` of ``fit`` of :class:`~sparseclust.SparseLDA` or
    :class:`~sparseclust.SparseGaussianMixture` (any ``algorithm``). After pass p, when p is a
    multiple of ``every`` or the last of ``max_iter``, it writes to ``path`` the parameters
    the callback reports: the topic-word Dirichlet parameters lambda (``components``) of a
    topic model, the point estimates ``weights``, ``means`` and ``precisions_cholesky`` of a
    mixture, with p and the objective after pass p. The file is a numpy ``.npz`` archive (no
    pickle: loading it runs no code) written next to ``path`` and renamed over it once
    complete, so an interruption while saving leaves the previous checkpoint intact.

    :meth:`resume` turns an estimator configured like the interrupted one into one that
    starts from the saved parameters and runs the passes that remain:

    - a topic model starts from the saved topics, ``init`` = lambda - eta (eta the
      ``topic_word_prior``), so its first pass is that of a fit initialised with them;
    - a mixture starts from the saved point estimates (``weights_init``, ``means_init``
      unless ``zero_mean``, ``precisions_init`` = P_k P_k^T from the Cholesky factors P_k,
      or P_k^2 for ``'diag'`` and ``'spherical'``) and as many components as the checkpoint
      holds (the Dirichlet-process moves may have changed them), with ``n_init=1``;
    - ``max_iter`` becomes the passes left, ``max_iter`` - p (at least 1).

    What a checkpoint does not hold is rebuilt on the first resumed pass: memoized training's
    per-batch statistics (its first pass accumulates every batch under the saved parameters,
    as the first pass of any fit does, so the objective is monotone again from the second
    pass on), the Gibbs local step's chains, the mixture's posterior uncertainty beyond its
    point estimates. Stochastic training is resumed from a saved model instead:
    :func:`sparseclust.save` keeps its state, and ``partial_fit`` of the loaded model
    continues the step counter and the blended statistics.

    Parameters
    ----------
    path : str or path-like
        The checkpoint file (``.npz``; replaced at every save).
    every : int, default=1
        Save after every ``every``-th pass (and after the last of ``max_iter``).

    Examples
    --------
    >>> import tempfile, os
    >>> from sparseclust import SparseLDA
    >>> from sparseclust.datasets import load_kos
    >>> from sparseclust.utils import Checkpoint
    >>> X = load_kos().data[:200]
    >>> ckpt = Checkpoint(os.path.join(tempfile.mkdtemp(), "lda.npz"), every=2)
    >>> lda = SparseLDA(n_components=5, max_iter=6, tol=0, random_state=0)
    >>> _ = lda.fit(X, callback=ckpt)             # saves after passes 2, 4 and 6
    >>> ckpt.load()["pass"]
    6
    >>> rest = ckpt.resume(SparseLDA(n_components=5, max_iter=10, tol=0, random_state=0))
    >>> rest.max_iter                             # the passes left of 10
    4
    """

    def __init__(self, path, every=1):
        if not isinstance(every, numbers.Integral) or isinstance(every, bool) or every < 1:
            raise ValueError(f"every must be a positive integer, got {every!r}")
        self.path = os.fspath(path)
        self.every = int(every)

    def __repr__(self):
        return f"Checkpoint({self.path!r}, every={self.every})"

    # ------------------------------------------------------------------------ saving
    def __call__(self, info):
        p = int(info["pass"])
        last = info.get("n_passes") is not None and p >= int(info["n_passes"])
        if p % self.every == 0 or last:
            self.save(info)
        return False

    def save(self, info):
        """Write the parameters of a callback's ``info`` (see the class) to ``path``."""
        kind = next((k for k, f in _FIELDS.items() if all(x in info for x in f)), None)
        if kind is None:
            raise ValueError(
                "Checkpoint saves the callback of SparseLDA.fit (components) or "
                "SparseGaussianMixture.fit (weights, means, precisions_cholesky); got "
                f"{sorted(k for k in info if not k.startswith('_'))}")
        meta = dict(kind=kind, pass_=int(info["pass"]),
                    elbo=float(info["elbo"]) if info.get("elbo") is not None else None)
        arrays = {f: np.asarray(info[f]) for f in _FIELDS[kind]}
        folder = os.path.dirname(os.path.abspath(self.path))
        tmp = os.path.join(folder, f".{os.path.basename(self.path)}.{secrets.token_hex(8)}.tmp")
        try:
            with open(tmp, "wb") as fh:
                np.savez(fh, meta=np.array(json.dumps(meta)), **arrays)
            os.replace(tmp, self.path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)

    # ------------------------------------------------------------------------ resuming
    def load(self):
        """The last checkpoint: a dict with ``kind`` ('topics' or 'mixture'), ``pass`` (the
        passes it was written after), ``elbo`` (the objective then) and the saved arrays."""
        with np.load(self.path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            out = {f: z[f] for f in _FIELDS[meta["kind"]]}
        out.update(kind=meta["kind"], elbo=meta["elbo"])
        out["pass"] = meta["pass_"]
        return out

    def resume(self, estimator):
        """A clone of ``estimator`` that starts from the last checkpoint and runs the passes
        that remain of its ``max_iter`` (see the class).

        Parameters
        ----------
        estimator : SparseLDA or SparseGaussianMixture
            Configured like the interrupted fit (its other parameters are kept).

        Returns
        -------
        estimator
            An unfitted clone with the starting point and ``max_iter`` set.
        """
        from ..mixture import SparseGaussianMixture
        from ..topics import SparseLDA

        ck = self.load()
        est = clone(estimator)
        left = max(1, int(est._passes()) - int(ck["pass"]))
        if ck["kind"] == "topics":
            if not isinstance(est, SparseLDA):
                raise TypeError(f"{self.path} holds topics, resumed by a SparseLDA; got "
                                f"{type(estimator).__name__}")
            lam = ck["components"]
            if lam.shape[0] != est.n_components:
                raise ValueError(f"{self.path} holds {lam.shape[0]} topics; the estimator has "
                                 f"n_components={est.n_components}")
            return est.set_params(init=np.maximum(lam - float(est.topic_word_prior), 0.0),
                                  max_iter=left)
        if not isinstance(est, SparseGaussianMixture):
            raise TypeError(f"{self.path} holds a mixture, resumed by a SparseGaussianMixture; "
                            f"got {type(estimator).__name__}")
        P = ck["precisions_cholesky"]
        if est.covariance_type == "full":
            prec = np.einsum("kij,klj->kil", P, P)
        else:
            prec = P ** 2
        params = dict(n_components=int(ck["weights"].shape[0]), weights_init=ck["weights"],
                      precisions_init=prec, n_init=1, warm_start=False, max_iter=left)
        if not est.zero_mean:
            params["means_init"] = ck["means"]
        return est.set_params(**params)
