"""Where signing keys come from: an environment variable or an encrypted keystore, never a flag.

A private key on the command line ends up in shell history and in ``ps``
output, so FedChain takes one only from

* the environment variable ``FEDCHAIN_PRIVATE_KEY`` (hex, with or without 0x), or
* an encrypted JSON keystore (``--keystore FILE``, the Web3 Secret Storage
  format geth, Foundry's ``cast wallet`` and MetaMask export), whose password
  comes from ``FEDCHAIN_KEYSTORE_PASSWORD`` or, on a terminal, a prompt.

On a local chain that FedChain starts itself, Anvil's public test account 0 is
used when no key is given.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from eth_account import Account
from eth_account.signers.local import LocalAccount

from fedchain.errors import SigningKeyError

log = logging.getLogger(__name__)

#: Environment variable holding a hex private key.
PRIVATE_KEY_ENV = "FEDCHAIN_PRIVATE_KEY"
#: Environment variable holding the password of the --keystore file.
KEYSTORE_PASSWORD_ENV = "FEDCHAIN_KEYSTORE_PASSWORD"

#: Asks for a password without echoing it; returns the password.
PasswordPrompt = Callable[[str], str]


def account_from_hex(value: str, *, source: str = PRIVATE_KEY_ENV) -> LocalAccount:
    """The account of a hex private key; the error never repeats the key."""
    text = value.strip().removeprefix("0x")
    try:
        raw = bytes.fromhex(text)
        if len(raw) != 32:
            raise ValueError("not 32 bytes")
        return Account.from_key(raw)
    except (ValueError, TypeError):
        raise SigningKeyError(
            f"{source} does not hold a private key (expected 64 hex digits, got {len(text)} characters)",
            hint=f"set {source} to the account's 32-byte private key in hex",
        ) from None


def account_from_keystore(path: Path, password: str) -> LocalAccount:
    """Decrypt the keystore file at ``path``."""
    if not path.is_file():
        raise SigningKeyError(
            f"keystore file {path} does not exist", hint="pass the path of an encrypted JSON keystore"
        )
    try:
        keyfile = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise SigningKeyError(f"keystore file {path} is not a JSON keystore: {err}") from err
    try:
        key = Account.decrypt(keyfile, password)
    except ValueError as err:
        if "MAC mismatch" in str(err):
            raise SigningKeyError(
                f"wrong password for keystore {path}",
                hint=f"set {KEYSTORE_PASSWORD_ENV} to the keystore's password (or unset it to be asked)",
            ) from None
        raise SigningKeyError(f"keystore file {path} cannot be decrypted: {err}") from None
    except (KeyError, TypeError) as err:
        raise SigningKeyError(f"keystore file {path} is malformed: missing {err}") from None
    return Account.from_key(key)


def write_keystore(
    account: LocalAccount, path: Path, password: str, *, kdf: str = "scrypt", iterations: int | None = None
) -> Path:
    """Encrypt ``account`` into a keystore file at ``path`` (readable only by its owner).

    ``kdf`` and ``iterations`` choose the key derivation (the defaults are
    eth-account's: scrypt with n = 2**18); fewer iterations only for tests.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    keyfile = Account.encrypt(account.key, password, kdf=kdf, iterations=iterations)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(keyfile, handle)
    return path


def resolve_account(
    keystore: Path | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    prompt: PasswordPrompt | None = None,
) -> LocalAccount | None:
    """The signing account the user configured, or None when they configured none.

    ``--keystore`` wins over ``FEDCHAIN_PRIVATE_KEY``. The keystore's password
    comes from ``FEDCHAIN_KEYSTORE_PASSWORD``, else from ``prompt`` (None: no
    terminal to ask on, which is an error).
    """
    env = os.environ if environ is None else environ
    if keystore is not None:
        password = env.get(KEYSTORE_PASSWORD_ENV)
        if password is None:
            if prompt is None:
                raise SigningKeyError(
                    f"no password for keystore {keystore}",
                    hint=f"set {KEYSTORE_PASSWORD_ENV}, or run the command on a terminal to be asked",
                )
            password = prompt(f"password for {keystore.name}")
        account = account_from_keystore(keystore, password)
        log.info("signing as %s (keystore %s)", account.address, keystore)
        return account
    if env.get(PRIVATE_KEY_ENV):
        account = account_from_hex(env[PRIVATE_KEY_ENV])
        log.info("signing as %s (%s)", account.address, PRIVATE_KEY_ENV)
        return account
    return None
