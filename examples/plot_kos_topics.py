"""
Topics of the KOS blog corpus
=============================

Fit :class:`~sparseclust.SparseLDA` with 20 topics and the L-sparse document local step
(``L=8``) to the bundled KOS corpus (3,430 political blog entries of 2004, 6,906 word types)
and draw the most probable words of each topic, largest topics first. The bar lengths are the
posterior-mean word probabilities E[phi_kv].
"""

# sphinx_gallery_thumbnail_number = 1
import matplotlib.pyplot as plt
import numpy as np

from sparseclust import SparseLDA
from sparseclust.datasets import load_kos

kos = load_kos()
X, vocab = kos.data, kos.feature_names
lda = SparseLDA(n_components=20, L=8, local_step="variational", max_iter=15, tol=1e-3,
                random_state=0).fit(X)
print(f"{lda.n_iter_} passes, per-token ELBO {lda.score(X):.3f}")

# %%
# Topics ordered by their number of assigned tokens, sum_v (lambda_kv - tau).
phi = lda.topic_word_distribution_
size = lda.components_.sum(axis=1) - lda.topic_word_prior_ * X.shape[1]
order = np.argsort(-size)[:12]
n_words = 8

fig, axes = plt.subplots(3, 4, figsize=(12, 8), constrained_layout=True)
for ax, k in zip(axes.ravel(), order, strict=True):
    top = np.argsort(-phi[k])[:n_words]
    ax.barh(np.arange(n_words), phi[k, top][::-1], color="tab:blue")
    ax.set_yticks(np.arange(n_words), vocab[top][::-1])
    ax.set_title(f"topic {k}: {size[k] / size.sum():.1%} of tokens", fontsize=10)
    ax.tick_params(axis="x", labelsize=7)
fig.suptitle("SparseLDA on KOS: the 12 largest of 20 topics")
plt.show()
