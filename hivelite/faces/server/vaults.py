"""The stores a server holds, by vault id, and which of them a token belongs to."""

from __future__ import annotations

from collections.abc import Sequence

from ...core.errors import NotFound, Unauthenticated
from ...hive import Hive
from ...verbs.tokens import Authenticated, parse_token


class Vaults:
    """The served stores by vault id."""

    def __init__(self, hives: Sequence[Hive]) -> None:
        self.by_id: dict[str, Hive] = {}
        for hive in hives:
            self.add(hive)

    def add(self, hive: Hive) -> str:
        """Serve ``hive`` too; its vault id."""
        vault_id = hive.info().vault_id
        self.by_id[vault_id] = hive
        return vault_id

    def discard(self, vault_id: str) -> None:
        """Stop serving a vault (its store stays open: whoever added it closes it)."""
        self.by_id.pop(vault_id, None)

    def authenticate(self, token: str | None, session: str | None) -> tuple[str, Authenticated]:
        """The vault whose store issued ``token``, and who it proves (``401`` when none
        did: a token is one store's)."""
        token_id, _ = parse_token(token)
        for vault_id, hive in self.by_id.items():
            with hive.store.read() as reader:
                known = reader.token(token_id) is not None
            if known:
                return vault_id, hive.authenticate(token, session=session)
        raise Unauthenticated("invalid_token", "unknown token")

    def __getitem__(self, vault_id: str) -> Hive:
        hive = self.by_id.get(vault_id)
        if hive is None:
            raise NotFound("no_such_vault", f"this server has no vault {vault_id!r}")
        return hive


__all__ = ["Vaults"]
