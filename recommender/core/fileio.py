"""Safe file output: writes go to a temporary file in the same directory, then are renamed into place."""
from __future__ import annotations

import gzip
import io
import json
import os
import tempfile
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterable, Iterator

from .errors import BankError, SchedrecError


@contextmanager
def replacing(path: str) -> Iterator[str]:
    """Yield a temporary path beside `path` to write; on success it is renamed over `path`, on any failure
    or interruption it is removed and `path` is left as it was. OS errors become one-line SchedrecErrors."""
    directory = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
    except OSError as err:
        raise SchedrecError(f"cannot write {path}: {err.strerror}") from err
    os.close(fd)
    try:
        os.chmod(tmp, 0o644)
        yield tmp
        os.replace(tmp, path)
    except OSError as err:
        discard_quietly(tmp)
        raise SchedrecError(f"cannot write {path}: {err.strerror}") from err
    except BaseException:  # interrupted: leave the old file, not a temporary one
        discard_quietly(tmp)
        raise


@contextmanager
def gzip_writer(path: str, text: bool = False) -> Iterator[IO]:
    """Write gzip with no file name or time in its header, so the same content always gives the same
    bytes (a bank repacked without new records leaves git nothing to commit)."""
    with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0) as gz:
        if text:
            with io.TextIOWrapper(gz, encoding="utf-8") as f:
                yield f
        else:
            yield gz


def atomic_write_text(path: str, text: str) -> None:
    """Write `text` to `path` so that readers see the old file or the new one, never a partial one."""
    with replacing(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def discard_quietly(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except OSError:
        pass


def atomic_write_json(path: str, obj: object) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2) + "\n")


def display_path(path: str | os.PathLike) -> str:
    """A path as written into shipped reports: relative to the repository when inside it, else absolute; a
    URL (a bank in an object store) as it is."""
    if "://" in str(path):
        return str(path)
    p = Path(path).resolve()
    root = Path(__file__).resolve().parents[2]
    return str(p.relative_to(root)) if p.is_relative_to(root) else str(p)


def read_json(path: str | os.PathLike, hint: str = "", error: type[SchedrecError] = SchedrecError) -> object:
    """A JSON file's value; an `error` naming the file (and ending with `hint`, if given) when it cannot be
    read or parsed."""
    tail = f"; {hint}" if hint else ""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (ValueError, UnicodeDecodeError) as err:
        raise error(f"corrupt {path}: {err}{tail}") from err
    except OSError as err:
        raise error(f"cannot read {path}: {err.strerror or err}{tail}") from err


def open_text(path: str | Path) -> IO[str]:
    """A text file, read through gzip where its name ends in .gz."""
    path = Path(path)
    return gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else open(path, encoding="utf-8")


def read_lines(path: str | Path, what: str) -> list[str]:
    """The lines of a (possibly gzipped) text file; clear errors on a missing or damaged one."""
    try:
        with open_text(path) as f:
            return f.read().splitlines()
    except FileNotFoundError as err:
        raise BankError(f"missing {what}: {path}") from err
    except (OSError, EOFError, UnicodeDecodeError, zlib.error) as err:
        raise BankError(f"corrupt or truncated {what} {path}: {err}") from err


def write_json_lines(path: str | Path, values: Iterable[object]) -> None:
    """Write one compact JSON value a line, gzipped with stable bytes (`gzip_writer`), atomically."""
    with replacing(str(path)) as tmp, gzip_writer(tmp, text=True) as f:
        for value in values:
            f.write(json.dumps(value, separators=(",", ":")) + "\n")


def read_json_lines(path: str | Path, what: str = "bank file") -> list:
    """The JSON values of a (possibly gzipped) one-value-a-line file; clear errors on damage."""
    lines = read_lines(path, what)
    out = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except (json.JSONDecodeError, RecursionError) as err:
            raise BankError(f"corrupt {what} {path}, line {n}: {getattr(err, 'msg', 'nested too deeply')}") from err
    return out
