# SPDX-License-Identifier: BSD-3-Clause
"""Data for the examples, tests and benchmarks.

- :func:`load_kos` -- the KOS blog corpus (UCI "Bag of Words", CC BY 4.0), bundled;
- :func:`load_uci_bow`, :func:`save_uci_bow`, :func:`load_ldac`,
  :func:`load_text_folder`, :func:`load_text_lines` -- bag-of-words readers and writer;
- :func:`stream_uci_bow`, :func:`stream_ldac`, :func:`stream_text_folder` -- the same
  corpora as CSR minibatches read from disk without loading the corpus (:class:`CorpusStream`),
  and :func:`stream_npz` for a stream written once in binary by :meth:`CorpusStream.save`;
- :func:`extract_patches`, :func:`load_sample_patches`, :func:`load_image_patches` --
  image patches on a regular grid, the data of the Gaussian-mixture experiments;
- :func:`stream_image_patches` -- the same patches as minibatches, read one image at a
  time (:class:`PatchStream`), and :func:`stream_npy` for a stream written once by
  :meth:`PatchStream.save` (:class:`ArrayStream`).
"""

from ._base import load_kos
from ._bow import load_ldac, load_text_folder, load_text_lines, load_uci_bow, save_uci_bow
from ._images import (
    ArrayStream,
    PatchStream,
    extract_patches,
    load_image_patches,
    load_sample_patches,
    stream_image_patches,
    stream_npy,
)
from ._stream import CorpusStream, stream_ldac, stream_npz, stream_text_folder, stream_uci_bow

__all__ = [
    "ArrayStream",
    "CorpusStream",
    "PatchStream",
    "extract_patches",
    "load_image_patches",
    "load_kos",
    "load_ldac",
    "load_sample_patches",
    "load_text_folder",
    "load_text_lines",
    "load_uci_bow",
    "save_uci_bow",
    "stream_image_patches",
    "stream_ldac",
    "stream_npy",
    "stream_npz",
    "stream_text_folder",
    "stream_uci_bow",
]
