# SPDX-License-Identifier: BSD-3-Clause
"""HDPTopicModel's stopping rule on a planted corpus: does a larger ``tol`` stop the fit
while the moves are still removing topics?

The planted HDP corpus of ``tests/test_hdp.py`` (20 topics, V = 200, 1,000 documents of 50
tokens; seeds 0-4) is fitted from a truncation of 100 with the defaults and ``tol=0`` for
``--max-iter`` passes; the trace (progress, accepted merges and deletes, live topics) is
stored, and two rules are replayed on it for every ``--tols`` value (memoized training is
deterministic, so a fit stopped at pass t equals this fit after pass t):

* ``second_below``: stop at the first pass below tol that accepted no merge or delete, or at
  the second pass in a row below tol whatever the moves (the rule before 30a831f);
* ``no_move``: stop at the first pass below tol that accepted no merge or delete (the rule
  since then).

Usage::

    python benchmarks/bench_hdp_stopping.py
"""

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
from _common import RESULTS, environment, write_json  # noqa: E402
from bench_hdp_validation import stop_pass  # noqa: E402
from test_hdp import planted_hdp_corpus  # noqa: E402

from sparseclust import HDPTopicModel  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    p.add_argument("--max-iter", type=int, default=40)
    p.add_argument("--tols", type=float, nargs="+", default=[1e-4, 1e-3, 3e-3, 1e-2])
    p.add_argument("--out", default=str(RESULTS / "hdp_stopping_planted.json"))
    args = p.parse_args(argv)
    runs = []
    for seed in args.seeds:
        X = planted_hdp_corpus(seed)
        t0 = time.process_time()
        m = HDPTopicModel(max_components=100, tol=0, max_iter=args.max_iter, random_state=seed,
                          n_threads=1).fit(X)
        trace = [dict(progress=e["progress"], merges=e["merges_accepted"],
                      deletes=e["deletes_accepted"], n_live=e["n_live"]) for e in m.trace_]
        stops = []
        for rule in ("second_below", "no_move"):
            for tol in args.tols:
                i = stop_pass(trace, tol, rule)
                stops.append(dict(rule=rule, tol=tol, passes=i + 1, n_live=trace[i]["n_live"]))
        row = dict(seed=seed, true_K=20, seconds=time.process_time() - t0, trace=trace,
                   stops=stops)
        print({k: v for k, v in row.items() if k != "trace"}, flush=True)
        runs.append(row)
        write_json(args.out, dict(environment=environment(), args=vars(args), runs=runs))


if __name__ == "__main__":
    main()
