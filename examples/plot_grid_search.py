"""
Grid search over L, kappa and delta
===================================

:class:`~sparseclust.SparseLDA` is a scikit-learn estimator, so
:class:`~sklearn.model_selection.GridSearchCV` can tune it; ``score`` (the per-token evidence
lower bound of held-out documents, larger is better) is the default criterion. Here the
sparsity level ``L`` and the stochastic step size rho_t = (delta + t)^-kappa of stochastic
training are searched with 3-fold cross-validation on 900 KOS documents.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.model_selection import GridSearchCV

from sparseclust import SparseLDA
from sparseclust.datasets import load_kos

X = load_kos().data[:900]
grid = {"L": [2, 8], "kappa": [0.5, 0.7, 0.9], "delta": [1.0, 10.0]}
search = GridSearchCV(
    SparseLDA(n_components=15, local_step="variational", algorithm="stochastic",
              batch_size=100, max_iter=4, random_state=0),
    grid, cv=3,
)
search.fit(X)
print("best:", search.best_params_, f"score {search.best_score_:.4f}")

# %%
# Mean cross-validated score for each (kappa, delta), one panel per L.
res = search.cv_results_
scores = np.asarray(res["mean_test_score"])
fig, axes = plt.subplots(1, len(grid["L"]), figsize=(10, 3.8), sharey=True,
                         constrained_layout=True)
for ax, L in zip(axes, grid["L"], strict=True):
    for delta in grid["delta"]:
        sel = [i for i, p in enumerate(res["params"]) if p["L"] == L and p["delta"] == delta]
        kap = [res["params"][i]["kappa"] for i in sel]
        ax.plot(kap, scores[sel], "o-", label=f"delta = {delta:g}")
    ax.set_title(f"L = {L}")
    ax.set_xlabel("kappa")
axes[0].set_ylabel("mean held-out per-token ELBO (3 folds)")
axes[0].legend()
plt.show()
