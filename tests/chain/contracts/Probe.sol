// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

/// @notice A tiny contract that exercises what the chain layer must decode:
/// custom errors (with and without arguments), events with indexed and
/// dynamic fields, a struct parameter, payable calls and views.
contract Probe {
    struct Pair {
        uint64 left;
        address right;
    }

    error ProbeTooSmall(uint256 value, uint256 minimum);
    error ProbeClosed();
    error ProbeNamed(string label, bytes32 tag);

    event Stored(address indexed sender, uint256 indexed value, string note);
    event Paired(uint256 indexed id, Pair pair, uint8[] flags);
    event Paid(address indexed from, uint256 amount);

    uint256 private _value;
    bool private _closed;
    mapping(uint256 id => Pair pair) private _pairs;

    constructor(uint256 initial) {
        _value = initial;
    }

    function store(uint256 value, string calldata note) external {
        if (_closed) revert ProbeClosed();
        if (value < 10) revert ProbeTooSmall(value, 10);
        _value = value;
        emit Stored(msg.sender, value, note);
    }

    function pair(uint256 id, Pair calldata p, uint8[] calldata flags) external {
        _pairs[id] = p;
        emit Paired(id, p, flags);
    }

    function pay() external payable {
        emit Paid(msg.sender, msg.value);
    }

    function close() external {
        _closed = true;
    }

    function fail(string calldata label) external pure {
        revert ProbeNamed(label, keccak256(bytes(label)));
    }

    function failWithString() external pure {
        revert("plain reason");
    }

    function value() external view returns (uint256) {
        return _value;
    }

    function pairOf(uint256 id) external view returns (Pair memory) {
        return _pairs[id];
    }
}
