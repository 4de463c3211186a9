"""An annotated workload for the Section-5 experiment: a small file-hosting service on a real SQLite database.

Rogora et al. (HotCloud 2017, Section 4) study SWITCHdrive, an ownCloud file-hosting service
(WebDAV front end, a metadata database, file storage), instrumented method by method, under an
rsync of a source tree; Section 5 slows the database down (0 to 10 ms of network delay) and
checks the annotations derived on a clean run. This module is that system in miniature, real
where it matters for performance:

* :class:`Database`: the file metadata in **SQLite** (a file on disk, WAL journal): users,
  sessions, files and folders with owner, size, etag and permissions. ``delay_s`` is waited
  before every statement: the paper's delay between the database and the rest (slept; below
  :data:`SPIN_BELOW_S`, spun: ``time.sleep`` cannot wait that little);
* :class:`Storage`: file contents as **real files** under a directory;
* :class:`FileHost`: ownCloud-like handling of WebDAV requests (``MKCOL``, ``PUT``, ``GET``,
  ``PROPFIND``, ``DELETE``): a session lookup, a permission check per folder of the path (its
  cost grows with the path's depth), a content checksum on upload and download (cost grows
  with the size), the metadata updates, and for ``PROPFIND`` the XML multistatus of a folder's
  entries, built with a quadratic duplicate check as the ``generateMultiStatus`` of the paper's
  Figure 1b.

:func:`run_workload` runs a seeded request plan (folders created, files uploaded, listed, read
and some deleted, as an rsync and a client's browsing would) against a fresh instance, every
method of the three classes measured by :func:`tracesleuth.instrument.instrument_module` into
an OTLP JSON file (service ``filehost``), and returns its path. The same seed gives the same
requests; timings are the machine's.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["DB_OPERATIONS", "Database", "FileHost", "SERVICE", "Storage", "WorkloadRun", "request_plan",
           "run_workload"]

#: The ``service.name`` of the workload's spans.
SERVICE = "filehost"
#: The operation keys of the database's methods (where a delay is injected).
DB_OPERATIONS = (f"{SERVICE}:Database.query", f"{SERVICE}:Database.execute")
#: The root operation (one per request).
ENDPOINT = f"{SERVICE}:FileHost.handle"


#: Delays shorter than this are waited for by spinning (``time.sleep`` sleeps at least ~60 µs more
#: than asked on Linux, and gives the core away); longer ones are slept.
SPIN_BELOW_S = 200e-6


def _wait(seconds: float) -> None:
    if seconds >= SPIN_BELOW_S:
        time.sleep(seconds)
        return
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        pass


class Database:
    """File metadata in SQLite; ``delay_s`` waited before each statement (the injected database latency)."""

    def __init__(self, path, delay_s: float = 0.0):
        self.delay_s = float(delay_s)
        self.connection = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self.connection.execute("PRAGMA journal_mode=WAL")
        self.connection.execute("PRAGMA synchronous=NORMAL")
        self.connection.executescript("""
            CREATE TABLE IF NOT EXISTS users (name TEXT PRIMARY KEY, quota INTEGER);
            CREATE TABLE IF NOT EXISTS sessions (token TEXT PRIMARY KEY, user TEXT);
            CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, parent TEXT, owner TEXT, is_folder INTEGER,
                                              size INTEGER, etag TEXT, permissions INTEGER);
            CREATE INDEX IF NOT EXISTS files_parent ON files (parent);
        """)

    def query(self, sql, params):
        if self.delay_s:
            _wait(self.delay_s)
        return self.connection.execute(sql, params).fetchall()

    def execute(self, sql, params):
        if self.delay_s:
            _wait(self.delay_s)
        return self.connection.execute(sql, params).rowcount

    def close(self):
        self.connection.close()


class Storage:
    """File contents as files under ``root``."""

    def __init__(self, root):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def local(self, path):
        return str(self.root / path.strip("/"))

    def make_folder(self, local):
        os.makedirs(local, exist_ok=True)

    def write(self, local, data):
        with open(local, "wb") as f:
            f.write(data)
        return len(data)

    def read(self, local):
        with open(local, "rb") as f:
            return f.read()

    def remove(self, local):
        os.remove(local)


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


class FileHost:
    """ownCloud-like WebDAV handling over a :class:`Database` and a :class:`Storage`."""

    def __init__(self, database, storage, user="alice"):
        self.db, self.storage, self.user = database, storage, user
        self.db.execute("INSERT OR IGNORE INTO users VALUES (?, ?)", (user, 10**10))
        self.db.execute("INSERT OR IGNORE INTO sessions VALUES (?, ?)", ("token-" + user, user))
        self.db.execute("INSERT OR IGNORE INTO files VALUES ('/', NULL, ?, 1, 0, 'root', 31)", (user,))

    def handle(self, method, path, body):
        user = self.authenticate("token-" + self.user)
        if method == "MKCOL":
            return self.mkcol(path, user)
        if method == "PUT":
            return self.put(path, body, user)
        if method == "GET":
            return self.get(path)
        if method == "PROPFIND":
            return self.propfind(path)
        if method == "DELETE":
            return self.delete(path)
        raise ValueError(f"unknown method {method}")

    def authenticate(self, token):
        rows = self.db.query("SELECT user FROM sessions WHERE token = ?", (token,))
        return rows[0][0]

    def get_owner(self, path):
        rows = self.db.query("SELECT owner FROM files WHERE path = ?", (path,))
        return rows[0][0] if rows else None

    def check_permissions(self, path):
        """One lookup per folder on the way (share and permission inheritance)."""
        allowed = 31
        folder = path
        while folder != "/":
            folder = _parent(folder)
            rows = self.db.query("SELECT permissions FROM files WHERE path = ?", (folder,))
            if rows:
                allowed &= rows[0][0]
        return allowed

    def mkcol(self, path, user):
        self.check_permissions(path)
        self.storage.make_folder(self.storage.local(path))
        return self.db.execute("INSERT OR REPLACE INTO files VALUES (?, ?, ?, 1, 0, ?, 31)",
                               (path, _parent(path), user, f"e{hash(path) & 0xffff:x}"))

    def checksum(self, data):
        """The content's checksum (ownCloud keeps one per file), SHA-1 in 4 KiB blocks: cost ~ size."""
        digest = hashlib.sha1()
        for i in range(0, len(data), 4096):
            digest.update(data[i:i + 4096])
        return digest.hexdigest()

    def put(self, path, data, user):
        self.check_permissions(path)
        etag = self.checksum(data)
        size = self.storage.write(self.storage.local(path), data)
        return self.db.execute("INSERT OR REPLACE INTO files VALUES (?, ?, ?, 0, ?, ?, 27)",
                               (path, _parent(path), user, size, etag))

    def get(self, path):
        self.check_permissions(path)
        self.get_owner(path)
        data = self.storage.read(self.storage.local(path))
        self.checksum(data)
        return len(data)

    def propfind(self, path):
        self.check_permissions(path)
        entries = self.db.query("SELECT path, owner, is_folder, size, etag, permissions FROM files WHERE parent = ?",
                                (path,))
        return len(self.generate_multistatus(entries))

    def generate_multistatus(self, entries):
        """The XML answer of a PROPFIND, with a naive duplicate check (quadratic, as Figure 1b)."""
        seen = []
        parts = ['<?xml version="1.0"?><d:multistatus xmlns:d="DAV:">']
        for path, owner, folder, size, etag, permissions in entries:
            duplicate = any(e[:12] == etag[:12] and e == etag for e in seen)
            seen.append(etag)
            parts.append(f"<d:response><d:href>{path}</d:href><d:propstat><d:prop><d:owner>{owner}</d:owner>"
                         f"<d:getcontentlength>{size}</d:getcontentlength><d:getetag>{etag}"
                         f"{'-dup' if duplicate else ''}</d:getetag><oc:permissions>{permissions}</oc:permissions>"
                         f"<d:resourcetype>{'<d:collection/>' if folder else ''}</d:resourcetype>"
                         "</d:prop></d:propstat></d:response>")
        parts.append("</d:multistatus>")
        return "".join(parts)

    def delete(self, path):
        self.check_permissions(path)
        self.get_owner(path)
        rows = self.db.query("SELECT path, is_folder FROM files WHERE path = ? OR path LIKE ?", (path, path + "/%"))
        for entry, folder in sorted(rows, key=lambda r: -len(r[0])):
            local = self.storage.local(entry)
            if folder:
                os.rmdir(local)
            else:
                self.storage.remove(local)
        return self.db.execute("DELETE FROM files WHERE path = ? OR path LIKE ?", (path, path + "/%"))


def request_plan(n_requests: int, *, random_state=0) -> list[tuple[str, str, bytes]]:
    """A seeded sequence of ``(method, path, body)`` requests.

    A tree of folders (depth 1 to 7) is created, files of 200 B to 200 KB (log-uniform) uploaded
    into them, then folders listed, files read and uploaded again, and files deleted, mixed; each
    request is valid when it is made (its folder exists, a file read or deleted exists).
    """
    rng = np.random.default_rng(random_state)
    folders = ["/"]
    files: list[str] = []
    plan = []
    n_folders = max(3, n_requests // 12)
    while len(folders) < n_folders + 1:
        parent = folders[int(rng.integers(len(folders)))]
        if parent.count("/") >= 7:
            continue
        path = f"{parent.rstrip('/')}/d{len(folders)}"
        folders.append(path)
        plan.append(("MKCOL", path, b""))
    while len(plan) < n_requests:
        u = rng.random()
        if u < 0.40 or not files:
            folder = folders[int(rng.integers(len(folders)))]
            path = f"{folder.rstrip('/')}/f{len(plan)}.c"
            files.append(path)
            plan.append(("PUT", path, bytes(int(np.exp(rng.uniform(np.log(200), np.log(200_000)))))))
        elif u < 0.65:
            plan.append(("PROPFIND", folders[int(rng.integers(len(folders)))], b""))
        elif u < 0.90:
            plan.append(("GET", files[int(rng.integers(len(files)))], b""))
        else:
            plan.append(("DELETE", files.pop(int(rng.integers(len(files)))), b""))
    return plan[:n_requests]


@dataclass(frozen=True)
class WorkloadRun:
    """One run of :func:`run_workload`.

    Attributes
    ----------
    spans_path : pathlib.Path
        The OTLP JSON file of its spans.
    n_requests : int
    db_delay_s : float
    seconds : float
        Wall time of the requests.
    """

    spans_path: Path
    n_requests: int
    db_delay_s: float
    seconds: float


def run_workload(directory, *, n_requests: int = 1500, db_delay_s: float = 0.0, random_state=0,
                 memory: bool = False, name: str = "run") -> WorkloadRun:
    """Run the seeded request plan against a fresh file host, every method measured.

    Parameters
    ----------
    directory : str or os.PathLike
        Where the run's database, files and spans go (``<directory>/<name>/``; emptied first).
    n_requests : int, default=1500
    db_delay_s : float, default=0.0
        Seconds waited before every database statement (spun below :data:`SPIN_BELOW_S`).
    random_state : int, default=0
        The request plan's seed.
    memory : bool, default=False
        Also measure memory (:mod:`tracemalloc`: slower).
    name : str, default="run"

    Returns
    -------
    WorkloadRun
    """
    import shutil

    from ...instrument import FileRecorder, instrument_module, uninstrument_module

    base = Path(directory) / name
    if base.exists():
        shutil.rmtree(base)
    base.mkdir(parents=True)
    plan = request_plan(n_requests, random_state=random_state)
    recorder = FileRecorder(base / "spans.jsonl", service=SERVICE)
    module = sys.modules[__name__]
    instrument_module(module, recorder=recorder, memory=memory,
                      include=lambda q: q.split(".")[0] in ("Database", "Storage", "FileHost")
                      and q not in ("Database.__init__", "Database.close", "FileHost.__init__", "Storage.__init__",
                                    "Storage.local"))
    database = None
    try:
        database = Database(base / "meta.sqlite", delay_s=db_delay_s)
        host = FileHost(database, Storage(base / "files"))
        t0 = time.perf_counter()
        for method, path, body in plan:
            host.handle(method, path, body)
        seconds = time.perf_counter() - t0
    finally:
        uninstrument_module(module)
        if database is not None:
            database.close()
        recorder.close()
    return WorkloadRun(spans_path=base / "spans.jsonl", n_requests=len(plan), db_delay_s=db_delay_s, seconds=seconds)
