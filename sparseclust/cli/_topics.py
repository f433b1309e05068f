# SPDX-License-Identifier: BSD-3-Clause
"""The ``topics`` command: fit a topic model to a corpus, print its topics, held-out scores
and coherence, and write the files asked for."""

import json
import os
import sys
import time
import types
import warnings
from pathlib import Path

import numpy as np

from ._common import (
    _DOC_TOPIC_SUFFIXES,
    _HDP_TRUNCATION,
    CLIError,
    _check_writable,
    _documents_scored,
    _plain_trace,
    _progress,
    _save_doc_topics,
    _say,
    _warn,
)
from ._corpus import _load_corpus, _missing_vocabulary_hint


def _convergence_summary(model, args):
    """Whether and why training stopped, from the fitted model's trace."""
    trace = getattr(model, "trace_", None) or []
    n_iter = int(getattr(model, "n_iter_", len(trace)))
    # HDPTopicModel's tol='auto' is resolved in fit, the others' defaults by the estimator
    tol = float(model.tol_ if hasattr(model, "tol_") else model._tolerance())
    if type(model).__name__ == "StochasticEMLDA":
        return _sem_convergence_summary(model, trace, n_iter, tol)
    last = trace[-1].get("elbo_change") if trace else None
    last = None if last is None or not np.isfinite(last) else float(last)
    converged = bool(getattr(model, "converged_", False))
    if converged and model.algorithm == "stochastic":
        from .._engine import STOCHASTIC_WINDOW as w

        msg = (f"converged after {n_iter} passes of stochastic training (the mean ELBO of the "
               f"last {w} passes differs from that of the {w} before them by {last:.2g} nats "
               f"per token, below tol = {tol:g})")
    elif converged:
        msg = (f"converged after {n_iter} passes (the ELBO changed by {last:.2g} nats per "
               f"token in the last pass, below tol = {tol:g})")
    elif model.algorithm == "stochastic":
        msg = (f"ran {n_iter} passes of stochastic training (its running objective is an "
               f"estimate; it stops early only if that changes by less than tol = {tol:g})")
    elif tol == 0:
        msg = (f"ran the {n_iter} passes asked for (tol = 0: no convergence test; the Gibbs "
               "step's default, whose objective is a Monte Carlo estimate)"
               if getattr(model, "local_step", None) == "gibbs"
               else f"ran the {n_iter} passes asked for (tol = 0: no convergence test)")
    else:
        change = "" if last is None else f"; the ELBO still changed by {last:.2g} nats per token"
        msg = (f"stopped after --max-iter {n_iter} passes without converging{change} "
               f"(tol = {tol:g}); more passes may improve the topics")
    return {"converged": converged, "last_change": last, "tol": tol, "message": msg}


def _sem_convergence_summary(model, trace, n_iter, tol):
    """The same summary for StochasticEMLDA (sweeps and its log joint likelihood)."""
    converged = bool(getattr(model, "converged_", False))
    last = trace[-1].get("log_joint_change") if trace else None
    last = None if last is None or not np.isfinite(last) else float(last)
    if model.algorithm == "online":
        last = trace[-1].get("elbo_change") if trace else None
        last = None if last is None or not np.isfinite(last) else float(last)
        msg = (f"{'converged after' if converged else 'ran'} {n_iter} passes of online "
               "stochastic-EM minibatch steps")
    elif converged:
        msg = (f"converged after {n_iter} sweeps (the log joint likelihood changed by "
               f"{last:.2g} nats per token in the last sweep, below tol = {tol:g})")
    else:
        change = "" if last is None else (f"; the log joint likelihood changed by {last:.2g} "
                                          "nats per token in the last sweep")
        msg = (f"ran {n_iter} stochastic-EM sweeps{change} (a sampler's log joint keeps "
               "fluctuating; more sweeps may improve the topics)")
    return {"converged": converged, "last_change": last, "tol": tol, "message": msg}


def _split_documents(n_docs, fraction, seed):
    """Seeded (train_idx, test_idx) with round(fraction * n_docs) test documents."""
    if fraction == 0:
        return np.arange(n_docs), np.arange(0)
    n_test = int(round(fraction * n_docs))
    n_test = min(max(n_test, 1), n_docs - 1)
    perm = np.random.RandomState(seed).permutation(n_docs)
    return np.sort(perm[n_test:]), np.sort(perm[:n_test])


def _unigram_baseline(X_train, X_test, tau, seed, n_threads):
    """Document completion of the unigram model: every held-out token scored by the smoothed
    training word frequencies p_v = (c_v + tau) / (N + V tau), on the same split as the topic
    model (the split depends only on the held-out documents, the fraction and the seed)."""
    from sparseclust.metrics import document_completion_score

    counts = np.asarray(X_train.sum(axis=0), dtype=np.float64).ravel() + tau
    return document_completion_score(
        (counts / counts.sum())[None, :], X_test, heldout_fraction=0.2, random_state=seed,
        doc_topic_prior=1.0, n_threads=n_threads,
    )


def _run_topics(args):
    t0 = time.perf_counter()
    X, feature_names, description, vectorizer = _topics_corpus(args)
    n_docs, n_words = X.shape
    _check_topics_options(args, n_docs)
    train_idx, test_idx = _split_documents(n_docs, args.heldout_fraction, args.seed)
    X_train, X_test = X[train_idx], X[test_idx]
    if X_train.nnz == 0:
        raise CLIError(
            f"the {len(train_idx)} training documents are all empty: nothing to fit (lower "
            "--heldout-fraction, or give a corpus with more non-empty documents)")
    t_load = time.perf_counter() - t0
    _say(
        args,
        f"corpus: {description}: {n_docs} documents, {n_words} words, {int(X.sum())} tokens; "
        f"training on {len(train_idx)}, {len(test_idx)} held out",
    )
    model, params = _topic_model(args)
    t0 = time.perf_counter()
    _fit_quietly(model, X_train, args)
    t_fit = time.perf_counter() - t0
    convergence = _convergence_summary(model, args)
    t0 = time.perf_counter()
    ev = _evaluate_topics(model, args, X_train, X_test, feature_names)
    t_eval = time.perf_counter() - t0
    share, order = _topic_shares(model, n_words)
    _print_topics(args, params, ev, share, order, len(test_idx), convergence)
    n_iter = getattr(model, "n_iter_", None)
    unit = "sweeps" if args.model == "sem" and params["algorithm"] == "batch" else "passes"
    iters = f" ({n_iter} {unit})" if n_iter is not None else ""
    t0 = time.perf_counter()
    _save_topic_model(args, model, X, vectorizer, feature_names)
    t_save = time.perf_counter() - t0
    saved = f", save {t_save:.2f}s" if (args.doc_topics or args.save_model) else ""
    print(
        f"timings: load {t_load:.2f}s, fit {t_fit:.2f}s{iters}, evaluate {t_eval:.2f}s{saved}",
        file=sys.stdout,
    )
    if args.output or args.report:
        corpus = _corpus_record(args, description, X, X_train, train_idx, test_idx, ev)
        timings = {"load": t_load, "fit": t_fit, "evaluate": t_eval}
        payload = _topics_payload(model, params, corpus, ev, share, order, convergence,
                                  timings, args)
        _write_topics_files(args, model, payload, ev.top_n, order, convergence)
    return 0


def _topics_corpus(args):
    """The corpus of the topics command as CSR, word names (``word<j>`` with a warning when
    it has no vocabulary), its description and the vectorizer of text input."""
    X, feature_names, description, vectorizer = _load_corpus(
        args.path, args.vocab, args.min_df, args.format, args.max_df)
    X = X.tocsr()
    n_docs, n_words = X.shape
    if feature_names is None:
        _warn(
            args,
            f"no vocabulary for {Path(args.path).name} "
            f"({_missing_vocabulary_hint(args.path, args.format)}): topics are shown as word "
            "ids word0, word1, ...; give --vocab FILE (one word per line) for words",
        )
        feature_names = np.array([f"word{j}" for j in range(n_words)], dtype=object)
    if n_docs < 2 or X.nnz == 0:
        raise CLIError(
            f"the corpus has {n_docs} documents and {X.nnz} nonzero counts: too few to fit"
        )
    return X, feature_names, description, vectorizer


def _check_topics_options(args, n_docs):
    """The options of the topics command against each other and the corpus (CLIError), with
    the defaults that depend on them (``n_topics``, ``L``) filled in."""
    if args.n_topics is None:
        # the HDP learns K below its truncation: a cap of the LDA default would cap what it
        # can learn, so it gets its estimator's own default
        args.n_topics = min(_HDP_TRUNCATION, n_docs) if args.model == "hdp" else 20
    if args.n_topics > n_docs:
        raise CLIError(f"--n-topics {args.n_topics} exceeds the number of documents ({n_docs})")
    if args.top_n < 2:
        raise CLIError("--top-n must be at least 2 (coherence scores word pairs)")
    _check_writable(args.output, args.report, args.save_model, args.doc_topics)
    if args.doc_topics and Path(args.doc_topics).suffix.lower() not in _DOC_TOPIC_SUFFIXES:
        raise CLIError(
            f"--doc-topics {args.doc_topics}: expected a file ending in "
            f"{', '.join(_DOC_TOPIC_SUFFIXES)}"
        )
    if args.model == "sem" and args.L is not None:
        _warn(args, "--L does not apply to --model sem (it samples one topic per token)")
    if args.model == "sem" and args.n_batches is not None:
        _warn(args, "--n-batches does not apply to --model sem (its batch sweeps visit every "
                    "document; --batch-size sets its online minibatches)")
    if args.model == "lda" and args.local_step == "gibbs" and args.L is not None:
        _warn(args, "--L applies to --local-step variational only (the gibbs step samples "
                    "one topic per token)")
    if args.L is None:
        args.L = min(8, args.n_topics)
    elif args.L > args.n_topics and args.model != "sem":
        _warn(
            args,
            f"--L {args.L} exceeds --n-topics {args.n_topics}: using L = {args.n_topics} "
            "(every topic kept: the dense local step)",
        )
    if args.left_to_right is not None and args.heldout_fraction == 0:
        raise CLIError("--left-to-right scores the held-out documents: it needs "
                       "--heldout-fraction > 0")


def _topic_model(args):
    """The unfitted estimator of ``--model`` and its parameters; says what it fits."""
    from sparseclust.topics import HDPTopicModel, SparseLDA, StochasticEMLDA

    Estimator = {"hdp": HDPTopicModel, "sem": StochasticEMLDA}.get(args.model, SparseLDA)
    size = "max_components" if args.model == "hdp" else "n_components"
    params = dict(
        L=min(args.L, args.n_topics),
        algorithm=args.algorithm,
        random_state=args.seed,
        n_threads=args.threads,
    )
    if args.max_iter is not None:
        params["max_iter"] = args.max_iter
    if args.model == "lda":
        params["local_step"] = args.local_step
        if args.local_step == "gibbs":
            del params["L"]
    if args.model == "sem":
        del params["L"]
        params["algorithm"] = "online" if args.algorithm == "stochastic" else "batch"
    params[size] = args.n_topics
    if args.tol is not None:
        params["tol"] = args.tol
    if args.n_batches is not None and args.model != "sem":
        params["n_batches"] = args.n_batches
    if args.batch_size is not None:
        params["batch_size"] = args.batch_size
    try:
        model = Estimator(**params)
    except TypeError as exc:  # pragma: no cover - estimator contract
        raise CLIError(f"{Estimator.__name__} does not accept these options: {exc}") from None
    what = "truncation K" if args.model == "hdp" else "K"
    step = f", local_step={params['local_step']}" if "local_step" in params else ""
    _say(
        args,
        f"fitting {Estimator.__name__}: {what}={args.n_topics}{_l_text(params)}{step}, "
        f"algorithm={params['algorithm']}, up to {model._passes()} "
        f"{'sweeps' if args.model == 'sem' else 'passes'}",
    )
    return model, params


def _l_text(params):
    return f", L={params['L']}" if "L" in params else ""


def _fit_quietly(model, X_train, args):
    """Fit with the progress bar; convergence is reported afterwards, in words, instead of
    a ConvergenceWarning."""
    from sklearn.exceptions import ConvergenceWarning

    progress = _progress(args, type(model).__name__, model._passes())
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(X_train, callback=progress)
    except ValueError as exc:
        raise CLIError(f"cannot fit: {exc}") from None
    finally:
        if progress is not None:
            progress.close()


def _evaluate_topics(model, args, X_train, X_test, feature_names):
    """The top words and coherence of every topic and the held-out scores, as a namespace
    (``words``, ``top_n``, ``coherence``, ``npmi``, ``heldout``, ``baseline``, ``l2r``,
    ``l2r_std``, ``n_completed``, ``n_nonempty``)."""
    from sparseclust.metrics import npmi_coherence, top_words, umass_coherence

    ev = types.SimpleNamespace(heldout=None, baseline=None, l2r=None, l2r_std=None)
    ev.words = top_words(model, feature_names, n=args.top_n)
    ev.top_n = top_n = min(args.top_n, X_train.shape[1])
    ev.coherence = umass_coherence(model, X_train, top_n=top_n) if top_n >= 2 else None
    ev.npmi = (npmi_coherence(model, X_train, top_n=top_n)
               if args.npmi and top_n >= 2 else None)
    if args.left_to_right is not None and X_test.shape[0] > 0:
        _left_to_right(ev, model, X_test, args)
    # documents with fewer than 2 word types cannot be split for document completion; empty
    # ones have no tokens for left-to-right
    types_per_doc = np.asarray((X_test > 0).sum(axis=1)).ravel()
    ev.n_completed = int(np.count_nonzero(types_per_doc >= 2))
    ev.n_nonempty = int(np.count_nonzero(types_per_doc >= 1))
    if X_test.shape[0] > 0:
        _document_completion(ev, model, X_train, X_test, args)
    return ev


def _left_to_right(ev, model, X_test, args):
    from sparseclust.metrics import left_to_right_score

    try:
        ev.l2r, ev.l2r_std = left_to_right_score(
            model,
            X_test,
            n_particles=args.left_to_right,
            random_state=args.seed,
            n_threads=args.threads,
            return_std=True,
        )
    except ValueError as exc:
        _say(args, f"no left-to-right score: {exc}")


def _document_completion(ev, model, X_train, X_test, args):
    from sparseclust.metrics import document_completion_score

    try:
        ev.heldout = document_completion_score(
            model,
            X_test,
            heldout_fraction=0.2,
            random_state=args.seed,
            n_threads=args.threads,
        )
        ev.baseline = _unigram_baseline(
            X_train, X_test, float(model.topic_word_prior_), args.seed, args.threads
        )
    except ValueError as exc:
        _say(args, f"no held-out score: {exc}")


def _topic_shares(model, n_words):
    """Every topic's share of the training tokens, and the topics by decreasing share."""
    lam = np.asarray(model.components_, dtype=np.float64)
    prior = float(getattr(model, "topic_word_prior", 0.0) or 0.0)
    mass = np.maximum(lam.sum(axis=1) - prior * n_words, 0.0)
    share = mass / mass.sum() if mass.sum() > 0 else np.full(len(mass), 1.0 / len(mass))
    return share, np.argsort(-share, kind="stable")


def _print_topics(args, params, ev, share, order, n_test, convergence):
    """The printed summary: the topics by share, the scores and how training ended."""
    out = sys.stdout
    n_shown = len(order)
    learned = f", learned from a truncation of {args.n_topics}" if args.model == "hdp" else ""
    print(f"\nTopics (K={n_shown}{learned}{_l_text(params)}), by share of training tokens:",
          file=out)
    width = len(str(n_shown - 1))
    for k in order:
        coh = f"  [coherence {ev.coherence[k]:7.1f}]" if ev.coherence is not None else ""
        print(f"  {k:>{width}} {100 * share[k]:5.1f}%  {' '.join(ev.words[k])}{coh}", file=out)
    print("", file=out)
    for line in _score_lines(args, ev, n_test):
        print(line, file=out)
    print(f"training: {convergence['message']}", file=out)


def _score_lines(args, ev, n_test):
    """The lines of the held-out scores and the coherence, those that were computed."""
    if ev.heldout is not None:
        yield (f"held-out document completion: {ev.heldout:.4f} nats per token "
               f"({_documents_scored(ev.n_completed, n_test, 'with 2 or more word types')}, "
               "20% of each one's word types held out; "
               f"perplexity {np.exp(-ev.heldout):.0f})")
        yield (f"  unigram baseline on the same held-out words: {ev.baseline:.4f} nats per "
               f"token (perplexity {np.exp(-ev.baseline):.0f}); the topics gain "
               f"{ev.heldout - ev.baseline:+.4f} nats per token (higher is better; the "
               "baseline predicts every word by its frequency in the training documents)")
    if ev.l2r is not None:
        se = "" if not np.isfinite(ev.l2r_std) else f" +- {ev.l2r_std:.4f} (standard error)"
        yield (f"held-out left-to-right log-likelihood: {ev.l2r:.4f}{se} nats per token "
               f"({_documents_scored(ev.n_nonempty, n_test, 'not empty')}, whole, "
               f"{args.left_to_right} particles)")
    if ev.npmi is not None:
        yield (f"NPMI coherence (top {ev.top_n} words, training documents): "
               f"mean {ev.npmi.mean():.3f}")
    if ev.coherence is not None:
        yield (f"UMass coherence (top {ev.top_n} words, training documents): "
               f"mean {ev.coherence.mean():.2f}")


def _save_topic_model(args, model, X, vectorizer, feature_names):
    """--doc-topics and --save-model."""
    if args.doc_topics:
        try:
            _save_doc_topics(args.doc_topics, model.transform(X).astype(np.float64))
        except OSError as exc:
            raise CLIError(f"cannot write {args.doc_topics}: {exc}") from None
        n_cols = getattr(model, "n_components_", args.n_topics)
        _say(args, f"wrote the {X.shape[0]} x {n_cols} document-topic matrix to "
                   f"{args.doc_topics}")
    if args.save_model:
        try:
            from .._persist import save

            save(_saved_pipeline(model, vectorizer, feature_names), args.save_model)
        except OSError as exc:
            raise CLIError(f"cannot write {args.save_model}: {exc}") from None
        _say(args, f"saved the model to {args.save_model}")


def _corpus_record(args, description, X, X_train, train_idx, test_idx, ev):
    """The ``corpus`` entry of the JSON output."""
    n_docs, n_words = X.shape
    return {
        "description": description,
        "path": None if args.path is None else os.fspath(args.path),
        "n_documents": n_docs,
        "n_words": n_words,
        "n_tokens": float(X.sum()),
        "n_train": int(len(train_idx)),
        "n_train_tokens": float(X_train.sum()),
        "n_heldout": int(len(test_idx)),
        "n_heldout_scored": int(ev.n_completed),
        "n_heldout_nonempty": int(ev.n_nonempty),
    }


def _topics_payload(model, params, corpus, ev, share, order, convergence, timings, args):
    """What --output writes (and --report renders)."""
    n_iter = getattr(model, "n_iter_", None)
    return {
        "corpus": corpus,
        "model": type(model).__name__,
        "n_topics": int(len(order)),
        "params": {k: v for k, v in params.items()},
        "topics": [
            {
                "index": int(k),
                "share": float(share[k]),
                "words": ev.words[k],
                "coherence": None if ev.coherence is None else float(ev.coherence[k]),
                "npmi": None if ev.npmi is None else float(ev.npmi[k]),
            }
            for k in order
        ],
        "scores": {
            "heldout_document_completion": ev.heldout,
            "heldout_unigram_baseline": ev.baseline,
            "umass_coherence_mean": None if ev.coherence is None else float(ev.coherence.mean()),
            "heldout_left_to_right": ev.l2r,
            "heldout_left_to_right_std": (
                None if ev.l2r_std is None or not np.isfinite(ev.l2r_std) else ev.l2r_std
            ),
            "left_to_right_particles": args.left_to_right,
            "npmi_coherence_mean": None if ev.npmi is None else float(ev.npmi.mean()),
            "coherence_top_n": ev.top_n,
        },
        "timings": timings,
        "n_iter": None if n_iter is None else int(n_iter),
        "converged": convergence["converged"],
        "last_elbo_change_per_token": convergence["last_change"],
        "tol": convergence["tol"],
        "saved": {"model": args.save_model, "doc_topics": args.doc_topics},
        "trace": _plain_trace(getattr(model, "trace_", None)),
    }


def _write_topics_files(args, model, payload, top_n, order, convergence):
    """--output (JSON) and --report (HTML)."""
    if args.output:
        try:
            with open(args.output, "w") as fh:
                json.dump(payload, fh, indent=1)
                fh.write("\n")
        except OSError as exc:
            raise CLIError(f"cannot write {args.output}: {exc}") from None
        _say(args, f"wrote {args.output}")
    if args.report:
        from .._report import render_report
        from ..metrics._topics import _top_word_indices, _topic_word_and_prior

        phi, _ = _topic_word_and_prior(model)
        top = _top_word_indices(phi, top_n)
        probs = [[float(phi[k, j]) for j in top[k]] for k in order]
        try:
            with open(args.report, "w", encoding="utf-8") as fh:
                fh.write(render_report(payload, probs, convergence["message"]))
        except OSError as exc:
            raise CLIError(f"cannot write {args.report}: {exc}") from None
        _say(args, f"wrote the report {args.report}")


def _saved_pipeline(model, vectorizer, feature_names):
    """What --save-model writes: the vectorizer (text input) or the word-id vocabulary and
    the model, without training state (see sparseclust._saved)."""
    from .._saved import WordIdVocabulary, slim_copy, topic_pipeline

    if vectorizer is None:
        vectorizer = WordIdVocabulary(np.asarray(feature_names, dtype=str)).fit()
    return slim_copy(topic_pipeline(vectorizer, model))
