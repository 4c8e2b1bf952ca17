"""A folder replaced as a whole: the dataset emit writes.

Emit writes the new dataset beside the old one (WORKDIR/.dataset.new/), then swaps the two folders and removes the
old one. The swap is one `renameat2(RENAME_EXCHANGE)` on Linux: a reader (check, export, push, `load_dataset`)
sees the old dataset or the new one, never a manifest over another emit's shards, whatever stops the emit and
whenever (SIGTERM, kill -9, a full disk). Where the exchange is not available (another OS, a file system without
it), the old folder is renamed aside (WORKDIR/.dataset.old/) and the new one into place: a stop between the two
renames leaves no `dataset/` for that instant, and the workdir's next writer puts the old one back
(`recover_dataset`). The cost: while it is written, the new dataset takes its room beside the old one. Emit's
side (the folder it writes into, the swap once it is complete): emit/writer.py's `replacing_dataset`.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import shutil
from pathlib import Path

log = logging.getLogger(__name__)

STAGING = ".dataset.new"        # the dataset being written
SWAPPED_OUT = ".dataset.old"    # the old dataset, between the two renames of the fallback
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def exchange(a: Path, b: Path) -> bool:
    """Swap two existing paths in one step (Linux renameat2 RENAME_EXCHANGE). False when this system or file system
    has no such call; OSError on any other failure."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def replace_dir(new: Path, target: Path, *, atomic: bool = True) -> None:
    """`new` becomes `target`; the old `target`, if any, ends at `new`'s path (the caller removes it). With
    `atomic` false the fallback's two renames are used even where the exchange exists (its test)."""
    if not target.exists():
        os.rename(new, target)
        return
    if atomic and exchange(new, target):
        return
    aside = target.parent / SWAPPED_OUT
    remove_tree(aside)
    os.rename(target, aside)
    os.rename(new, target)
    os.rename(aside, new)


def remove_tree(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def recover_dataset(root: Path) -> None:
    """What a stopped emit left: the old dataset put back if a fallback swap stopped between its renames, then the
    staging folder and any old one removed. Only for the workdir's one writer (no emit is under way)."""
    target, aside, staged = root / "dataset", root / SWAPPED_OUT, root / STAGING
    if aside.exists() and not target.exists():
        os.rename(aside, target)
        log.info("the dataset an interrupted emit had moved aside is back in %s", target)
    for leftover in (staged, aside):
        if leftover.exists():
            remove_tree(leftover)
