"""Which filesystem holds a store: WAL needs one machine's shared memory, so a store on a
network filesystem (NFS, SMB/CIFS, 9p, sshfs and other FUSE mounts) is refused unless the
owner says otherwise.

Read from the mount table (``/proc/self/mountinfo`` on Linux); where there is none, the
answer is "unknown" and nothing is refused.
"""

from __future__ import annotations

import os
from pathlib import Path

MOUNTINFO = Path("/proc/self/mountinfo")
NETWORK_TYPES = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "afs", "ceph", "glusterfs", "lustre",
    "gpfs", "ocfs2", "gfs2", "beegfs", "davfs", "ncpfs", "coda", "virtiofs",
})
"""Filesystem types whose files other machines (or a VM's host) may write at the same
time. Any ``fuse.*`` type is counted too (sshfs, rclone, s3fs...), except the local FUSE
overlays below."""
LOCAL_FUSE = frozenset({"fuse.fuse-overlayfs", "fuse.lxcfs"})


def _unescape(text: str) -> str:
    """mountinfo writes space, tab, newline and backslash as octal escapes (``\\040``)."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and text[i + 1:i + 4].isdigit():
            out.append(chr(int(text[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def mount_of(path: Path, mountinfo: str) -> tuple[str, str] | None:
    """The mount point and filesystem type holding ``path`` (an absolute, resolved path),
    from the text of a mountinfo file."""
    best: tuple[str, str] | None = None
    target = str(path)
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        fields = left.split()
        if not sep or len(fields) < 5 or not right.split():
            continue
        point, fstype = _unescape(fields[4]), right.split()[0]
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= len(best[0])):
            best = (point, fstype)  # the deepest (and, on a tie, the last) mount wins
    return best


def is_network(fstype: str) -> bool:
    return fstype in NETWORK_TYPES or (fstype.startswith("fuse.") and fstype not in LOCAL_FUSE)


def network_filesystem(path: Path, mountinfo: Path = MOUNTINFO) -> str | None:
    """The network filesystem type holding ``path`` (or the folder it will be made in),
    else None (a local filesystem, or no mount table to tell)."""
    try:
        text = mountinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    where = path if path.exists() else path.parent
    found = mount_of(Path(os.path.realpath(where)), text)
    return found[1] if found is not None and is_network(found[1]) else None
