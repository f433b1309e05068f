# SPDX-License-Identifier: BSD-3-Clause
"""Held-out score per sweep of the StochasticEMLDA sweep variants and of tomotopy per iteration,
on a validation split of the 20 Newsgroups training posts (not the benchmark's test split).

Variants (the flags of :class:`sparseclust.topics._sem_sampler._Sampler`):

* ``frozen``: the paper's sweep, every count from the previous sweep, the token's own topic
  counted (``doc_counts='frozen'``);
* ``live``: the document's counts updated token by token (n_dk^{-dn}), W and T of the
  previous sweep with the token's own topic still counted;
* ``liveown``: ``live`` with the token's previous topic taken out of W and T as well
  (``doc_counts='live'`` before the entry correction);
* ``entry``: ``liveown`` with W and T also following the other tokens of the token's
  (document, word) entry: their new topics once drawn, their previous ones taken out (each
  token sees its entry as a collapsed Gibbs sampler does; ``doc_counts='live'``, the default);
* ``jacobi``: every count from the previous sweep with the token's own topic taken out of
  n_d, W and T (each token from its collapsed conditional given the others' previous topics);
* ``tomotopy``: tomotopy ``LDAModel`` (collapsed Gibbs, one thread, ``optim_interval=0``).

alpha = 0.5 / K, beta = 0.1; the last 1500 training documents (of the benchmark's shuffled
order) are the validation documents, the others the training documents (20 Newsgroups, or
the IMDB ``train`` reviews with the sixth argument ``imdb``); held-out document completion as
in ``bench_sem.py``; CPU seconds of the training (scoring excluded).  The StochasticEMLDA
variants are scored with the topics of the last sample's counts and with the
Rao-Blackwellized topics of the same assignments (``topic_estimate``), whose CPU time is
stored beside them.

Usage::

    python benchmarks/bench_sem_variants.py 400 liveown,frozen,tomotopy 5,10,20,40,80,160 out.json
    python benchmarks/bench_sem_variants.py 100 entry,liveown 20,40,80,160,320 out.json 1  # seed
    python benchmarks/bench_sem_variants.py 100 entry,tomotopy 10,20,40,80,160 out.json 0 imdb
"""

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import environment, imdb_heldout_split, newsgroups_heldout_split  # noqa: E402
from bench_lda_heldout import token_lists  # noqa: E402

from sparseclust import StochasticEMLDA  # noqa: E402
from sparseclust.metrics import document_completion_score  # noqa: E402
from sparseclust.topics import _sem  # noqa: E402

VARIANTS = {"frozen": (False, False, False), "live": (True, False, False),
            "liveown": (True, True, False), "jacobi": (False, True, False),
            "entry": (True, True, True)}


def main(argv):
    K, variants, checkpoints, out = int(argv[0]), argv[1].split(","), \
        [int(c) for c in argv[2].split(",")], argv[3]
    seed = int(argv[4]) if len(argv) > 4 else 0  # of the samplers (tomotopy: seed + 1)
    corpus = argv[5] if len(argv) > 5 else "20newsgroups"
    split = {"20newsgroups": newsgroups_heldout_split, "imdb": imdb_heldout_split}[corpus]
    X_train, _, _ = split(seed=0, n_test=1000)
    Xv, Xt = X_train[-1500:], X_train[:-1500]
    alpha, beta = 0.5 / K, 0.1

    def score(phi):
        return document_completion_score(phi, Xv, heldout_fraction=0.2, random_state=0,
                                         doc_topic_prior=alpha, n_threads=1)

    res = {"environment": environment(), "load_start": os.getloadavg(), "K": K,
           "seed": seed, "corpus": corpus, "alpha": alpha, "beta": beta, "n_train": Xt.shape[0],
           "n_validation": Xv.shape[0],
           "columns": "sweep, CPU seconds, held-out score[, log joint, held-out score of the "
                      "Rao-Blackwellized topics (topic_estimate='rao_blackwell'), CPU seconds "
                      "of computing them]", "curves": {}}
    for var in variants:
        curve = []
        if var == "tomotopy":
            import tomotopy as tp

            m = tp.LDAModel(tw=tp.TermWeight.ONE, k=K, alpha=alpha, eta=beta, seed=seed + 1)
            m.optim_interval = 0
            for w in token_lists(Xt):
                if w:
                    m.add_doc(w)
            m.train(0, workers=1)
            cols = np.array([int(w) for w in m.used_vocabs])
            done, cpu = 0, 0.0
            for c in checkpoints:
                t0 = time.process_time()
                m.train(c - done, workers=1)
                cpu += time.process_time() - t0
                done = c
                phi = np.zeros((K, Xt.shape[1]))
                for k in range(K):
                    phi[k, cols] = m.get_topic_word_dist(k)
                curve.append((c, cpu, score(phi)))
                print(var, curve[-1], flush=True)
        else:
            live, own, entry = VARIANTS[var]

            def new_sampler(self, V, live=live, own=own, entry=entry):
                return _sem._Sampler(V, self.n_components, self._alpha(), self._dense(), 1,
                                     live, own, entry)

            _sem.StochasticEMLDA._new_sampler = new_sampler
            st = {"cpu": 0.0, "t": time.process_time()}

            def cb(info, curve=curve, st=st):
                st["cpu"] += time.process_time() - st["t"]
                if info["sweep"] in checkpoints:
                    c = info["word_topic_counts"].T + beta
                    t0 = time.process_time()
                    R = info["topic_estimate"]().T + beta  # Rao-Blackwellized counts
                    rb_cpu = time.process_time() - t0
                    curve.append((info["sweep"], st["cpu"],
                                  score(c / c.sum(1, keepdims=True)), info["log_joint"],
                                  score(R / R.sum(1, keepdims=True)), rb_cpu))
                    print(var, curve[-1], flush=True)
                st["t"] = time.process_time()

            StochasticEMLDA(K, doc_topic_prior=alpha, topic_word_prior=beta,
                            max_iter=max(checkpoints), n_threads=1,
                            random_state=seed).fit(Xt, callback=cb)
        res["curves"][var] = curve
        Path(out).write_text(json.dumps(res, indent=1))
    res["load_end"] = os.getloadavg()
    Path(out).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
