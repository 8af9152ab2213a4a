"""The settings helpers every plugin uses: one way to read TOML, one way to fail."""

from __future__ import annotations

from pathlib import Path

import pytest

from hivelite import Hive, InvalidInput, plugin_settings, read_toml


@pytest.mark.parametrize(("content", "problem"), [
    (None, "cannot be read: it does not exist"),
    ("a = [", "is not valid TOML"),
    (b"\xff\xfe = 1", "is not UTF-8 text"),
])
def test_read_toml_names_the_file_and_the_problem(tmp_path: Path, content: str | bytes | None,
                                                  problem: str) -> None:
    path = tmp_path / "rules.toml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(InvalidInput) as err:
        read_toml(path, "rules file")
    assert err.value.reason == "invalid_config"
    assert err.value.message.startswith(f"rules file {path} {problem}")


def test_read_toml_refuses_a_folder(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="it is a folder"):
        read_toml(tmp_path, "rules file")


def test_plugin_settings_prefers_the_named_file(db_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    (db_path.parent / "hivelite.toml").write_text("[thing]\nsize = 1\n")
    with Hive.open(db_path, owner="ana") as hive:
        from_table = plugin_settings(hive, "thing", "HIVELITE_THING")
        assert (from_table.table, from_table.from_env) == ({"size": 1}, False)
        assert "hivelite.toml" in from_table.source
        named = db_path.parent / "thing.toml"
        named.write_text("size = 2\n")
        monkeypatch.setenv("HIVELITE_THING", str(named))
        from_env = plugin_settings(hive, "thing", "HIVELITE_THING")
        assert (from_env.table, from_env.from_env) == ({"size": 2}, True)
        assert from_env.source == f"$HIVELITE_THING file {named}"


def test_a_settings_section_that_is_no_table(db_path: Path) -> None:
    (db_path.parent / "hivelite.toml").write_text("thing = 3\n")
    with Hive.open(db_path, owner="ana") as hive, pytest.raises(InvalidInput) as err:
        plugin_settings(hive, "thing", "HIVELITE_THING")
    assert "must be a table" in err.value.message
    assert "hivelite.toml" in err.value.message
