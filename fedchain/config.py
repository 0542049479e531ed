"""Loading typed, frozen configurations from YAML files and flags.

Each component defines its own frozen dataclass; this module turns a mapping
(from a YAML file, updated by command-line overrides) into one, rejecting
unknown keys and values of the wrong type with a :class:`ConfigError` that
names the key.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from eth_utils import is_checksum_address, is_hex_address, to_checksum_address

from fedchain.errors import ConfigError

T = TypeVar("T")


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping from ``path``."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist", hint="pass the path of an existing YAML file")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"config file {path} is not valid YAML: {err}", hint="fix the YAML syntax") from err
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping, not {type(data).__name__}")
    return data


def _coerce(name: str, value: Any, annotation: Any) -> Any:
    origin = typing.get_origin(annotation)
    if annotation is Any:
        return value
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        if isinstance(value, annotation):
            return value
        if not isinstance(value, Mapping):
            raise ConfigError(f"{name} must be a mapping for {annotation.__name__}")
        return from_mapping(annotation, value, prefix=f"{name}.")
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(annotation)
        if value is None and type(None) in args:
            return None
        errors: list[ConfigError] = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(name, value, arg)
            except ConfigError as err:
                errors.append(err)
        if len(errors) == 1:  # an optional value: its one alternative's error is the error
            raise errors[0]
        reasons = "; ".join(err.args[0] for err in errors)
        raise ConfigError(f"{name}={value!r} matches none of {annotation}: {reasons}")
    if origin is typing.Literal:
        allowed = typing.get_args(annotation)
        if value not in allowed:
            raise ConfigError(f"{name}={value!r} is not one of {', '.join(map(repr, allowed))}")
        return value
    if origin in (tuple, list):
        if isinstance(value, str) or not isinstance(value, (list, tuple)):
            raise ConfigError(f"{name} must be a list, got {value!r}")
        args = typing.get_args(annotation)
        item = args[0] if args else Any
        return tuple(_coerce(f"{name}[{i}]", v, item) for i, v in enumerate(value))
    if annotation is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0"):
            return value.lower() in ("true", "yes", "1")
        raise ConfigError(f"{name} must be true or false, got {value!r}")
    if annotation in (int, float, str):
        kind = {int: "an integer", float: "a number", str: "a string"}[annotation]
        if isinstance(value, bool) and annotation is not str:
            raise ConfigError(f"{name} must be {kind}, got {value!r}")
        try:
            converted = annotation(value)
        except (TypeError, ValueError) as err:
            raise ConfigError(f"{name} must be {kind}, got {value!r}") from err
        if annotation is int and isinstance(value, float) and converted != value:
            raise ConfigError(f"{name} must be an integer, got {value!r}")
        return converted
    if annotation is Path:
        return Path(value)
    return value


def from_mapping(cls: type[T], data: Mapping[str, Any], *, prefix: str = "") -> T:
    """Build the frozen dataclass ``cls`` from ``data``; unknown keys are errors."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(
            f"unknown setting(s) {', '.join(prefix + k for k in unknown)}",
            hint=f"known settings: {', '.join(prefix + k for k in sorted(fields))}",
        )
    kwargs = {key: _coerce(prefix + key, value, hints[key]) for key, value in data.items()}
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"invalid {cls.__name__}: {err}") from err


def load_config(cls: type[T], path: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> T:
    """Load ``cls`` from an optional YAML file, then apply non-None ``overrides`` (flags win)."""
    data: dict[str, Any] = load_yaml(path) if path is not None else {}
    for key, value in (overrides or {}).items():
        if value is not None:
            data[key] = value
    return from_mapping(cls, data)


def checked_address(name: str, value: object) -> str:
    """``value`` in checksum form; ConfigError unless it is 0x and 40 hex digits, all one case or a valid EIP-55 checksum."""
    if not isinstance(value, str) or not is_hex_address(value):
        raise ConfigError(
            f"{name} {value!r} is not an Ethereum address",
            hint=f"give the {name} as an address: 0x and 40 hex digits",
        )
    digits = value[2:]
    if digits not in (digits.lower(), digits.upper()) and not is_checksum_address(value):
        raise ConfigError(
            f"{name} {value!r} fails its EIP-55 checksum: a typo in the address?",
            hint="copy the address again (or give it in lower case, which carries no checksum)",
        )
    return to_checksum_address(value)
