#!/usr/bin/env python3
"""A local package index for tests: the PEP 691 JSON simple API over a directory of wheels.

  GET /simple/<project>/          {"meta": {"api-version": "1.0"}, "name", "files": [{"filename",
                                  "url", "hashes": {"sha256"}}]} for DIR/<project>/*.whl
  GET /simple/<project>/<file>    the file's bytes; honours `Range: bytes=N-` (206)

With `$INDEX_LOG` set, each file request is appended to that file as `<file> <Range header>`.

Run: `python3 server.py DIR`; it listens on 127.0.0.1, on a free port, and prints `PORT <n>`
on its first line of output.
"""

import hashlib
import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT = sys.argv[1]


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        parts = [p for p in self.path.split("?")[0].split("/") if p]
        if len(parts) < 2 or parts[0] != "simple":
            return self.send_error(404)
        project_dir = os.path.join(ROOT, parts[1])
        if not os.path.isdir(project_dir):
            return self.send_error(404)
        if len(parts) == 2:
            host = self.headers.get("Host")
            files = []
            for name in sorted(os.listdir(project_dir)):
                with open(os.path.join(project_dir, name), "rb") as f:
                    sha = hashlib.sha256(f.read()).hexdigest()
                url = "http://%s/simple/%s/%s" % (host, parts[1], name)
                files.append({"filename": name, "url": url, "hashes": {"sha256": sha}})
            body = json.dumps({"meta": {"api-version": "1.0"}, "name": parts[1], "files": files}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        path = os.path.join(project_dir, parts[2])
        if not os.path.isfile(path):
            return self.send_error(404)
        with open(path, "rb") as f:
            data = f.read()
        start = 0
        rng = self.headers.get("Range", "")
        if os.environ.get("INDEX_LOG"):
            with open(os.environ["INDEX_LOG"], "a") as log:
                log.write("%s %s\n" % (parts[2], rng or "-"))
        if rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[len("bytes="):-1])
            if start >= len(data):
                return self.send_error(416)
            self.send_response(206)
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(data) - start))
        self.end_headers()
        self.wfile.write(data[start:])


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print("PORT %d" % server.server_address[1], flush=True)
server.serve_forever()
