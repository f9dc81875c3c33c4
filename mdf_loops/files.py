"""Writing result files so that a failed or interrupted write loses nothing.

Data goes to a temporary file in the target folder, which is then renamed over
the target: the target holds either its earlier content or the complete new
content, never a part.
"""

from __future__ import annotations

import os
import tempfile
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
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=folder)
    except OSError as exc:
        raise MdfLoopsError(f"{target}: cannot write in '{folder}' ({exc.strerror})") from None
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(payload)
            stream.flush()
            os.fsync(stream.fileno())
        if target.exists():
            os.chmod(temporary, target.stat().st_mode & 0o777)
        else:
            os.chmod(temporary, 0o666 & ~_umask())
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


def refuse_overwriting(output: str | os.PathLike, *inputs: str | os.PathLike) -> None:
    """Raise :class:`MdfLoopsError` when ``output`` is one of the ``inputs`` files."""
    out = Path(output)
    for source in inputs:
        source = Path(source)
        same = out.resolve() == source.resolve()
        if not same and out.exists() and source.exists():
            same = os.path.samefile(out, source)
        if same:
            raise MdfLoopsError(f"{out}: refusing to overwrite the input file; choose another output")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
