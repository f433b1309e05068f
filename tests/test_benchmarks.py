# SPDX-License-Identifier: BSD-3-Clause
"""The benchmark runner and the generated results pages (``python -m benchmarks``).

The committed pages must equal what ``python -m benchmarks page`` generates from the
committed result files, and every result file must be fit to cite. The runner must refuse
to write results from a changed tree. The tables' summaries are checked against figures
computed by hand.
"""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # appended: the installed sparseclust stays first

from benchmarks import _page, _runner, suites  # noqa: E402

pytestmark = pytest.mark.contract


def test_committed_pages_are_generated_and_results_fit_to_cite(capsys):
    status = _page.main(check=True)
    assert status == 0, capsys.readouterr().err


def _result(**kw):
    res = dict(suite="quality", part="kos", schema=_runner.SCHEMA, commit="0123456789",
               quick=False, date="2026-11-29 00:00:00 UTC", duration_s=1.0, machine={},
               load={"start": [0, 0, 0], "end": [0, 0, 0]}, parameters={}, seeds=[0, 1],
               data="d", n_tokens=10, n_words=5, n_documents=2, records=[])
    res.update(kw)
    return res


@pytest.mark.parametrize("change, reason", [
    ({"commit": "0123456789+changed"}, "clean commit"),
    ({"quick": True}, "--quick"),
    ({"part": "nope"}, "no full-size part"),
    ({"schema": 0}, "schema"),
    ({"suite": "nope"}, "unknown suite"),
])
def test_unfit_result_files_are_named(tmp_path, change, reason):
    res = _result(**change)
    name = f"{res['suite']}-{res['part']}.json"
    (tmp_path / name).write_text(json.dumps(res))
    _, problems = _page.load_results(tmp_path)
    assert any(reason in p for p in problems), problems
    (tmp_path / name).write_text(json.dumps(_result()))
    (tmp_path / name).rename(tmp_path / "quality-kos.json")
    found, problems = _page.load_results(tmp_path)
    assert problems == [] and found["quality"][0]["part"] == "kos"


def test_runner_refuses_a_changed_tree(monkeypatch, tmp_path):
    monkeypatch.setattr(_runner, "tree_state", lambda: ("0123456789", ["sparseclust/cli.py"]))
    with pytest.raises(SystemExit, match="changed tree.*sparseclust/cli.py"):
        _runner.run(suites.load("quality"), quick=True)
    # --out elsewhere is allowed, and the file records the change
    calls = []

    class Fake:
        NAME, QUICK, FULL = "fake", {"p": {"seeds": [3]}}, {}

        @staticmethod
        def run(part, params, log):
            calls.append((part, params))
            return {"records": [{"x": 1}]}

    (path,) = _runner.run(Fake, quick=True, out=tmp_path, log=lambda m: None)
    res = json.loads(path.read_text())
    assert calls == [("p", {"seeds": [3]})]
    with pytest.raises(SystemExit, match="no parameter 'K'"):
        _runner.run(Fake, quick=True, out=tmp_path, overrides={"K": [1]})
    _runner.run(Fake, quick=True, out=tmp_path, overrides={"seeds": [5]}, log=lambda m: None)
    assert calls[-1] == ("p", {"seeds": [5]})
    assert res["commit"] == "0123456789+changed" and res["quick"] is True
    assert res["records"] == [{"x": 1}] and res["seeds"] == [3]
    assert {"machine", "load", "date", "duration_s", "parameters"} <= set(res)


def test_quality_summary_pairs_seeds_with_the_peer():
    rng = np.random.RandomState(0)
    recs = []
    for seed in (0, 1, 2):
        for method in ("sparselda", "tomotopy"):
            recs.append(dict(method=method, K=50, seed=seed, cpu_s=float(rng.uniform(1, 9)),
                             wall_s=1.0, n_iter=7, validation=float(rng.normal(-7, 0.1)),
                             report=float(rng.normal(-7, 0.1))))
    summ = suites.load("quality")._summaries(_result(records=recs))
    ours = [r for r in recs if r["method"] == "sparselda"]
    peer = [r for r in recs if r["method"] == "tomotopy"]
    s = summ[50, "sparselda"]
    np.testing.assert_allclose(s["report"], np.mean([r["report"] for r in ours]))
    np.testing.assert_allclose(
        s["delta"], np.mean([a["report"] - b["report"] for a, b in zip(ours, peer, strict=True)]))
    np.testing.assert_allclose(
        s["ratio"], np.median([a["cpu_s"] / b["cpu_s"] for a, b in zip(ours, peer, strict=True)]))
    np.testing.assert_allclose(s["cpu"], np.median([r["cpu_s"] for r in ours]))
    assert summ[50, "tomotopy"]["delta"] == 0.0
    table = suites.load("quality").table([_result(records=recs)])
    assert f"{s['delta']:+.4f}" in table


def test_corpus_summary_pairs_repeats_by_turn():
    rng = np.random.RandomState(1)
    recs = []
    for repeat in range(3):
        for threads in (1, 2):
            recs.append(dict(model="sem", size="quarter", threads=threads, repeat=repeat, K=9,
                             n_docs=10, n_tokens=1000.0, tokens_per_s=float(rng.uniform(1, 9)),
                             tokens_per_cpu_s=float(rng.uniform(1, 9)), base_rss_mb=5.0,
                             peak_rss_mb=float(rng.uniform(10, 20)), passes=4))
    one = [x for x in recs if x["threads"] == 1]
    two = [x for x in recs if x["threads"] == 2]
    res = _result(records=recs, part="corpus100m", data="d")
    rows = {x["threads"]: x for x in suites.load("scale")._corpus_rows(res, dask=False)}
    np.testing.assert_allclose(rows[2]["tokens_per_s"],
                               np.median([x["tokens_per_s"] for x in two]))
    np.testing.assert_allclose(
        rows[2]["ratio"],
        np.median([b["tokens_per_s"] / a["tokens_per_s"] for a, b in zip(one, two, strict=True)]))
    assert rows[1]["ratio"] == 1.0 and rows[2]["repeats"] == 3
    assert rows[2]["peak_rss_mb"] == max(x["peak_rss_mb"] for x in two)
    assert f"{rows[2]['ratio']:.3f}" in "\n".join(suites.load("scale")._corpus_table(res))


def test_every_suite_declares_what_the_page_needs():
    for name in suites.NAMES:
        mod = suites.load(name)
        assert mod.NAME == name
        for attr in ("TITLE", "MEASURES", "METHOD"):
            assert isinstance(getattr(mod, attr), str) and getattr(mod, attr).strip()
        assert mod.FULL and mod.QUICK
        for fn in ("run", "table", "headline"):
            assert callable(getattr(mod, fn))
        assert mod.table([]) == "" and mod.headline([]) == []
