#!/usr/bin/env python3
"""A local stand-in for the Hugging Face Hub HTTP API, for tests.

It implements the endpoints that `kernel-builder upload` and the `kernels` loader (through
huggingface_hub) use, with the shapes of the Hub's API:

  POST /api/repos/create                               {"name","organization","type","private"}
  GET  /api/{t}s/{org}/{name}[/revision/{rev}]         repository info: id, sha, siblings
  GET  /api/{t}s/{org}/{name}/refs[?include_prs=1]     branches (and pull request refs)
  POST /api/{t}s/{org}/{name}/branch/{branch}          new branch from main (or startingPoint)
  GET  /api/{t}s/{org}/{name}/tree/{rev}[/{path}]      ?recursive=&cursor=, Link rel="next"
  POST /api/{t}s/{org}/{name}/preupload/{rev}          uploadMode lfs|regular, shouldIgnore, oid
  POST /api/{t}s/{org}/{name}/commit/{rev}             NDJSON header/file/lfsFile/deletedFile,
                                                        ?create_pr=1 opens refs/pr/N
  POST /{prefix}{org}/{name}.git/info/lfs/objects/batch   git-lfs batch API, basic transfer
  PUT  /_lfs/upload/{oid}, POST /_lfs/verify          the upload and verify actions it hands out
  GET|HEAD /{prefix}{org}/{name}/resolve/{rev}/{path}  file bytes with X-Repo-Commit, ETag,
                                                        X-Linked-Etag / X-Linked-Size for LFS

{t} is model, dataset, space or kernel; {prefix} is "" for models and "kernels/" etc. otherwise.

Test controls (not part of the Hub API):

  GET  /_admin/stats   request counts per endpoint, bytes received (inline file content after
                       base64 decoding, LFS uploads), commits made
  GET  /_admin/state   every repository: branch -> {path: {"sha256", "size", "lfs"}}
  POST /_admin/fail    {"endpoint": "commit", "nth": 1, "times": 1, "status": 500,
                       "message": "...", "echo_auth": false, "race": false}: the nth next
                       request to that endpoint, and the times-1 after it, fail with that
                       status and `{"error": message}`; with echo_auth the message ends with
                       the request's Authorization header (to test that clients redact it);
                       with race (commits only) another writer commits `race.txt` to the
                       branch just before the request is handled, instead of a failure.
                       Hostile answers instead of a failure (for the client's bounds):
                       "hostile": "silent" reads the request and answers nothing for
                       "seconds" (default 120); "hostile": "endless" answers 200 with a
                       chunked JSON body that never ends (until the client hangs up or
                       "seconds" pass); "hostile": "redirect" answers 307 to "location";
                       "hostile": "empty_pages" (tree) answers an empty page linking to the
                       next; "hostile": "big_pages" (tree) answers a page of one file padded
                       with spaces to "mib" MiB (default 30), linking to the next;
                       "link_next": URL (tree only) answers normally with
                       `Link: <URL>; rel="next"`
  POST /_admin/put     {"repo_id": "org/name", "branch": "v1", "files": {path: text}}: commit
                       exactly these files to that branch of kernel repository org/name
                       (made when missing), whatever upload would refuse (bytecode, say);
                       answers {"commit": sha}
  POST /_admin/generate {"prefix": "org/name", "fanout": F, "depth": D}: kernel repositories
                       named org/name, org/name-0, org/name-0-1, … come into being when asked
                       for; each has branch v1 holding build/torch-cpu/metadata.json whose
                       kernel-depends are its F children (version 1), down to D levels below
                       org/name (no bound when D is null): a Hub whose dependencies never end

Everything is kept in memory. Mutating API calls need `Authorization: Bearer <token>` (equal
to --token when given). Run: `python3 server.py [--token T] [--page-size N]`; it listens on
127.0.0.1, on a free port, and prints `PORT <n>` on its first line of output.
"""

import argparse
import base64
import hashlib
import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, quote, unquote, urlsplit

LFS_THRESHOLD = 10 * 1024 * 1024
TYPES = {"models": "model", "datasets": "dataset", "spaces": "space", "kernels": "kernel"}
PREFIX = {"model": "", "dataset": "datasets/", "space": "spaces/", "kernel": "kernels/"}
GITATTRIBUTES = b"*.so filter=lfs diff=lfs merge=lfs -text\n*.bin filter=lfs diff=lfs merge=lfs -text\n"


def git_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lfs_pointer(sha256: str, size: int) -> bytes:
    return (
        "version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n" % (sha256, size)
    ).encode()


def is_binary(data: bytes) -> bool:
    if b"\0" in data:
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


class Hangup(Exception):
    """A hostile answer was given: close the connection without another answer."""


class HubError(Exception):
    def __init__(self, status, message, code=None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code


class State:
    """Repositories: (type, id) -> {"private", "branches": {name: commit}, "prs": [..]};
    commits: id -> {"parent", "files": {path: ("regular", bytes) | ("lfs", sha256, size)}}."""

    def __init__(self):
        self.lock = threading.Lock()
        self.repos = {}
        self.commits = {}
        self.lfs = {}
        self.counter = 0
        self.stats = {"requests": {}, "inline_bytes": 0, "lfs_bytes": 0, "commits": 0}
        self.failures = []
        self.generators = []

    def new_commit(self, parent, files, message):
        self.counter += 1
        h = hashlib.sha1()
        h.update(("%s\n%s\n%d\n" % (parent, message, self.counter)).encode())
        for path in sorted(files):
            h.update(path.encode() + b"\0" + repr(files[path][1:]).encode())
        oid = h.hexdigest()
        self.commits[oid] = {"parent": parent, "files": dict(files)}
        return oid


STATE = State()


def generated(repo_id):
    """The repository /_admin/generate makes `repo_id` (made now, STATE.lock held), or None."""
    for g in STATE.generators:
        prefix = g["prefix"]
        if repo_id != prefix and not repo_id.startswith(prefix + "-"):
            continue
        rest = repo_id[len(prefix):]
        levels = [x for x in rest.split("-")[1:]]
        if not all(x.isdigit() for x in levels):
            continue
        depth = g.get("depth")
        children = []
        if depth is None or len(levels) < depth:
            children = [{"repo-id": "%s-%d" % (repo_id, i), "version": 1} for i in range(g.get("fanout", 1))]
        meta = {"name": repo_id.split("/")[1], "kernel-depends": children}
        files = {
            "build/torch-cpu/metadata.json": ("regular", json.dumps(meta).encode()),
            "build/torch-cpu/__init__.py": ("regular", b""),
        }
        sha = STATE.new_commit(None, files, repo_id)
        repo = {"private": False, "branches": {"main": sha, "v1": sha}, "prs": []}
        STATE.repos[("kernel", repo_id)] = repo
        return repo
    return None


def file_entry(path, rec):
    if rec[0] == "regular":
        return {"type": "file", "oid": git_oid(rec[1]), "size": len(rec[1]), "path": path}
    sha, size = rec[1], rec[2]
    pointer = lfs_pointer(sha, size)
    return {
        "type": "file",
        "oid": git_oid(pointer),
        "size": size,
        "path": path,
        "lfs": {"oid": sha, "size": size, "pointerSize": len(pointer)},
    }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in separate writes
    server_version = "hub-test-server/1"

    def log_message(self, fmt, *args):  # quiet; errors are reported in answers
        pass

    # -- plumbing --------------------------------------------------------------------------

    def base(self):
        return "http://%s" % self.headers.get("Host", "127.0.0.1:%d" % self.server.server_port)

    def body(self):
        if getattr(self, "_consumed", False):
            return b""
        self._consumed = True
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def send(self, status, payload=None, headers=None, raw=None, head=False):
        data = raw if raw is not None else (b"" if payload is None else json.dumps(payload).encode())
        self.send_response(status)
        if raw is None:
            self.send_header("Content-Type", "application/json")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if not head:
            self.wfile.write(data)

    def require_auth(self):
        auth = self.headers.get("Authorization", "")
        if not auth.startswith("Bearer ") or not auth[7:].strip():
            raise HubError(401, "Invalid credentials in Authorization header")
        want = self.server.token
        if want is not None and auth[7:].strip() != want:
            raise HubError(401, "Invalid credentials in Authorization header")

    def count(self, endpoint):
        self._count_locked(endpoint)
        hostile = getattr(self, "_hostile", None)
        if hostile:
            self.body()
            self.behave(hostile)
            raise Hangup()

    def behave(self, f):
        """Answer as a hostile server would (see /_admin/fail), for at most f["seconds"]."""
        deadline = time.monotonic() + float(f.get("seconds", 120))
        if f["hostile"] == "silent":
            while time.monotonic() < deadline:
                time.sleep(0.1)
            return
        if f["hostile"] == "endless":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            chunk = b" " * 65536
            frame = b"%x\r\n%s\r\n" % (len(chunk), chunk)
            try:
                self.wfile.write(b"1\r\n[\r\n")
                while time.monotonic() < deadline:
                    self.wfile.write(frame)
            except OSError:  # the client hung up, as it should
                pass
            return
        if f["hostile"] == "redirect":
            self.send_response(307)
            self.send_header("Location", f["location"])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if f["hostile"] == "empty_pages":  # tree only: an empty page that links to the next
            url = urlsplit(self.path)
            cursor = int(parse_qs(url.query).get("cursor", ["0"])[0]) + 1
            self.send(200, [], headers={"Link": '<%s%s?recursive=true&cursor=%d>; rel="next"' % (self.base(), url.path, cursor)})
            return
        if f["hostile"] == "big_pages":  # tree only: a large page that links to the next
            url = urlsplit(self.path)
            cursor = int(parse_qs(url.query).get("cursor", ["0"])[0]) + 1
            entry = json.dumps([{"type": "file", "path": "f%d" % cursor, "oid": "00", "size": 1}]).encode()
            pad = int(f.get("mib", 30)) << 20
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Link", '<%s%s?recursive=true&cursor=%d>; rel="next"' % (self.base(), url.path, cursor))
            self.send_header("Content-Length", str(len(entry) + pad))
            self.end_headers()
            try:
                self.wfile.write(entry[:-1])
                chunk = b" " * (1 << 20)
                for _ in range(pad >> 20):
                    self.wfile.write(chunk)
                self.wfile.write(b"]")
            except OSError:  # the client hung up
                pass
            return
        raise ValueError("unknown hostile mode %r" % f["hostile"])

    def _count_locked(self, endpoint):
        with STATE.lock:
            r = STATE.stats["requests"]
            r[endpoint] = r.get(endpoint, 0) + 1
            for f in STATE.failures:
                if f["endpoint"] == endpoint:
                    if f["nth"] > 1:
                        f["nth"] -= 1
                        break
                    f["times"] = f.get("times", 1) - 1
                    if f["times"] <= 0:
                        STATE.failures.remove(f)
                    if f.get("race"):
                        self._race = True
                        break
                    if f.get("link_next"):
                        self._link_next = f["link_next"]
                        break
                    if f.get("hostile"):
                        self._hostile = f
                        break
                    self.body()  # read what the client sent, so the connection stays usable
                    msg = f.get("message", "injected failure")
                    if f.get("echo_auth"):
                        msg += " (request had Authorization: %s)" % self.headers.get(
                            "Authorization", ""
                        )
                    raise HubError(int(f.get("status", 500)), msg)

    def dispatch(self, method):
        self._consumed = False
        self._race = False
        self._hostile = None
        self._link_next = None
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        path = url.path
        try:
            self.route(method, path, query)
        except Hangup:
            self.close_connection = True
        except HubError as e:
            self.body()  # read what the client sent, so the connection stays usable
            headers = {"X-Error-Message": e.message.replace("\n", " ")[:200]}
            if e.code:
                headers["X-Error-Code"] = e.code
            self.send(e.status, {"error": e.message}, headers=headers, head=method == "HEAD")
        except Exception as e:  # a bug in the server: answer 500 and say what
            self.body()
            self.send(500, {"error": "test server error: %r" % (e,)})

    def do_GET(self):
        self.dispatch("GET")

    def do_HEAD(self):
        self.dispatch("HEAD")

    def do_POST(self):
        self.dispatch("POST")

    def do_PUT(self):
        self.dispatch("PUT")

    # -- routing ---------------------------------------------------------------------------

    def route(self, method, path, query):
        if path.startswith("/_admin/"):
            return self.admin(method, path[len("/_admin/"):])
        if path == "/api/repos/create" and method == "POST":
            self.count("create_repo")
            return self.create_repo()
        m = re.fullmatch(r"/api/(models|datasets|spaces|kernels)/([^/]+)/([^/]+)(?:/(.*))?", path)
        if m:
            rtype = TYPES[m.group(1)]
            repo_id = "%s/%s" % (unquote(m.group(2)), unquote(m.group(3)))
            rest = m.group(4) or ""
            op, _, tail = rest.partition("/")
            if op == "" and method == "GET":
                self.count("info")
                return self.info(rtype, repo_id, "main")
            if op == "revision" and method == "GET":
                self.count("info")
                return self.info(rtype, repo_id, unquote(tail))
            if op == "refs" and method == "GET":
                self.count("refs")
                return self.refs(rtype, repo_id, query)
            if op == "branch" and method == "POST":
                self.count("branch")
                return self.create_branch(rtype, repo_id, unquote(tail))
            if op == "tree" and method == "GET":
                self.count("tree")
                rev, _, sub = tail.partition("/")
                return self.tree(rtype, repo_id, unquote(rev), unquote(sub), query)
            if op == "preupload" and method == "POST":
                self.count("preupload")
                return self.preupload(rtype, repo_id, unquote(tail))
            if op == "commit" and method == "POST":
                self.count("commit")
                return self.commit(rtype, repo_id, unquote(tail), query)
        m = re.fullmatch(r"/(?:(datasets|spaces|kernels)/)?([^/]+)/([^/]+)\.git/info/lfs/objects/batch", path)
        if m and method == "POST":
            self.count("lfs_batch")
            rtype = TYPES.get(m.group(1) or "models")
            return self.lfs_batch(rtype, "%s/%s" % (m.group(2), m.group(3)))
        m = re.fullmatch(r"/_lfs/upload/([0-9a-f]{64})", path)
        if m and method == "PUT":
            self.count("lfs_upload")
            return self.lfs_upload(m.group(1))
        if path == "/_lfs/verify" and method == "POST":
            self.count("lfs_verify")
            return self.lfs_verify()
        m = re.fullmatch(r"/(?:(datasets|spaces|kernels)/)?([^/]+)/([^/]+)/resolve/([^/]+)/(.+)", path)
        if m and method in ("GET", "HEAD"):
            self.count("resolve")
            rtype = TYPES.get(m.group(1) or "models")
            return self.resolve(
                rtype, "%s/%s" % (m.group(2), m.group(3)), unquote(m.group(4)), unquote(m.group(5)), method
            )
        raise HubError(404, "test server: no route for %s %s" % (method, path))

    # -- admin -----------------------------------------------------------------------------

    def admin(self, method, what):
        if what == "stats" and method == "GET":
            with STATE.lock:
                return self.send(200, STATE.stats)
        if what == "state" and method == "GET":
            with STATE.lock:
                out = {}
                for (rtype, rid), repo in STATE.repos.items():
                    branches = {}
                    for b, c in repo["branches"].items():
                        files = {}
                        for p, rec in STATE.commits[c]["files"].items():
                            if rec[0] == "regular":
                                files[p] = {"sha256": hashlib.sha256(rec[1]).hexdigest(), "size": len(rec[1]), "lfs": False}
                            else:
                                files[p] = {"sha256": rec[1], "size": rec[2], "lfs": True}
                        branches[b] = files
                    out["%s:%s" % (rtype, rid)] = branches
                return self.send(200, out)
        if what == "put" and method == "POST":
            spec = json.loads(self.body() or b"{}")
            files = {p: ("regular", t.encode()) for p, t in spec["files"].items()}
            with STATE.lock:
                sha = STATE.new_commit(None, files, "put")
                repo = STATE.repos.setdefault(
                    ("kernel", spec["repo_id"]), {"private": False, "branches": {}, "prs": []}
                )
                repo["branches"].setdefault("main", sha)
                repo["branches"][spec["branch"]] = sha
            return self.send(200, {"commit": sha})
        if what == "generate" and method == "POST":
            spec = json.loads(self.body() or b"{}")
            with STATE.lock:
                STATE.generators.append(spec)
            return self.send(200, {"ok": True})
        if what == "fail" and method == "POST":
            spec = json.loads(self.body() or b"{}")
            with STATE.lock:
                STATE.failures.append(spec)
            return self.send(200, {"ok": True})
        raise HubError(404, "no such admin call")

    # -- repositories and refs -------------------------------------------------------------

    def repo(self, rtype, repo_id):
        repo = STATE.repos.get((rtype, repo_id))
        if repo is None and rtype == "kernel":
            repo = generated(repo_id)
        if repo is None:
            raise HubError(404, "Repository not found", "RepoNotFound")
        return repo

    def resolve_rev(self, repo, rev):
        if rev in repo["branches"]:
            return repo["branches"][rev]
        if rev.startswith("refs/heads/") and rev[11:] in repo["branches"]:
            return repo["branches"][rev[11:]]
        if rev in STATE.commits:
            return rev
        m = re.fullmatch(r"refs/pr/(\d+)", rev)
        if m and 0 < int(m.group(1)) <= len(repo["prs"]):
            return repo["prs"][int(m.group(1)) - 1]
        raise HubError(404, "Invalid rev id: %s" % rev, "RevisionNotFound")

    def create_repo(self):
        self.require_auth()
        body = json.loads(self.body() or b"{}")
        rtype = body.get("type") or "model"
        if rtype not in PREFIX:
            raise HubError(400, "Invalid repo type")
        org, name = body.get("organization"), body.get("name")
        if not name:
            raise HubError(400, "name is required")
        repo_id = "%s/%s" % (org or "user", name)
        url = "%s/%s%s" % (self.base(), PREFIX[rtype], repo_id)
        with STATE.lock:
            if (rtype, repo_id) in STATE.repos:
                raise HubError(409, "You already created this %s repo" % rtype)
            first = STATE.new_commit(None, {".gitattributes": ("regular", GITATTRIBUTES)}, "initial commit")
            STATE.repos[(rtype, repo_id)] = {
                "private": bool(body.get("private")),
                "branches": {"main": first},
                "prs": [],
            }
        self.send(200, {"url": url, "name": repo_id, "id": repo_id})

    def info(self, rtype, repo_id, rev):
        with STATE.lock:
            repo = self.repo(rtype, repo_id)
            sha = self.resolve_rev(repo, rev)
            files = sorted(STATE.commits[sha]["files"])
        self.send(
            200,
            {
                "id": repo_id,
                "author": repo_id.split("/")[0],
                "sha": sha,
                "private": repo["private"],
                "siblings": [{"rfilename": f} for f in files],
            },
        )

    def refs(self, rtype, repo_id, query):
        with STATE.lock:
            repo = self.repo(rtype, repo_id)
            out = {
                "branches": [
                    {"name": b, "ref": "refs/heads/" + b, "targetCommit": c}
                    for b, c in sorted(repo["branches"].items())
                ],
                "converts": [],
                "tags": [],
            }
            if query.get("include_prs", ["0"])[0] in ("1", "true", "True"):
                out["pullRequests"] = [
                    {"name": "refs/pr/%d" % n, "ref": "refs/pr/%d" % n, "targetCommit": c}
                    for n, c in enumerate(repo["prs"], start=1)
                ]
        self.send(200, out)

    def create_branch(self, rtype, repo_id, branch):
        self.require_auth()
        body = json.loads(self.body() or b"{}")
        with STATE.lock:
            repo = self.repo(rtype, repo_id)
            if branch in repo["branches"]:
                raise HubError(409, "Reference already exists")
            start = self.resolve_rev(repo, body.get("startingPoint") or "main")
            repo["branches"][branch] = start
        self.send(200, {})

    # -- reading ---------------------------------------------------------------------------

    def tree(self, rtype, repo_id, rev, sub, query):
        recursive = query.get("recursive", ["false"])[0] in ("1", "true", "True")
        cursor = int(query.get("cursor", ["0"])[0])
        with STATE.lock:
            repo = self.repo(rtype, repo_id)
            sha = self.resolve_rev(repo, rev)
            files = STATE.commits[sha]["files"]
        sub = sub.strip("/")
        prefix = sub + "/" if sub else ""
        if sub and sub in files:
            entries = [file_entry(sub, files[sub])]
        else:
            entries = {}
            for p, rec in files.items():
                if not p.startswith(prefix):
                    continue
                rest = p[len(prefix):].split("/")
                for depth in range(1, len(rest)):
                    if not recursive and depth > 1:
                        break
                    d = prefix + "/".join(rest[:depth])
                    entries[d] = {
                        "type": "directory",
                        "oid": hashlib.sha1(d.encode()).hexdigest(),
                        "size": 0,
                        "path": d,
                    }
                if recursive or len(rest) == 1:
                    entries[p] = file_entry(p, rec)
            if sub and not entries:
                raise HubError(404, "Entry not found", "EntryNotFound")
            entries = [entries[k] for k in sorted(entries)]
        size = self.server.page_size
        page = entries[cursor:cursor + size]
        headers = {}
        if cursor + size < len(entries):
            url = urlsplit(self.path)
            q = {k: v[0] for k, v in parse_qs(url.query).items()}
            q["cursor"] = str(cursor + size)
            qs = "&".join("%s=%s" % (k, quote(v)) for k, v in sorted(q.items()))
            headers["Link"] = '<%s%s?%s>; rel="next"' % (self.base(), url.path, qs)
        if self._link_next:  # a hostile proxy's link (see /_admin/fail)
            headers["Link"] = '<%s>; rel="next"' % self._link_next
        self.send(200, page, headers=headers)

    def resolve(self, rtype, repo_id, rev, path, method):
        with STATE.lock:
            repo = self.repo(rtype, repo_id)
            sha = self.resolve_rev(repo, rev)
            rec = STATE.commits[sha]["files"].get(path)
            data = None
            if rec is not None and rec[0] == "lfs":
                data = STATE.lfs.get(rec[1])
        if rec is None:
            raise HubError(404, "Entry not found", "EntryNotFound")
        headers = {"X-Repo-Commit": sha, "Content-Type": "application/octet-stream"}
        if rec[0] == "regular":
            data = rec[1]
            headers["ETag"] = '"%s"' % git_oid(data)
        else:
            headers["ETag"] = '"%s"' % rec[1]
            headers["X-Linked-Etag"] = '"%s"' % rec[1]
            headers["X-Linked-Size"] = str(rec[2])
        self.send(200, raw=data, headers=headers, head=method == "HEAD")

    # -- writing ---------------------------------------------------------------------------

    def preupload(self, rtype, repo_id, rev):
        self.require_auth()
        body = json.loads(self.body() or b"{}")
        with STATE.lock:
            repo = self.repo(rtype, repo_id)
            files = STATE.commits[self.resolve_rev(repo, rev)]["files"]
        out = []
        for f in body.get("files", []):
            sample = base64.b64decode(f.get("sample", ""))
            size = int(f.get("size", 0))
            mode = "lfs" if size > LFS_THRESHOLD or (size > 0 and is_binary(sample)) else "regular"
            entry = {"path": f["path"], "uploadMode": mode, "shouldIgnore": False}
            rec = files.get(f["path"])
            if rec is not None:
                entry["oid"] = git_oid(rec[1]) if rec[0] == "regular" else rec[1]
            out.append(entry)
        self.send(200, {"files": out, "commitOid": self.resolve_rev(repo, rev)})

    def lfs_batch(self, rtype, repo_id):
        self.require_auth()
        body = json.loads(self.body() or b"{}")
        with STATE.lock:
            self.repo(rtype, repo_id)
        if body.get("operation") != "upload":
            raise HubError(400, "only upload is supported")
        if "basic" not in body.get("transfers", ["basic"]):
            raise HubError(400, "only the basic transfer is supported")
        objects = []
        for o in body.get("objects", []):
            oid, size = o["oid"], int(o["size"])
            with STATE.lock:
                have = oid in STATE.lfs and len(STATE.lfs[oid]) == size
            if have:
                objects.append({"oid": oid, "size": size})
            else:
                objects.append(
                    {
                        "oid": oid,
                        "size": size,
                        "authenticated": True,
                        "actions": {
                            "upload": {
                                "href": "%s/_lfs/upload/%s" % (self.base(), oid),
                                "header": {"X-Upload-Ticket": "t-" + oid[:8]},
                            },
                            "verify": {"href": "%s/_lfs/verify" % self.base(), "header": {}},
                        },
                    }
                )
        self.send(200, {"transfer": "basic", "objects": objects, "hash_algo": "sha256"})

    def lfs_upload(self, oid):
        data = self.body()
        if self.headers.get("X-Upload-Ticket") != "t-" + oid[:8]:
            raise HubError(403, "missing upload ticket header")
        if hashlib.sha256(data).hexdigest() != oid:
            raise HubError(400, "content does not match oid %s" % oid)
        with STATE.lock:
            STATE.lfs[oid] = data
            STATE.stats["lfs_bytes"] += len(data)
        self.send(200, raw=b"")

    def lfs_verify(self):
        body = json.loads(self.body() or b"{}")
        with STATE.lock:
            data = STATE.lfs.get(body.get("oid"))
        if data is None or len(data) != int(body.get("size", -1)):
            raise HubError(422, "object %s was not uploaded" % body.get("oid"))
        self.send(200, {})

    def commit(self, rtype, repo_id, rev, query):
        self.require_auth()
        lines = [json.loads(l) for l in self.body().splitlines() if l.strip()]
        if not lines or lines[0].get("key") != "header":
            raise HubError(400, "the first line must be the header")
        header = lines[0]["value"]
        create_pr = query.get("create_pr", ["0"])[0] in ("1", "true", "True")
        with STATE.lock:
            repo = self.repo(rtype, repo_id)
            if rev not in repo["branches"]:
                raise HubError(404, "Invalid rev id: %s" % rev, "RevisionNotFound")
            if self._race:
                # Another writer commits to the branch first.
                before = STATE.commits[repo["branches"][rev]]["files"]
                repo["branches"][rev] = STATE.new_commit(
                    repo["branches"][rev], {**before, "race.txt": ("regular", b"other writer\n")}, "race"
                )
            head = repo["branches"][rev]
            parent = header.get("parentCommit")
            if parent and parent != head:
                raise HubError(412, "A commit has happened since. Please refresh and try again.")
            files = dict(STATE.commits[head]["files"])
            inline = 0
            for line in lines[1:]:
                key, v = line.get("key"), line.get("value", {})
                p = v.get("path", "")
                if not p or p.startswith("/") or ".." in p.split("/"):
                    raise HubError(400, "invalid path %r" % p)
                if key == "file":
                    data = base64.b64decode(v["content"]) if v.get("encoding") == "base64" else v["content"].encode()
                    if b"\0" in data:
                        raise HubError(400, "Your push was rejected because it contains binary files: %s" % p)
                    files[p] = ("regular", data)
                    inline += len(data)
                elif key == "lfsFile":
                    if v.get("algo") != "sha256":
                        raise HubError(400, "unsupported algo")
                    data = STATE.lfs.get(v["oid"])
                    if data is None or len(data) != int(v["size"]):
                        raise HubError(422, "LFS pointer pointed to a file that does not exist: %s" % p)
                    files[p] = ("lfs", v["oid"], int(v["size"]))
                elif key == "deletedFile":
                    if p not in files:
                        raise HubError(404, "A file with this name doesn't exist: %s" % p)
                    del files[p]
                elif key == "deletedFolder":
                    pre = p.rstrip("/") + "/"
                    gone = [k for k in files if k.startswith(pre)]
                    if not gone:
                        raise HubError(404, "A folder with this name doesn't exist: %s" % p)
                    for k in gone:
                        del files[k]
                else:
                    raise HubError(400, "unknown operation %r" % key)
            oid = STATE.new_commit(head, files, header.get("summary", ""))
            STATE.stats["commits"] += 1
            STATE.stats["inline_bytes"] += inline
            prefix = PREFIX[rtype]
            answer = {
                "success": True,
                "commitOid": oid,
                "commitUrl": "%s/%s%s/commit/%s" % (self.base(), prefix, repo_id, oid),
            }
            if create_pr:
                repo["prs"].append(oid)
                n = len(repo["prs"])
                answer["pullRequestUrl"] = "%s/%s%s/discussions/%d" % (self.base(), prefix, repo_id, n)
                answer["prNum"] = n
            else:
                repo["branches"][rev] = oid
        self.send(200, answer)


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # A client closing its connection is not worth a traceback.
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            return
        super().handle_error(request, client_address)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--token", default=None, help="the only token accepted for writes")
    ap.add_argument("--page-size", type=int, default=1000, help="tree entries per page")
    args = ap.parse_args()
    server = Server(("127.0.0.1", args.port), Handler)
    server.token = args.token
    server.page_size = max(1, args.page_size)
    print("PORT %d" % server.server_port, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
