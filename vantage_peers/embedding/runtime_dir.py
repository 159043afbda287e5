"""The model host's folder: checked from `/` down, then used only through an open descriptor (#32).

A folder that is itself 0700 is not enough: when a folder above it belongs to another user (or
anyone may write in it), that user can rename ours away and put a symlink in its place between our
check and our use, and a root process would then create its lock, log and start files wherever the
symlink points. So `verify` walks the whole path from `/`, opening each component with
`O_NOFOLLOW` relative to the one above it, and accepts it only when every component

- is a real directory, owned by root or by this user, and not writable by group or others unless
  sticky (`/tmp`: others may add entries there but cannot rename or remove ours);
- the last one is owned by this user and open to nobody else (0700);

A symlink on the way is followed only when nobody else can have made or replaced it: the link is
owned by root or this user, inside a folder already checked (nobody else may write it, or it is
sticky) — macOS's `/var -> private/var`; its target is then checked the same way. The folder itself is never a
symlink. Missing components are created 0700 (`mkdirat`).

What comes back is a `RuntimeDir`: the folder's descriptor. Files are opened and removed relative
to it (`openat`/`unlinkat` with `O_NOFOLLOW`, never through the path again), so a later swap of any
path component cannot redirect them; `address(name)` gives a socket address that reaches the same
folder (`/proc/self/fd/N/name` on Linux, the path elsewhere — see `address`).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
CLOEXEC = getattr(os, "O_CLOEXEC", 0)
# O_PATH (Linux) opens a folder we may search but not list (a 0711 home); elsewhere read access.
_DIR_FLAGS = (getattr(os, "O_PATH", 0) or os.O_RDONLY) | getattr(os, "O_DIRECTORY", 0) | NOFOLLOW | CLOEXEC
MAX_LINKS = 40  # symlinks followed on one path, as the kernel's own limit


class UnsafeDir(Exception):
    """The folder cannot be used safely; the message says why (shown by the client and `doctor`)."""


class RuntimeDir:
    """An open, checked folder. Close it (or use `with`) when done."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self.fd = fd
        self.st = os.fstat(fd)
        self.via_proc = _proc_reaches(fd, self.st)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> RuntimeDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self, name: str, flags: int, mode: int = 0o600) -> int:
        """`openat(folder, name, flags | O_NOFOLLOW)`: a regular file of this user with one link,
        else UnsafeDir (a FIFO or device planted there never blocks us: O_NONBLOCK until checked)."""
        fd = os.open(name, flags | NOFOLLOW | CLOEXEC | getattr(os, "O_NONBLOCK", 0), mode, dir_fd=self.fd)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_nlink != 1:
                raise UnsafeDir(f"{self.path / name} is not a plain file of this user (uid {st.st_uid}, "
                                f"{st.st_nlink} link(s)); remove it")
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def lstat(self, name: str) -> os.stat_result:
        return os.stat(name, dir_fd=self.fd, follow_symlinks=False)

    def unlink(self, name: str) -> None:
        os.unlink(name, dir_fd=self.fd)

    def replace(self, src: str, dst: str) -> None:
        os.replace(src, dst, src_dir_fd=self.fd, dst_dir_fd=self.fd)

    def still_here(self) -> bool:
        """The path still leads to this folder (not renamed, removed or replaced since `verify`)."""
        try:
            st = os.stat(self.path, follow_symlinks=False)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == (self.st.st_dev, self.st.st_ino)

    def address(self, name: str) -> str:
        """A Unix socket address for `name` in this very folder.

        On Linux `/proc/self/fd/N/name`: the kernel resolves it through our descriptor, so a swapped
        path component cannot redirect a bind or a connect (and it is short: no sun_path limit).
        Without /proc (macOS) Python cannot bind or connect relative to a descriptor: the path, and
        the caller checks `still_here()` right before and after (the residual: a swap by root or by
        this user inside that window; nobody else can swap a component `verify` accepted).
        """
        return f"/proc/self/fd/{self.fd}/{name}" if self.via_proc else str(self.path / name)


def _proc_reaches(fd: int, st: os.stat_result) -> bool:
    try:
        seen = os.stat(f"/proc/self/fd/{fd}")
    except OSError:
        return False
    return (seen.st_dev, seen.st_ino) == (st.st_dev, st.st_ino)


def verify(directory: Path, *, create: bool = True) -> RuntimeDir:
    """The checked folder, open; UnsafeDir (with the reason) when any component fails the rules above."""
    shown = f"the model host folder {directory}"
    target = os.path.abspath(os.fspath(directory))
    for _ in range(MAX_LINKS + 1):
        fd, target = _walk(target, shown, create)
        if fd is not None:
            return RuntimeDir(Path(directory), fd)
    raise UnsafeDir(f"{shown} goes through more than {MAX_LINKS} symbolic links")


def problem(directory: Path) -> str | None:
    """None when `directory` is safe (it is created if absent), else why not."""
    try:
        verify(directory).close()
    except UnsafeDir as exc:
        return str(exc)
    return None


def _walk(target: str, shown: str, create: bool) -> tuple[int | None, str]:
    """(the folder's fd, target) when every component passes; (None, the new target) after a
    trusted symlink (the caller walks again from `/`); UnsafeDir otherwise."""
    me = os.getuid()
    parts = [p for p in target.split("/") if p]
    fd = os.open("/", _DIR_FLAGS)
    try:
        _check(os.fstat(fd), "/", final=not parts, shown=shown, me=me)
        where = ""
        for i, name in enumerate(parts):
            final = i == len(parts) - 1
            try:
                child = _open_component(fd, name, where, shown, create)
            except _Link as link:
                if final:
                    raise UnsafeDir(f"{shown} is a symlink; it must be a real directory") from None
                # The folder holding the link passed _check: nobody else may write it, or it is sticky
                # (then nobody else may replace an entry of ours). So only the link's owner matters.
                if link.st.st_uid not in (0, me):
                    raise UnsafeDir(f"{shown} is not safe: {where}/{name} is a symlink that another user "
                                    f"made (uid {link.st.st_uid}); set VP_MODEL_HOST_DIR to a folder of "
                                    "your own") from None
                rest = parts[i + 1:]
                return None, os.path.normpath(os.path.join(where or "/", link.target, *rest))
            os.close(fd)
            fd = child
            where = f"{where}/{name}"
            _check(os.fstat(fd), where, final=final, shown=shown, me=me)
        return fd, target
    except BaseException:
        os.close(fd)
        raise


class _Link(Exception):
    def __init__(self, st: os.stat_result, target: str) -> None:
        self.st, self.target = st, target


def _open_component(parent: int, name: str, where: str, shown: str, create: bool) -> int:
    for attempt in range(2):
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            if not create or attempt:
                raise UnsafeDir(f"{shown} does not exist ({where}/{name} is missing)") from None
            try:
                os.mkdir(name, 0o700, dir_fd=parent)
            except FileExistsError:
                pass  # made at the same moment by another process: opened (and checked) next
            except OSError as exc:
                raise UnsafeDir(f"{shown} cannot be created ({exc.strerror or exc})") from None
        except OSError as exc:
            try:
                st = os.stat(name, dir_fd=parent, follow_symlinks=False)
            except OSError:
                raise UnsafeDir(f"{shown} cannot be opened ({where}/{name}: {exc.strerror or exc})") from None
            if stat.S_ISLNK(st.st_mode):
                raise _Link(st, os.readlink(name, dir_fd=parent)) from None
            if not stat.S_ISDIR(st.st_mode):
                raise UnsafeDir(f"{shown} is not a directory ({where}/{name} is a file)") from None
            raise UnsafeDir(f"{shown} cannot be opened ({where}/{name}: {exc.strerror or exc})") from None
    raise AssertionError("unreachable")


def _check(st: os.stat_result, where: str, *, final: bool, shown: str, me: int) -> None:
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeDir(f"{shown} is not a directory ({where})")
    mode = st.st_mode & 0o7777
    if final:
        if st.st_uid != me:
            raise UnsafeDir(f"{shown} belongs to uid {st.st_uid}, not to this user ({me})")
        if mode & 0o077:
            raise UnsafeDir(f"{shown} is open to other users (mode {oct(mode & 0o777)}); it must be 0700 — "
                            "run `chmod 700` on it or set VP_MODEL_HOST_DIR")
        return
    if st.st_uid not in (0, me):
        raise UnsafeDir(f"{shown} is not safe: {where} on the way to it belongs to uid {st.st_uid} (neither "
                        "root nor this user), who could swap what lies below; set VP_MODEL_HOST_DIR to a "
                        "folder of your own")
    if mode & 0o022 and not mode & stat.S_ISVTX:
        raise UnsafeDir(f"{shown} is not safe: {where} on the way to it is writable by other users (mode "
                        f"{oct(mode)}) and not sticky; set VP_MODEL_HOST_DIR to a folder of your own")
