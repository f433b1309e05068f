# SPDX-License-Identifier: BSD-3-Clause
"""Read-ahead for the streams: the next minibatch is read in a background thread."""

import queue
import threading

__all__ = ["read_ahead"]


def _malloc_trim():
    """glibc's ``malloc_trim``, or None where the C library has none."""
    try:
        import ctypes

        trim = ctypes.CDLL(None).malloc_trim
    except Exception:  # not glibc (macOS, Windows, musl): nothing to trim
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


_TRIM = _malloc_trim()

#: seconds a blocked hand-over waits before it checks whether the reader was abandoned
_POLL_S = 0.1


def read_ahead(make_iter, depth=1):
    """Iterate ``make_iter()`` in a background thread, ``depth`` items ahead of the caller.

    The items, their order and the exceptions are those of ``make_iter()``: an exception
    raised while reading is raised to the caller when it reaches that point of the sequence.
    Reading (file access, gzip decompression, parsing) then overlaps with the caller's work
    on the previous item, wherever either releases the GIL (the compiled kernels, zlib,
    numpy on large arrays do). When the caller stops early (``break``, an exception, the
    generator closed or collected), the reader stops at its next item and closes the
    underlying iterator (its open file) before control returns.
    """
    slots = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def hand_over(entry):
        # wait for a free slot unless the caller has gone
        while not stop.is_set():
            try:
                slots.put(entry, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def reader():
        it = None
        try:
            it = make_iter()
            for item in it:
                if not hand_over((0, item)):
                    return
                if _TRIM is not None:
                    # the minibatches are allocated in this thread's malloc arena and freed
                    # by the caller's; glibc keeps such freed memory in the arena instead of
                    # returning it, and the process grows by several minibatches' worth
                    _TRIM(0)
            hand_over((1, None))
        except BaseException as exc:  # handed to the caller, raised there
            hand_over((2, exc))
        finally:
            if it is not None and hasattr(it, "close"):
                it.close()

    thread = threading.Thread(target=reader, name="sparseclust-read-ahead", daemon=True)
    thread.start()
    try:
        while True:
            kind, value = slots.get()
            if kind == 0:
                yield value
            elif kind == 1:
                return
            else:
                raise value
    finally:
        stop.set()
        while thread.is_alive():
            try:  # free a slot the reader may be waiting for
                slots.get(timeout=_POLL_S)
            except queue.Empty:
                pass
        thread.join()
