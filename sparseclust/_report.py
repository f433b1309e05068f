# SPDX-License-Identifier: BSD-3-Clause
"""A self-contained HTML report of a ``sparseclust topics`` run.

One file, no scripts, no network at view time: inline CSS, the training trace drawn as inline
SVG, the topics as tables with word bars. It is built from the same record the command writes
with ``--output`` (see :func:`sparseclust.cli.main`), plus the topic-word probabilities of the
shown words.
"""

import html
import math

__all__ = ["render_report"]

_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em auto;max-width:70em;
color:#222;line-height:1.45}
h1{font-size:1.6em}h2{font-size:1.25em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse}td,th{padding:.2em .6em;text-align:left;vertical-align:top}
.num{text-align:right;font-variant-numeric:tabular-nums}
.topics{display:grid;grid-template-columns:repeat(auto-fill,minmax(20em,1fr));gap:1em}
.topic{border:1px solid #ddd;border-radius:6px;padding:.6em}
.topic h3{font-size:1em;margin:0 0 .4em 0}
.bar{background:#4c72b0;height:.8em;display:inline-block;vertical-align:middle}
.word{display:inline-block;width:7.5em;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.note{color:#555;font-size:.92em}svg text{font-size:11px;fill:#333}
"""


def _esc(x):
    return html.escape(str(x))


def _fmt(x, spec=".4f"):
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    return format(x, spec)


def _trace_svg(xs, ys, xlabel, ylabel, width=640, height=260):
    """A line plot as inline SVG (no plotting library, nothing to load)."""
    pts = [(x, y) for x, y in zip(xs, ys, strict=True)
           if y is not None and math.isfinite(y)]
    if len(pts) < 2:
        return "<p class='note'>(fewer than two recorded points: no trace plot)</p>"
    left, right, top, bottom = 70, 15, 15, 40
    x0, x1 = min(p[0] for p in pts), max(p[0] for p in pts)
    y0, y1 = min(p[1] for p in pts), max(p[1] for p in pts)
    if x1 == x0:
        x1 = x0 + 1
    if y1 == y0:
        y1 = y0 + 1

    def sx(x):
        return left + (x - x0) / (x1 - x0) * (width - left - right)

    def sy(y):
        return top + (y1 - y) / (y1 - y0) * (height - top - bottom)

    line = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
    ticks = []
    for i in range(5):
        yv = y0 + (y1 - y0) * i / 4
        ticks.append(f"<line x1='{left - 4}' x2='{left}' y1='{sy(yv):.1f}' y2='{sy(yv):.1f}' "
                     f"stroke='#999'/><text x='{left - 6}' y='{sy(yv) + 4:.1f}' "
                     f"text-anchor='end'>{yv:.4g}</text>")
        xv = x0 + (x1 - x0) * i / 4
        ticks.append(f"<text x='{sx(xv):.1f}' y='{height - bottom + 15}' "
                     f"text-anchor='middle'>{xv:.3g}</text>")
    return (
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
        f"role='img' aria-label='{_esc(ylabel)} against {_esc(xlabel)}'>"
        f"<rect x='{left}' y='{top}' width='{width - left - right}' "
        f"height='{height - top - bottom}' fill='none' stroke='#ccc'/>"
        + "".join(ticks)
        + f"<polyline fill='none' stroke='#c44e52' stroke-width='2' points='{line}'/>"
        + "".join(f"<circle cx='{sx(x):.1f}' cy='{sy(y):.1f}' r='2.5' fill='#c44e52'/>"
                  for x, y in pts)
        + f"<text x='{(left + width - right) / 2}' y='{height - 5}' "
          f"text-anchor='middle'>{_esc(xlabel)}</text>"
        + f"<text transform='translate(14,{(top + height - bottom) / 2}) rotate(-90)' "
          f"text-anchor='middle'>{_esc(ylabel)}</text></svg>"
    )


def render_report(record, word_probs, message):
    """HTML text of the report.

    Parameters
    ----------
    record : dict
        What ``sparseclust topics --output`` writes (corpus, model, params, topics, scores,
        timings, trace).
    word_probs : list of list of float
        For each topic of ``record["topics"]`` (same order), the probabilities of its shown
        words under the topic.
    message : str
        The training summary line (converged or not, and why).
    """
    c, s = record["corpus"], record["scores"]
    title = f"{record['model']} on {c['description']}"
    out = ["<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
           f"<title>{_esc(title)}</title><style>{_CSS}</style></head><body>",
           f"<h1>{_esc(title)}</h1>"]
    # corpus
    out.append("<h2>Corpus</h2><table>")
    for label, value in (("documents", f"{c['n_documents']:,}"),
                         ("word types", f"{c['n_words']:,}"),
                         ("tokens", f"{int(c['n_tokens']):,}"),
                         ("training documents", f"{c['n_train']:,}"),
                         ("held-out documents", f"{c['n_heldout']:,}")):
        out.append(f"<tr><th>{label}</th><td class='num'>{value}</td></tr>")
    out.append("</table>")
    # scores
    out.append("<h2>Scores</h2><table>")
    rows = [
        ("held-out document completion (nats per token)", s.get("heldout_document_completion"),
         "log-probability of each held-out document's held-out 20% of word types, given the "
         "other 80%; higher is better"),
        ("unigram baseline on the same words", s.get("heldout_unigram_baseline"),
         "every word predicted by its training frequency; the gap to the line above is what "
         "the topics add"),
        ("held-out left-to-right (nats per token)", s.get("heldout_left_to_right"),
         "estimate of log p(document) for whole held-out documents (Wallach et al. 2009)"),
        ("mean UMass coherence", s.get("umass_coherence_mean"),
         "co-occurrence of each topic's top words in the training documents; closer to 0 is "
         "more coherent"),
        ("mean NPMI coherence", s.get("npmi_coherence_mean"),
         "normalized pointwise mutual information of top-word pairs, in [-1, 1]"),
    ]
    for label, value, note in rows:
        if value is None:
            continue
        out.append(f"<tr><th>{_esc(label)}</th><td class='num'>{_fmt(value)}</td>"
                   f"<td class='note'>{_esc(note)}</td></tr>")
    out.append("</table>")
    # training
    out.append(f"<h2>Training</h2><p>{_esc(message)}</p>")
    t = record.get("timings") or {}
    out.append("<p class='note'>" + ", ".join(f"{_esc(k)} {v:.2f} s" for k, v in t.items())
               + "</p>")
    trace = record.get("trace") or []
    key = next((k for k in ("elbo", "log_joint") if trace and k in trace[0]), None)
    if key is not None:
        # the objective is a sum over the training documents (records written before
        # n_train_tokens was stored give only the whole corpus's tokens: no per-token plot)
        n_tok = c.get("n_train_tokens")
        if n_tok is None:
            key = None
    if key is not None:
        n_tok = max(float(n_tok), 1.0)
        ys = [None if e.get(key) is None else e[key] / n_tok for e in trace]
        label = ("ELBO per training token" if key == "elbo"
                 else "log joint per training token")
        out.append(_trace_svg(list(range(1, len(trace) + 1)), ys, "pass", label))
    # topics
    out.append(f"<h2>Topics ({record['n_topics']}, largest first)</h2>"
               "<p class='note'>Share: the topic's fraction of the expected tokens. Bars: "
               "each word's probability under the topic.</p><div class='topics'>")
    for rank, (topic, probs) in enumerate(zip(record["topics"], word_probs, strict=True)):
        top = max(probs) if probs else 1.0
        extra = ""
        if topic.get("coherence") is not None:
            extra += f" · UMass {topic['coherence']:.2f}"
        if topic.get("npmi") is not None:
            extra += f" · NPMI {topic['npmi']:.2f}"
        out.append(f"<div class='topic'><h3>#{rank + 1} (topic {topic['index']}) · "
                   f"{100 * topic['share']:.1f}%{extra}</h3><table>")
        for w, p in zip(topic["words"], probs, strict=True):
            width = 9.0 * p / top if top > 0 else 0.0
            out.append(f"<tr><td><span class='word'>{_esc(w)}</span></td><td>"
                       f"<span class='bar' style='width:{width:.2f}em'></span></td>"
                       f"<td class='num'>{p:.3f}</td></tr>")
        out.append("</table></div>")
    out.append("</div>")
    params = record.get("params") or {}
    out.append("<h2>Parameters</h2><table>")
    for k in sorted(params):
        out.append(f"<tr><th>{_esc(k)}</th><td>{_esc(params[k])}</td></tr>")
    out.append("</table></body></html>\n")
    return "\n".join(out)
