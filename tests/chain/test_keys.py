"""Keys come from the environment or an encrypted keystore, and every mistake is named without leaking the key."""

from __future__ import annotations

from pathlib import Path

import pytest
from eth_account import Account

from fedchain.chain.keys import KEYSTORE_PASSWORD_ENV, PRIVATE_KEY_ENV, resolve_account, write_keystore
from fedchain.errors import SigningKeyError

KEY = "0x" + "42" * 32
ACCOUNT = Account.from_key(KEY)


@pytest.fixture()
def keystore(tmp_path: Path) -> Path:
    return write_keystore(ACCOUNT, tmp_path / "key.json", "right", kdf="pbkdf2", iterations=2)


def test_no_key_configured_gives_none() -> None:
    assert resolve_account(environ={}) is None


def test_key_from_environment_with_or_without_0x() -> None:
    for key in (KEY, KEY[2:]):
        account = resolve_account(environ={PRIVATE_KEY_ENV: key})
        assert account is not None and account.address == ACCOUNT.address


@pytest.mark.parametrize("value", ["0x1234", "zz" * 32, "0x" + "42" * 33])
def test_malformed_environment_key_is_refused_without_echoing_it(value: str) -> None:
    with pytest.raises(SigningKeyError, match=PRIVATE_KEY_ENV) as caught:
        resolve_account(environ={PRIVATE_KEY_ENV: value})

    assert value.removeprefix("0x") not in str(caught.value)


def test_keystore_opens_with_password_from_environment_and_wins_over_env_key(keystore: Path) -> None:
    other = "0x" + "07" * 32

    account = resolve_account(keystore, environ={KEYSTORE_PASSWORD_ENV: "right", PRIVATE_KEY_ENV: other})

    assert account is not None and account.address == ACCOUNT.address
    assert keystore.stat().st_mode & 0o777 == 0o600


def test_keystore_password_from_prompt(keystore: Path) -> None:
    asked: list[str] = []

    def prompt(label: str) -> str:
        asked.append(label)
        return "right"

    account = resolve_account(keystore, environ={}, prompt=prompt)

    assert account is not None and account.address == ACCOUNT.address and asked == ["password for key.json"]


def test_keystore_with_wrong_password_is_refused(keystore: Path) -> None:
    with pytest.raises(SigningKeyError, match="wrong password"):
        resolve_account(keystore, environ={KEYSTORE_PASSWORD_ENV: "wrong"})


def test_keystore_without_password_or_terminal_is_refused(keystore: Path) -> None:
    with pytest.raises(SigningKeyError, match="no password"):
        resolve_account(keystore, environ={})


@pytest.mark.parametrize(
    ("content", "complaint"), [(None, "does not exist"), ("{oops", "not a JSON keystore"), ("{}", "malformed")]
)
def test_missing_or_malformed_keystore_is_refused(tmp_path: Path, content: str | None, complaint: str) -> None:
    path = tmp_path / "key.json"
    if content is not None:
        path.write_text(content)

    with pytest.raises(SigningKeyError, match=complaint):
        resolve_account(path, environ={KEYSTORE_PASSWORD_ENV: "x"})
