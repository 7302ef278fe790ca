"""A policy folder signed with a site key: what a forger who can write the folder cannot redo.

The hashes in a policy folder (the manifest's, the card's binding: :mod:`hpcpolicy.deploy.
binding`) sit next to what they hash, so whoever can change a file can recompute them. A
signature made with a key kept *outside* the folder cannot be recomputed without that key:

* ``hpcpolicy sign POLICY --key FILE`` (:func:`sign`) writes ``POLICY/signature.json``: the
  SHA-256 of every file of the folder (manifest, card, model files, an agent's folder...) and
  an HMAC-SHA256 of that list under the key;
* ``hpcpolicy verify POLICY --key FILE`` (:func:`verify`) checks it;
* with ``HPCPOLICY_SIGNING_KEY=FILE`` in the environment, every command that reads a policy
  folder (``simulate``, ``evaluate``, ``whatif``, ``advise``, ``train --init-from``) refuses
  one whose signature is missing or does not match (:func:`require_signature`).

HMAC is symmetric: whoever holds the key can sign as well as verify, so keep the key file
readable only by the people and services who may deploy policies (``chmod 600``), on the
machines that check them, never inside a policy folder. It proves that the folder is, byte
for byte, the one someone holding the key signed; not that the policy is any good (that is
what its card says).

Example:
    >>> import tempfile
    >>> folder, key = Path(tempfile.mkdtemp()), Path(tempfile.mkdtemp()) / "site.key"
    >>> _ = (folder / "manifest.json").write_text("{}")
    >>> _ = key.write_bytes(b"k" * 32)
    >>> _ = sign(folder, key)
    >>> sorted(verify(folder, key))
    ['manifest.json']
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from pathlib import Path

from hpcpolicy.atomic import file_sha256, write_json
from hpcpolicy.docload import read_json
from hpcpolicy.errors import ArtifactError, ConfigError

__all__ = ["KEY_ENV", "MIN_KEY_BYTES", "SIGNATURE_FILE", "require_signature", "sign", "verify"]

SIGNATURE_FILE = "signature.json"
"""The signature's name in a policy folder."""
KEY_ENV = "HPCPOLICY_SIGNING_KEY"
"""Environment variable naming the key file every command then requires signatures with."""
MIN_KEY_BYTES = 32
"""Shortest key accepted (256 bits; e.g. ``head -c 32 /dev/urandom > site.key``)."""
_FORMAT = "hpcpolicy.signature"
_ALGORITHM = "hmac-sha256"


def _key(given: str | os.PathLike[str] | None, folder: Path) -> bytes:
    """The key's bytes, refused when not given, too short, or kept inside the folder it
    signs."""
    if given is None:
        raise ConfigError(f"no signing key: give --key FILE, or set {KEY_ENV}")
    key_file = Path(given)
    if key_file.resolve().is_relative_to(folder.resolve()):
        raise ConfigError(f"{key_file}: the key lies inside the policy folder {folder}, where "
                          "anyone who can change the folder can read it; keep it elsewhere")
    try:
        key = key_file.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{key_file}: cannot read the signing key ({exc.strerror}); give the "
                          f"key file with --key or {KEY_ENV}") from exc
    if len(key) < MIN_KEY_BYTES:
        raise ConfigError(f"{key_file}: a signing key of {len(key)} bytes is too short; make "
                          f"one of {MIN_KEY_BYTES} with `head -c {MIN_KEY_BYTES} /dev/urandom > "
                          f"{key_file}`")
    return key


def _files(folder: Path) -> dict[str, str]:
    """SHA-256 of every file under ``folder`` but the signature, by relative path."""
    if not folder.is_dir():
        raise ArtifactError(f"{folder}: not a policy folder; sign or verify the folder that "
                            "holds manifest.json")
    return {path.relative_to(folder).as_posix(): file_sha256(path)
            for path in sorted(folder.rglob("*"))
            if path.is_file() and path.relative_to(folder).as_posix() != SIGNATURE_FILE}


def _mac(key: bytes, files: dict[str, str]) -> str:
    text = json.dumps({"algorithm": _ALGORITHM, "files": files}, sort_keys=True,
                      separators=(",", ":"))
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).hexdigest()


def _key_id(key: bytes) -> str:
    """A short name of the key (not the key): tells two keys apart in messages."""
    return hashlib.sha256(b"hpcpolicy key id\0" + key).hexdigest()[:16]


def sign(folder: str | os.PathLike[str], key_file: str | os.PathLike[str] | None) -> Path:
    """Write ``folder/signature.json``: every file's SHA-256 and their HMAC under the key.

    Raises:
        ConfigError: No key given, or it is unreadable, too short, or inside the folder.
        ArtifactError: ``folder`` is not a folder.
    """
    folder = Path(folder)
    key = _key(key_file, folder)
    files = _files(folder)
    write_json(folder / SIGNATURE_FILE, {"format": _FORMAT, "algorithm": _ALGORITHM,
                                         "key_id": _key_id(key), "files": files,
                                         "mac": _mac(key, files)})
    return folder / SIGNATURE_FILE


def verify(folder: str | os.PathLike[str],
           key_file: str | os.PathLike[str] | None) -> dict[str, str]:
    """Check ``folder/signature.json`` against the folder's files and the key.

    Returns:
        The signed files and their SHA-256.

    Raises:
        ConfigError: No key given, or it is unreadable, too short, or inside the folder.
        ArtifactError: No signature, a signature of another key, or files changed, added or
            removed since signing (the message names them).
    """
    folder = Path(folder)
    key = _key(key_file, folder)
    where = folder / SIGNATURE_FILE
    if not where.is_file():
        raise ArtifactError(f"{folder}: not signed (no {SIGNATURE_FILE}); sign the folder with "
                            "`hpcpolicy sign` where the site key is kept, after checking it")
    doc = read_json(where, "policy signature", ArtifactError)
    if not isinstance(doc, dict) or doc.get("format") != _FORMAT or \
            not isinstance(doc.get("files"), dict) or not isinstance(doc.get("mac"), str):
        raise ArtifactError(f"{where}: not a signature hpcpolicy wrote; sign the folder again")
    if doc.get("key_id") != _key_id(key):
        raise ArtifactError(f"{where}: signed with another key than {key_file}; verify with the "
                            "key it was signed with, or sign it again with this one")
    if not hmac.compare_digest(doc["mac"], _mac(key, doc["files"])):
        raise ArtifactError(f"{where}: the signature does not match its file list: the "
                            "signature was edited; do not deploy this folder")
    now = _files(folder)
    changed = sorted(name for name in set(now) | set(doc["files"])
                     if now.get(name) != doc["files"].get(name))
    if changed:
        raise ArtifactError(f"{folder}: changed since it was signed ({', '.join(changed[:5])}"
                            f"{' ...' if len(changed) > 5 else ''}); do not deploy it, or "
                            "check it and sign it again")
    return now


def require_signature(folder: str | os.PathLike[str]) -> None:
    """With :data:`KEY_ENV` set, refuse a policy folder whose signature is missing or does not
    match (:func:`verify`); without it, do nothing."""
    key_file = os.environ.get(KEY_ENV)
    if key_file:
        verify(folder, key_file)
