"""
Held-out score and training time against L
==========================================

The sparsity level ``L`` bounds how many topics a word type of a document may use. This
example fits :class:`~sparseclust.SparseLDA` with K = 100 topics on 2,000 KOS documents for
several L (``L=None`` is the dense local step, L = K) and reports, for each, the CPU time of
training and the held-out document-completion score of the remaining documents
(:func:`~sparseclust.metrics.document_completion_score`: half of each test document's word
types observed, the other half predicted; larger is better).

L = 1 (a hard assignment per word type) scores lowest; from L = 4 on the score is close to that of
the dense step. On a corpus this small the training times differ little (the figure shows what
this run measured, initialization included). The local step's gain over the dense step grows
with K; the ``kernels`` suite of the benchmarks page measures it at larger K.
"""

import time

import matplotlib.pyplot as plt

from sparseclust import SparseLDA
from sparseclust.datasets import load_kos
from sparseclust.metrics import document_completion_score

X = load_kos().data
X_train, X_test = X[:2000], X[2000:]
K = 100
Ls = [1, 2, 4, 8, None]
times, scores = [], []
for L in Ls:
    lda = SparseLDA(n_components=K, L=L, local_step="variational", max_iter=5, tol=0,
                    random_state=0, n_threads=1)
    t0 = time.process_time()
    lda.fit(X_train)
    times.append(time.process_time() - t0)
    scores.append(document_completion_score(lda, X_test, heldout_fraction=0.5,
                                            random_state=0))
    print(f"L = {L or K:3d}: {times[-1]:5.1f} s CPU, held-out {scores[-1]:.4f}")

# %%
labels = [str(L) if L else f"{K} (dense)" for L in Ls]
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4), constrained_layout=True)
ax1.bar(labels, times, color="tab:gray")
ax1.set_xlabel("L")
ax1.set_ylabel("training CPU time (s), 5 passes")
ax2.plot(labels, scores, "o-")
ax2.set_xlabel("L")
ax2.set_ylabel("held-out log-likelihood per token")
fig.suptitle(f"SparseLDA, K = {K}, KOS")
plt.show()
