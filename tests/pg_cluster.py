"""A throwaway PostgreSQL cluster for the scale-out tests: initdb into a temporary directory,
``pg_ctl start`` on a free loopback port, trust authentication, removed at the end.

initdb refuses to run as root, so under root (CI) the server runs as the ``postgres`` user that
Debian's package creates. The tests can stop and start the server to simulate an outage.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def server_binaries() -> Path | None:
    """The newest ``/usr/lib/postgresql/*/bin`` holding initdb and pg_ctl (or PG_BIN)."""
    versions = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2] or 0)
    )
    candidates = [os.environ.get("PG_BIN", ""), *reversed(versions)]
    for c in candidates:
        if c and (Path(c) / "initdb").exists() and (Path(c) / "pg_ctl").exists():
            return Path(c)
    if shutil.which("initdb") and shutil.which("pg_ctl"):
        return Path(shutil.which("initdb")).parent  # type: ignore[arg-type]
    return None


#: starts of a new cluster, each on a port found free just before, before giving up
BIND_TRIES = 5


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """A running cluster; :meth:`database` makes a fresh database per test."""

    def __init__(self, bin_dir: Path, root: Path, user: str | None) -> None:
        self.bin = bin_dir
        self.data = root / "data"
        self.log = root / "server.log"
        self.user = user  # run the server as this user (we are root), else as ourselves
        self.port = _free_port()
        self.started_once = False  # a restart after an outage keeps the clients' port

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        cmd = [str(self.bin / args[0]), *args[1:]]
        if self.user is not None:
            cmd = ["runuser", "-u", self.user, "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, check=check, timeout=120)

    def init(self) -> None:
        # --no-sync: a throwaway cluster need not wait for its files to reach the disk
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
        )

    def start(self) -> None:
        """Start the server on :attr:`port`. The first start moves to another free port when
        that one was taken meanwhile: ``_free_port`` only finds a port free, and another
        pytest-xdist worker's cluster (or any other program) can bind it first. A restart keeps
        the port its clients know.

        Raises:
            RuntimeError: ``pg_ctl start`` failed (its output and the server's log).
        """
        opts = "-c listen_addresses=127.0.0.1 -k {} -c fsync=off -p {}"
        for _ in range(BIND_TRIES):
            out = self._run(
                "pg_ctl",
                "-D",
                str(self.data),
                "-l",
                str(self.log),
                "-o",
                opts.format(self.data, self.port),
                "-w",
                "start",
                check=False,
            )
            if out.returncode == 0:
                self.started_once = True
                return
            log = self.log.read_text()
            if self.started_once or "could not bind" not in log:
                break
            self.port = _free_port()
        raise RuntimeError(f"pg_ctl start failed: {out.stderr}\n{log}")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``fast``: clients are disconnected, as in an outage; ``immediate``:
        no shutdown checkpoint, for throwing the cluster away)."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def database(self) -> str:
        """A new, empty database; returns its URL."""
        import psycopg

        name = "wb_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)


@contextmanager
def throwaway_cluster() -> Iterator[Cluster | str]:
    """A started cluster, or a string saying why there is none (server binaries absent)."""
    bin_dir = server_binaries()
    if bin_dir is None:
        yield "no PostgreSQL server binaries (initdb, pg_ctl) under /usr/lib/postgresql/*/bin"
        return
    user = None
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            yield "running as root and there is no 'postgres' user to run the server as"
            return
        user = "postgres"
    root = Path(tempfile.mkdtemp(prefix="wb-pg-"))
    if user is not None:
        shutil.chown(root, user)
    cluster = Cluster(bin_dir, root, user)
    try:
        cluster.init()
        cluster.start()
        yield cluster
    finally:
        cluster.stop("immediate")  # thrown away: no shutdown checkpoint to wait for
        # removing the data directory's thousands of files takes seconds: in the background
        subprocess.Popen(
            ["rm", "-rf", "--", str(root)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
