"""The admin token a client sends, read from the same kind of source, in the same format, as the admin listener
reads its own (:class:`soklet_core.mcp.server.ops._admin.AdminTokens`): a bare token, or one ``label:token`` line."""

from __future__ import annotations

from collections.abc import Mapping

from soklet_core.files import AdminTokenEnv, AdminTokenSource, FleetFileError, KeyringFileError, io_problem
from soklet_core.mcp.server.ops._admin import AdminTokenError, AdminTokens

__all__ = ["read_admin_token"]


def read_admin_token(source: AdminTokenSource, *, environ: Mapping[str, str] | None = None) -> str:
    """The one bearer token ``source`` names: an environment variable's value, or a secret file's content (0600,
    trusted owner and folders). The format and bounds are the admin listener's; a source holding several
    tokens is refused (the client sends one). Raises :class:`FleetFileError`, which never holds a token."""
    try:
        if isinstance(source, AdminTokenEnv):
            tokens = AdminTokens.from_env(source.name, environ)
        else:
            tokens = AdminTokens.from_file(source.path)
    except KeyringFileError as error:
        raise FleetFileError(
            f"admin token file: {io_problem(error)}", path=_path(source), is_io=error.reason.is_io
        ) from None
    except AdminTokenError as error:
        raise FleetFileError(f"admin token: {error}", path=_path(source), where=_where(source)) from None
    if len(tokens.tokens) != 1:
        raise FleetFileError(
            "admin token: the source holds several tokens; a client sends one", path=_path(source), where=_where(source)
        )
    return tokens.tokens[0].secret.decode("ascii")


def _path(source: AdminTokenSource) -> str | None:
    return None if isinstance(source, AdminTokenEnv) else source.path


def _where(source: AdminTokenSource) -> str | None:
    return f"${source.name}" if isinstance(source, AdminTokenEnv) else None
