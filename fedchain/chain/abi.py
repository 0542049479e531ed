"""Decoding what contracts say: custom errors into exceptions, logs into typed events.

Everything here is generic over ABIs. An :class:`AbiRegistry` knows, by
selector and topic, one Python class per custom error (a subclass of
:class:`~fedchain.errors.ContractRevert`) and one frozen dataclass per event
(a subclass of :class:`ChainEvent`). The committed bindings
(:mod:`fedchain.chain.bindings`) declare those classes statically, typed; any
other ABI (a test contract, a contract added since the bindings were
generated) gets the same kind of classes built at run time by
:meth:`AbiRegistry.add_abi`.

>>> registry = AbiRegistry()
>>> registry.add_abi([{"type": "error", "name": "TooLow", "inputs": [
...     {"name": "value", "type": "uint256"}, {"name": "minimum", "type": "uint256"}]}])
>>> data = registry.error("TooLow").selector() + (3).to_bytes(32, "big") + (10).to_bytes(32, "big")
>>> err = registry.decode_revert(data)
>>> (type(err).__name__, err.value, err.minimum)
('TooLow', 3, 10)
"""

from __future__ import annotations

import dataclasses
import enum
import keyword
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from eth_abi import decode as abi_decode
from eth_abi.exceptions import DecodingError
from eth_utils import keccak, to_checksum_address

from fedchain.errors import ContractRevert

#: The EIP-712 domain type of FedChain's typed messages (the committee's verdicts) and of ERC-2612 permits:
#: name, version, chain id and verifying contract (EIP-5267 field bitmap 0x0f).
EIP712_DOMAIN_TYPE: tuple[dict[str, str], ...] = (
    {"name": "name", "type": "string"},
    {"name": "version", "type": "string"},
    {"name": "chainId", "type": "uint256"},
    {"name": "verifyingContract", "type": "address"},
)

#: An ABI as solc writes it: a sequence of JSON objects.
Abi = Sequence[Mapping[str, Any]]

#: Names a decoded field may not take: Python keywords and the attributes of the base classes.
_RESERVED = frozenset(
    {
        "args",
        "hint",
        "data",
        "values",
        "contract",
        "signature",
        "selector",
        "fields",
        "abi_types",
        "with_traceback",
        "add_note",
        "block_number",
        "log_index",
        "transaction_hash",
        "address",
        "topic",
        "position",
        "types",
        "abi",
        "from_log",
        "decode",
    }
)


# --------------------------------------------------------------------------- ABI types


def canonical_type(param: Mapping[str, Any]) -> str:
    """The canonical ABI type of one parameter: structs become ``(t1,t2)`` with their array suffix."""
    kind: str = param["type"]
    if kind.startswith("tuple"):
        inner = ",".join(canonical_type(c) for c in param.get("components", ()))
        return f"({inner}){kind[len('tuple') :]}"
    return kind


def signature(entry: Mapping[str, Any]) -> str:
    """``name(type1,type2)`` of a function, event or error ABI entry."""
    return f"{entry['name']}({','.join(canonical_type(p) for p in entry.get('inputs', ()))})"


def selector(entry: Mapping[str, Any]) -> bytes:
    """The 4-byte selector of a function or error."""
    return keccak(text=signature(entry))[:4]


def topic(entry: Mapping[str, Any]) -> bytes:
    """The 32-byte topic 0 of an event."""
    return keccak(text=signature(entry))


def snake_case(name: str) -> str:
    """``auctionId`` -> ``auction_id``, ``TaskID`` -> ``task_id``; leading and trailing underscores kept."""
    core = name.strip("_")
    if not core:
        return name
    lead = name[: len(name) - len(name.lstrip("_"))]
    trail = name[len(name.rstrip("_")) :]
    core = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", core)
    core = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", core)
    return lead + core.lower() + trail


def field_names(params: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """Python attribute names for ABI parameters: snake_case, unique, never a keyword or reserved name."""
    names: list[str] = []
    for index, param in enumerate(params):
        name = snake_case(param.get("name") or "") or f"arg{index}"
        name = name.lstrip("_") or f"arg{index}"
        if keyword.iskeyword(name) or name in _RESERVED:
            name += "_"
        while name in names:
            name += "_"
        names.append(name)
    return tuple(names)


def type_name(param: Mapping[str, Any]) -> str | None:
    """The qualified Solidity name of a struct or enum parameter (``enum ITasks.Status`` -> ``ITasks.Status``)."""
    match = re.match(r"(?:struct|enum)\s+([\w.]+)", param.get("internalType") or "")
    return match.group(1) if match else None


def to_python(param: Mapping[str, Any], value: Any, types: Mapping[str, type] | None = None) -> Any:
    """Normalise a value decoded by eth_abi: checksum addresses, tuples for arrays, and the classes of
    ``types`` (by qualified Solidity name) for structs (NamedTuples) and enums (IntEnums)."""
    kind: str = param["type"]
    if kind.endswith("]"):
        element = dict(param, type=kind[: kind.rindex("[")])
        return tuple(to_python(element, item, types) for item in value)
    named = (types or {}).get(type_name(param) or "")
    if kind == "tuple":
        components = param.get("components", ())
        items = tuple(to_python(c, v, types) for c, v in zip(components, value, strict=True))
        return named(*items) if named is not None else items
    if kind == "address":
        return to_checksum_address(value)
    if named is not None and issubclass(named, enum.Enum):
        try:
            return named(value)
        except ValueError:  # a value the enum lacks (a contract casting a number): keep the number
            return value
    return value


def decode_values(
    params: Sequence[Mapping[str, Any]], data: bytes, types: Mapping[str, type] | None = None
) -> tuple[Any, ...]:
    """Decode ABI-encoded ``data`` for ``params`` into Python values (see :func:`to_python`)."""
    raw = abi_decode([canonical_type(p) for p in params], data)
    return tuple(to_python(p, v, types) for p, v in zip(params, raw, strict=True))


# --------------------------------------------------------------------------- errors


class RevertReason(ContractRevert):
    """A ``revert("reason")`` or ``require(cond, "reason")``: Solidity's built-in ``Error(string)``."""

    def __init__(self, reason: str, *, data: bytes = b"") -> None:
        super().__init__(f"reverted: {reason}")
        self.reason = reason
        self.data = data


class Panic(ContractRevert):
    """Solidity's built-in ``Panic(uint256)``: an assertion, overflow, division by zero or bad array index."""

    hint = "a contract invariant broke (a bug in the contract or a call it cannot handle); report it with the code"

    #: Panic codes from the Solidity documentation.
    CODES: ClassVar[Mapping[int, str]] = {
        0x01: "assert failed",
        0x11: "arithmetic overflow or underflow",
        0x12: "division or modulo by zero",
        0x21: "invalid enum value",
        0x22: "bad storage byte array",
        0x31: "pop on empty array",
        0x32: "array index out of bounds",
        0x41: "out of memory",
        0x51: "call to an uninitialised function",
    }

    def __init__(self, code: int, *, data: bytes = b"") -> None:
        super().__init__(f"panic 0x{code:02x}: {self.CODES.get(code, 'unknown panic code')}")
        self.code = code
        self.data = data


class CustomError(ContractRevert):
    """Base of the exception classes for a contract's custom errors (one class per error).

    Subclasses set :attr:`abi`; the decoded arguments become attributes named
    by :attr:`fields` (the ABI names in snake_case).
    """

    #: The error's ABI entry (``{"type": "error", "name": ..., "inputs": [...]}``).
    abi: ClassVar[Mapping[str, Any]] = {"type": "error", "name": "CustomError", "inputs": []}
    #: Python attribute names of the arguments, in ABI order.
    fields: ClassVar[tuple[str, ...]] = ()
    #: Classes of struct (NamedTuple) and enum (IntEnum) arguments, by qualified Solidity name.
    types: ClassVar[Mapping[str, type]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "fields" not in cls.__dict__:
            cls.fields = field_names(cls.abi.get("inputs", ()))

    def __init__(self, *values: Any, data: bytes = b"") -> None:
        if len(values) != len(self.fields):
            raise TypeError(f"{type(self).__name__} takes {len(self.fields)} values, got {len(values)}")
        shown = ", ".join(f"{name}={_shown(value)}" for name, value in zip(self.fields, values, strict=True))
        super().__init__(f"reverted with {self.abi['name']}({shown})")
        self.values = values
        self.data = data
        for name, value in zip(self.fields, values, strict=True):
            setattr(self, name, value)

    @classmethod
    def signature(cls) -> str:
        """``Name(type1,type2)``."""
        return signature(cls.abi)

    @classmethod
    def selector(cls) -> bytes:
        """The 4-byte selector that starts the revert data."""
        return selector(cls.abi)

    @classmethod
    def decode(cls, data: bytes) -> CustomError:
        """Build the exception from revert data (selector included)."""
        return cls(*decode_values(cls.abi.get("inputs", ()), data[4:], cls.types), data=data)

    def __reduce__(self) -> tuple[Any, ...]:  # picklable across processes (multiprocessing, pytest-xdist)
        cls = type(self)
        if getattr(sys.modules.get(cls.__module__), cls.__qualname__, None) is cls:
            return (_rebuild_error, (cls, None, self.values, self.data))
        return (
            _rebuild_error,
            (None, dict(cls.abi), self.values, self.data),
        )  # built at run time: rebuild from the ABI


def _shown(value: Any) -> str:
    """An argument in a revert message: an enum by its name (``TaskStatus.RUNNING``), others as their repr."""
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    return repr(value)


def _rebuild_error(
    cls: type[CustomError] | None, abi: Mapping[str, Any] | None, values: tuple[Any, ...], data: bytes
) -> CustomError:
    return (cls or error_class(abi or {}))(*values, data=data)


def error_class(
    entry: Mapping[str, Any], *, doc: str = "", types: Mapping[str, type] | None = None
) -> type[CustomError]:
    """Build the exception class for one custom error ABI entry (used for ABIs without generated bindings)."""
    namespace: dict[str, Any] = {
        "abi": dict(entry),
        "types": dict(types or {}),
        "__doc__": doc or f"The contract's custom error ``{signature(entry)}``.",
        "__module__": __name__,
    }
    if doc:
        namespace["hint"] = doc
    return type(str(entry["name"]), (CustomError,), namespace)


# --------------------------------------------------------------------------- events


@dataclass(frozen=True, kw_only=True)
class ChainEvent:
    """Base of the decoded events: where the log is, then the event's own fields.

    Events sort by (block number, log index), the order the chain applied them in.
    """

    #: The event's ABI entry.
    abi: ClassVar[Mapping[str, Any]] = {"type": "event", "name": "ChainEvent", "inputs": []}
    #: Classes of struct (NamedTuple) and enum (IntEnum) fields, by qualified Solidity name.
    types: ClassVar[Mapping[str, type]] = {}
    #: The event's own field names (the ABI names in snake_case), in ABI order.
    fields: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "fields" not in cls.__dict__:
            cls.fields = field_names(cls.abi.get("inputs", ()))

    block_number: int
    log_index: int
    transaction_hash: str
    address: str

    @property
    def position(self) -> tuple[int, int]:
        """(block number, log index): the event's place in the chain's history."""
        return (self.block_number, self.log_index)

    def __lt__(self, other: ChainEvent) -> bool:
        if not isinstance(other, ChainEvent):
            return NotImplemented
        return self.position < other.position

    @classmethod
    def topic(cls) -> bytes:
        """Topic 0 of the event's logs."""
        return topic(cls.abi)

    @classmethod
    def from_log(cls, log: Mapping[str, Any]) -> ChainEvent:
        """Decode one log (as web3 returns it) whose topic 0 is this event's."""
        inputs = cls.abi.get("inputs", ())
        topics = [bytes(t) for t in log["topics"]][1:]
        indexed = [p for p in inputs if p.get("indexed")]
        plain = [p for p in inputs if not p.get("indexed")]
        if len(topics) != len(indexed):
            raise DecodingError(f"{cls.__name__} expects {len(indexed)} indexed topics, log has {len(topics)}")
        plain_values = iter(decode_values(plain, bytes(log["data"]), cls.types))
        topic_values = iter(topics)
        values: dict[str, Any] = {}
        for name, param in zip(cls.fields, inputs, strict=True):
            if not param.get("indexed"):
                values[name] = next(plain_values)
            elif _is_value_type(param):
                values[name] = decode_values([param], next(topic_values), cls.types)[0]
            else:  # dynamic values are indexed by their keccak hash only
                values[name] = next(topic_values)
        return cls(
            block_number=int(log["blockNumber"]),
            log_index=int(log["logIndex"]),
            transaction_hash=_hex(log["transactionHash"]),
            address=to_checksum_address(log["address"]),
            **values,
        )


def _is_value_type(param: Mapping[str, Any]) -> bool:
    kind = param["type"]
    return not (kind in ("string", "bytes") or kind.startswith("tuple") or kind.endswith("]"))


def _hex(value: Any) -> str:
    if isinstance(value, str):
        return value if value.startswith("0x") else "0x" + value
    return "0x" + bytes(value).hex()


def python_type(param: Mapping[str, Any], types: Mapping[str, type] | None = None) -> Any:
    """The Python type of a decoded ABI value (used for run-time event dataclasses)."""
    kind: str = param["type"]
    if kind.endswith("]"):
        return tuple
    named = (types or {}).get(type_name(param) or "")
    if named is not None:
        return named
    if kind == "tuple":
        return tuple
    if kind == "bool":
        return bool
    if kind.startswith(("uint", "int")):
        return int
    if kind in ("address", "string"):
        return str
    if kind.startswith("bytes"):
        return bytes
    return Any


def event_class(
    entry: Mapping[str, Any], *, doc: str = "", types: Mapping[str, type] | None = None
) -> type[ChainEvent]:
    """Build the frozen dataclass for one event ABI entry (used for ABIs without generated bindings)."""
    inputs = entry.get("inputs", ())
    cls = dataclasses.make_dataclass(
        str(entry["name"]),
        [(name, python_type(p, types)) for name, p in zip(field_names(inputs), inputs, strict=True)],
        bases=(ChainEvent,),
        frozen=True,
        kw_only=True,
        namespace={"abi": dict(entry), "types": dict(types or {}), "__module__": __name__},
    )
    cls.__doc__ = doc or f"The contract's event ``{signature(entry)}``."
    return cls


#: An event class, for functions that return the events of the type they are given.
E = TypeVar("E", bound=ChainEvent)


# --------------------------------------------------------------------------- registry


class AbiRegistry:
    """Custom errors by selector and events by topic, across every contract of a deployment."""

    def __init__(self, errors: Iterable[type[CustomError]] = (), events: Iterable[type[ChainEvent]] = ()) -> None:
        self._errors: dict[bytes, type[CustomError]] = {}
        self._events: dict[bytes, type[ChainEvent]] = {}
        for error in errors:
            self.register_error(error)
        for event in events:
            self.register_event(event)

    def register_error(self, cls: type[CustomError]) -> None:
        """Map ``cls``'s selector to it; a declared class replaces one built at run time, never the reverse."""
        _register(self._errors, cls.selector(), cls)

    def register_event(self, cls: type[ChainEvent]) -> None:
        """Map ``cls``'s topic to it; a declared class replaces one built at run time, never the reverse."""
        _register(self._events, cls.topic(), cls)

    def add_abi(self, abi: Abi) -> None:
        """Build and register classes for the ABI's errors and events not known yet."""
        for entry in abi:
            if entry.get("type") == "error" and selector(entry) not in self._errors:
                self.register_error(error_class(entry))
            elif entry.get("type") == "event" and not entry.get("anonymous") and topic(entry) not in self._events:
                self.register_event(event_class(entry))

    def merged(self, other: AbiRegistry) -> AbiRegistry:
        """A registry that knows both; ``self``'s classes win on collisions."""
        return AbiRegistry([*self.errors, *other.errors], [*self.events, *other.events])

    @property
    def errors(self) -> tuple[type[CustomError], ...]:
        return tuple(self._errors.values())

    @property
    def events(self) -> tuple[type[ChainEvent], ...]:
        return tuple(self._events.values())

    @property
    def topics(self) -> tuple[bytes, ...]:
        """Topic 0 of every known event (for eth_getLogs filters)."""
        return tuple(self._events)

    def error(self, name: str) -> type[CustomError]:
        """The exception class of the custom error called ``name``."""
        for cls in self._errors.values():
            if cls.abi["name"] == name:
                return cls
        raise KeyError(name)

    def event(self, name: str) -> type[ChainEvent]:
        """The event class called ``name``."""
        for cls in self._events.values():
            if cls.abi["name"] == name:
                return cls
        raise KeyError(name)

    def decode_revert(self, data: bytes | str | None) -> ContractRevert:
        """The exception for revert ``data``: a custom error's class, RevertReason, Panic, or a generic ContractRevert."""
        raw = _as_bytes(data)
        head, body = raw[:4], raw[4:]
        try:
            if head in self._errors:
                return self._errors[head].decode(raw)
            if head == _ERROR_STRING:
                return RevertReason(abi_decode(["string"], body)[0], data=raw)
            if head == _PANIC:
                return Panic(abi_decode(["uint256"], body)[0], data=raw)
        except DecodingError:
            pass
        generic = ContractRevert(
            f"reverted with unknown error data 0x{raw.hex()}" if raw else "reverted without error data",
            hint="the revert data matches no known custom error; regenerate the bindings "
            "(python -m fedchain.chain.codegen) or check the contract address",
        )
        generic.data = raw
        return generic

    def decode_log(self, log: Mapping[str, Any]) -> ChainEvent | None:
        """The typed event for one log, or None when its topic is unknown or it cannot be decoded."""
        topics = log.get("topics") or ()
        if not topics:
            return None
        cls = self._events.get(bytes(topics[0]) if not isinstance(topics[0], str) else bytes.fromhex(topics[0][2:]))
        if cls is None:
            return None
        try:
            return cls.from_log(log)
        except (DecodingError, ValueError):
            return None  # same signature, different indexing: not one of ours

    def decode_logs(self, logs: Iterable[Mapping[str, Any]]) -> list[ChainEvent]:
        """The typed events among ``logs``, ordered by (block number, log index)."""
        return sorted(event for event in map(self.decode_log, logs) if event is not None)


def _register(table: dict[bytes, Any], key: bytes, cls: type) -> None:
    known = table.get(key)
    if known is None or (known.__module__ == __name__ and cls.__module__ != __name__):
        table[key] = cls


_ERROR_STRING = keccak(text="Error(string)")[:4]
_PANIC = keccak(text="Panic(uint256)")[:4]


def _as_bytes(data: bytes | str | None) -> bytes:
    if data is None:
        return b""
    if isinstance(data, str):
        return bytes.fromhex(data.removeprefix("0x"))
    return bytes(data)
