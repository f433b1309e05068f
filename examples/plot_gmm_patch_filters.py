"""
Gaussian mixture of image patches: covariances as 8x8 filters
=============================================================

A zero-mean Gaussian mixture of 8x8 image patches (Zoran & Weiss 2012) is the model of the
image experiments of Hughes & Sudderth (2016). Each cluster's covariance describes a family
of patches (flat, edges at one orientation, textures); its leading eigenvectors, drawn as
8x8 images, show what the cluster models. The patches come from the two photographs shipped
with scikit-learn (no download), mean removed.
"""

import matplotlib.pyplot as plt
import numpy as np

from sparseclust import SparseGaussianMixture
from sparseclust.datasets import load_sample_patches

patches = load_sample_patches(stride=4, max_patches=20000, random_state=0)
X = patches.data
K = 25
gm = SparseGaussianMixture(n_components=K, L=4, zero_mean=True,
                           weight_concentration_prior=10 / K, max_iter=30,
                           random_state=0).fit(X)
print(f"{gm.n_iter_} passes, mean log-likelihood {gm.score(X):.2f} per patch")

# %%
# The 6 largest clusters (rows) and the 8 leading eigenvectors of each covariance
# (columns), with the fraction of the cluster's variance each one explains.
order = np.argsort(-gm.weights_)[:6]
n_vec = 8
fig, axes = plt.subplots(len(order), n_vec, figsize=(n_vec * 1.2, len(order) * 1.35),
                         constrained_layout=True)
for row, k in zip(axes, order, strict=True):
    evals, evecs = np.linalg.eigh(gm.covariances_[k])
    evals, evecs = evals[::-1], evecs[:, ::-1]
    for j, ax in enumerate(row):
        v = evecs[:, j].reshape(8, 8)
        ax.imshow(v, cmap="gray", vmin=-np.abs(v).max(), vmax=np.abs(v).max())
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_xlabel(f"{evals[j] / evals.sum():.0%}", fontsize=7)
    row[0].set_ylabel(f"k={k}\nw={gm.weights_[k]:.2f}", fontsize=8)
fig.suptitle("Leading eigenvectors of the largest clusters' covariances")
plt.show()
