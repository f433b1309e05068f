"""
Topic features in a classification pipeline
===========================================

Topic proportions are a compact representation of count data. scikit-learn's handwritten
digits are 8x8 images whose pixels are counts from 0 to 16, so they can be read as
"documents" over 64 "words" (pixel positions). A :class:`~sklearn.pipeline.Pipeline` feeds the
document-topic proportions of :class:`~sparseclust.SparseLDA` (``transform``) to a logistic
regression; the topics themselves are strokes.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline

from sparseclust import SparseLDA

X, y = load_digits(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0)

pipe = make_pipeline(
    SparseLDA(n_components=24, L=4, local_step="variational", max_iter=30, random_state=0),
    LogisticRegression(max_iter=2000),
)
pipe.fit(X_train, y_train)
print(f"test accuracy with 24 topic proportions: {pipe.score(X_test, y_test):.3f}")
print(f"chance level: {np.bincount(y_test).max() / len(y_test):.3f}")

# %%
# The 24 topics as 8x8 images (posterior-mean pixel distributions E[phi_k]).
lda = pipe[0]
fig, axes = plt.subplots(3, 8, figsize=(10, 4), constrained_layout=True)
for k, ax in enumerate(axes.ravel()):
    ax.imshow(lda.topic_word_distribution_[k].reshape(8, 8), cmap="gray_r")
    ax.set_xticks([])
    ax.set_yticks([])
fig.suptitle("SparseLDA topics of the digits")
plt.show()
