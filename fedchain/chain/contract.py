"""A deployed contract driven from its ABI: encode, transact, call, decode.

:class:`Contract` is what the generated bindings (:mod:`fedchain.chain.bindings`)
subclass: each generated method is one line over :meth:`Contract.transact` or
:meth:`Contract.call`. It also works on its own for any ABI:

>>> probe = Contract(transactor, address, abi)              # doctest: +SKIP
>>> probe.transact("store", 42, "hello").events              # doctest: +SKIP
(Stored(..., sender='0xf39F...', value=42, note='hello'),)
>>> probe.call("value")                                       # doctest: +SKIP
42
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

from eth_abi import encode as abi_encode
from eth_utils import to_checksum_address

from fedchain.chain.abi import Abi, canonical_type, decode_values, selector, signature
from fedchain.chain.tx import Receipt, Transactor
from fedchain.errors import ChainError

C = TypeVar("C", bound="Contract")


class Contract:
    """A contract at ``address``, sending through ``transactor``; generated subclasses fix ABI and name."""

    #: The contract's name (generated subclasses set it).
    NAME: ClassVar[str] = ""
    #: The contract's ABI (generated subclasses set it; plain instances take it as an argument).
    ABI: ClassVar[Abi] = ()
    #: Classes of the ABI's structs (NamedTuple) and enums (IntEnum), by qualified Solidity name.
    TYPES: ClassVar[Mapping[str, type]] = {}

    def __init__(self, transactor: Transactor, address: str, abi: Abi | None = None) -> None:
        self.transactor = transactor
        self.address = to_checksum_address(address)
        self.abi: Abi = tuple(abi if abi is not None else self.ABI)
        self.transactor.registry.add_abi(self.abi)
        functions = [e for e in self.abi if e.get("type") == "function"]
        self._by_signature = {signature(e): e for e in functions}
        self._by_name: dict[str, list[Mapping[str, Any]]] = {}
        for entry in functions:
            self._by_name.setdefault(entry["name"], []).append(entry)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.address})"

    @classmethod
    def deploy(
        cls: type[C], transactor: Transactor, bytecode: str, *args: Any, value: int = 0, abi: Abi | None = None
    ) -> C:
        """Create the contract from ``bytecode`` with constructor ``args`` and return it bound to its address."""
        entries = abi if abi is not None else cls.ABI
        constructor: Mapping[str, Any] = next((e for e in entries if e.get("type") == "constructor"), {"inputs": []})
        receipt = transactor.deploy(bytecode, _encode_args(constructor, args), value=value)
        if receipt.contract_address is None:
            raise ChainError(f"deploying {cls.NAME or 'the contract'} returned no contract address")
        return cls(transactor, receipt.contract_address, abi)

    # ------------------------------------------------------------------ generic access

    def function(self, name: str) -> Mapping[str, Any]:
        """The ABI entry of function ``name`` (a bare name, or ``name(types)`` for overloads)."""
        if "(" in name:
            if name not in self._by_signature:
                raise ChainError(f"{self!r} has no function {name}", hint=_functions_hint(self._by_signature))
            return self._by_signature[name]
        entries = self._by_name.get(name, [])
        if len(entries) != 1:
            what = "no function" if not entries else "several overloads of"
            raise ChainError(f"{self!r} has {what} {name}", hint=_functions_hint(self._by_signature))
        return entries[0]

    def encode(self, name: str, *args: Any) -> bytes:
        """Calldata of ``name(args)``."""
        entry = self.function(name)
        return selector(entry) + _encode_args(entry, args)

    def transact(self, name: str, *args: Any, value: int = 0) -> Receipt:
        """Send ``name(args)`` as a transaction; the revert, if any, is raised as its decoded exception."""
        return self.transactor.send(self.address, self.encode(name, *args), value=value)

    def call(self, name: str, *args: Any, value: int = 0, block: int | str = "latest") -> Any:
        """Evaluate ``name(args)`` with eth_call; one output is returned bare, several as a tuple."""
        entry = self.function(name)
        raw = self.transactor.call(self.address, self.encode(name, *args), value=value, block=block)
        outputs = entry.get("outputs", ())
        values = decode_values(outputs, raw, self.TYPES)
        return values[0] if len(values) == 1 else (values if values else None)

    def estimate_gas(self, name: str, *args: Any, value: int = 0) -> int:
        """Gas ``name(args)`` would use now; a revert is raised as its decoded exception."""
        return self.transactor.estimate_gas(self.address, self.encode(name, *args), value=value)


def _encode_args(entry: Mapping[str, Any], args: tuple[Any, ...]) -> bytes:
    inputs = entry.get("inputs", ())
    if len(args) != len(inputs):
        name = entry.get("name", "constructor")
        raise ChainError(f"{name} takes {len(inputs)} arguments ({signature(dict(entry, name=name))}), got {len(args)}")
    try:
        return abi_encode([canonical_type(p) for p in inputs], list(args))
    except Exception as err:  # eth_abi raises many kinds of encoding errors
        raise ChainError(
            f"cannot encode the arguments of {entry.get('name', 'constructor')}: {err}",
            hint="pass values of the ABI types (int for uintN, checksum str for address, bytes for bytesN)",
        ) from err


def _functions_hint(by_signature: Mapping[str, Any]) -> str:
    return "functions: " + (", ".join(sorted(by_signature)) or "(none)")
