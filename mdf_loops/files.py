"""Writing result files so that a failed, interrupted or killed write leaves nothing behind.

Data goes to a temporary file ``.NAME.<pid>.<random>.part`` in the target's
folder, which is then renamed over the target: the target holds either its
earlier content or the complete new content, never a part. A failed or
interrupted write removes its temporary file; a process killed while writing
(SIGKILL, a power cut) cannot, so each write first removes the temporaries of
earlier writes to the same target whose process has ended.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from mdf_loops.errors import MdfLoopsError

__all__ = ["write_atomically", "refuse_overwriting"]


def write_atomically(path: str | os.PathLike, data: bytes | str) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` by way of a temporary file and a rename."""
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise MdfLoopsError(f"{target}: folder '{folder}' does not exist")
    payload = data.encode("utf-8") if isinstance(data, str) else data
    _remove_stale_temporaries(target)
    temporary = folder / f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.part"
    try:
        handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        raise MdfLoopsError(f"{target}: cannot write in '{folder}' ({exc.strerror})") from None
    try:
        try:
            _write_all(handle, payload)
            os.fsync(handle)
            os.fchmod(
                handle, target.stat().st_mode & 0o777 if target.exists() else 0o666 & ~_umask()
            )
        finally:
            os.close(handle)
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
