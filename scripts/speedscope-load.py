#!/usr/bin/env python3
"""Loads a profile file into speedscope, run headless, and says what it shows.

    scripts/speedscope-load.py FILE [CACHE_DIR]

Fetches speedscope's release (the npm package, checked against its published
sha512) into CACHE_DIR (default target/viewers) the first time, serves it and
FILE from 127.0.0.1, opens speedscope with FILE in a headless Chromium
(chromium-headless-shell or chromium) and prints one JSON object: the page
title, the text of speedscope's toolbar, and the browser console's lines.
speedscope names the page "<file> - speedscope" only once it has imported a
profile; a file it cannot read leaves the title "speedscope".

Exits 2, saying why on stderr, when no headless Chromium is installed or the
package cannot be fetched; 1 on any other failure.
"""

import base64
import hashlib
import html
import http.server
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import urllib.request

VERSION = "1.25.0"
URL = f"https://registry.npmjs.org/speedscope/-/speedscope-{VERSION}.tgz"
SHA512 = "cpf9HWTZf1ijLXBJrk87Ve/54tnYx6rlf0gUThvn3ook6h63hLXVOQiMf44PT+XoV503cPfvfiT5gP5vojp6Ag=="
BROWSERS = ["chromium-headless-shell", "chromium", "chromium-browser"]


def skip(why):
    print(f"speedscope-load: {why}", file=sys.stderr)
    sys.exit(2)


def speedscope(cache):
    """The directory of speedscope's release files, fetched once."""
    release = os.path.join(cache, f"speedscope-{VERSION}", "package", "dist", "release")
    if os.path.isfile(os.path.join(release, "index.html")):
        return release
    try:
        data = urllib.request.urlopen(URL, timeout=60).read()
    except OSError as e:
        skip(f"cannot fetch {URL}: {e}")
    digest = base64.b64encode(hashlib.sha512(data).digest()).decode()
    if digest != SHA512:
        print(f"speedscope-load: {URL} has sha512 {digest}, expected {SHA512}", file=sys.stderr)
        sys.exit(1)
    os.makedirs(cache, exist_ok=True)
    partial = tempfile.mkdtemp(dir=cache)
    with tarfile.open(fileobj=io.BytesIO(data)) as t:
        t.extractall(partial, filter="data")
    os.rename(partial, os.path.join(cache, f"speedscope-{VERSION}"))
    return release


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(1)
    profile = os.path.abspath(sys.argv[1])
    cache = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else "target/viewers")
    browser = next((b for b in map(shutil.which, BROWSERS) if b), None)
    if browser is None:
        skip("no headless Chromium (apt-get install chromium-headless-shell)")
    release = speedscope(cache)

    name = os.path.basename(profile)

    class Files(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **k):
            super().__init__(*a, directory=release, **k)

        def translate_path(self, path):
            if path.split("?")[0] == "/profile/" + name:
                return profile
            return super().translate_path(path)

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Files)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    url = f"{base}/index.html#profileURL={base}/profile/{name}"
    with tempfile.TemporaryDirectory() as home:
        run = subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu",
             f"--user-data-dir={home}", "--enable-logging=stderr", "--v=0",
             "--virtual-time-budget=60000", "--dump-dom", url],
            capture_output=True, text=True, timeout=300)
    server.shutdown()
    dom = run.stdout
    title = re.search(r"<title>(.*?)</title>", dom, re.S)
    # The toolbar: the text between its view buttons and its export button.
    text = html.unescape(re.sub(r"<[^>]+>", "\n", dom))
    console = [l for l in run.stderr.splitlines() if "CONSOLE" in l]
    print(json.dumps({
        "title": html.unescape(title.group(1)) if title else None,
        "text": [l.strip() for l in text.splitlines() if l.strip()],
        "console": console,
        "browser_status": run.returncode,
    }))


if __name__ == "__main__":
    main()
