# SPDX-License-Identifier: BSD-3-Clause
"""Open pages of the built documentation in headless Chromium and check their images.

Usage: python .ci/check_site.py BUILD_DIR [--out DIR] [--chromium PATH] [--report HTML]

For the index, the SparseLDA API page and one gallery page: Chromium renders the page
(``--dump-dom``, after scripts have run) and every ``<img>`` of the rendered DOM must point to
a file of the build that exists, is non-empty and decodes as an image; the page must have at
least its expected images (named below) and its title. A screenshot of each page is written
to the artifact folder (printed at the end) and must not be blank. Exits non-zero on the first
failure, with the reason. With ``--report``, the HTML report of ``sparseclust topics`` is
rendered and checked the same way (its trace plot and word bars are inline SVG and CSS).
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

from PIL import Image

# page -> (text the rendered page must contain, substrings of image files it must show)
PAGES = {
    "index.html": ("sparseclust documentation", ["sphx_glr_plot_heldout_vs_L_001"]),
    "generated/sparseclust.SparseLDA.html": ("SparseLDA", ["sphx_glr_plot_"]),
    "auto_examples/plot_kos_topics.html": ("Topics of the KOS blog corpus",
                                           ["sphx_glr_plot_kos_topics_001"]),
}


class _Images(HTMLParser):
    def __init__(self):
        super().__init__()
        self.srcs = []

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            src = dict(attrs).get("src")
            if src:
                self.srcs.append(src)


def _chromium(binary, *args, timeout=120):
    # --no-sandbox: CI containers run as root; the pages are local files of our own build
    cmd = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           "--no-first-run", "--disable-extensions", "--virtual-time-budget=5000",
           f"--user-data-dir={tempfile.mkdtemp(prefix='chromium-')}", *args]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stderr[-2000:]}")
    return out.stdout


def check_page(binary, build, page, must_text, must_images, out_dir):
    path = (build / page).resolve()
    if not path.is_file():
        raise AssertionError(f"{page}: not built")
    url = path.as_uri()
    dom = _chromium(binary, "--dump-dom", url)
    if must_text not in dom:
        raise AssertionError(f"{page}: the rendered page does not contain {must_text!r}")
    parser = _Images()
    parser.feed(dom)
    local = []
    for src in parser.srcs:
        parsed = urlparse(src)
        if parsed.scheme in ("http", "https"):
            raise AssertionError(f"{page}: image {src} is loaded from the network")
        if parsed.scheme == "data":
            continue
        file = Path(unquote(parsed.path)) if parsed.scheme == "file" else \
            (path.parent / unquote(parsed.path)).resolve()
        if not file.is_file() or file.stat().st_size == 0:
            raise AssertionError(f"{page}: image {src} is missing or empty ({file})")
        if file.suffix.lower() != ".svg":
            with Image.open(file) as im:
                im.load()
                if im.width == 0 or im.height == 0:
                    raise AssertionError(f"{page}: image {src} has no pixels")
        local.append(file.name)
    for needle in must_images:
        if not any(needle in name for name in local):
            raise AssertionError(f"{page}: no image named like {needle!r} among {local}")
    shot = out_dir / (page.replace("/", "__").removesuffix(".html") + ".png")
    _chromium(binary, f"--screenshot={shot}", "--window-size=1280,1800", url)
    if not shot.is_file() or shot.stat().st_size == 0:
        raise AssertionError(f"{page}: no screenshot written")
    with Image.open(shot) as im:
        lo_hi = im.convert("L").getextrema()
    if lo_hi[0] == lo_hi[1]:
        raise AssertionError(f"{page}: the screenshot is blank")
    return len(local), shot


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build", type=Path)
    ap.add_argument("--out", type=Path, default=None, help="folder of the screenshots")
    ap.add_argument("--chromium", default=os.environ.get("CHROMIUM", "chromium"))
    ap.add_argument("--report", type=Path, default=None,
                    help="also check an HTML report of `sparseclust topics --report`")
    args = ap.parse_args(argv)
    binary = shutil.which(args.chromium) or args.chromium
    out_dir = args.out or Path(tempfile.mkdtemp(prefix="sparseclust-site-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    for page, (text, images) in PAGES.items():
        n, shot = check_page(binary, args.build.resolve(), page, text, images, out_dir)
        print(f"site: {page}: rendered, {n} images present and non-empty, screenshot {shot}")
    if args.report is not None:
        rep = args.report.resolve()
        dom = _chromium(binary, "--dump-dom", rep.as_uri())
        for needle in ("Topics (", "<svg", "<polyline", "class=\"bar\""):
            if needle not in dom:
                raise AssertionError(f"{rep.name}: the rendered report lacks {needle!r}")
        n, shot = check_page(binary, rep.parent, rep.name, "held-out document completion", [],
                             out_dir)
        print(f"site: report {rep.name}: rendered with its trace plot and word bars, "
              f"screenshot {shot}")
    print(f"site: screenshots (CI artifacts) in {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
