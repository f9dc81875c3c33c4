"""Files crossing the program's boundary: every byte read from outside, and result files.

:func:`read_file` is the one reader of files a user or a model names (model
files, ONNX files and their external data, input arrays): it refuses what is not
a regular file (a FIFO would block for ever, a link to ``/dev/zero`` would be
read until memory runs out) before reading anything, and a file larger than
``8 * max_elements`` bytes (the largest value a run may hold, as float64).
:func:`read_npy` and :func:`read_npz` check the shape an array file declares
against ``max_elements`` before the array is made.

Result files are written so that a failed, interrupted or killed write leaves
nothing behind. On Linux, where the filesystem allows it, data goes to an
unnamed file in the target's folder (``O_TMPFILE``), which gets a name
(``.NAME.<pid>.<random>.part``, by ``linkat``) only once complete and is then
renamed over the target: a write killed with SIGKILL leaves nothing. Elsewhere
the data goes to the named temporary file from the start. Either way the target
holds its earlier content or the complete new content, never a part. A failed
or interrupted write removes its temporary file; a process killed while the
file has a name cannot, so each write first removes the temporaries of earlier
writes to the same target whose process has ended.
"""

from __future__ import annotations

import io
import math
import os
import stat
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from mdf_loops.errors import MdfLoopsError, ModelError, SizeLimitError
from mdf_loops.ops.common import current_limits, how_to_raise

__all__ = [
    "read_file",
    "check_folder",
    "read_npy",
    "read_npz",
    "write_atomically",
    "refuse_overwriting",
]

_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


def read_file(
    path: str | os.PathLike,
    error: type[MdfLoopsError] = ModelError,
    *,
    start: int = 0,
    length: int | None = None,
) -> bytes:
    """The bytes of the regular file ``path`` (``length`` bytes from ``start``, or to its end).

    The file is opened without blocking and checked before anything is read: what is
    not a regular file, and a read of more than ``8 * max_elements`` bytes, raise
    ``error`` (:class:`SizeLimitError` for the size) naming the file.
    """
    name = os.fspath(path)
    try:
        handle = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise error(f"{name}: no such file") from None
    except OSError as exc:
        raise error(f"{name}: cannot be read ({exc.strerror})") from None
    try:
        info = os.fstat(handle)
        if not stat.S_ISREG(info.st_mode):
            kind = _KINDS.get(stat.S_IFMT(info.st_mode), "not a regular file")
            raise error(f"{name}: is {kind}, not a regular file; give the path of a file")
        wanted = max(info.st_size - start, 0) if length is None else length
        _check_bytes(wanted, name)
        os.lseek(handle, start, os.SEEK_SET)
        chunks, left = [], wanted
        while left:
            chunk = os.read(handle, min(left, 1 << 24))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise error(f"{name}: cannot be read ({exc.strerror})") from None
    finally:
        os.close(handle)


def check_folder(path: str | os.PathLike, error: type[MdfLoopsError] = ModelError) -> None:
    """Check a folder that another library will read (a zarr store) as :func:`read_file`
    checks a file, before anything in it is read: every entry must be a regular file or a
    folder (a link could lead outside it, a FIFO would block for ever, a device would be
    read until memory runs out), and the files together at most ``8 * max_elements`` bytes.
    """
    name = os.fspath(path)
    total = 0
    for folder, folders, files in os.walk(name, onerror=_raise_walk_error(error)):
        for entry in (*folders, *files):
            where = os.path.join(folder, entry)
            try:
                info = os.lstat(where)
            except OSError as exc:
                raise error(f"{where}: cannot be read ({exc.strerror})") from None
            if stat.S_ISLNK(info.st_mode):
                raise error(f"{where}: is a link; {name} may hold only files and folders")
            if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
                kind = _KINDS.get(stat.S_IFMT(info.st_mode), "not a regular file")
                raise error(f"{where}: is {kind}; {name} may hold only files and folders")
            total += info.st_size if stat.S_ISREG(info.st_mode) else 0
    _check_bytes(total, name)


def _raise_walk_error(error: type[MdfLoopsError]):
    def raise_it(exc: OSError) -> None:
        raise error(f"{exc.filename}: cannot be read ({exc.strerror})") from None

    return raise_it


def _check_bytes(count: int, name: str) -> None:
    limit = 8 * current_limits().max_elements
    if count > limit:
        raise SizeLimitError(
            f"{name}: reading it means {count} bytes, over the limit of {limit} bytes "
            f"(8 x max_elements); nothing was read. If the file is meant to be this large, "
            f"{how_to_raise('max_elements')}"
        )


def read_npy(path: str | os.PathLike, error: type[MdfLoopsError] = ModelError) -> np.ndarray:
    """The array of a ``.npy`` file, its declared shape and type checked before it is made."""
    data = read_file(path, error)
    try:
        _check_npy_header(io.BytesIO(data), os.fspath(path))
        return np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise error(f"{os.fspath(path)}: not a readable .npy file ({exc})") from None


def read_npz(
    path: str | os.PathLike, error: type[MdfLoopsError] = ModelError
) -> dict[str, np.ndarray]:
    """The arrays of a ``.npz`` archive by name, each declared shape checked before any is made."""
    name = os.fspath(path)
    data = read_file(path, error)
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            total = 0
            for member in archive.infolist():
                with archive.open(member) as stream:
                    total += _check_npy_header(stream, f"{name}: {member.filename}")
                _check_total(total, name)
        with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
            return {key: arrays[key] for key in arrays.files}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, NotImplementedError) as exc:
        raise error(f"{name}: not a readable .npz file ({' '.join(str(exc).split())})") from None


def _check_npy_header(stream: Any, where: str) -> int:
    """Elements the ``.npy`` header at the start of ``stream`` declares (refused past the limit)."""
    version = np.lib.format.read_magic(stream)
    reader = (
        np.lib.format.read_array_header_1_0
        if version == (1, 0)
        else np.lib.format.read_array_header_2_0
    )
    shape, _, dtype = reader(stream)
    elements = math.prod(shape)
    if dtype.hasobject or dtype.itemsize > 32 or dtype.subdtype is not None:
        raise ValueError(f"element type {dtype} is not a plain number type")
    _check_total(elements, where)
    return elements


def _check_total(elements: int, where: str) -> None:
    limit = current_limits().max_elements
    if elements > limit:
        raise SizeLimitError(
            f"{where}: declares {elements} elements, over the limit of {limit} "
            f"(max_elements); nothing was read. If the inputs are meant to be this large, "
            f"{how_to_raise('max_elements')}"
        )


def write_atomically(path: str | os.PathLike, data: bytes | str) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` by way of a temporary file and a rename."""
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise MdfLoopsError(f"{target}: folder '{folder}' does not exist")
    payload = data.encode("utf-8") if isinstance(data, str) else data
    _remove_stale_temporaries(target)
    temporary = folder / f".{target.name}.{os.getpid()}.{os.urandom(4).hex()}.part"
    try:
        if not _written_unnamed(folder, temporary, target, payload):
            _written_named(temporary, target, payload)
        os.replace(temporary, target)
    except BaseException as exc:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError):
            raise MdfLoopsError(f"{target}: cannot be written ({exc.strerror})") from None
        raise
    return target


def _written_unnamed(folder: Path, temporary: Path, target: Path, payload: bytes) -> bool:
    """Write ``payload`` to an unnamed file in ``folder`` (Linux ``O_TMPFILE``) and link it
    as ``temporary`` once complete; False where the system or filesystem cannot."""
    flag = getattr(os, "O_TMPFILE", None)
    if flag is None:
        return False
    try:
        handle = os.open(folder, flag | os.O_WRONLY, 0o600)
    except OSError:
        return False
    try:
        _fill(handle, target, payload)
        try:
            os.link(f"/proc/self/fd/{handle}", temporary, follow_symlinks=True)
        except OSError:
            return False  # no /proc: written again under a name
    finally:
        os.close(handle)
    return True


def _written_named(temporary: Path, target: Path, payload: bytes) -> None:
    try:
        handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        raise MdfLoopsError(
            f"{target}: cannot write in '{temporary.parent}' ({exc.strerror})"
        ) from None
    try:
        _fill(handle, target, payload)
    finally:
        os.close(handle)


def _fill(handle: int, target: Path, payload: bytes) -> None:
    _write_all(handle, payload)
    os.fsync(handle)
    os.fchmod(handle, target.stat().st_mode & 0o777 if target.exists() else 0o666 & ~_umask())


def _write_all(handle: int, payload: bytes) -> None:
    view = memoryview(payload)
    while view:
        view = view[os.write(handle, view[: 1 << 24]) :]


def _remove_stale_temporaries(target: Path) -> None:
    """Remove ``.NAME.<pid>.*.part`` files of earlier writes to ``target`` whose process
    has ended (a crash before the rename); another writer's live temporaries stay."""
    folder = target.parent if str(target.parent) else Path(".")
    prefix = f".{target.name}."
    try:
        names = [n for n in os.listdir(folder) if n.startswith(prefix) and n.endswith(".part")]
    except OSError:
        return
    for name in names:
        pid = name[len(prefix) :].split(".", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            try:
                os.unlink(folder / name)
            except OSError:
                pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def refuse_overwriting(output: str | os.PathLike, *inputs: str | os.PathLike) -> None:
    """Raise :class:`MdfLoopsError` when ``output`` is one of the ``inputs`` files."""
    out = Path(output)
    for source in inputs:
        source = Path(source)
        same = out.resolve() == source.resolve()
        if not same and out.exists() and source.exists():
            same = os.path.samefile(out, source)
        if same:
            raise MdfLoopsError(
                f"{out}: refusing to overwrite the input file; choose another output"
            )


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
