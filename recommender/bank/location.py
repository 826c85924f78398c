"""Where a bank lives: a local folder (a plain path or `file://...`) or an fsspec URL (`memory://`, `s3://`, ...).

A plain path stays a `Path` everywhere, exactly as before; `file://` URLs become one at the boundary. Only a URL of
another protocol goes through fsspec, imported when first needed (an optional dependency: `schedrec[cluster]`), so
a bank that outgrew git can live in an object store and a transfer still reads only the files it needs.
"""
from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator
from urllib.parse import unquote, urlparse

from ..core.errors import BankError
from ..core.fileio import replacing
from .store import META_FILE, RECORD_FILE, WORKLOAD_FILE, is_url

BANK_FILES = (META_FILE, WORKLOAD_FILE + ".gz", RECORD_FILE + ".gz", WORKLOAD_FILE, RECORD_FILE)


def bank_location(text: str | os.PathLike) -> str | Path:
    """The CLI's `--bank PATH_OR_URL`: a Path for a plain path or a `file://` URL, the URL itself otherwise."""
    if isinstance(text, Path):
        return text
    if text.startswith("file://"):
        parsed = urlparse(text)
        if parsed.netloc not in ("", "localhost"):
            raise BankError(f"--bank {text}: a file:// URL names a local path (file:///abs/path)")
        return Path(unquote(parsed.path))
    return text if is_url(text) else Path(text)


def local_bank(bank: str | os.PathLike, what: str) -> Path:
    """`bank` as a local folder, for the commands that write a bank or read all of it (`what` names them)."""
    where = bank_location(bank)
    if isinstance(where, Path):
        return where
    raise BankError(f"{what} needs a local bank folder, not {where}: work in a local copy (e.g. `fsspec`'s "
                    f"get/put or your store's sync tool); transfer, replay and compare read a bank at a URL")


class BankFiles:
    """A bank's files by path relative to its root (`<model folder>/<file>`); local through the OS."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def __str__(self) -> str:
        return str(self.root)

    def model_stamps(self) -> dict[str, list]:
        """Folder name -> what changes when the folder's bank files change (the folder's mtime, and each bank
        file's size and mtime), for every folder holding a meta.json."""
        if not self.root.is_dir():
            raise BankError(f"no bank at {self.root}")
        out = {}
        with os.scandir(self.root) as entries:
            for e in entries:
                if not e.is_dir() or e.name.startswith("."):
                    continue
                stamp: list = [e.stat().st_mtime_ns]
                for name in BANK_FILES:
                    try:
                        st = os.stat(os.path.join(e.path, name))
                    except FileNotFoundError:
                        continue
                    stamp.append([name, st.st_size, st.st_mtime_ns])
                if any(s[0] == META_FILE for s in stamp[1:]):
                    out[e.name] = stamp
        return dict(sorted(out.items()))

    def open(self, rel: str) -> IO[bytes]:
        try:
            return open(self.root / rel, "rb")
        except FileNotFoundError as err:
            raise BankError(f"missing {self.root / rel}") from err
        except OSError as err:
            raise BankError(f"cannot read {self.root / rel}: {err.strerror}") from err

    def read(self, rel: str) -> bytes:
        with self.open(rel) as f:
            return f.read()

    def exists(self, rel: str) -> bool:
        return (self.root / rel).exists()

    def write(self, rel: str, data: bytes) -> None:
        """Atomic: readers see the old file or the new one."""
        with replacing(str(self.root / rel)) as tmp, open(tmp, "wb") as f:
            f.write(data)

    def remove(self, rel: str) -> None:
        try:
            (self.root / rel).unlink()
        except FileNotFoundError:
            pass

    def local_folder(self, folder: str) -> Path:
        """A model folder as a local Path (to read with `store`'s readers)."""
        return self.root / folder

    @contextmanager
    def locked(self, rel_dir: str) -> Iterator[None]:
        """Wait for, then hold, the lock of `rel_dir` (a blocking lock: what it guards takes seconds); a bank
        this process cannot write needs none."""
        try:
            (self.root / rel_dir).mkdir(parents=True, exist_ok=True)
            f = open(self.root / rel_dir / ".lock", "a+")
        except OSError:
            yield
            return
        with f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)


class RemoteBankFiles(BankFiles):
    """A bank at an fsspec URL. A put is whole-object on object stores, so a reader never sees half a file."""

    def __init__(self, url: str) -> None:
        try:
            import fsspec
        except ImportError as err:
            raise BankError(f"--bank {url} needs fsspec: pip install 'schedrec[cluster]'") from err
        try:
            self.fs, self.path = fsspec.core.url_to_fs(url)
        except (ValueError, ImportError) as err:
            raise BankError(f"--bank {url}: {str(err).splitlines()[0]}") from err
        self.url = url.rstrip("/")
        self.path = self.path.rstrip("/")
        self._scratch: Path | None = None

    def __str__(self) -> str:
        return self.url

    def _full(self, rel: str) -> str:
        return f"{self.path}/{rel}"

    def model_stamps(self) -> dict[str, list]:
        """One listing of the whole bank (a paginated LIST on an object store, not a request per model)."""
        try:
            found = self.fs.find(self.path, maxdepth=2, detail=True)
        except (OSError, ValueError) as err:
            raise BankError(f"cannot list the bank at {self.url}: {err}") from err
        if not found:
            raise BankError(f"no bank at {self.url}")
        by_folder: dict[str, list] = {}
        for full, info in found.items():
            rel = full[len(self.path):].strip("/").split("/")
            if len(rel) != 2 or rel[0].startswith(".") or rel[1] not in BANK_FILES:
                continue
            when = info.get("mtime") or info.get("LastModified") or info.get("created") or info.get("ETag") or ""
            by_folder.setdefault(rel[0], []).append([rel[1], int(info.get("size") or 0), str(when)])
        return {name: [0] + sorted(files) for name, files in sorted(by_folder.items())
                if any(f[0] == META_FILE for f in files)}

    def open(self, rel: str) -> IO[bytes]:
        try:
            return self.fs.open(self._full(rel), "rb")
        except FileNotFoundError as err:
            raise BankError(f"missing {self.url}/{rel}") from err
        except OSError as err:
            raise BankError(f"cannot read {self.url}/{rel}: {err}") from err

    def exists(self, rel: str) -> bool:
        return bool(self.fs.exists(self._full(rel)))

    def write(self, rel: str, data: bytes) -> None:
        try:
            self.fs.pipe_file(self._full(rel), data)
        except OSError as err:
            raise BankError(f"cannot write {self.url}/{rel}: {err}") from err

    def remove(self, rel: str) -> None:
        try:
            self.fs.rm_file(self._full(rel))
        except FileNotFoundError:
            pass

    @contextmanager
    def locked(self, rel_dir: str) -> Iterator[None]:
        """No lock on an object store: two writers of one index there are a documented limit (docs/scale.md)."""
        yield

    def local_folder(self, folder: str) -> Path:
        """The model folder's bank files copied into a scratch folder of this process (one GET per file)."""
        import atexit
        import shutil
        import tempfile
        if self._scratch is None:
            self._scratch = Path(tempfile.mkdtemp(prefix="schedrec-bank-"))
            atexit.register(shutil.rmtree, self._scratch, True)
        local = self._scratch / folder
        if not local.is_dir():
            local.mkdir(parents=True)
            for name in BANK_FILES:
                if self.exists(f"{folder}/{name}"):
                    (local / name).write_bytes(self.read(f"{folder}/{name}"))
        return local


def bank_files(bank: str | os.PathLike) -> BankFiles:
    """The files of the bank at `bank` (a Path, a plain path or a URL)."""
    where = bank_location(bank)
    return BankFiles(where) if isinstance(where, Path) else RemoteBankFiles(where)
