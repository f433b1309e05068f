# SPDX-License-Identifier: BSD-3-Clause
"""Build the Cython extensions of sparseclust.

Every ``sparseclust/**/*.pyx`` becomes one C++ extension compiled with OpenMP
(``-fopenmp``) where the compiler supports it, serially otherwise.

Development switches (environment variables):

``SPARSECLUST_BUILD_ONLY``
    comma-separated module stems (``_topl,_stats``) to build only those.
``SPARSECLUST_DEBUG=1``
    turn Cython's bounds/wraparound/initialized checks back on.
"""

import os
import sys
from glob import glob

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


def _has_openmp(compiler):
    import shutil
    import subprocess
    import tempfile

    cc = compiler.compiler_so[0] if hasattr(compiler, "compiler_so") else "cc"
    if not shutil.which(cc):
        return False
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "t.c")
        with open(src, "w") as fh:
            fh.write("#include <omp.h>\nint main(void){return omp_get_max_threads()<0;}\n")
        res = subprocess.run(
            [cc, "-fopenmp", src, "-o", os.path.join(tmp, "t")], capture_output=True
        )
        return res.returncode == 0


class BuildExt(build_ext):
    def build_extensions(self):
        openmp = sys.platform != "win32" and _has_openmp(self.compiler)
        if not openmp:
            print("sparseclust: OpenMP not found, building serial kernels", file=sys.stderr)
        for ext in self.extensions:
            ext.extra_compile_args += ["-O3", "-std=c++17"]
            if openmp:
                ext.extra_compile_args.append("-fopenmp")
                ext.extra_link_args.append("-fopenmp")
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
    debug = os.environ.get("SPARSECLUST_DEBUG") == "1"
    directives = {
        "language_level": 3,
        "boundscheck": debug,
        "wraparound": debug,
        "initializedcheck": debug,
        "cdivision": True,
        "nonecheck": False,
        "cpow": True,
    }
    return cythonize(exts, compiler_directives=directives, nthreads=0)


setup(ext_modules=extensions(), cmdclass={"build_ext": BuildExt})
