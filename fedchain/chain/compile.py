"""Compile FedChain's Solidity sources into ABI and bytecode artifacts.

A native ``solc`` of the pinned version is used when py-solc-x finds one;
otherwise the npm compiler (WebAssembly) through the project's Node bridge
(``solc_bridge.js``), which speaks the same ``--standard-json`` protocol.
Artifacts are cached under ``build/contracts`` by a hash of every source, the
compiler version and the settings, so an unchanged tree compiles once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fedchain.errors import ChainError
from fedchain.files import write_atomic

log = logging.getLogger(__name__)

#: The project root (contracts/, node_modules/ and build/ live here).
PROJECT_ROOT = Path(__file__).resolve().parents[2]
CONTRACTS_DIR = PROJECT_ROOT / "contracts"
BUILD_DIR = PROJECT_ROOT / "build" / "contracts"
BRIDGE = Path(__file__).with_name("solc_bridge.js")

SOLC_VERSION = "0.8.37"
#: Pinned everywhere: newer defaults are not supported by py-evm (eth-tester).
EVM_VERSION = "prague"
OPTIMIZER_RUNS = 200
REMAPPINGS = ("@openzeppelin/=node_modules/@openzeppelin/",)


class CompileError(ChainError):
    """The Solidity sources do not compile."""

    hint = "fix the reported Solidity error; `make setup` installs the compiler if it is missing"


@dataclass(frozen=True)
class Artifact:
    """One compiled contract."""

    name: str
    source: str
    abi: tuple[dict[str, Any], ...]
    bytecode: str
    deployed_bytecode: str
    #: NatSpec for users (``@notice``) by kind (methods, errors, events) and signature.
    userdoc: dict[str, Any] = field(default_factory=dict, compare=False)
    #: NatSpec for developers (``@param``, ``@return``, ``@dev``) by kind and signature.
    devdoc: dict[str, Any] = field(default_factory=dict, compare=False)
    #: The enums the contract defines: their members' names in value order, by enum name
    #: (the ABI gives an enum only as ``uint8``; the names come from the compiler's AST).
    enums: dict[str, list[str]] = field(default_factory=dict, compare=False)

    @property
    def bytecode_hash(self) -> str:
        """SHA-256 (hex) of the runtime code, recorded in deployment files to pin what was deployed."""
        return hashlib.sha256(bytes.fromhex(self.deployed_bytecode.removeprefix("0x"))).hexdigest()


def _sources(contracts_dir: Path) -> dict[str, Path]:
    files = sorted(contracts_dir.rglob("*.sol"))
    if not files:
        raise CompileError(f"no Solidity sources under {contracts_dir}")
    return {path.relative_to(contracts_dir.parent).as_posix(): path for path in files}


def standard_input(contracts_dir: Path = CONTRACTS_DIR) -> dict[str, Any]:
    """The solc standard-JSON input for every source under ``contracts_dir``."""
    return {
        "language": "Solidity",
        "sources": {name: {"content": path.read_text()} for name, path in _sources(contracts_dir).items()},
        "settings": {
            "evmVersion": EVM_VERSION,
            "optimizer": {"enabled": True, "runs": OPTIMIZER_RUNS},
            "viaIR": True,
            "remappings": list(REMAPPINGS),
            "outputSelection": {
                "*": {
                    "": ["ast"],
                    "*": ["abi", "evm.bytecode.object", "evm.deployedBytecode.object", "userdoc", "devdoc"],
                }
            },
        },
    }


def _solc_binary() -> Path:
    """A native solc of the pinned version if py-solc-x has one, else the Node bridge."""
    try:
        from solcx import get_installed_solc_versions
        from solcx.install import get_executable

        for version in get_installed_solc_versions():
            if str(version) == SOLC_VERSION:
                return Path(get_executable(version))
    except Exception:  # py-solc-x missing or its folder unreadable: fall back to the bridge
        log.debug("no native solc %s from py-solc-x", SOLC_VERSION, exc_info=True)
    if shutil.which("node") is None:
        raise CompileError(
            "neither a native solc nor node is available", hint="install Node.js 20+ and run `make setup`"
        )
    if not (PROJECT_ROOT / "node_modules" / "solc").is_dir():
        raise CompileError(
            "the npm solc compiler is not installed", hint="run `make setup` (npm ci) in the project root"
        )
    return BRIDGE


def compile_contracts(contracts_dir: Path = CONTRACTS_DIR, build_dir: Path = BUILD_DIR) -> dict[str, Artifact]:
    """Compile every contract (cached by source hash) and return artifacts by contract name."""
    payload = standard_input(contracts_dir)
    key = hashlib.sha256(json.dumps([SOLC_VERSION, payload], sort_keys=True).encode()).hexdigest()[:16]
    cache = build_dir / f"artifacts-{key}.json"
    if cache.is_file():
        raw = json.loads(cache.read_text())
    else:
        raw = _run_compiler(payload)
        build_dir.mkdir(parents=True, exist_ok=True)
        for stale in build_dir.glob("artifacts-*.json"):
            if stale != cache:  # another process compiling the same sources may have just written it
                stale.unlink(missing_ok=True)
        # Through a temporary file of this process's own: processes compiling at once (the demo's agents, the
        # test suite's workers) never write into one file, and a reader sees a whole cache or none.
        write_atomic(cache, json.dumps(raw).encode())
    return {name: Artifact(name=name, **fields) for name, fields in raw.items()}


def _run_compiler(payload: dict[str, Any]) -> dict[str, dict[str, Any]]:
    import solcx

    binary = _solc_binary()
    log.info("compiling %d Solidity sources with %s", len(payload["sources"]), binary.name)
    try:
        output = solcx.compile_standard(
            payload,
            solc_binary=binary,
            base_path=str(PROJECT_ROOT),
            allow_paths=[str(PROJECT_ROOT)],
        )
    except solcx.exceptions.SolcError as err:
        raise CompileError(f"solc failed: {err.message if hasattr(err, 'message') else err}") from err
    errors = [e for e in output.get("errors", []) if e.get("severity") == "error"]
    if errors:
        raise CompileError("\n".join(e.get("formattedMessage", e.get("message", "")) for e in errors))
    artifacts: dict[str, dict[str, Any]] = {}
    for source, contracts in output.get("contracts", {}).items():
        enums = _enums(output.get("sources", {}).get(source, {}).get("ast", {}))
        for name, data in contracts.items():
            if name in artifacts:
                raise CompileError(f"contract name {name} is defined twice ({artifacts[name]['source']}, {source})")
            artifacts[name] = {
                "source": source,
                "abi": data["abi"],
                "bytecode": "0x" + data["evm"]["bytecode"]["object"],
                "deployed_bytecode": "0x" + data["evm"]["deployedBytecode"]["object"],
                "userdoc": data.get("userdoc", {}),
                "devdoc": data.get("devdoc", {}),
                "enums": enums.get(name, {}),
            }
    return artifacts


def _enums(ast: dict[str, Any]) -> dict[str, dict[str, list[str]]]:
    """``{contract: {enum: [member, ...]}}`` for the enums defined in the contracts of one source's AST."""
    found: dict[str, dict[str, list[str]]] = {}
    for node in ast.get("nodes", ()):
        if node.get("nodeType") != "ContractDefinition":
            continue
        for member in node.get("nodes", ()):
            if member.get("nodeType") == "EnumDefinition":
                found.setdefault(node["name"], {})[member["name"]] = [value["name"] for value in member["members"]]
    return found
