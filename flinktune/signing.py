"""Model files signed when written and checked before anything in them runs.

A pickled model runs code when it is loaded, so a file given on the command line (``twin predict
--grey-box``, ``jobs.decide --models``) is read only if it carries an HMAC-SHA256 signature made
with this installation's key: use :func:`write_signed` in a model's ``save`` and
:func:`read_signed` in its ``load`` (before unpickling). The key is the file named by
``FLINKTUNE_SIGNING_KEY_FILE`` (default ``~/.config/flinktune/signing.key``), created with mode
0600 on the first signature; give every host that writes or reads model files the same key file.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["MAGIC", "SignatureError", "SigningSettings", "key_file", "read_signed", "write_signed"]

MAGIC = b"FLINKTUNE-SIGNED-1\n"
_DIGEST_LEN = 64  # hex characters of an HMAC-SHA256


class SigningSettings(BaseSettings):
    """The key that signs model files written to disk (``FLINKTUNE_SIGNING_*``)."""

    model_config = SettingsConfigDict(env_prefix="FLINKTUNE_SIGNING_", extra="forbid", env_ignore_empty=True)

    key_file: Path | None = Field(
        None,
        description="File holding the HMAC key that signs model files (grey-box twins, saved replay models); "
        "created on first use; default ~/.config/flinktune/signing.key. A file signed with another key is refused.",
    )


class SignatureError(ValueError):
    """A model file without a valid signature: refused before any of it is run."""


def key_file() -> Path:
    """The signing key's file: ``FLINKTUNE_SIGNING_KEY_FILE``, else under ``$XDG_CONFIG_HOME`` (``~/.config``)."""
    # Read here, not through flinktune.settings, which sits above the modules that sign; a path
    # cannot be malformed, so there is no bad value to turn into a settings error.
    chosen = SigningSettings().key_file
    if chosen is not None and str(chosen).strip():
        return chosen
    config = os.environ.get("XDG_CONFIG_HOME", "").strip() or str(Path.home() / ".config")
    return Path(config) / "flinktune" / "signing.key"


def _key(create: bool) -> bytes:
    path = key_file()
    if not path.exists():
        if not create:
            raise SignatureError(f"no signing key at {path}: this installation has signed no model file yet")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(secrets.token_hex(32).encode())
        try:  # a link appears whole or not at all; a concurrent first writer wins and both use its key
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    key = path.read_bytes().strip()
    if len(key) < 32:
        raise SignatureError(f"signing key {path} is shorter than 32 bytes; remove it to make a new one")
    return key


def write_signed(path: str | Path, payload: bytes) -> Path:
    """Write ``payload`` to ``path`` (atomically) behind its signature; returns ``path``."""
    path = Path(path)
    digest = hmac.new(_key(create=True), payload, hashlib.sha256).hexdigest().encode()
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(MAGIC + digest + b"\n" + payload)
    tmp.replace(path)
    return path


def read_signed(path: str | Path, what: str) -> bytes:
    """The payload of a file :func:`write_signed` wrote with this key; :class:`SignatureError`
    (one line naming ``path`` and ``what`` it should be) for anything else. Nothing is unpickled here."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such {what}")
    data = path.read_bytes()
    head, body = data[: len(MAGIC) + _DIGEST_LEN + 1], data[len(MAGIC) + _DIGEST_LEN + 1 :]
    refusal = (
        f"{path}: not a {what} signed with this installation's key ({key_file()}), refused unread: model files "
        "run code when loaded, so only files written here (or with the same FLINKTUNE_SIGNING_KEY_FILE) are read"
    )
    if not head.startswith(MAGIC) or not head.endswith(b"\n"):
        raise SignatureError(refusal)
    try:
        key = _key(create=False)
    except SignatureError:
        raise SignatureError(refusal) from None
    expected = hmac.new(key, body, hashlib.sha256).hexdigest().encode()
    if not hmac.compare_digest(expected, head[len(MAGIC) : -1]):
        raise SignatureError(refusal)
    return body
