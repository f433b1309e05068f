# SPDX-License-Identifier: BSD-3-Clause
"""Corpora bundled inside the package."""

from importlib import resources

import numpy as np

from ._bow import _load_uci

__all__ = ["load_kos"]

_DATA_PACKAGE = "sparseclust.datasets"

KOS_DESCR = """\
KOS blog entries (UCI Machine Learning Repository, "Bag of Words" data set)
---------------------------------------------------------------------------

3,430 posts of the Daily Kos political blog (2004), as a bag of words after
tokenization and removal of stop words and rare words:

    documents D ..................... 3,430
    vocabulary W .................... 6,906
    tokens (sum of counts) .......... 467,714
    non-zero (document, word) pairs . 353,160

Bundled as the original files docword.kos.txt.gz and vocab.kos.txt.

Licence: Creative Commons Attribution 4.0 International (CC BY 4.0).
Citation: D. Newman. "Bag of Words" data set. UCI Machine Learning Repository,
2008.
"""


def _data_file(filename):
    """``importlib.resources`` handle of a file in ``sparseclust/datasets/data``."""
    return resources.files(_DATA_PACKAGE).joinpath("data").joinpath(filename)


def load_kos(dtype=np.float64):
    """Load the KOS blog corpus bundled with sparseclust (no download, no cache).

    The UCI "Bag of Words" KOS corpus (D. Newman, UCI Machine Learning Repository,
    CC BY 4.0): 3,430 Daily Kos blog posts over a vocabulary of 6,906 words, 467,714
    tokens in 353,160 non-zero (document, word) counts. It is the quick topic-model
    corpus of the test suite and the examples.

    Parameters
    ----------
    dtype : numeric dtype, default=np.float64
        Dtype of the count matrix.

    Returns
    -------
    bunch : :class:`~sklearn.utils.Bunch`
        ``data``: CSR matrix of shape ``(3430, 6906)``, entry ``(d, v)`` the count
        :math:`n_{dv}` of word ``v`` in document ``d``; ``feature_names``: object array
        of the 6,906 words (column order); ``DESCR``: description and citation.

    See Also
    --------
    load_uci_bow : the reader used here, for other corpora in the same format.
    """
    bunch = _load_uci(_data_file("docword.kos.txt.gz"), _data_file("vocab.kos.txt"), dtype)
    bunch.DESCR = KOS_DESCR
    return bunch
