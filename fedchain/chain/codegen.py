"""Generate the typed Python bindings (:mod:`fedchain.chain.bindings`) from the contracts' ABIs.

One NamedTuple per Solidity struct, one exception class per custom error
(documented with its NatSpec, which also becomes its hint), one frozen
dataclass per event, and one class per deployable contract with a typed method
per function: views return decoded values, the others send a transaction and
return a :class:`~fedchain.chain.tx.Receipt`. The output is deterministic, so a
test can tell when the committed module is stale::

    python -m fedchain.chain.codegen           # rewrite fedchain/chain/bindings.py
    python -m fedchain.chain.codegen --check   # exit 1 when it is stale
"""

from __future__ import annotations

import argparse
import json
import keyword
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fedchain.chain.abi import field_names, signature, snake_case, type_name
from fedchain.chain.compile import Artifact, compile_contracts

BINDINGS_PATH = Path(__file__).with_name("bindings.py")
#: Sources whose contracts get a class: FedChain's own, not its test helpers or OpenZeppelin's.
BOUND_SOURCES = "contracts/"
UNBOUND_SOURCES = ("contracts/test/",)
#: Sources whose contracts get a class but are not part of a FedChain deployment (the demo's own token).
UNDEPLOYED_SOURCES = ("contracts/demo/",)
#: Attribute names of :class:`~fedchain.chain.contract.Contract` a generated method must not shadow.
CONTRACT_ATTRIBUTES = frozenset(
    {"call", "transact", "encode", "function", "deploy", "estimate_gas", "address", "abi", "transactor"}
)


@dataclass
class _Docs:
    """NatSpec by kind ("methods", "errors", "events") and signature, merged across contracts."""

    notices: dict[tuple[str, str], str] = field(default_factory=dict)
    params: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)

    def add(self, artifact: Artifact) -> None:
        if artifact.userdoc.get("notice"):
            self.notices[("contract", artifact.name)] = " ".join(artifact.userdoc["notice"].split())
        for kind in ("methods", "errors", "events"):
            for sig, doc in artifact.userdoc.get(kind, {}).items():
                for entry in doc if isinstance(doc, list) else [doc]:
                    if entry.get("notice"):
                        self.notices.setdefault((kind, sig), " ".join(entry["notice"].split()))
            for sig, doc in artifact.devdoc.get(kind, {}).items():
                for entry in doc if isinstance(doc, list) else [doc]:
                    if entry.get("params"):
                        self.params.setdefault((kind, sig), entry["params"])

    def notice(self, kind: str, sig: str) -> str:
        return self.notices.get((kind, sig), "")

    def param(self, kind: str, sig: str, name: str) -> str:
        return " ".join(self.params.get((kind, sig), {}).get(name, "").split())


class _Names:
    """Python class names, unique across the module."""

    def __init__(self) -> None:
        self.taken: set[str] = {"REGISTRY", "TYPES", "CONTRACTS", "Contract", "Receipt", "ChainEvent", "CustomError"}

    def claim(self, wanted: str, suffix: str) -> str:
        name = wanted if wanted not in self.taken else wanted + suffix
        while name in self.taken:
            name += "_"
        self.taken.add(name)
        return name


def _py_type(param: Mapping[str, Any], named: Mapping[str, str], *, argument: bool = False) -> str:
    """The annotation of a value: ``named`` maps qualified struct and enum names to their classes.

    Arguments take a plain ``int`` where an enum goes (an IntEnum member is one); results are the enum.
    """
    kind: str = param["type"]
    if kind.endswith("]"):
        inner = _py_type(dict(param, type=kind[: kind.rindex("[")]), named, argument=argument)
        return f"Sequence[{inner}]" if argument else f"tuple[{inner}, ...]"
    qualified = type_name(param)
    if kind == "tuple":
        if qualified is not None and qualified in named:
            return named[qualified]
        return "tuple[" + ", ".join(_py_type(c, named, argument=argument) for c in param.get("components", ())) + "]"
    if qualified is not None and qualified in named and not argument:
        return named[qualified]
    if kind == "bool":
        return "bool"
    if kind.startswith(("uint", "int")):
        return "int"
    if kind in ("address", "string"):
        return "str"
    if kind.startswith("bytes"):
        return "bytes"
    return "Any"


def _event_field_type(param: Mapping[str, Any], named: Mapping[str, str]) -> str:
    dynamic = param["type"] in ("string", "bytes") or param["type"].startswith("tuple") or param["type"].endswith("]")
    return "bytes" if param.get("indexed") and dynamic else _py_type(param, named)


def _doc(lines: Iterable[str], indent: str) -> str:
    body = [line for line in lines if line is not None]
    if len(body) == 1:
        return f'{indent}"""{body[0]}"""\n'
    text = f'{indent}"""{body[0]}\n'
    for line in body[1:]:
        text += f"{indent}{line}\n".rstrip(" ") if line else "\n"
    return text + f'{indent}"""\n'


def _literal(entry: Mapping[str, Any]) -> str:
    """A JSON ABI entry as a Python literal on one line (deterministic)."""
    return repr(json.loads(json.dumps(entry, sort_keys=True)))


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"""', "'''")


def _param_line(name: str, doc: str) -> str:
    doc = doc.strip()
    return f"- ``{name}``" + (f": {_escape(doc)}" if doc else "")


def _method_name(name: str, taken: set[str]) -> str:
    method = snake_case(name)
    if keyword.iskeyword(method) or method in CONTRACT_ATTRIBUTES or method.startswith("_"):
        method = method.strip("_") + "_"
    while method in taken:
        method += "_"
    taken.add(method)
    return method


def render(artifacts: Mapping[str, Artifact]) -> str:
    """The source of the bindings module for ``artifacts``."""
    docs = _Docs()
    for artifact in artifacts.values():
        docs.add(artifact)
    names = _Names()
    ordered = sorted(artifacts.values(), key=lambda a: (a.source, a.name))

    # Structs: every tuple parameter with a struct internalType, nested ones first.
    struct_defs: dict[str, Mapping[str, Any]] = {}

    def collect(params: Sequence[Mapping[str, Any]]) -> None:
        for param in params:
            if param["type"].startswith("tuple"):
                collect(param.get("components", ()))
                qualified = type_name(param)
                if qualified and qualified not in struct_defs:
                    struct_defs[qualified] = param

    for artifact in ordered:
        entry: Mapping[str, Any]
        for entry in artifact.abi:
            collect(entry.get("inputs", ()))
            collect(entry.get("outputs", ()))
    enum_defs = {f"{a.name}.{enum}": members for a in ordered for enum, members in sorted(a.enums.items())}
    enums = {q: names.claim(q.split(".")[-1], "Enum") for q in enum_defs}
    structs = {q: names.claim(q.split(".")[-1], "Struct") for q in struct_defs}
    named = {**enums, **structs}

    errors: dict[str, Mapping[str, Any]] = {}
    events: dict[str, Mapping[str, Any]] = {}
    for artifact in ordered:
        for entry in artifact.abi:
            if entry["type"] == "error":
                errors.setdefault(signature(entry), entry)
            elif entry["type"] == "event" and not entry.get("anonymous"):
                events.setdefault(signature(entry), entry)
    bound = [
        a
        for a in ordered
        if a.source.startswith(BOUND_SOURCES)
        and not a.source.startswith(UNBOUND_SOURCES)
        and len(a.deployed_bytecode) > 2
        and any(e["type"] == "function" for e in a.abi)
    ]
    contract_names = {a.name: names.claim(a.name, "Contract") for a in bound}
    error_names = {sig: names.claim(e["name"], "Error") for sig, e in sorted(errors.items())}
    event_names = {sig: names.claim(e["name"], "Event") for sig, e in sorted(events.items())}

    out: list[str] = [
        '"""Typed bindings for FedChain\'s contracts: enums, structs, custom errors, events and contract classes.\n\n'
        "GENERATED by ``python -m fedchain.chain.codegen`` from the compiled ABIs and NatSpec; do not edit.\n"
        "A test fails when this file is stale; regenerate it after changing contracts/.\n\n"
        ">>> fedchain = FedChainContracts.bind(deployment, transactor)   # doctest: +SKIP\n"
        ">>> receipt = fedchain.task_registry.create_task(params, aggregator, value=budget)   # doctest: +SKIP\n"
        '"""\n\n'
        "from __future__ import annotations\n\n"
        "from collections.abc import Mapping, Sequence\n"
        "from dataclasses import dataclass\n"
        "from enum import IntEnum\n"
        "from typing import Any, ClassVar, NamedTuple, Protocol\n\n"
        "from fedchain.chain.abi import AbiRegistry, ChainEvent, CustomError\n"
        "from fedchain.chain.contract import Contract\n"
        "from fedchain.chain.tx import Receipt, Transactor\n\n"
    ]

    out.append("# " + "-" * 75 + " enums\n\n")
    for qualified, members in enum_defs.items():
        out.append(f"\nclass {enums[qualified]}(IntEnum):\n")
        out.append(_doc([f"Solidity enum ``{qualified}``."], "    "))
        out.append("\n")
        for value, member in enumerate(members):
            out.append(f"    {snake_case(member).upper()} = {value}\n")
        out.append("\n")

    out.append("\n# " + "-" * 75 + " structs\n\n")
    for qualified, param in struct_defs.items():
        components = param.get("components", ())
        out.append(f"\nclass {structs[qualified]}(NamedTuple):\n")
        out.append(_doc([f"Solidity struct ``{qualified}``."], "    "))
        out.append("\n")
        for name, component in zip(field_names(components), components, strict=True):
            out.append(f"    {name}: {_py_type(component, named)}\n")
        out.append("\n")
    out.append("\n#: The classes of the contracts' enums and structs, by qualified Solidity name (for decoding).\n")
    out.append(f"TYPES: Mapping[str, type] = {{{', '.join(f'{q!r}: {n}' for q, n in named.items())}}}\n\n")

    out.append("# " + "-" * 75 + " errors\n\n")
    for sig, entry in sorted(errors.items()):
        inputs = entry.get("inputs", ())
        notice = docs.notice("errors", sig)
        lines = [_escape(notice or f"The contracts' custom error ``{sig}``."), "", f"``{sig}``"]
        params = [
            _param_line(n, docs.param("errors", sig, p.get("name", "")))
            for n, p in zip(field_names(inputs), inputs, strict=True)
        ]
        if params:
            lines += ["", *params]
        out.append(f"\nclass {error_names[sig]}(CustomError):\n")
        out.append(_doc(lines, "    "))
        out.append("\n")
        out.append(f"    abi = {_literal(entry)}\n")
        out.append("    types = TYPES\n")
        if notice:
            out.append(f"    hint = {notice!r}\n")
        for name, field_abi in zip(field_names(inputs), inputs, strict=True):
            out.append(f"    {name}: {_py_type(field_abi, named)}\n")
        out.append("\n")

    out.append("\n# " + "-" * 75 + " events\n\n")
    for sig, entry in sorted(events.items()):
        inputs = entry.get("inputs", ())
        lines = [_escape(docs.notice("events", sig) or f"The contracts' event ``{sig}``."), "", f"``{sig}``"]
        params = [
            _param_line(n, docs.param("events", sig, p.get("name", "")) + (" (indexed)" if p.get("indexed") else ""))
            for n, p in zip(field_names(inputs), inputs, strict=True)
        ]
        if params:
            lines += ["", *params]
        out.append("\n@dataclass(frozen=True, kw_only=True)\n")
        out.append(f"class {event_names[sig]}(ChainEvent):\n")
        out.append(_doc(lines, "    "))
        out.append("\n")
        out.append(f"    abi: ClassVar[Mapping[str, Any]] = {_literal(entry)}\n")
        out.append("    types: ClassVar[Mapping[str, type]] = TYPES\n\n")
        for name, param in zip(field_names(inputs), inputs, strict=True):
            out.append(f"    {name}: {_event_field_type(param, named)}\n")
        out.append("\n")

    out.append("\n# " + "-" * 75 + " contracts\n\n")
    for artifact in bound:
        out.append(_render_contract(artifact, contract_names[artifact.name], named, docs))

    out.append("\n# " + "-" * 75 + " registry\n\n")
    out.append("#: Every custom error and event of FedChain's contracts, for decoding reverts and logs.\n")
    out.append("REGISTRY = AbiRegistry(\n")
    out.append(f"    errors=[{', '.join(error_names[s] for s in sorted(errors))}],\n")
    out.append(f"    events=[{', '.join(event_names[s] for s in sorted(events))}],\n")
    out.append(")\n\n")
    out.append("#: Contract classes by contract name.\n")
    out.append(
        f"CONTRACTS: Mapping[str, type[Contract]] = {{{', '.join(f'{a.name!r}: {contract_names[a.name]}' for a in bound)}}}\n\n"
    )
    out.append(_render_bundle(bound, contract_names))
    return "".join(out)


def _render_contract(artifact: Artifact, class_name: str, named: Mapping[str, str], docs: _Docs) -> str:
    functions = sorted((e for e in artifact.abi if e["type"] == "function"), key=lambda e: (e["name"], signature(e)))
    overloaded = {e["name"] for e in functions if sum(f["name"] == e["name"] for f in functions) > 1}
    notice = docs.notice("contract", artifact.name)
    out = [f"\nclass {class_name}(Contract):\n"]
    out.append(_doc([f"The ``{artifact.name}`` contract ({artifact.source}).", *([notice] if notice else [])], "    "))
    out.append("\n")
    out.append(f"    NAME = {artifact.name!r}\n")
    out.append("    ABI = (\n")
    for entry in artifact.abi:
        if entry["type"] in ("function", "constructor"):
            out.append(f"        {_literal(entry)},\n")
    out.append("    )\n")
    out.append("    TYPES = TYPES\n")
    taken: set[str] = set()
    for entry in functions:
        sig = signature(entry)
        method = _method_name(
            entry["name"] + (f"_{len(entry.get('inputs', ()))}" if entry["name"] in overloaded else ""), taken
        )
        inputs = entry.get("inputs", ())
        arg_names = field_names(inputs)
        args = [f"{n}: {_py_type(p, named, argument=True)}" for n, p in zip(arg_names, inputs, strict=True)]
        view = entry.get("stateMutability") in ("view", "pure")
        payable = entry.get("stateMutability") == "payable"
        outputs = entry.get("outputs", ())
        if view:
            kinds = [_py_type(p, named) for p in outputs]
            returns = "None" if not kinds else kinds[0] if len(kinds) == 1 else f"tuple[{', '.join(kinds)}]"
        else:
            returns = "Receipt"
        if payable:
            args.append("*, value: int = 0")
        if view:
            args.append('*, block: int | str = "latest"')
        lines = [
            _escape(docs.notice("methods", sig) or f"``{sig}``"),
            "",
            f"``{sig}``" + (" (view: an eth_call)" if view else ""),
        ]
        params = [
            _param_line(n, docs.param("methods", sig, p.get("name", "")))
            for n, p in zip(arg_names, inputs, strict=True)
        ]
        if payable:
            params.append("- ``value``: wei sent with the call")
        if view:
            params.append("- ``block``: the block whose state to read (a number, or a tag such as ``latest``)")
        if params:
            lines += ["", *params]
        out.append(f"\n    def {method}(self{''.join(', ' + a for a in args)}) -> {returns}:\n")
        out.append(_doc(lines, "        "))
        call_args = (
            "".join(f", {n}" for n in arg_names)
            + (", value=value" if payable else "")
            + (", block=block" if view else "")
        )
        verb = "call" if view else "transact"
        result = f"self.{verb}({sig!r}{call_args})"
        if view and not outputs:
            out.append(f"        {result}\n")
        else:
            out.append(f"        return {result}\n")
    out.append("\n")
    return "".join(out)


def _render_bundle(bound: Sequence[Artifact], contract_names: Mapping[str, str]) -> str:
    out = [
        "\nclass Addresses(Protocol):\n"
        '    """Where a deployment\'s contracts are: what :meth:`FedChainContracts.bind` needs of a\n'
        "    :class:`fedchain.chain.deployment.Deployment` (named by type, not imported: the deployment module reads\n"
        '    this one\'s registry)."""\n\n'
        "    def address(self, name: str) -> str: ...\n\n",
        "\n@dataclass(frozen=True)\nclass FedChainContracts:\n",
    ]
    out.append('    """Every deployed FedChain contract, typed, sending through one transactor."""\n\n')
    bound = [a for a in bound if not a.source.startswith(UNDEPLOYED_SOURCES)]
    for artifact in bound:
        out.append(f"    {snake_case(artifact.name)}: {contract_names[artifact.name]}\n")
    out.append("\n    @classmethod\n")
    out.append("    def bind(cls, deployment: Addresses, transactor: Transactor) -> FedChainContracts:\n")
    out.append(
        '        """The deployment\'s contracts at their addresses (registering FedChain\'s errors and events)."""\n'
    )
    out.append("        for error in REGISTRY.errors:\n            transactor.registry.register_error(error)\n")
    out.append("        for event in REGISTRY.events:\n            transactor.registry.register_event(event)\n")
    out.append("        return cls(\n")
    for artifact in bound:
        out.append(
            f"            {snake_case(artifact.name)}={contract_names[artifact.name]}(transactor, deployment.address({artifact.name!r})),\n"
        )
    out.append("        )\n")
    return "".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    """Regenerate the bindings (or, with --check, report whether they are stale)."""
    parser = argparse.ArgumentParser(prog="python -m fedchain.chain.codegen", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="exit 1 when the committed bindings are stale; write nothing"
    )
    parser.add_argument("--out", type=Path, default=BINDINGS_PATH, help="where to write the module")
    args = parser.parse_args(argv)
    source = render(compile_contracts())
    current = args.out.read_text() if args.out.is_file() else ""
    if args.check:
        if current != source:
            print(f"{args.out} is stale; run: python -m fedchain.chain.codegen", file=sys.stderr)
            return 1
        return 0
    if current != source:
        args.out.write_text(source)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
