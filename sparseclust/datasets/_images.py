# SPDX-License-Identifier: BSD-3-Clause
"""Image patches on a regular grid: the observations of the zero-mean Gaussian mixture.

The sparse-posteriors paper (Hughes & Sudderth, Sec. 4) models 8x8 grayscale patches
taken from overlapping regular grids of stride 4 pixels, each patch with its own mean
removed, :math:`x_n \\in \\mathbb{R}^{64}`, following Zoran & Weiss (2012).
"""

import numbers
import os
from pathlib import Path

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from sklearn.utils import Bunch, check_random_state

from ._read_ahead import read_ahead
from ._saved_batches import (
    batch_name,
    check_files,
    new_directory,
    read_manifest,
    reading,
    write_directory,
)

__all__ = [
    "ArrayStream",
    "PatchStream",
    "extract_patches",
    "load_image_patches",
    "load_sample_patches",
    "stream_image_patches",
    "stream_npy",
]

# ITU-R BT.601 luma weights for (R, G, B)
_LUMA = np.array([0.299, 0.587, 0.114])
_IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")


def _check_positive_int(value, name):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value}")
    return int(value)


def _to_float_image(image, index, grayscale):
    """Image ``index`` as a float64 array of shape (H, W, C), C in {1, 3}.

    uint8 pixels are divided by 255; floating pixels are kept. The caller's array is
    never written to.
    """
    image = np.asarray(image)
    if image.ndim == 3 and image.shape[2] == 1:
        image = image[:, :, 0]
    if not (image.ndim == 2 or (image.ndim == 3 and image.shape[2] == 3)):
        raise ValueError(f"image {index} has shape {image.shape}; expected (H, W) or (H, W, 3)")
    if image.dtype == np.uint8:
        image = image.astype(np.float64) / 255.0
    elif image.dtype.kind == "f":
        image = image.astype(np.float64, copy=False)
        if not np.isfinite(image).all():
            raise ValueError(f"image {index} contains NaN or infinite values")
    else:
        raise ValueError(
            f"image {index} has dtype {image.dtype}; expected uint8 (scaled to [0, 1]) "
            "or floating point"
        )
    if image.ndim == 2:
        return image[:, :, np.newaxis]
    if grayscale:
        return (image @ _LUMA)[:, :, np.newaxis]
    return image


def _as_image_list(images):
    if isinstance(images, np.ndarray):
        if images.ndim not in (3, 4):
            raise ValueError(
                f"an array of images must have 3 (n, H, W) or 4 (n, H, W, 3) dimensions, "
                f"got shape {images.shape}; wrap a single image in a list"
            )
        return list(images)
    if isinstance(images, (str, bytes, os.PathLike)):
        raise ValueError("images must be a sequence of arrays; see load_image_patches for files")
    return list(images)


def _patches(
    images,
    patch_size,
    stride,
    remove_mean,
    grayscale,
    dtype,
    max_patches=None,
    random_state=None,
):
    """Grid patches of ``images``; returns ``(patches, image_index, positions)``."""
    patch_size = _check_positive_int(patch_size, "patch_size")
    stride = _check_positive_int(stride, "stride")
    dtype = np.dtype(dtype)
    if dtype not in (np.float32, np.float64):
        raise ValueError(f"dtype must be float32 or float64, got {dtype}")
    if max_patches is not None:
        max_patches = _check_positive_int(max_patches, "max_patches")
    images = _as_image_list(images)
    if not images:
        raise ValueError("no images given")

    shapes = []
    for i, image in enumerate(images):
        shape = np.shape(image)
        if len(shape) < 2:
            raise ValueError(f"image {i} has shape {shape}; expected (H, W) or (H, W, 3)")
        if shape[0] < patch_size or shape[1] < patch_size:
            raise ValueError(f"patch_size={patch_size} is larger than image {i} of shape {shape}")
        shapes.append(shape)
    grid = [
        ((h - patch_size) // stride + 1, (w - patch_size) // stride + 1) for h, w, *_ in shapes
    ]
    counts = np.array([gh * gw for gh, gw in grid], dtype=np.int64)
    offsets = np.concatenate(([0], np.cumsum(counts)))
    total = int(offsets[-1])

    if max_patches is None or max_patches >= total:
        chosen = None
        n_out = total
    else:
        rng = check_random_state(random_state)
        chosen = np.sort(rng.choice(total, size=max_patches, replace=False))
        n_out = max_patches

    n_channels = None
    out = None
    image_index = np.empty(n_out, dtype=np.intp)
    positions = np.empty((n_out, 2), dtype=np.intp)
    start = 0
    for i, image in enumerate(images):
        if chosen is None:
            local = np.arange(counts[i])
        else:
            lo, hi = np.searchsorted(chosen, offsets[i : i + 2])
            local = chosen[lo:hi] - offsets[i]
        pixels = _to_float_image(image, i, grayscale)
        if n_channels is None:
            n_channels = pixels.shape[2]
            out = np.empty((n_out, patch_size * patch_size * n_channels), dtype=dtype)
        elif pixels.shape[2] != n_channels:
            raise ValueError(
                f"image {i} has {pixels.shape[2]} channel(s) but image 0 has {n_channels}; "
                "with grayscale=False all images must be RGB or all grayscale"
            )
        if local.size == 0:
            continue
        # windows[r, c, ch, i, j] = pixels[r * stride + i, c * stride + j, ch]
        windows = sliding_window_view(pixels, (patch_size, patch_size), axis=(0, 1))
        windows = windows[::stride, ::stride]
        rows, cols = np.divmod(local, grid[i][1])
        block = windows[rows, cols]  # (k, C, p, p), a copy
        block = block.transpose(0, 2, 3, 1).reshape(local.size, -1)
        if remove_mean:
            block = block - block.mean(axis=1, keepdims=True)
        stop = start + local.size
        out[start:stop] = block
        image_index[start:stop] = i
        positions[start:stop, 0] = rows * stride
        positions[start:stop, 1] = cols * stride
        start = stop
    return out, image_index, positions


def extract_patches(
    images,
    patch_size=8,
    stride=4,
    remove_mean=True,
    grayscale=True,
    dtype=np.float64,
    *,
    max_patches=None,
    random_state=None,
):
    """All ``patch_size x patch_size`` patches of images on a regular grid, as rows.

    For each image (in order) the patches whose top-left corners are ``(r * stride,
    c * stride)``, ``r, c = 0, 1, ...``, that fit inside the image are taken in row-major
    grid order, and flattened in (row, column, channel) order.

    Pixels: uint8 images are scaled to [0, 1] by dividing by 255, floating-point images
    are used as they are. With ``grayscale=True`` an RGB image is converted to its luma
    :math:`Y = 0.299 R + 0.587 G + 0.114 B` (ITU-R BT.601). With ``remove_mean=True``
    each patch :math:`x_n` is replaced by :math:`x_n - \\bar{x}_n \\mathbf{1}`, its mean
    :math:`\\bar{x}_n` taken over all its entries (all channels), as in the paper's
    image-patch experiments (Hughes & Sudderth, Sec. 4).

    Parameters
    ----------
    images : sequence of ndarray, or ndarray of shape (n, H, W) or (n, H, W, 3)
        Images of shape ``(H, W)`` or ``(H, W, 3)``, dtype uint8 or floating; sizes may
        differ. An ndarray is a stack of images along its first axis (a single image
        must be wrapped in a list). Not modified.
    patch_size : int, default=8
        Side of the square patches, at most the height and width of every image.
    stride : int, default=4
        Step between grid positions, in pixels.
    remove_mean : bool, default=True
        Subtract each patch's own mean.
    grayscale : bool, default=True
        Convert RGB images to luma. With ``False``, RGB images keep their three channels
        (all images must then be RGB, or all grayscale).
    dtype : {np.float64, np.float32}, default=np.float64
        Dtype of the result (computations are done in float64).
    max_patches : int, default=None
        If given and smaller than the number of grid patches, keep only this many,
        drawn uniformly without replacement over all images (kept in grid order).
    random_state : int, RandomState instance or None, default=None
        Seeds the draw of ``max_patches``.

    Returns
    -------
    patches : ndarray of shape (n_patches, patch_size * patch_size * n_channels)
        ``n_channels`` is 1 for grayscale output, 3 otherwise. An image of size
        ``H x W`` contributes ``((H - patch_size) // stride + 1) * ((W - patch_size) //
        stride + 1)`` patches.
    """
    return _patches(
        images, patch_size, stride, remove_mean, grayscale, dtype, max_patches, random_state
    )[0]


def _patch_bunch(
    images,
    filenames,
    descr,
    patch_size,
    stride,
    remove_mean,
    grayscale,
    dtype,
    max_patches,
    random_state,
):
    data, image_index, positions = _patches(
        images, patch_size, stride, remove_mean, grayscale, dtype, max_patches, random_state
    )
    return Bunch(
        data=data,
        image_index=image_index,
        positions=positions,
        filenames=np.asarray(filenames),
        DESCR=descr,
    )


def load_sample_patches(
    patch_size=8,
    stride=4,
    remove_mean=True,
    grayscale=True,
    dtype=np.float64,
    *,
    max_patches=None,
    random_state=None,
):
    """Grid patches of the two photographs shipped with scikit-learn.

    The images are those of :func:`sklearn.datasets.load_sample_images` (``china.jpg``
    and ``flower.jpg``, 427 x 640 RGB, no download); reading them requires Pillow. The
    parameters are those of :func:`extract_patches`; the defaults (8 x 8 grayscale
    patches, stride 4, mean removed) give 2 x 105 x 159 = 33,390 patches.

    Returns
    -------
    bunch : :class:`~sklearn.utils.Bunch`
        ``data``: patches, one per row, as returned by :func:`extract_patches`;
        ``image_index``: index (into ``filenames``) of the image of each patch;
        ``positions``: ``(n_patches, 2)`` top-left ``(row, column)`` of each patch;
        ``filenames``: the image files; ``DESCR``: a short description.
    """
    from sklearn.datasets import load_sample_images

    sample = load_sample_images()
    names = [os.path.basename(f) for f in sample.filenames]
    descr = (
        f"{patch_size}x{patch_size} patches (stride {stride}) of scikit-learn's sample "
        f"images {', '.join(names)}."
    )
    return _patch_bunch(
        sample.images,
        sample.filenames,
        descr,
        patch_size,
        stride,
        remove_mean,
        grayscale,
        dtype,
        max_patches,
        random_state,
    )


def _read_image(path):
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            mode = image.mode
            if mode in ("L", "LA", "1"):
                image = image.convert("L")
            elif mode in ("I", "I;16", "I;16B", "I;16L", "F"):
                raise ValueError(f"{path}: unsupported high bit-depth image mode {mode!r}")
            elif mode != "RGB":
                image = image.convert("RGB")
            return np.asarray(image, dtype=np.uint8)
    except (UnidentifiedImageError, OSError) as exc:
        raise ValueError(f"{path}: cannot read the image ({exc})") from None


def load_image_patches(
    folder,
    patch_size=8,
    stride=4,
    remove_mean=True,
    grayscale=True,
    dtype=np.float64,
    *,
    max_images=None,
    max_patches=None,
    random_state=None,
):
    """Grid patches of the JPEG and PNG images of a folder, read with Pillow.

    Files with suffix ``.jpg``, ``.jpeg`` or ``.png`` (any case) directly in ``folder``
    are read in sorted name order, as 8-bit RGB (palette, CMYK and alpha images are
    converted to RGB, the alpha channel dropped) or 8-bit grayscale; 16-bit and
    floating-point images are rejected. The other parameters are those of
    :func:`extract_patches`.

    Parameters
    ----------
    folder : str or path-like
        The image folder, e.g. the BSDS500 ``images/train`` folder.
    max_images : int, default=None
        Read only the first ``max_images`` files (in sorted order).

    Returns
    -------
    bunch : :class:`~sklearn.utils.Bunch`
        ``data``: patches, one per row, as returned by :func:`extract_patches`;
        ``image_index``: index (into ``filenames``) of the image of each patch;
        ``positions``: ``(n_patches, 2)`` top-left ``(row, column)`` of each patch;
        ``filenames``: the image files; ``DESCR``: a short description.
    """
    try:
        import PIL  # noqa: F401
    except ImportError:
        raise ImportError(
            "load_image_patches reads images with Pillow; install it with 'pip install pillow'"
        ) from None
    folder = Path(os.fspath(folder))
    if not folder.is_dir():
        raise ValueError(f"{folder} is not a directory")
    files = sorted(
        p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in _IMAGE_SUFFIXES
    )
    if max_images is not None:
        files = files[: _check_positive_int(max_images, "max_images")]
    if not files:
        raise ValueError(f"{folder}: no .jpg, .jpeg or .png images found")
    images = [_read_image(f) for f in files]
    descr = (
        f"{patch_size}x{patch_size} patches (stride {stride}) of {len(files)} images "
        f"from {folder}."
    )
    return _patch_bunch(
        images,
        [str(f) for f in files],
        descr,
        patch_size,
        stride,
        remove_mean,
        grayscale,
        dtype,
        max_patches,
        random_state,
    )


# ----------------------------------------------------------------------------- streaming


def _image_files(source):
    """The image files of a folder (sorted by name) or of a sequence of paths (in order)."""
    if isinstance(source, (str, bytes, os.PathLike)):
        folder = Path(os.fsdecode(source) if isinstance(source, bytes) else source)
        if not folder.is_dir():
            raise ValueError(f"{folder} is not a directory")
        files = sorted(
            p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in _IMAGE_SUFFIXES
        )
        if not files:
            raise ValueError(f"{folder}: no .jpg, .jpeg or .png images found")
        return files, str(folder)
    try:
        files = [Path(os.fspath(p)) for p in source]
    except TypeError:
        raise ValueError(
            f"images must be a folder or a sequence of image files, got {type(source).__name__}"
        ) from None
    if not files:
        raise ValueError("no image files given")
    for p in files:
        if not p.is_file():
            raise ValueError(f"{p} is not a file")
    return files, f"{len(files)} image files"


def _image_header(path):
    """``(height, width, n_channels)`` of an image file, read from its header only."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            width, height = image.size
            mode = image.mode
    except (UnidentifiedImageError, OSError) as exc:
        raise ValueError(f"{path}: cannot read the image ({exc})") from None
    if mode in ("I", "I;16", "I;16B", "I;16L", "F"):
        raise ValueError(f"{path}: unsupported high bit-depth image mode {mode!r}")
    return height, width, 1 if mode in ("L", "LA", "1") else 3


def _take_rows(pend, n):
    """Remove the first ``n`` rows from the list of arrays ``pend`` (in place): the pieces
    (views) that held them, in order."""
    pieces = []
    while n:
        head = pend[0]
        take = min(n, head.shape[0])
        pieces.append(head[:take])
        if take == head.shape[0]:
            pend.pop(0)
        else:
            pend[0] = head[take:]
        n -= take
    return pieces


class PatchStream:
    """Grid patches of image files, read image by image, as minibatches of rows.

    Returned by :func:`stream_image_patches`; iterate it (again) to read the images (again).
    Every iteration yields the same minibatches in the same order, so the stream can be the
    fixed batches of memoized training (``SparseGaussianMixture.fit``) or be fed, minibatch
    by minibatch, to ``partial_fit``.

    Attributes
    ----------
    n_samples : int
        Number of patches of all the images (counted from the image sizes).
    n_features : int
        ``patch_size * patch_size * n_channels``, the columns of every minibatch.
    batch_size : int
        Rows of every minibatch but the last, which holds the rest.
    dtype : numpy dtype
    filenames : ndarray of str
        The image files, in reading order when ``shuffle=False``.
    patches_per_image : ndarray of int64
        Patches of each file of ``filenames``.
    source : str
    prefetch : bool
        Read and cut the next minibatch in a background thread while the current one is in
        use (default True): image decoding then overlaps with training. The minibatches and
        their order are the same either way; set it to False to read in the calling thread.
    """

    def __init__(self, files, shapes, *, source, batch_size, patch_size, stride, remove_mean,
                 grayscale, dtype, shuffle, shuffle_images, seed):
        self.filenames = np.asarray([str(f) for f in files])
        self._files = list(files)
        self._shapes = shapes
        self.batch_size = batch_size
        self.patch_size = patch_size
        self.stride = stride
        self.remove_mean = remove_mean
        self.grayscale = grayscale
        self.dtype = dtype
        self.shuffle = shuffle
        self.shuffle_images = shuffle_images
        self._seed = seed
        self.source = source
        self.patches_per_image = np.array(
            [((h - patch_size) // stride + 1) * ((w - patch_size) // stride + 1)
             for h, w, _ in shapes], dtype=np.int64)
        self.n_samples = int(self.patches_per_image.sum())
        channels = 1 if grayscale else shapes[0][2]
        self.n_features = patch_size * patch_size * channels
        self.prefetch = True

    def __len__(self):
        """Number of minibatches, ``ceil(n_samples / batch_size)``."""
        return -(-self.n_samples // self.batch_size)

    def _image_patches(self, i):
        pixels = _read_image(self._files[i])
        return _patches([pixels], self.patch_size, self.stride, self.remove_mean,
                        self.grayscale, self.dtype)[0]

    def _blocks(self):
        """Arrays of patches in stream order: one per image, or one per shuffled group."""
        if not self.shuffle:
            for i in range(len(self._files)):
                yield self._image_patches(i)
            return
        rng = np.random.RandomState(self._seed)
        order = rng.permutation(len(self._files))
        for lo in range(0, order.size, self.shuffle_images):
            group = [self._image_patches(i) for i in order[lo : lo + self.shuffle_images]]
            block = np.concatenate(group) if len(group) > 1 else group[0]
            del group
            # in place: the rows of block[rng.permutation(n)], without a second copy
            rng.shuffle(block)
            yield block

    def __iter__(self):
        return read_ahead(self._batches) if self.prefetch else self._batches()

    def _batches(self):
        # a minibatch inside one block is a view of it (a block holds at most
        # shuffle_images images' patches); one spanning blocks is a new array of exactly its
        # rows, so no minibatch keeps a larger buffer alive
        bs = self.batch_size
        pend, n_pend = [], 0
        for block in self._blocks():
            pend.append(block)
            n_pend += block.shape[0]
            while n_pend >= bs:
                pieces = _take_rows(pend, bs)
                n_pend -= bs
                yield pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
        if n_pend:
            yield pend[0] if len(pend) == 1 else np.concatenate(pend)

    def __repr__(self):
        return (f"PatchStream({self.source!r}, n_samples={self.n_samples}, "
                f"n_features={self.n_features}, batch_size={self.batch_size})")

    def save(self, directory):
        """Read the images once and write the stream's minibatches to ``directory``.

        Each minibatch becomes a ``.npy`` file (:func:`numpy.save`, ``n_features`` values of
        ``dtype`` a row), ``batch-000000.npy``, ``batch-000001.npy``, ..., beside a manifest
        (``patches.json``: the rows of each minibatch, the dtype and the options that cut
        the patches). Reading one back is a copy of its array, with no image decoding, so
        patches that several passes or several fits read (memoized training, the moves of
        the Dirichlet-process mixture, a grid search) are cut once, here. The saved stream
        yields the same minibatches, in the same order and dtype.

        Parameters
        ----------
        directory : str or path-like
            Created (with its parents); it must not exist, or be an empty directory. The files
            are written to a temporary directory beside it, renamed to ``directory`` when
            complete: a save that fails or is interrupted leaves nothing at ``directory``.

        Returns
        -------
        stream : ArrayStream
            ``stream_npy(directory)``: the saved minibatches.

        Raises
        ------
        FileExistsError
            When ``directory`` is a file, a symbolic link or a directory that holds files,
            checked before reading and again when the finished stream is renamed.
        ValueError
            Any error raised while reading the images.
        """
        target = new_directory(directory, "PatchStream.save")

        def fill(tmp):
            rows = []
            with reading(self) as it:
                for i, Xb in enumerate(it):
                    np.save(tmp / batch_name(i, "npy"), Xb, allow_pickle=False)
                    rows.append(int(Xb.shape[0]))
            return dict(format=_NPY_FORMAT, version=_NPY_VERSION, n_samples=int(sum(rows)),
                        n_features=int(self.n_features), batch_size=int(self.batch_size),
                        rows=rows, dtype=str(np.dtype(self.dtype)), source=str(self.source),
                        patch_size=self.patch_size, stride=self.stride,
                        remove_mean=self.remove_mean, grayscale=self.grayscale,
                        shuffle=self.shuffle)

        write_directory(target, fill, _NPY_MANIFEST)
        return stream_npy(target)


_NPY_FORMAT = "sparseclust.PatchStream"
_NPY_VERSION = 1
_NPY_MANIFEST = "patches.json"


class ArrayStream:
    """Minibatches of rows saved by :meth:`PatchStream.save`, read file by file; iterate it
    (again) to read them (again). Returned by :func:`stream_npy`.

    Attributes
    ----------
    n_samples : int
        Number of rows of all the minibatches.
    n_features : int
        The columns of every minibatch.
    batch_size : int
        Rows of every minibatch of the saved stream but the last.
    dtype : numpy dtype
    source : str
        The directory.
    prefetch : bool
        Read the next minibatch in a background thread while the current one is in use
        (default True); the minibatches are the same either way.
    patch_size, stride : int
        The options that cut the saved patches (:func:`stream_image_patches`).
    remove_mean, grayscale, shuffle : bool
        Likewise.
    """

    def __init__(self, files, manifest, source):
        self._files = list(files)
        self._rows = [int(n) for n in manifest["rows"]]
        self.n_samples = int(sum(self._rows))
        self.n_features = int(manifest["n_features"])
        self.batch_size = int(manifest["batch_size"])
        self.dtype = np.dtype(manifest["dtype"])
        self.source = source
        for key in ("patch_size", "stride", "remove_mean", "grayscale", "shuffle"):
            setattr(self, key, manifest.get(key))
        self.prefetch = True

    def __len__(self):
        """Number of minibatches."""
        return len(self._files)

    def __iter__(self):
        return read_ahead(self._batches) if self.prefetch else self._batches()

    def _batches(self):
        for f, n in zip(self._files, self._rows, strict=True):
            try:
                Xb = np.load(f, allow_pickle=False)
            except (OSError, ValueError) as exc:
                raise ValueError(f"{f}: cannot read the saved minibatch ({exc})") from None
            if Xb.shape != (n, self.n_features) or Xb.dtype != self.dtype:
                raise ValueError(f"{f}: holds a {' x '.join(map(str, Xb.shape))} {Xb.dtype} "
                                 f"array, the manifest declares {n} x {self.n_features} "
                                 f"{self.dtype}")
            yield np.ascontiguousarray(Xb)

    def __repr__(self):
        return (f"ArrayStream({self.source!r}, n_samples={self.n_samples}, "
                f"n_features={self.n_features}, batch_size={self.batch_size})")


def stream_npy(directory):
    """Stream the minibatches written by :meth:`PatchStream.save`.

    Minibatch ``i`` is the file ``batch-<i>.npy`` of ``directory`` (``i`` zero-padded to six
    digits), read with :func:`numpy.load`: the minibatches of the stream that was saved, in
    its order and dtype, as C-contiguous arrays of shape ``(n, n_features)``.

    Parameters
    ----------
    directory : str or path-like
        A directory written by :meth:`PatchStream.save`.

    Returns
    -------
    stream : ArrayStream

    Raises
    ------
    ValueError
        When ``directory`` holds no saved patches (its ``patches.json``) or an incomplete
        manifest, a minibatch file is missing, or, while iterating, a file cannot be read or
        does not hold the rows, columns and dtype the manifest declares.
    """
    keys = ("n_samples", "n_features", "batch_size", "rows", "dtype")
    folder, name, manifest = read_manifest(directory, _NPY_MANIFEST, _NPY_FORMAT, _NPY_VERSION,
                                           keys, "patch stream", "PatchStream.save")
    files = check_files(folder, name, len(manifest["rows"]), "npy")
    return ArrayStream(files, manifest, name)


def stream_image_patches(
    images,
    batch_size=4096,
    patch_size=8,
    stride=4,
    remove_mean=True,
    grayscale=True,
    dtype=np.float64,
    *,
    max_images=None,
    shuffle=False,
    shuffle_images=16,
    random_state=None,
):
    """Stream the grid patches of a folder of images in minibatches, one image read at a time.

    The streaming counterpart of :func:`load_image_patches`: the same files (``.jpg``,
    ``.jpeg``, ``.png`` directly in the folder, in sorted name order, read with Pillow), the
    same patches (see :func:`extract_patches` for the grid, the grayscale conversion and the
    mean removal), but only the patches of the images being read are held in memory, never
    all of them. The number of patches is counted from the image headers, before any image
    is decoded.

    With ``shuffle=False`` the minibatches are the rows of ``extract_patches`` of the images
    (in file order), ``batch_size`` at a time, the last one holding the rest; a minibatch may
    hold the patches of several images. With ``shuffle=True`` the images are read in a random
    order, in groups of ``shuffle_images``, and the patches of each group are permuted before
    they are cut into minibatches: a minibatch then mixes patches of up to
    ``shuffle_images`` images (as stochastic training wants), and memory holds one group's
    patches.

    Every iteration of the returned stream reads the images again and yields the same
    minibatches in the same order (the shuffled order is drawn once, from ``random_state``),
    as memoized training needs. For a new order in every stochastic pass, make a stream per
    pass with its own ``random_state`` (making one reads only the image headers).

    Parameters
    ----------
    images : str, path-like or sequence of path-like
        A folder (e.g. the BSDS500 ``images/train`` folder), or image files, read in the
        order given.
    batch_size : int, default=4096
        Patches per minibatch.
    patch_size, stride, remove_mean, grayscale, dtype
        As in :func:`extract_patches`. With ``grayscale=False`` the images must be all RGB
        or all grayscale.
    max_images : int, default=None
        Use only the first ``max_images`` files (in sorted or given order).
    shuffle : bool, default=False
        Read the images in a random order and permute the patches within each group of
        ``shuffle_images`` images.
    shuffle_images : int, default=16
        Images whose patches are permuted together when ``shuffle=True`` (memory holds one
        such group: an 8 x 8 grayscale patch takes 512 bytes in float64).
    random_state : int, RandomState instance or None, default=None
        Seeds the shuffled order (drawn once, when the stream is made). Not used without
        ``shuffle``.

    Returns
    -------
    stream : PatchStream
        An iterable of C-contiguous arrays of shape ``(n, n_features)`` and dtype ``dtype``;
        ``n_samples`` patches in all, ``len(stream)`` minibatches.

    Raises
    ------
    ValueError
        On a missing or empty folder, an unreadable image, a patch larger than an image, a
        bad ``batch_size``, ``patch_size``, ``stride``, ``max_images`` or
        ``shuffle_images``, or (``grayscale=False``) RGB and grayscale images mixed.

    Examples
    --------
    >>> from sparseclust.mixture import SparseGaussianMixture
    >>> stream = stream_image_patches("BSDS500/images/train",
    ...                               batch_size=100000)  # doctest: +SKIP
    >>> model = SparseGaussianMixture(n_components=200, zero_mean=True,
    ...                               random_state=0).fit(stream)  # doctest: +SKIP
    """
    try:
        import PIL  # noqa: F401
    except ImportError:
        raise ImportError(
            "stream_image_patches reads images with Pillow; install it with "
            "'pip install pillow'"
        ) from None
    batch_size = _check_positive_int(batch_size, "batch_size")
    patch_size = _check_positive_int(patch_size, "patch_size")
    stride = _check_positive_int(stride, "stride")
    shuffle_images = _check_positive_int(shuffle_images, "shuffle_images")
    dtype = np.dtype(dtype)
    if dtype not in (np.float32, np.float64):
        raise ValueError(f"dtype must be float32 or float64, got {dtype}")
    files, source = _image_files(images)
    if max_images is not None:
        files = files[: _check_positive_int(max_images, "max_images")]
    shapes = []
    for f in files:
        h, w, c = _image_header(f)
        if h < patch_size or w < patch_size:
            raise ValueError(
                f"patch_size={patch_size} is larger than image {f} of size {h} x {w}")
        if not grayscale and shapes and c != shapes[0][2]:
            raise ValueError(
                f"image {f} has {c} channel(s) but {files[0]} has {shapes[0][2]}; with "
                "grayscale=False all images must be RGB or all grayscale")
        shapes.append((h, w, c))
    seed = None
    if shuffle:
        seed = int(check_random_state(random_state).randint(np.iinfo(np.int32).max))
    return PatchStream(files, shapes, source=source, batch_size=batch_size,
                       patch_size=patch_size, stride=stride, remove_mean=bool(remove_mean),
                       grayscale=bool(grayscale), dtype=dtype, shuffle=bool(shuffle),
                       shuffle_images=shuffle_images, seed=seed)
