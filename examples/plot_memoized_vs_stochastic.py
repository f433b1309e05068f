"""
Memoized and stochastic training traces
=======================================

:class:`~sparseclust.SparseLDA` can be trained by memoized variational inference (fixed
batches whose statistics are replaced on every visit; no step size) or by stochastic
variational inference (minibatches and a decreasing step size rho_t = (delta + t)^-kappa).
The ``callback`` of ``fit`` sees the topics after every pass; here it evaluates the held-out
document-completion score, and its own time is excluded from the ``elapsed`` clock of the
trace.
"""

import matplotlib.pyplot as plt

from sparseclust import SparseLDA
from sparseclust.datasets import load_kos
from sparseclust.metrics import document_completion_score

X = load_kos().data
X_train, X_test = X[:3000], X[3000:]

settings = {
    "memoized (10 batches)": dict(algorithm="memoized", n_batches=10),
    "stochastic (batch 300, kappa 0.6, delta 10)": dict(
        algorithm="stochastic", batch_size=300, kappa=0.6, delta=10.0),
}
traces = {}
for name, kw in settings.items():
    curve = []

    def record(info, curve=curve):
        score = document_completion_score(info["components"], X_test, heldout_fraction=0.5,
                                          random_state=0, doc_topic_prior=0.5 / 30)
        curve.append((info["elapsed"], score))

    lda = SparseLDA(n_components=30, L=8, local_step="variational", max_iter=10, tol=0,
                    random_state=0, **kw)
    lda.fit(X_train, callback=record)
    traces[name] = curve
    print(f"{name}: held-out {curve[-1][1]:.4f} after {lda.n_iter_} passes")

# %%
fig, ax = plt.subplots(figsize=(7, 4.5), constrained_layout=True)
for name, curve in traces.items():
    t, s = zip(*curve, strict=True)
    ax.plot(t, s, "o-", label=name)
ax.set_xlabel("training time (s)")
ax.set_ylabel("held-out log-likelihood per token")
ax.set_title("SparseLDA, K = 30, L = 8, KOS: one point per pass")
ax.legend()
plt.show()
