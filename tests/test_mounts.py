"""Network filesystems (issue 14): read from the mount table, the deepest mount wins."""

from __future__ import annotations

from pathlib import Path

import pytest

from hivelite.store.mounts import is_network, mount_of, network_filesystem

MOUNTINFO = """\
22 1 8:1 / / rw,relatime shared:1 - ext4 disk0 rw
30 22 0:40 / /example/share rw,relatime shared:9 - nfs4 server:/export rw,vers=4.2
31 30 0:41 / /example/share/local rw shared:10 - tmpfs tmpfs rw
32 22 0:42 / /example/ana/remote rw,nosuid - fuse.sshfs ana@box:/srv rw
33 22 0:43 / /example/with\\040space rw - cifs //nas/share rw
34 22 0:44 / /example/containers rw - fuse.fuse-overlayfs fuse-overlayfs rw
"""


@pytest.mark.parametrize(("path", "fstype"), [
    ("/example/ana/projects/store.db", "ext4"),
    ("/example/share/store.db", "nfs4"),
    ("/example/share", "nfs4"),
    ("/example/share/local/store.db", "tmpfs"),
    ("/example/shared/store.db", "ext4"),  # a sibling, not inside /example/share
    ("/example/ana/remote/store.db", "fuse.sshfs"),
    ("/example/with space/store.db", "cifs"),
    ("/example/containers/x.db", "fuse.fuse-overlayfs"),
])
def test_the_deepest_mount_holds_the_path(path: str, fstype: str) -> None:
    found = mount_of(Path(path), MOUNTINFO)
    assert found is not None and found[1] == fstype


@pytest.mark.parametrize(("fstype", "network"), [
    ("nfs", True), ("nfs4", True), ("cifs", True), ("smb3", True), ("9p", True),
    ("fuse.sshfs", True), ("fuse.rclone", True), ("ext4", False), ("tmpfs", False),
    ("overlay", False), ("xfs", False), ("fuse.fuse-overlayfs", False),
])
def test_which_types_are_network(fstype: str, network: bool) -> None:
    assert is_network(fstype) is network


def test_a_store_on_a_fake_nfs_mount_is_named(tmp_path: Path) -> None:
    table = tmp_path / "mountinfo"
    table.write_text(f"22 1 8:1 / / rw - ext4 disk0 rw\n"
                     f"40 22 0:40 / {tmp_path} rw - nfs4 server:/x rw\n")
    assert network_filesystem(tmp_path / "store.db", table) == "nfs4"
    assert network_filesystem(tmp_path / "store.db", tmp_path / "missing") is None


def test_this_machines_temp_folder_is_local(tmp_path: Path) -> None:
    assert network_filesystem(tmp_path / "store.db") is None


def test_opening_a_store_on_a_network_filesystem_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hivelite import Hive, StoreError
    from hivelite.store import mounts

    table = tmp_path / "mountinfo"
    table.write_text(f"22 1 8:1 / / rw - ext4 disk0 rw\n"
                     f"40 22 0:40 / {tmp_path} rw - nfs4 server:/x rw\n")
    monkeypatch.setattr(mounts, "MOUNTINFO", table)
    monkeypatch.delenv("HIVELITE_ALLOW_NETWORK_FS", raising=False)
    with pytest.raises(StoreError) as err:
        Hive.open(tmp_path / "store.db", owner="ana")
    assert err.value.reason == "network_filesystem" and "nfs4" in err.value.message
    assert not (tmp_path / "store.db").exists()  # nothing made
    Hive.open(tmp_path / "store.db", owner="ana", allow_network_fs=True).close()
    monkeypatch.setenv("HIVELITE_ALLOW_NETWORK_FS", "1")
    Hive.open(tmp_path / "store.db", owner="ana").close()
