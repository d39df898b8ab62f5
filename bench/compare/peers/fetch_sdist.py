#!/usr/bin/env python3
"""Downloads a source distribution by name and version without running any of it.

`pip download` prepares an sdist's metadata, which runs its setup.py: too early for a file
nobody has read yet. This asks pip's own index finder (the index pip is configured with) for the
file, downloads it, and checks it against the SHA-256 recorded in sdists.txt when it was read.
Usage: fetch_sdist.py NAME VERSION SHA256 DEST_DIR   (prints the file's path)
"""
import hashlib
import os
import sys

from pip._internal.index.collector import LinkCollector
from pip._internal.index.package_finder import PackageFinder
from pip._internal.models.search_scope import SearchScope
from pip._internal.models.selection_prefs import SelectionPreferences
from pip._internal.network.session import PipSession
from pip._internal.configuration import Configuration
from pip._internal.models.index import PyPI


def index_urls():
    cfg = Configuration(isolated=False)
    cfg.load()
    for key, value in cfg.items():
        if key.endswith(".index-url"):
            return [value]
    return [os.environ.get("PIP_INDEX_URL", PyPI.simple_url)]


def main():
    name, version, sha256, dest = sys.argv[1:5]
    session = PipSession()
    finder = PackageFinder.create(
        link_collector=LinkCollector(session=session,
                                     search_scope=SearchScope.create(find_links=[], index_urls=index_urls(),
                                                                     no_index=False)),
        selection_prefs=SelectionPreferences(allow_yanked=False))
    links = [c.link for c in finder.find_all_candidates(name)
             if str(c.version) == version and c.link.filename.endswith((".tar.gz", ".zip"))]
    if not links:
        sys.exit("fetch_sdist: no source distribution of %s %s on the index" % (name, version))
    link = links[0]
    path = os.path.join(dest, link.filename)
    if not os.path.exists(path):
        reply = session.get(link.url)
        reply.raise_for_status()
        os.makedirs(dest, exist_ok=True)
        with open(path + ".part", "wb") as f:
            f.write(reply.content)
        os.replace(path + ".part", path)
    with open(path, "rb") as f:
        got = hashlib.sha256(f.read()).hexdigest()
    if got != sha256:
        os.remove(path)
        sys.exit("fetch_sdist: %s has SHA-256 %s, not the %s that was read; not installing it" % (link.filename, got, sha256))
    print(path)


if __name__ == "__main__":
    main()
