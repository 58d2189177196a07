"""A non-blocking cross-process lock on a file, released by the kernel if the holder dies."""

from __future__ import annotations

import errno
import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def held(path: str, busy: Exception) -> Iterator[None]:
    """Hold an exclusive flock on ``path`` (created 0600) or raise ``busy`` at once."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                raise busy from None
            raise
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
