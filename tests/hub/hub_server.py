"""A small local Hugging Face Hub-protocol server for offline push tests.

It speaks enough of the Hub's HTTP API for `HfApi.create_repo`, `upload_folder` / `create_commit`
(preupload, NDJSON commit, the git-LFS batch endpoint with basic PUT uploads and verify), `create_tag`,
`list_repo_refs`, `list_repo_tree` / `list_repo_files`, `get_paths_info`, `repo_info` / `dataset_info`
(with a revision), `hf_hub_download` / `resolve` (HEAD and GET, byte ranges) and therefore
`datasets.load_dataset(repo_id, config, revision=...)` with `HF_ENDPOINT` pointing here.
Set `HF_HUB_DISABLE_XET=1` in the client (otherwise uploads try a Xet endpoint) and `HF_ENDPOINT`
*before* `huggingface_hub`/`datasets` are imported.

Storage: content-addressed blobs (`<root>/blobs/<sha256>`), and every commit is a full snapshot
(`<root>/repos/<type>/<org>/<name>/commits/<oid>/…`, hard links to the blobs) with its file table kept in
memory. Branches and tags point at commits. Nothing is persisted beyond the server's life.

Endpoints (`{t}` is `datasets`, `models` or `spaces`; `{p}` the matching URL prefix `datasets/`, ``, `spaces/`):

    POST   /api/repos/create                            create (409 when it exists)
    POST   /api/validate-yaml                           README.md front matter check (parses the YAML)
    GET    /api/whoami-v2                               the token's user
    GET    /api/{t}/{org}/{name}[/revision/{rev}]       repo info: sha, siblings, private, cardData
    GET    /api/{t}/{org}/{name}/refs                   branches and tags
    GET    /api/{t}/{org}/{name}/tree/{rev}[/{path}]    ?recursive=&expand= (404 EntryNotFound: no such folder)
    POST   /api/{t}/{org}/{name}/paths-info/{rev}       form `paths` (repeated), `expand`
    POST   /api/{t}/{org}/{name}/preupload/{rev}        upload modes: lfs for binary, big or LFS-pattern files
    POST   /api/{t}/{org}/{name}/commit/{rev}           NDJSON: header, file (base64), lfsFile, deletedFile,
                                                        deletedFolder; `parentCommit` checked
    POST   /api/{t}/{org}/{name}/tag/{rev}              {"tag", "message"} (409 when the tag exists)
    DELETE /api/{t}/{org}/{name}/tag/{tag}
    GET    /api/{t}/{org}/{name}/commits/{rev}          the commit history (newest first)
    POST   /{p}{org}/{name}.git/info/lfs/objects/batch  LFS batch (upload): PUT + verify actions
    PUT    /lfs/objects/{oid}                           the LFS upload (no auth, like a presigned URL)
    POST   /lfs/verify/{oid}                            the LFS verify step
    HEAD   /{p}{org}/{name}/resolve/{rev}/{path}        X-Repo-Commit, ETag, X-Linked-Etag/-Size, Content-Length
    GET    /{p}{org}/{name}/resolve/{rev}/{path}        the bytes (Range → 206)

Errors carry the Hub's `X-Error-Code` (RepoNotFound, RevisionNotFound, EntryNotFound) so `huggingface_hub`
raises its typed errors. With `token=` set, writes need `Authorization: Bearer <token>` and private repos
need it to be read. Every request is recorded whole (`requests`: method, target, headers, body) so a test
can check where a secret travelled; one log line per request goes to `log` (and `log_path` when given).

Run it standalone with `python tests/hub_server.py --port 8765 [--token T]`.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import itertools
import json
import os
import re
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from email.utils import formatdate
from fnmatch import fnmatch
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from aiohttp import web

LFS_THRESHOLD = 10 << 20
LFS_PATTERNS = ("*.parquet", "*.arrow", "*.png", "*.jpg", "*.bin", "*.safetensors", "*.gz", "*.zst", "*.npy")
GITATTRIBUTES = "".join(f"{p} filter=lfs diff=lfs merge=lfs -text\n" for p in LFS_PATTERNS).encode()
TYPES = {"datasets": "dataset", "models": "model", "spaces": "space"}
PREFIX = {"dataset": "datasets/", "model": "", "space": "spaces/"}


def git_blob_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lfs_pointer(sha256: str, size: int) -> bytes:
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


@dataclass(frozen=True)
class Entry:
    sha256: str
    size: int
    lfs: bool
    git_oid: str     # git blob id (of the LFS pointer for LFS files)

    def tree_json(self, path: str) -> dict[str, Any]:
        d: dict[str, Any] = {"type": "file", "oid": self.git_oid, "size": self.size, "path": path}
        if self.lfs:
            d["lfs"] = {"oid": self.sha256, "size": self.size, "pointerSize": len(lfs_pointer(self.sha256, self.size))}
        return d


@dataclass
class Commit:
    oid: str
    parent: str | None
    title: str
    description: str
    date: str
    files: dict[str, Entry]


@dataclass
class Repo:
    type: str
    repo_id: str
    private: bool
    created: str
    commits: dict[str, Commit] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)

    def resolve(self, rev: str) -> Commit | None:
        oid = self.branches.get(rev) or self.tags.get(rev)
        if oid is None and rev.startswith("refs/heads/"):
            oid = self.branches.get(rev[len("refs/heads/"):])
        if oid is None and rev.startswith("refs/tags/"):
            oid = self.tags.get(rev[len("refs/tags/"):])
        if oid is None and re.fullmatch(r"[0-9a-f]{7,40}", rev):
            hits = [c for c in self.commits if c.startswith(rev)]
            oid = hits[0] if len(hits) == 1 else None
        return self.commits.get(oid) if oid else None


class HubError(Exception):
    def __init__(self, status: int, message: str, code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.code = status, message, code


@dataclass
class Recorded:
    method: str
    target: str                       # raw path + query
    headers: list[tuple[str, str]]
    body: bytes
    status: int = 0


class HubServer:
    """`with HubServer(token="hf_x") as hub: ... hub.url ...` — an aiohttp app on 127.0.0.1 in a thread."""

    def __init__(self, root: str | os.PathLike | None = None, *, token: str | None = None, host: str = "127.0.0.1",
                 port: int = 0, log_path: str | os.PathLike | None = None, record_bodies: bool = True,
                 hold: str | None = None):
        """`hold`: a regular expression; a request whose path matches it is received and recorded, then left
        unanswered until `release()` (`held` is set when the first one arrives): a client caught mid-request."""
        self._own_root = root is None
        self.hold = re.compile(hold) if hold else None
        self.held = threading.Event()
        self._released = threading.Event()
        self.root = Path(root or tempfile.mkdtemp(prefix="hub-server-"))
        self.token = token
        self.host, self.port = host, port
        self.log_path = Path(log_path) if log_path else None
        self.record_bodies = record_bodies
        self.repos: dict[tuple[str, str], Repo] = {}
        self.requests: list[Recorded] = []
        self.log: list[str] = []
        self._lock = threading.Lock()
        self._counter = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        (self.root / "blobs").mkdir(parents=True, exist_ok=True)

    # -- lifecycle --------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> "HubServer":
        ready = threading.Event()
        error: list[BaseException] = []

        def run():
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._start_app())
            except BaseException as e:   # noqa: BLE001 - reported to the starting thread
                error.append(e)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=run, name="hub-server", daemon=True)
        self._thread.start()
        ready.wait(30)
        if error:
            raise error[0]
        return self

    async def _start_app(self) -> None:
        app = web.Application(client_max_size=1 << 34)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]

    def release(self) -> None:
        """Answer the held requests, and hold no more."""
        self.hold = None
        self._released.set()

    def stop(self) -> None:
        self._released.set()    # a held request must not keep the loop's executor waiting
        if self._loop and self._thread:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(30)
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "HubServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def client_env(self, token: str | None = None) -> dict[str, str]:
        """Environment variables that point huggingface_hub/datasets in a child process at this server."""
        env = {"HF_ENDPOINT": self.url, "HF_HUB_DISABLE_XET": "1", "HF_HUB_OFFLINE": "0", "HF_DATASETS_OFFLINE": "0",
               "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_ETAG_TIMEOUT": "30"}
        if token:
            env["HF_TOKEN"] = token
        return env

    # -- helpers ----------------------------------------------------------------------------------
    def _now(self) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())

    def _authorized(self, request: web.Request) -> bool:
        if self.token is None:
            return True
        return request.headers.get("Authorization", "") == f"Bearer {self.token}"

    def _require_write(self, request: web.Request) -> None:
        if not self._authorized(request):
            raise HubError(401, "Invalid credentials in Authorization header")

    def _repo(self, request: web.Request, type_: str, repo_id: str) -> Repo:
        repo = self.repos.get((type_, repo_id))
        if repo is None or (repo.private and not self._authorized(request)):
            raise HubError(404, f"Repository not found: {repo_id}", "RepoNotFound")
        return repo

    def _commit(self, repo: Repo, rev: str) -> Commit:
        c = repo.resolve(rev)
        if c is None:
            raise HubError(404, f"Invalid rev id: {rev}", "RevisionNotFound")
        return c

    def _blob(self, sha256: str) -> Path:
        return self.root / "blobs" / sha256

    def _store_blob(self, data: bytes) -> str:
        sha = hashlib.sha256(data).hexdigest()
        path = self._blob(sha)
        if not path.exists():
            tmp = path.with_suffix(".tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        return sha

    def _snapshot_dir(self, repo: Repo, oid: str) -> Path:
        return self.root / "repos" / repo.type / repo.repo_id / "commits" / oid

    def _new_commit(self, repo: Repo, parent: str | None, files: dict[str, Entry], title: str,
                    description: str = "") -> Commit:
        seed = json.dumps([parent, sorted((p, e.sha256) for p, e in files.items()), title, next(self._counter)])
        oid = hashlib.sha1(seed.encode()).hexdigest()
        commit = Commit(oid=oid, parent=parent, title=title, description=description, date=self._now(), files=files)
        snap = self._snapshot_dir(repo, oid)
        for path, e in files.items():
            dest = snap / path
            dest.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(self._blob(e.sha256), dest)
            except OSError:
                shutil.copyfile(self._blob(e.sha256), dest)
        snap.mkdir(parents=True, exist_ok=True)
        repo.commits[oid] = commit
        return commit

    def _entry_for(self, data: bytes, path: str, lfs: bool | None = None) -> Entry:
        sha = self._store_blob(data)
        if lfs is None:
            lfs = self._wants_lfs(path, len(data), data[:512])
        git_oid = git_blob_oid(lfs_pointer(sha, len(data))) if lfs else git_blob_oid(data)
        return Entry(sha256=sha, size=len(data), lfs=lfs, git_oid=git_oid)

    @staticmethod
    def _wants_lfs(path: str, size: int, sample: bytes) -> bool:
        name = path.rsplit("/", 1)[-1]
        return size >= LFS_THRESHOLD or any(fnmatch(name, p) for p in LFS_PATTERNS) or b"\0" in sample

    def _repo_url(self, repo: Repo) -> str:
        return f"{self.url}/{PREFIX[repo.type]}{repo.repo_id}"

    @staticmethod
    def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
        headers = {"Content-Type": "application/json", **(headers or {})}
        return web.Response(body=json.dumps(data).encode(), status=status, headers=headers)

    def _record_log(self, rec: Recorded) -> None:
        line = f"{time.strftime('%H:%M:%S')} {rec.method} {rec.target} -> {rec.status} ({len(rec.body)} bytes in)"
        with self._lock:
            self.log.append(line)
            if self.log_path:
                with open(self.log_path, "a", encoding="utf-8") as f:
                    f.write(line + "\n")

    # -- dispatch ---------------------------------------------------------------------------------
    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        rec = Recorded(method=request.method, target=request.raw_path, headers=list(request.headers.items()),
                       body=body if self.record_bodies else b"")
        with self._lock:
            self.requests.append(rec)
        if self.hold is not None and self.hold.search(urlsplit(request.raw_path).path):
            self.held.set()
            await asyncio.get_running_loop().run_in_executor(None, self._released.wait)
        try:
            resp = await self._route(request, body)
        except HubError as e:
            headers = {"X-Error-Message": e.message}
            if e.code:
                headers["X-Error-Code"] = e.code
            resp = self._json({"error": e.message}, status=e.status, headers=headers)
        except Exception as e:  # noqa: BLE001 - a server bug must show up as a 500 with its reason
            resp = self._json({"error": f"hub_server internal error: {type(e).__name__}: {e}"}, status=500)
        rec.status = resp.status
        self._record_log(rec)
        return resp

    async def _route(self, request: web.Request, body: bytes) -> web.StreamResponse:
        split = urlsplit(request.raw_path)
        segs = [unquote(s) for s in split.path.split("/")[1:]]
        query = {k: v[-1] for k, v in parse_qs(split.query).items()}
        m = request.method

        if segs[:1] == ["api"]:
            rest = segs[1:]
            if rest == ["repos", "create"] and m == "POST":
                return self._create_repo(request, body)
            if rest == ["validate-yaml"] and m == "POST":
                return self._validate_yaml(body)
            if rest[:1] == ["whoami-v2"] and m == "GET":
                if "Authorization" not in request.headers or not self._authorized(request):
                    raise HubError(401, "Invalid credentials in Authorization header")
                return self._json({"type": "user", "name": "tester", "fullname": "Tester", "orgs": [],
                                   "auth": {"type": "access_token", "accessToken": {"role": "write"}}})
            if len(rest) >= 3 and rest[0] in TYPES:
                repo_type, repo_id, tail = TYPES[rest[0]], f"{rest[1]}/{rest[2]}", rest[3:]
                return self._repo_api(request, body, m, repo_type, repo_id, tail, query)
        if segs[:2] == ["lfs", "objects"] and len(segs) == 3 and m == "PUT":
            return self._lfs_put(segs[2], body)
        if segs[:2] == ["lfs", "verify"] and len(segs) == 3 and m == "POST":
            return self._lfs_verify(segs[2], body)

        # /{prefix}{org}/{name}(.git/info/lfs/objects/batch | /resolve/{rev}/{path})
        repo_type = "model"
        if segs and segs[0] in ("datasets", "spaces"):
            repo_type, segs = TYPES[segs[0]], segs[1:]
        if len(segs) >= 2 and segs[1].endswith(".git") and segs[2:] == ["info", "lfs", "objects", "batch"] \
                and m == "POST":
            return self._lfs_batch(request, body, repo_type, f"{segs[0]}/{segs[1][:-4]}")
        if len(segs) >= 5 and segs[2] == "resolve" and m in ("GET", "HEAD"):
            return self._resolve(request, repo_type, f"{segs[0]}/{segs[1]}", segs[3], "/".join(segs[4:]))
        raise HubError(404, f"hub_server: no route for {m} {split.path}")

    # -- repos ------------------------------------------------------------------------------------
    def _create_repo(self, request: web.Request, body: bytes) -> web.Response:
        self._require_write(request)
        payload = json.loads(body or b"{}")
        org = payload.get("organization") or "tester"
        repo_id = f"{org}/{payload['name']}"
        repo_type = payload.get("type") or "model"
        private = bool(payload.get("private")) or payload.get("visibility") == "private"
        with self._lock:
            existing = self.repos.get((repo_type, repo_id))
            if existing:
                return self._json({"error": "You already created this repo", "url": self._repo_url(existing)},
                                  status=409)
            repo = Repo(type=repo_type, repo_id=repo_id, private=private, created=self._now())
            init = self._new_commit(repo, None, {".gitattributes": self._entry_for(GITATTRIBUTES, ".gitattributes",
                                                                                  lfs=False)},
                                    "initial commit")
            repo.branches["main"] = init.oid
            self.repos[(repo_type, repo_id)] = repo
        return self._json({"url": self._repo_url(repo), "name": repo_id, "id": repo_id})

    @staticmethod
    def _validate_yaml(body: bytes) -> web.Response:
        import yaml

        content = json.loads(body).get("content", "")
        m = re.match(r"^---\s*\n(.*?)\n---\s*\n", content, re.S)
        if m:
            try:
                meta = yaml.safe_load(m.group(1))
            except yaml.YAMLError as e:
                return HubServer._json({"errors": [{"message": f"invalid YAML: {e}"}], "warnings": []}, status=400)
            if meta is not None and not isinstance(meta, dict):
                return HubServer._json({"errors": [{"message": "metadata must be a mapping"}], "warnings": []},
                                       status=400)
        return HubServer._json({"errors": [], "warnings": []})

    def _repo_api(self, request, body, m, repo_type, repo_id, tail, query) -> web.Response:
        if not tail and m == "GET":
            repo = self._repo(request, repo_type, repo_id)
            return self._repo_info(repo, self._commit(repo, "main"))
        if tail[:1] == ["revision"] and len(tail) >= 2 and m == "GET":
            repo = self._repo(request, repo_type, repo_id)
            return self._repo_info(repo, self._commit(repo, "/".join(tail[1:])))
        if tail == ["refs"] and m == "GET":
            repo = self._repo(request, repo_type, repo_id)
            ref = lambda kind, name, oid: {"name": name, "ref": f"refs/{kind}/{name}", "targetCommit": oid}  # noqa
            return self._json({"branches": [ref("heads", n, o) for n, o in sorted(repo.branches.items())],
                               "tags": [ref("tags", n, o) for n, o in sorted(repo.tags.items())],
                               "converts": [], "pullRequests": []})
        if tail[:1] == ["tree"] and len(tail) >= 2 and m == "GET":
            repo = self._repo(request, repo_type, repo_id)
            commit = self._commit(repo, tail[1])
            return self._tree(commit, "/".join(tail[2:]).strip("/"), query.get("recursive") in ("1", "true", "True"))
        if tail[:1] == ["paths-info"] and len(tail) >= 2 and m == "POST":
            repo = self._repo(request, repo_type, repo_id)
            commit = self._commit(repo, "/".join(tail[1:]))
            form = parse_qs(body.decode())
            paths = form.get("paths", [])
            if not paths and body[:1] == b"{":
                paths = json.loads(body).get("paths", [])
            return self._paths_info(commit, [p.strip("/") for p in paths])
        if tail[:1] == ["commits"] and len(tail) >= 2 and m == "GET":
            repo = self._repo(request, repo_type, repo_id)
            c, out = self._commit(repo, "/".join(tail[1:])), []
            while c is not None:
                out.append({"id": c.oid, "title": c.title, "message": c.description, "date": c.date,
                            "authors": [{"user": "tester"}]})
                c = repo.commits.get(c.parent) if c.parent else None
            return self._json(out)
        if tail[:1] == ["preupload"] and len(tail) >= 2 and m == "POST":
            self._require_write(request)
            repo = self._repo(request, repo_type, repo_id)
            return self._preupload(repo, "/".join(tail[1:]), json.loads(body))
        if tail[:1] == ["commit"] and len(tail) >= 2 and m == "POST":
            self._require_write(request)
            repo = self._repo(request, repo_type, repo_id)
            return self._do_commit(repo, "/".join(tail[1:]), body)
        if tail[:1] == ["tag"] and len(tail) >= 2 and m == "POST":
            self._require_write(request)
            repo = self._repo(request, repo_type, repo_id)
            payload = json.loads(body)
            with self._lock:
                commit = self._commit(repo, "/".join(tail[1:]))
                tag = payload["tag"]
                if tag in repo.tags:
                    raise HubError(409, f"Tag {tag} already exists")
                repo.tags[tag] = commit.oid
            return self._json({})
        if tail[:1] == ["tag"] and len(tail) >= 2 and m == "DELETE":
            self._require_write(request)
            repo = self._repo(request, repo_type, repo_id)
            if repo.tags.pop("/".join(tail[1:]), None) is None:
                raise HubError(404, "Tag not found", "RevisionNotFound")
            return self._json({})
        raise HubError(404, f"hub_server: no route for {m} /api/{repo_type}s/{repo_id}/{'/'.join(tail)}")

    def _repo_info(self, repo: Repo, commit: Commit) -> web.Response:
        card_data = None
        readme = commit.files.get("README.md")
        if readme is not None:
            import yaml

            m = re.match(r"^---\s*\n(.*?)\n---\s*\n", self._blob(readme.sha256).read_text(encoding="utf-8"), re.S)
            card_data = yaml.safe_load(m.group(1)) if m else None
        siblings = [{"rfilename": p, "size": e.size, "blobId": e.git_oid,
                     **({"lfs": {"sha256": e.sha256, "size": e.size,
                                 "pointerSize": len(lfs_pointer(e.sha256, e.size))}} if e.lfs else {})}
                    for p, e in sorted(commit.files.items())]
        return self._json({
            "_id": hashlib.sha1(repo.repo_id.encode()).hexdigest()[:24], "id": repo.repo_id,
            "author": repo.repo_id.split("/")[0], "sha": commit.oid, "lastModified": commit.date,
            "createdAt": repo.created, "private": repo.private, "gated": False, "disabled": False,
            "downloads": 0, "likes": 0, "tags": [], "cardData": card_data, "siblings": siblings,
            "usedStorage": sum(e.size for e in commit.files.values()),
        })

    def _tree(self, commit: Commit, folder: str, recursive: bool) -> web.Response:
        prefix = f"{folder}/" if folder else ""
        if folder and not any(p.startswith(prefix) for p in commit.files):
            raise HubError(404, f"{folder} does not exist on this revision", "EntryNotFound")
        out, dirs = [], set()
        for path, e in sorted(commit.files.items()):
            if not path.startswith(prefix):
                continue
            rel = path[len(prefix):]
            parts = rel.split("/")
            for i in range(1, len(parts)):   # every folder on the way (only the first level unless recursive)
                if not recursive and i > 1:
                    break
                d = prefix + "/".join(parts[:i])
                if d not in dirs:
                    dirs.add(d)
                    out.append({"type": "directory", "oid": hashlib.sha1(d.encode()).hexdigest(), "size": 0,
                                "path": d})
            if recursive or len(parts) == 1:
                out.append(e.tree_json(path))
        return self._json(out)

    def _paths_info(self, commit: Commit, paths: list[str]) -> web.Response:
        out = []
        for p in paths:
            if p in commit.files:
                out.append(commit.files[p].tree_json(p))
            elif p == "" or any(f.startswith(p + "/") for f in commit.files):
                out.append({"type": "directory", "oid": hashlib.sha1(p.encode()).hexdigest(), "size": 0, "path": p})
        return self._json(out)

    # -- upload -----------------------------------------------------------------------------------
    def _preupload(self, repo: Repo, rev: str, payload: dict[str, Any]) -> web.Response:
        commit = repo.resolve(rev)
        files = []
        for f in payload.get("files", []):
            sample = base64.b64decode(f.get("sample", ""))
            lfs = self._wants_lfs(f["path"], int(f["size"]), sample)
            remote = commit.files.get(f["path"]) if commit else None
            oid = (remote.sha256 if remote.lfs else remote.git_oid) if remote else None
            files.append({"path": f["path"], "uploadMode": "lfs" if lfs else "regular", "shouldIgnore": False,
                          "oid": oid})
        return self._json({"files": files, "commitOid": commit.oid if commit else None})

    def _lfs_batch(self, request: web.Request, body: bytes, repo_type: str, repo_id: str) -> web.Response:
        self._require_write(request)
        self._repo(request, repo_type, repo_id)
        payload = json.loads(body)
        if payload.get("operation") != "upload":
            raise HubError(400, "hub_server supports only LFS uploads")
        objects = []
        for o in payload.get("objects", []):
            oid, size = o["oid"], int(o["size"])
            if not re.fullmatch(r"[0-9a-f]{64}", oid):
                objects.append({"oid": oid, "size": size, "error": {"code": 422, "message": "invalid oid"}})
            elif self._blob(oid).exists():
                objects.append({"oid": oid, "size": size})           # already there: nothing to upload
            else:
                objects.append({"oid": oid, "size": size, "authenticated": True, "actions": {
                    "upload": {"href": f"{self.url}/lfs/objects/{oid}", "header": {}},
                    "verify": {"href": f"{self.url}/lfs/verify/{oid}", "header": {}},
                }})
        return self._json({"transfer": "basic", "objects": objects, "hash_algo": "sha256"},
                          headers={"Content-Type": "application/vnd.git-lfs+json"})

    def _lfs_put(self, oid: str, body: bytes) -> web.Response:
        if hashlib.sha256(body).hexdigest() != oid:
            raise HubError(400, f"LFS upload for {oid}: content does not match its sha256")
        self._store_blob(body)
        return web.Response(status=200)

    def _lfs_verify(self, oid: str, body: bytes) -> web.Response:
        info = json.loads(body or b"{}")
        blob = self._blob(oid)
        if not blob.exists() or ("size" in info and blob.stat().st_size != int(info["size"])):
            raise HubError(404, f"LFS object {oid} was not uploaded")
        return self._json({})

    def _do_commit(self, repo: Repo, rev: str, body: bytes) -> web.Response:
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        if not lines or lines[0].get("key") != "header":
            raise HubError(400, "commit payload must start with a header line")
        header = lines[0]["value"]
        with self._lock:
            if rev not in repo.branches:
                raise HubError(404 if repo.resolve(rev) is None else 400,
                               f"Invalid rev id: {rev} (commits go to a branch)",
                               "RevisionNotFound" if repo.resolve(rev) is None else None)
            head = repo.commits[repo.branches[rev]]
            parent = header.get("parentCommit")
            if parent and not head.oid.startswith(parent):
                raise HubError(412, f"A commit has happened since {parent}: the branch is at {head.oid}")
            files = dict(head.files)
            for item in lines[1:]:
                key, v = item["key"], item["value"]
                if key == "file":
                    data = base64.b64decode(v["content"]) if v.get("encoding") == "base64" else v["content"].encode()
                    files[v["path"]] = self._entry_for(data, v["path"], lfs=False)
                elif key == "lfsFile":
                    blob = self._blob(v["oid"])
                    if not blob.exists():
                        raise HubError(400, f"LFS object {v['oid']} for {v['path']} was never uploaded")
                    size = blob.stat().st_size
                    if "size" in v and int(v["size"]) != size:
                        raise HubError(400, f"LFS object {v['oid']} has size {size}, not {v['size']}")
                    files[v["path"]] = Entry(sha256=v["oid"], size=size, lfs=True,
                                             git_oid=git_blob_oid(lfs_pointer(v["oid"], size)))
                elif key == "deletedFile":
                    if files.pop(v["path"], None) is None:
                        raise HubError(404, f"A file with this name doesn't exist: {v['path']}", "EntryNotFound")
                elif key == "deletedFolder":
                    prefix = v["path"].rstrip("/") + "/"
                    gone = [p for p in files if p.startswith(prefix)]
                    if not gone:
                        raise HubError(404, f"A folder with this name doesn't exist: {v['path']}", "EntryNotFound")
                    for p in gone:
                        del files[p]
                else:
                    raise HubError(400, f"unknown commit operation {key!r}")
            commit = self._new_commit(repo, head.oid, files, header.get("summary", ""), header.get("description", ""))
            repo.branches[rev] = commit.oid
        return self._json({"success": True, "commitOid": commit.oid, "pullRequestUrl": None,
                           "commitUrl": f"{self._repo_url(repo)}/commit/{commit.oid}"})

    # -- download ---------------------------------------------------------------------------------
    def _resolve(self, request: web.Request, repo_type: str, repo_id: str, rev: str, path: str) -> web.Response:
        repo = self._repo(request, repo_type, repo_id)
        commit = self._commit(repo, rev)
        e = commit.files.get(path)
        if e is None:
            raise HubError(404, f"Entry not found: {path}", "EntryNotFound")
        etag = f'"{e.sha256 if e.lfs else e.git_oid}"'
        headers = {"X-Repo-Commit": commit.oid, "ETag": etag, "Accept-Ranges": "bytes",
                   "Last-Modified": formatdate(usegmt=True), "Content-Type": "application/octet-stream"}
        if e.lfs:
            headers["X-Linked-Etag"] = etag
            headers["X-Linked-Size"] = str(e.size)
        start, end, status = 0, e.size - 1, 200
        rng = request.headers.get("Range")
        if rng:
            mm = re.fullmatch(r"bytes=(\d*)-(\d*)", rng.strip())
            if not mm or (mm.group(1) == "" and mm.group(2) == ""):
                raise HubError(416, f"bad Range {rng!r}")
            if mm.group(1) == "":
                start = max(0, e.size - int(mm.group(2)))
            else:
                start = int(mm.group(1))
                end = min(end, int(mm.group(2))) if mm.group(2) else end
            if start >= e.size:
                return web.Response(status=416, headers={"Content-Range": f"bytes */{e.size}"})
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end}/{e.size}"
        length = end - start + 1
        if request.method == "HEAD":
            headers["Content-Length"] = str(length)
            return web.Response(status=status, headers=headers)
        with open(self._blob(e.sha256), "rb") as f:
            f.seek(start)
            data = f.read(length)
        return web.Response(status=status, body=data, headers=headers)

    # -- for tests --------------------------------------------------------------------------------
    def files_at(self, repo_id: str, rev: str = "main", repo_type: str = "dataset") -> dict[str, bytes]:
        repo = self.repos[(repo_type, repo_id)]
        commit = repo.resolve(rev)
        return {p: self._blob(e.sha256).read_bytes() for p, e in commit.files.items()}


def main() -> None:  # pragma: no cover - manual use
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8765)
    ap.add_argument("--token", help="Require this token for writes and private reads.")
    ap.add_argument("--root", help="Storage directory (default: a temp dir, removed at exit).")
    a = ap.parse_args()
    hub = HubServer(a.root, token=a.token, host=a.host, port=a.port, log_path=None, record_bodies=False)
    hub.start()
    print(f"Hub-protocol server on {hub.url}  (export HF_ENDPOINT={hub.url} HF_HUB_DISABLE_XET=1)", flush=True)
    last = 0
    try:
        while True:
            time.sleep(0.5)
            for line in hub.log[last:]:
                print(line, flush=True)
            last = len(hub.log)
    except KeyboardInterrupt:
        hub.stop()


if __name__ == "__main__":  # pragma: no cover
    main()
