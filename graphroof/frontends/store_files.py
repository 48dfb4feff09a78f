"""The trace store's files (:mod:`.trace_store`), handled so that nobody but their owner can plant or alter one.

Layout under the store root (``cache_dir()``)::

    store.key                  32 random bytes, mode 0600, made on first use: this user's key
    usage                      a running estimate of the store's size (pruning scans only when it says so)
    ab/ab12...(40 hex)/PART.json.z    one entry's parts; the folder is an HMAC of the request key
    .../.tmp-XXXX              a write in progress (or left by a killed one; removed after an hour)

* Every level is opened with ``O_NOFOLLOW`` below the root (the root itself may be a link the user made) and
  must be a folder owned by this user and not writable by group or others, as ssh treats ``~/.ssh``: anything
  else turns the store off with one :class:`~graphroof.errors.GraphroofWarning` (:class:`Refused`).  Folders
  the store creates are 0700, whatever the umask.
* An entry file is ``MAGIC + HMAC-SHA256(key, MAGIC, request key, part, payload) + payload``; a file whose
  MAC does not match (planted, altered, copied from another entry or another user) is a miss and is removed.
* The folder name is an HMAC of the request key under this user's key, so nobody else can compute it.
* Walks (``cache clear``, pruning: :mod:`.store_walk`) never follow a link and touch only names of the
  store's own shape.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import re
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

__all__ = ["Refused", "MAGIC", "KEY_FILE", "USAGE_FILE", "PART", "open_root", "entry_dir", "read_part", "write_part",
           "remove_part"]

MAGIC = b"graphroof-store 2\n"
KEY_FILE = "store.key"
USAGE_FILE = "usage"
#: a part's name: ``graph``, ``manifest``, ``prefill-1-1024``, ``decode-2-1024-encoder-None``
PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,119}")
_L1 = re.compile(r"[0-9a-f]{2}")
_L2 = re.compile(r"[0-9a-f]{40}")
_CURRENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,119}\.json\.z")
_OLD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,119}\.pkl\.z")   # format 1 (pickles): never read, removable
_TMP = re.compile(r"\.tmp-[A-Za-z0-9_]{1,64}")
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


class Refused(Exception):
    """The store's folder (or key) is not this user's own and private: the message says which and why."""


def _check(fd: int, what: str) -> None:
    st = os.fstat(fd)
    uid = os.geteuid()
    if st.st_uid != uid:
        raise Refused(f"{what} is owned by uid {st.st_uid}, not by you (uid {uid})")
    if st.st_mode & 0o022:
        raise Refused(f"{what} is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})")


def _open_level(parent: int, name: str, create: bool, what: str) -> int | None:
    """The fd of folder *name* in *parent* (created 0700 when *create*), checked; None when it is absent."""
    made = False
    if create:
        try:
            os.mkdir(name, 0o700, dir_fd=parent)
            made = True
        except FileExistsError:
            pass
    try:
        fd = os.open(name, _DIR | _NOFOLLOW, dir_fd=parent)
    except FileNotFoundError:
        return None
    except OSError as e:  # ELOOP / ENOTDIR: a link or a file where a folder belongs
        raise Refused(f"{what} is a symbolic link or not a folder ({e.strerror})") from None
    try:
        if made:
            os.fchmod(fd, 0o700)
        _check(fd, what)
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextlib.contextmanager
def open_root(root: Path, create: bool, keyless: bool = False) -> Iterator[tuple[int, bytes] | None]:
    """``(root fd, key)`` of the store at *root*, or None when it does not exist yet (and not *create*);
    :class:`Refused` when it is not this user's private folder.  *keyless*: a folder without a key is opened
    too (key ``b""``: to count or clear files of the store's shape, such as an older format's)."""
    made = False
    if create:
        root.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.mkdir(root, 0o700)
            made = True
        except FileExistsError:
            pass
    try:
        fd = os.open(root, _DIR)
    except FileNotFoundError:
        yield None
        return
    except NotADirectoryError:
        raise Refused(f"{root} is not a folder") from None
    try:
        if made:
            os.fchmod(fd, 0o700)
        _check(fd, str(root))
        key = _key(fd, root, create)
        yield (fd, b"") if key is None and keyless else None if key is None else (fd, key)
    finally:
        os.close(fd)


def _key(root: int, where: Path, create: bool) -> bytes | None:
    flags = os.O_RDONLY | os.O_CLOEXEC | _NOFOLLOW | _NONBLOCK
    try:
        fd = os.open(KEY_FILE, flags, dir_fd=root)
    except FileNotFoundError:
        if not create:
            return None
        tmp = f".tmp-key{secrets.token_hex(8)}"
        wfd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | _NOFOLLOW, 0o600, dir_fd=root)
        try:
            os.write(wfd, secrets.token_bytes(32))
            os.fchmod(wfd, 0o600)
        finally:
            os.close(wfd)
        try:
            os.link(tmp, KEY_FILE, src_dir_fd=root, dst_dir_fd=root, follow_symlinks=False)
        except FileExistsError:  # another process made it first: use theirs
            pass
        finally:
            os.unlink(tmp, dir_fd=root)
        fd = os.open(KEY_FILE, flags, dir_fd=root)
    except OSError as e:
        raise Refused(f"{where / KEY_FILE} cannot be opened ({e.strerror}); remove it") from None
    try:
        st = os.fstat(fd)
        what = where / KEY_FILE
        if not stat.S_ISREG(st.st_mode) or st.st_size != 32:
            raise Refused(f"{what} is not a 32-byte key file; remove it (a new key is made)")
        if st.st_uid != os.geteuid() or st.st_mode & 0o077:
            raise Refused(f"{what} is not yours alone (uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):o}); "
                          "remove it (a new key is made)")
        key = os.read(fd, 33)
    finally:
        os.close(fd)
    if len(key) != 32:
        raise Refused(f"{where / KEY_FILE} is not a 32-byte key file; remove it (a new key is made)")
    return key


def entry_dir(key: bytes, request_key: str) -> tuple[str, str]:
    """The (level 1, level 2) folder names of an entry: an HMAC of the request key under this user's key."""
    name = hmac.new(key, b"entry\0" + request_key.encode(), hashlib.sha256).hexdigest()[:40]
    return name[:2], name


@contextlib.contextmanager
def _entry_fd(root: int, l1: str, l2: str, create: bool, where: Path) -> Iterator[int | None]:
    fd1 = _open_level(root, l1, create, str(where / l1))
    if fd1 is None:
        yield None
        return
    try:
        fd2 = _open_level(fd1, l2, create, str(where / l1 / l2))
    finally:
        os.close(fd1)
    if fd2 is None:
        yield None
        return
    try:
        yield fd2
    finally:
        os.close(fd2)


def _mac(key: bytes, request_key: str, part: str, payload: bytes) -> bytes:
    h = hmac.new(key, MAGIC, hashlib.sha256)
    h.update(request_key.encode() + b"\0" + part.encode() + b"\0")
    h.update(payload)
    return h.digest()


def read_part(root: int, key: bytes, where: Path, request_key: str, part: str, max_bytes: int) -> bytes | None:
    """The payload of *part*, or None when absent, not a regular file of ours, a link, larger than *max_bytes*
    or not sealed by *key* (such a file is removed).  A hit sets the file's mtime: pruning goes by last use."""
    l1, l2 = entry_dir(key, request_key)
    with _entry_fd(root, l1, l2, False, where) as d:
        if d is None:
            return None
        name = f"{part}.json.z"
        try:
            fd = os.open(name, os.O_RDONLY | os.O_CLOEXEC | _NOFOLLOW | _NONBLOCK, dir_fd=d)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_size > max_bytes:
                return None
            chunks, left = [], st.st_size + 1
            while left > 0:
                b = os.read(fd, min(left, 1 << 24))
                if not b:
                    break
                chunks.append(b)
                left -= len(b)
            data = b"".join(chunks)
            n = len(MAGIC) + 32
            if len(data) < n or data[:len(MAGIC)] != MAGIC or \
                    not hmac.compare_digest(data[len(MAGIC):n], _mac(key, request_key, part, data[n:])):
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=d)
                return None
            with contextlib.suppress(OSError):
                os.utime(fd)
            return data[n:]
        finally:
            os.close(fd)


def remove_part(root: int, key: bytes, where: Path, request_key: str, part: str) -> None:
    """Remove *part* of the entry (a stored value its reader did not accept)."""
    l1, l2 = entry_dir(key, request_key)
    with _entry_fd(root, l1, l2, False, where) as d, contextlib.suppress(OSError):
        if d is not None:
            os.unlink(f"{part}.json.z", dir_fd=d)


def write_part(root: int, key: bytes, where: Path, request_key: str, part: str, payload: bytes) -> int:
    """Write *part* atomically (a temporary file renamed into place); the bytes it added to the store."""
    l1, l2 = entry_dir(key, request_key)
    data = MAGIC + _mac(key, request_key, part, payload) + payload
    with _entry_fd(root, l1, l2, True, where) as d:
        assert d is not None
        name, tmp = f"{part}.json.z", f".tmp-{secrets.token_hex(8)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | _NOFOLLOW, 0o600, dir_fd=d)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
            old = 0
            with contextlib.suppress(OSError):
                st = os.stat(name, dir_fd=d, follow_symlinks=False)
                old = st.st_size if stat.S_ISREG(st.st_mode) else 0
            os.replace(tmp, name, src_dir_fd=d, dst_dir_fd=d)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=d)
            raise
    return len(data) - old
