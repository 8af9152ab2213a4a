"""The owner's keys folder: where the chain keys, the witnessed heads, the signing key and
the checkpoints live, outside every store.

``$HIVELITE_KEYS`` if set, else ``$XDG_CONFIG_HOME/hivelite/keys``, else
``~/.config/hivelite/keys``.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "HIVELITE_KEYS"


def keys_dir() -> Path:
    """Where the owner's keys and witnessed heads live (see the module's text)."""
    given = os.environ.get(ENV)
    if given:
        return Path(given).expanduser()
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "hivelite" / "keys"


__all__ = ["ENV", "keys_dir"]
