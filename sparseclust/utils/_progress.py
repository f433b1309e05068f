# SPDX-License-Identifier: BSD-3-Clause
"""The progress display shared by every estimator's ``verbose`` and the command line.

Every model reports a training step (a pass of memoized or batch training, a minibatch of
stochastic training, a sweep of the sampler) through the same per-step ``info`` dict its
``callback`` receives; :class:`Progress` turns that dict into one line::

    [SparseLDA] pass   3/50  ELBO -2.989103e+05  change 1.01e-02  K 10  0.74 s

The fields, each shown only when the step reports it:

* the step and its budget (``pass`` or ``sweep``; ``n_passes``, else the estimator's
  ``max_iter``);
* the objective: ``ELBO`` (``elbo``) for the variational models, ``log joint``
  (``log_joint``) for the sampler;
* ``change``: the objective's change per token or per sample since the previous step, the
  quantity the estimator compares with ``tol`` (``elbo_change`` or ``log_joint_change``);
* ``K``: the number of live components when the model learns it (``n_live`` or
  ``n_components``);
* ``held-out``: the held-out score when a held-out set was given;
* the training time so far (``elapsed``, seconds).

On a terminal, ``bar=True`` redraws one line in place with a bar of the steps done;
elsewhere one line per step is written.
"""

import sys

__all__ = ["Progress"]


class Progress:
    """Write training progress, one step at a time; usable as a ``callback``.

    Parameters
    ----------
    name : str
        Shown in brackets at the start of each line (the estimator's class name).
    total : int
        The step budget shown after the step number, unless a step's ``info`` carries
        ``n_passes``.
    stream : file-like or None, default=None
        Where to write; ``sys.stderr`` when None.
    every : int, default=1
        Write every ``every``-th step (and always the first).
    bar : bool, default=False
        On a terminal, redraw one line with a progress bar instead of writing a line per
        step; ignored when ``stream`` is not a terminal.
    """

    def __init__(self, name, total, stream=None, every=1, bar=False, width=24):
        self.name = name
        self.total = max(1, int(total))
        self.stream = stream
        self.every = max(1, int(every))
        self.width = width
        out = self._out()
        isatty = getattr(out, "isatty", None)
        self.bar = bool(bar and isatty and isatty())
        self._calls = 0
        self._drawn = False

    def _out(self):
        return sys.stderr if self.stream is None else self.stream

    def line(self, info):
        """The text of one step's line (without the bar)."""
        unit = "sweep" if "sweep" in info and "pass" not in info else "pass"
        step = int(info.get(unit) or self._calls)
        total = int(info.get("n_passes") or self.total)
        parts = [f"[{self.name}] {unit} {step:>{len(str(total))}}/{total}"]
        if info.get("elbo") is not None:
            parts.append(f"ELBO {info['elbo']: .6e}")
        elif info.get("log_joint") is not None:
            parts.append(f"log joint {info['log_joint']: .6e}")
        change = info.get("elbo_change", info.get("log_joint_change"))
        if change is not None and change == change and change != float("inf"):
            parts.append(f"change {change:.2e}")
        k = info.get("n_live", info.get("n_components"))
        if k is not None:
            parts.append(f"K {int(k)}")
        if info.get("heldout") is not None:
            parts.append(f"held-out {info['heldout']: .5f}")
        if info.get("elapsed") is not None:
            parts.append(f"{info['elapsed']:.2f} s")
        return "  ".join(parts)

    def __call__(self, info, extra=None):
        """Show the step ``info`` (its line, then the text ``extra`` when given); returns
        False, so that it can serve as a ``callback``."""
        self._calls += 1
        step = int(info.get("pass") or info.get("sweep") or self._calls)
        if step % self.every and step != 1:
            return False
        out = self._out()
        text = self.line(info)
        if extra:
            text = f"{text}  {extra}"
        if self.bar:
            total = int(info.get("n_passes") or self.total)
            filled = int(round(self.width * min(step, total) / total))
            out.write(f"\r[{'#' * filled}{'-' * (self.width - filled)}] {text}\x1b[K")
            self._drawn = True
        else:
            out.write(text + "\n")
        out.flush()
        return False

    def close(self):
        """End the redrawn line of a bar (nothing to do otherwise)."""
        if self.bar and self._drawn:
            out = self._out()
            out.write("\n")
            out.flush()
            self._drawn = False
