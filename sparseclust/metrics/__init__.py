# SPDX-License-Identifier: BSD-3-Clause
"""Evaluation metrics for topic models.

- :func:`document_completion_score` -- held-out document completion (Hughes & Sudderth 2016,
  App. E); :class:`DocumentCompletionScorer` -- the same as a scikit-learn scorer, for choosing
  the number of topics;
- :func:`umass_coherence` -- UMass coherence of each topic's top words (Mimno, Hoffman & Blei
  2012, Eq. 13);
- :func:`left_to_right_score` -- held-out log-likelihood by the left-to-right estimator
  (Wallach, Murray, Salakhutdinov & Mimno 2009, Alg. 3);
- :func:`npmi_coherence` -- NPMI coherence of each topic's top words (Lau, Newman & Baldwin
  2014; Bouma 2009), by document co-occurrence or a sliding window;
- :func:`top_words` -- each topic's most probable words;
- :func:`split_document_types` -- the seeded observed / held-out split of word types.
"""

from ._topics import (
    PROB_FLOOR,
    DocumentCompletionScorer,
    document_completion_score,
    left_to_right_score,
    npmi_coherence,
    split_document_types,
    top_words,
    umass_coherence,
)

__all__ = [
    "PROB_FLOOR",
    "DocumentCompletionScorer",
    "document_completion_score",
    "left_to_right_score",
    "npmi_coherence",
    "split_document_types",
    "top_words",
    "umass_coherence",
]
