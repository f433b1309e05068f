"""
StochasticEMLDA: throughput and the log joint over sweeps
=========================================================

:class:`~sparseclust.StochasticEMLDA` samples one topic per token in every sweep, reading the
counts of the previous sweep and writing the next ones (Zaheer & Kottur), so all documents of a
sweep are independent. The per-token sampler takes the document's own topics exactly and the
rest from alias tables built once per sweep (Walker 1977; Vose 1991), so its cost per token
hardly grows with the number of topics K. The trace records, per sweep, the tokens sampled per
second and the log joint likelihood of the corpus and its sampled assignments (divided here by
the number of tokens).
"""

import matplotlib.pyplot as plt

from sparseclust import StochasticEMLDA
from sparseclust.datasets import load_kos

X = load_kos().data
n_tokens = int(X.sum())
fits = {}
for K in (20, 100):
    fits[K] = StochasticEMLDA(K, max_iter=15, tol=0, n_threads=1, random_state=0).fit(X)
    tr = fits[K].trace_
    rate = sorted(t["tokens_per_s"] for t in tr)[len(tr) // 2]
    print(f"K = {K}: median {rate / 1e6:.2f} M tokens/s over {len(tr)} sweeps of "
          f"{n_tokens:,} tokens; log joint {tr[-1]['log_joint'] / n_tokens:.3f} nats/token")

# %%
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
for K, model in fits.items():
    tr = model.trace_
    sweeps = range(1, len(tr) + 1)
    ax1.plot(sweeps, [t["tokens_per_s"] / 1e6 for t in tr], "o-", label=f"K = {K}")
    ax2.plot([t["elapsed"] for t in tr], [t["log_joint"] / n_tokens for t in tr], "o-",
             label=f"K = {K}")
ax1.set_xlabel("sweep")
ax1.set_ylabel("million tokens per second (1 thread)")
ax1.set_ylim(bottom=0)
ax1.legend()
ax2.set_xlabel("seconds")
ax2.set_ylabel("log joint likelihood per token")
ax2.legend()
fig.suptitle("StochasticEMLDA on the KOS corpus")
plt.show()
