// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

/// @title The few Foundry cheatcodes the suite uses, declared by hand (forge-std is not available offline).
/// @notice Signatures as forge 1.7 implements them; the cheatcode contract lives at VM_ADDRESS.
interface Vm {
    struct Log {
        bytes32[] topics;
        bytes data;
        address emitter;
    }

    function warp(uint256 newTimestamp) external;
    function roll(uint256 newHeight) external;
    function prank(address msgSender) external;
    function startPrank(address msgSender) external;
    function stopPrank() external;
    function deal(address account, uint256 newBalance) external;
    function addr(uint256 privateKey) external pure returns (address keyAddr);
    function sign(uint256 privateKey, bytes32 digest) external pure returns (uint8 v, bytes32 r, bytes32 s);
    function expectRevert(bytes calldata revertData) external;
    function expectRevert(bytes4 revertData) external;
    function expectRevert() external;
    function recordLogs() external;
    function getRecordedLogs() external returns (Log[] memory logs);
    function computeCreateAddress(address deployer, uint256 nonce) external pure returns (address);
    function deployCode(string calldata artifactPath, bytes calldata constructorArgs) external returns (address deployed);
    function getNonce(address account) external view returns (uint64 nonce);
    function label(address account, string calldata newLabel) external;
    function assume(bool condition) external pure;
    function envOr(string calldata name, uint256 defaultValue) external view returns (uint256 value);
    function writeLine(string calldata path, string calldata data) external;
    function toString(uint256 value) external pure returns (string memory);
    function store(address target, bytes32 slot, bytes32 value) external;
    function load(address target, bytes32 slot) external view returns (bytes32 data);
    function expectEmit(bool checkTopic1, bool checkTopic2, bool checkTopic3, bool checkData) external;
}
