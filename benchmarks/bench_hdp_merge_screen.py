# SPDX-License-Identifier: BSD-3-Clause
"""How much re-optimizing the sticks adds to a merge proposal of HDPTopicModel, and what the
merge screen (``merge_screen``, 0.05 nats per document) saves.

A merge proposal (a, b) is evaluated at the warm-start sticks (a's weight plus b's on a, the
other sticks unchanged) and, after L-BFGS-B from there, at the optimized sticks. The screen
rejects a proposal whose warm-start value is more than ``merge_screen * D`` below the current
objective without the optimization. This study records, for every proposal of the first
``--passes`` passes (default settings, seed 0, the training split of ``bench_hdp.py``):

* the gain of the objective at the warm-start sticks and at the optimized sticks (with the
  screen off, so every proposal is optimized);
* then two fits, screen on and off, and whether they are the same bit for bit, with their CPU
  times and the time spent in moves.

Usage::

    python benchmarks/bench_hdp_merge_screen.py            # KOS and 20 Newsgroups, ~10 min
    python benchmarks/bench_hdp_merge_screen.py --corpora kos --passes 4
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, environment, write_json  # noqa: E402
from bench_hdp import ALPHA, TAU, load  # noqa: E402

from sparseclust import HDPTopicModel  # noqa: E402
from sparseclust.topics._hdp_model import HDPModel  # noqa: E402


class _NoScreen(HDPTopicModel):
    _move_opts = {"merge_screen": None}


def _model(cls, passes, seed):
    return cls(200, alpha=ALPHA, topic_word_prior=TAU, L=8, max_iter=passes, tol=0,
               random_state=seed, n_threads=1)


def proposal_gains(X, passes, seed):
    """(warm-start gain, optimized gain) of every merge proposal, screen off."""
    log = []

    class Logged(HDPTopicModel):
        _move_opts = {"merge_screen": None, "merge_log": log}

    _model(Logged, passes, seed).fit(X)
    return np.asarray(log)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpora", nargs="+", default=["kos", "20ng"], choices=["kos", "20ng"])
    p.add_argument("--passes", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(RESULTS / "hdp_merge_screen.json"))
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    screen = HDPModel(0.5, 1.0, 0.1, 8, {}, 1).move_opts["merge_screen"]
    out = dict(environment=environment(), args=vars(args), merge_screen=screen, results={})
    for corpus in args.corpora:
        X = load(corpus, args.seed)[0]
        D = X.shape[0]
        r = proposal_gains(X, args.passes, args.seed)
        extra = r[:, 1] - r[:, 0]
        fits = {}
        for name, cls in (("screen", HDPTopicModel), ("no_screen", _NoScreen)):
            m = _model(cls, args.passes, args.seed)
            t = time.process_time()
            m.fit(X)
            fits[name] = dict(
                model=m, seconds=time.process_time() - t,
                move_seconds=float(sum(e["time_moves"] for e in m.trace_)),
                merges_accepted=[int(e["merges_accepted"]) for e in m.trace_],
                n_components=int(m.n_components_))
        a, b = fits["screen"]["model"], fits["no_screen"]["model"]
        same = bool(np.array_equal(a.components_, b.components_)
                    and np.array_equal(a.lower_bounds_, b.lower_bounds_))
        res = dict(
            n_docs=D, n_proposals=int(len(r)),
            accepted_optimized=int((r[:, 1] > 0).sum()),
            accepted_at_warm_start=int((r[:, 0] > 0).sum()),
            stick_gain_quantiles={q: float(np.quantile(extra, float(q)))
                                  for q in ("0", "0.5", "0.9", "0.99", "1")},
            max_stick_gain_per_doc=float(extra.max() / D),
            proposals_within_screen=int((r[:, 0] >= -screen * D).sum()),
            same_fit=same,
            fits={k: {f: v for f, v in d.items() if f != "model"} for k, d in fits.items()},
        )
        out["results"][corpus] = res
        print(corpus, {k: v for k, v in res.items() if k != "fits"})
        for k, d in res["fits"].items():
            print("  ", k, d)
        write_json(Path(args.out), out)


if __name__ == "__main__":
    main()
