# SPDX-License-Identifier: BSD-3-Clause
"""Build the Cython extensions of sparseclust.

Every ``sparseclust/**/*.pyx`` becomes one C++ extension, compiled with OpenMP where the
compiler supports it and serially otherwise (the kernels then run on one thread; results are
the same).

OpenMP flags by compiler:

- GCC, Clang with libomp (Linux): ``-fopenmp``;
- Apple Clang (macOS): ``-Xpreprocessor -fopenmp`` and ``-lomp``; libomp is not part of
  Xcode and must be installed (``brew install libomp``) and found: the include and library
  folders of ``$(brew --prefix libomp)`` are added when Homebrew is present, or set ``CPPFLAGS``
  / ``LDFLAGS`` yourself;
- MSVC: ``/openmp``.

Switches (environment variables):

``SPARSECLUST_NO_OPENMP=1``
    build without OpenMP even when the compiler has it (what a compiler without OpenMP gets).
``SPARSECLUST_PORTABLE=1``
    compile the portable C++ code paths only: no GCC/Clang vector extensions in
    ``sparseclust/_kernels/topl.h`` (what a compiler without them gets).
``SPARSECLUST_BUILD_ONLY``
    comma-separated module stems (``_topl,_stats``) to build only those.
``SPARSECLUST_DEBUG=1``
    turn Cython's bounds/wraparound/initialized checks back on.
``SPARSECLUST_BUILD_JOBS``
    how many modules to translate and compile at once (default: the number of CPUs).
"""

import os
import shutil
import subprocess
import sys
import tempfile
from glob import glob

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


def _flag(name):
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def _homebrew_libomp():
    """(include dir, lib dir) of Homebrew's libomp, or None."""
    brew = shutil.which("brew")
    if brew is None:
        return None
    try:
        prefix = subprocess.run(
            [brew, "--prefix", "libomp"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    inc, lib = os.path.join(prefix, "include"), os.path.join(prefix, "lib")
    return (inc, lib) if os.path.isdir(inc) and os.path.isdir(lib) else None


def _openmp_flags(compiler):
    """(compile args, link args, include dirs, library dirs) that enable OpenMP, or None."""
    if compiler.compiler_type == "msvc":
        return ["/openmp"], [], [], []
    if sys.platform == "darwin":
        candidates = [(["-Xpreprocessor", "-fopenmp"], ["-lomp"]), (["-fopenmp"], ["-fopenmp"])]
        brew = _homebrew_libomp()
        inc, lib = ([brew[0]], [brew[1]]) if brew else ([], [])
    else:
        candidates = [(["-fopenmp"], ["-fopenmp"])]
        inc, lib = [], []
    for cflags, lflags in candidates:
        if _compiles(compiler, cflags, lflags, inc, lib):
            return cflags, lflags, inc, lib
    return None


def _compiles(compiler, cflags, lflags, inc, lib):
    """Whether a program calling omp_get_max_threads compiles and links with these flags."""
    cc = compiler.compiler_so[0] if hasattr(compiler, "compiler_so") else "cc"
    if not shutil.which(cc):
        return False
    extra = os.environ.get("CPPFLAGS", "").split() + os.environ.get("LDFLAGS", "").split()
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "t.c")
        with open(src, "w") as fh:
            fh.write("#include <omp.h>\nint main(void){return omp_get_max_threads()<0;}\n")
        cmd = [cc, *cflags, *(f"-I{d}" for d in inc), src, "-o", os.path.join(tmp, "t")]
        cmd += [*(f"-L{d}" for d in lib), *lflags, *extra]
        try:
            res = subprocess.run(cmd, capture_output=True)
        except OSError:
            return False
        return res.returncode == 0


def _jobs():
    """Modules translated and compiled at once: ``SPARSECLUST_BUILD_JOBS`` or the CPU count."""
    value = os.environ.get("SPARSECLUST_BUILD_JOBS", "").strip()
    if value:
        return max(1, int(value))
    return os.cpu_count() or 1


class BuildExt(build_ext):
    def finalize_options(self):
        super().finalize_options()
        if not self.parallel:
            self.parallel = _jobs()

    def build_extensions(self):
        msvc = self.compiler.compiler_type == "msvc"
        omp = None
        if _flag("SPARSECLUST_NO_OPENMP"):
            print("sparseclust: SPARSECLUST_NO_OPENMP set, building serial kernels",
                  file=sys.stderr)
        else:
            omp = _openmp_flags(self.compiler)
            if omp is None:
                print("sparseclust: OpenMP not found, building serial kernels "
                      "(on macOS: brew install libomp)", file=sys.stderr)
        portable = _flag("SPARSECLUST_PORTABLE")
        if portable:
            print("sparseclust: SPARSECLUST_PORTABLE set, no compiler vector extensions",
                  file=sys.stderr)
        for ext in self.extensions:
            ext.extra_compile_args += ["/O2", "/std:c++17"] if msvc else ["-O3", "-std=c++17"]
            if portable:
                ext.define_macros.append(("SPARSECLUST_NO_VECTOR_EXTENSIONS", "1"))
            if omp is not None:
                cflags, lflags, inc, lib = omp
                ext.extra_compile_args += cflags
                ext.extra_link_args += lflags
                ext.include_dirs += inc
                ext.library_dirs += lib
        # the largest translation unit first, so that parallel jobs end together
        self.extensions.sort(key=lambda e: -os.path.getsize(e.sources[0]))
        super().build_extensions()


def extensions():
    only = os.environ.get("SPARSECLUST_BUILD_ONLY")
    only = {s.strip() for s in only.split(",")} if only else None
    exts = []
    for path in sorted(glob(os.path.join("sparseclust", "**", "*.pyx"), recursive=True)):
        stem = os.path.splitext(os.path.basename(path))[0]
        if only is not None and stem not in only:
            continue
        name = os.path.splitext(path)[0].replace(os.sep, ".")
        exts.append(
            Extension(
                name,
                [path],
                language="c++",
                include_dirs=[np.get_include(), os.path.join("sparseclust", "_kernels")],
                define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_9_API_VERSION")],
            )
        )
    debug = _flag("SPARSECLUST_DEBUG")
    directives = {
        "language_level": 3,
        "boundscheck": debug,
        "wraparound": debug,
        "initializedcheck": debug,
        "cdivision": True,
        "nonecheck": False,
        "cpow": True,
    }
    return cythonize(exts, compiler_directives=directives, nthreads=_jobs())


setup(ext_modules=extensions(), cmdclass={"build_ext": BuildExt})
