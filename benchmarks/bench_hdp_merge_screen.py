# SPDX-License-Identifier: BSD-3-Clause
"""The cost of HDPTopicModel's merge moves with its merge screen (``merge_screen``, 0.05 nats
per document): the CPU time of a fit with the default settings and the time spent in moves.

The screen rejects a merge proposal whose objective at the warm-start sticks (a's weight plus
b's on a) is more than ``merge_screen * D`` below the current objective, without optimizing
its sticks. The study that measured the proposals' gains and compared the fit with the screen
off (``results/hdp_merge_screen.json``) needed options of the model that are no longer in the
package (git history keeps that version of this script); this one times the default fit
(seed 0, the training split of ``bench_hdp.py``).

Usage::

    python benchmarks/bench_hdp_merge_screen.py
    python benchmarks/bench_hdp_merge_screen.py --corpora kos --passes 4
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, environment, write_json  # noqa: E402
from bench_hdp import ALPHA, TAU, load  # noqa: E402

from sparseclust import HDPTopicModel  # noqa: E402
from sparseclust.topics._hdp_model import HDPModel  # noqa: E402


def _model(cls, passes, seed):
    return cls(200, alpha=ALPHA, topic_word_prior=TAU, L=8, max_iter=passes, tol=0,
               random_state=seed, n_threads=1)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpora", nargs="+", default=["kos", "20ng"], choices=["kos", "20ng"])
    p.add_argument("--passes", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(RESULTS / "hdp_merge_screen_default.json"))
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    screen = HDPModel(0.5, 1.0, 0.1, 8, {}, 1).move_opts["merge_screen"]
    out = dict(environment=environment(), args=vars(args), merge_screen=screen, results={})
    for corpus in args.corpora:
        X = load(corpus, args.seed)[0]
        m = _model(HDPTopicModel, args.passes, args.seed)
        t = time.process_time()
        m.fit(X)
        res = dict(
            n_docs=X.shape[0], seconds=time.process_time() - t,
            move_seconds=float(sum(e["time_moves"] for e in m.trace_)),
            merges_accepted=[int(e["merges_accepted"]) for e in m.trace_],
            n_components=int(m.n_components_))
        out["results"][corpus] = res
        print(corpus, res)
        write_json(Path(args.out), out)


if __name__ == "__main__":
    main()
