"""
HDPTopicModel: the number of live topics over training
======================================================

:class:`~sparseclust.HDPTopicModel` starts from ``max_components`` topics and learns how many
the data support: it starts from stochastic EM sweeps, and after each memoized pass it proposes
merges of co-occurring or alike topics and deletions of rarely used ones, and keeps a proposal
only if the whole-data objective rises (Hughes, Kim & Sudderth 2015). The trace records, per
pass, the topics left in the truncation, the live ones (holding at least one expected token)
and the accepted moves.
"""

import matplotlib.pyplot as plt
import numpy as np

from sparseclust import HDPTopicModel
from sparseclust.datasets import load_kos

X = load_kos().data[:1500]
hdp = HDPTopicModel(max_components=60, L=8, max_iter=12, tol=0, random_state=0).fit(X)
trace = hdp.trace_
print(f"{hdp.n_components_} live topics after {hdp.n_iter_} passes "
      f"(started from {hdp.max_components})")

# %%
passes = [t["pass"] for t in trace]
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
ax1.step(passes, [t["n_topics"] for t in trace], where="post", label="topics in truncation")
ax1.plot(passes, [t["n_live"] for t in trace], "o", label="live topics")
ax1.set_xlabel("pass")
ax1.set_ylabel("number of topics")
ax1.legend()
width = 0.4
ax2.bar(np.array(passes) - width / 2, [t["merges_accepted"] for t in trace], width,
        label="merges accepted")
ax2.bar(np.array(passes) + width / 2, [t["deletes_accepted"] for t in trace], width,
        label="deletes accepted")
ax2.set_xlabel("pass")
ax2.set_ylabel("moves")
ax2.legend()
fig.suptitle("HDPTopicModel on 1,500 KOS documents")
plt.show()
