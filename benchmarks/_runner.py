# SPDX-License-Identifier: BSD-3-Clause
"""The runner shared by every suite: tree checks, the result schema, the clock.

A result file holds, whatever the suite:

``suite``, ``part``, ``schema``
    what was measured (the suite's module and one part of its configuration);
``commit``, ``quick``, ``date``, ``duration_s``
    the clean commit the code came from, whether it was a ``--quick`` smoke run, when it ran
    and for how long;
``machine``, ``load``
    :func:`benchmarks._common.environment` and the 1/5/15-minute load averages at the start
    and the end of the run;
``parameters``, ``seeds``
    the part's configuration as run;
``records``
    one dict per measured run (method, settings, seed, figures), plus whatever summary the
    suite adds.

Results are written only from a clean tree (tracked files equal to ``commit``; the
``benchmarks/results`` folder itself is exempt), with sparseclust imported from this tree and
its compiled modules newer than their sources. ``--quick`` runs are smoke runs and go to
``benchmarks/results/quick`` (not committed).
"""

import os
import subprocess
import sys
import time
from pathlib import Path

from ._common import RESULTS, ROOT, environment, write_json

SCHEMA = 1
QUICK_RESULTS = RESULTS / "quick"


def _git(*args):
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()


def tree_state():
    """``(commit, changed)``: HEAD's short hash and the tracked files changed since it,
    outside ``benchmarks/results``."""
    commit = _git("rev-parse", "--short=10", "HEAD")
    changed = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
         ":(exclude)benchmarks/results"], cwd=ROOT, capture_output=True, text=True,
        check=True).stdout  # not stripped: every line starts with its two status columns
    return commit, [ln[3:] for ln in changed.splitlines() if ln.strip()]


def installed_problem():
    """Why the importable sparseclust is not this tree's built code, or None."""
    import sparseclust

    path = Path(sparseclust.__file__).resolve()
    if ROOT.resolve() not in path.parents:
        return (f"sparseclust is imported from {path.parent}, not from this tree "
                f"({ROOT}); install it with `pip install -e .` from here")
    kernels = path.parent / "_kernels"
    for pyx in kernels.glob("*.pyx"):
        built = list(kernels.glob(pyx.stem + ".*.so")) + list(kernels.glob(pyx.stem + ".*.pyd"))
        if not built or min(p.stat().st_mtime for p in built) < pyx.stat().st_mtime:
            return f"{pyx.name} is newer than its compiled module: rebuild (pip install -e .)"
    return None


def loadavg():
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover
        return None


def run(suite, *, quick=False, parts=None, seeds=None, overrides=None, out=None, log=print):
    """Run ``suite``'s parts and write one result file each; returns the paths written.

    ``overrides`` replaces configured parameters (e.g. ``{"K": [100]}``); the result file
    records the parameters as run."""
    commit, changed = tree_state()
    problem = installed_problem()
    if changed and out is None:
        raise SystemExit("refusing to write results from a changed tree (commit first): "
                         + ", ".join(changed[:8]))
    if problem and out is None:
        raise SystemExit("refusing to run: " + problem)
    config = suite.QUICK if quick else suite.FULL
    chosen = list(config) if not parts else parts
    unknown = set(chosen) - set(config)
    if unknown:
        raise SystemExit(f"{suite.NAME} has no part {sorted(unknown)}; parts: {list(config)}")
    out_dir = Path(out) if out is not None else (QUICK_RESULTS if quick else RESULTS)
    written = []
    for part in chosen:
        params = dict(config[part])
        if seeds is not None:
            params["seeds"] = list(seeds)
        for key, value in (overrides or {}).items():
            if key not in params:
                raise SystemExit(f"{suite.NAME}:{part} has no parameter {key!r}; "
                                 f"parameters: {sorted(params)}")
            params[key] = value
        log(f"[{suite.NAME}:{part}] {params}")
        start, t0 = loadavg(), time.time()
        body = suite.run(part, params, log)
        payload = {
            "suite": suite.NAME,
            "part": part,
            "schema": SCHEMA,
            "commit": commit + ("+changed" if changed else ""),
            "quick": bool(quick),
            "date": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t0)) + " UTC",
            "duration_s": round(time.time() - t0, 1),
            "machine": environment(),
            "load": {"start": start, "end": loadavg()},
            "parameters": params,
            "seeds": params.get("seeds", []),
            **body,
        }
        name = f"{suite.NAME}-{part}.json"
        written.append(write_json(out_dir / name, payload))
        log(f"[{suite.NAME}:{part}] wrote {written[-1]} in {payload['duration_s']} s")
    return written


def main(argv=None):
    import argparse

    from . import suites

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Run a benchmark suite, or regenerate the results pages.")
    parser.add_argument("suite", choices=[*suites.NAMES, "page", "list"],
                        help="a suite; `page` regenerates the results pages from "
                             "benchmarks/results; `list` shows the suites and their parts")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run on small data (results go to benchmarks/results/quick)")
    parser.add_argument("--part", nargs="+", default=None,
                        help="run only these parts of the suite's configuration")
    parser.add_argument("--seeds", nargs="+", type=int, default=None,
                        help="override the configured seeds")
    parser.add_argument("--set", nargs="+", default=[], metavar="KEY=JSON",
                        help="override configured parameters, e.g. --set 'K=[100]'")
    parser.add_argument("--out", default=None,
                        help="write results here instead; allowed from a changed tree, "
                             "and never cited by the pages")
    parser.add_argument("--check", action="store_true",
                        help="with `page`: fail if the committed pages differ from the "
                             "generated ones, or a result file is not fit to cite")
    args = parser.parse_args(argv)
    if args.suite == "list":
        for name in suites.NAMES:
            mod = suites.load(name)
            print(f"{name:11s} {mod.TITLE}\n{'':11s} parts: {', '.join(mod.FULL)}; "
                  f"--quick: {', '.join(mod.QUICK)}")
        return 0
    if args.suite == "page":
        from . import _page

        return _page.main(check=args.check)
    import json

    overrides = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--set expects KEY=JSON, got {item!r}")
        try:
            overrides[key] = json.loads(value)
        except ValueError:
            parser.error(f"--set {key}: {value!r} is not JSON")
    run(suites.load(args.suite), quick=args.quick, parts=args.part, seeds=args.seeds,
        overrides=overrides, out=args.out, log=lambda msg: print(msg, flush=True))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
