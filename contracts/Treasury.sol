// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ReentrancyGuard} from "@openzeppelin/contracts/utils/ReentrancyGuard.sol";
import {ITreasury} from "./interfaces/ITreasury.sol";

/// @title Treasury: custody of every wei in FedChain, pull payments only
/// @notice The four modules and the sink are fixed at deployment (immutables); nobody else can move money.
contract Treasury is ITreasury, ReentrancyGuard {
    address private immutable _registry;
    address private immutable _ledger;
    address private immutable _auction;
    address private immutable _disputes;
    address private immutable _sink;

    mapping(uint256 taskId => uint256 wei_) private _held;
    mapping(address account => uint256 wei_) private _claimable;
    Totals private _totals;

    /// @param registry the TaskRegistry
    /// @param ledger the RoundLedger
    /// @param auction the FogAuction
    /// @param disputes the Disputes contract (bonds and challenges)
    /// @param sink_ where forfeits go that no wronged party is owed (address(0): burned)
    constructor(address registry, address ledger, address auction, address disputes, address sink_) {
        _registry = registry;
        _ledger = ledger;
        _auction = auction;
        _disputes = disputes;
        _sink = sink_;
        emit SinkSet(sink_);
    }

    modifier onlyModule() {
        if (msg.sender != _registry && msg.sender != _ledger && msg.sender != _auction && msg.sender != _disputes) {
            revert TreasuryUnauthorized(msg.sender);
        }
        _;
    }

    /// @inheritdoc ITreasury
    function deposit(uint256 taskId, address from) external payable onlyModule {
        uint256 pool = _held[taskId] + msg.value;
        _held[taskId] = pool;
        _totals.deposited += msg.value;
        _totals.held += msg.value;
        emit Deposited(taskId, from, msg.value, pool);
    }

    /// @inheritdoc ITreasury
    function credit(uint256 taskId, address to, uint256 amount, bytes32 reason) external onlyModule {
        _credit(taskId, to, amount, reason);
    }

    /// @inheritdoc ITreasury
    function creditSink(uint256 taskId, uint256 amount, bytes32 reason) external onlyModule {
        _credit(taskId, _sink, amount, reason);
    }

    function _credit(uint256 taskId, address to, uint256 amount, bytes32 reason) private {
        if (amount == 0) return;
        uint256 pool = _held[taskId];
        if (amount > pool) revert TreasuryPoolExhausted(taskId, amount, pool);
        // amount <= pool was checked above, and pool <= _totals.held always.
        unchecked {
            _held[taskId] = pool - amount;
            _totals.held -= amount;
        }
        _claimable[to] += amount;
        _totals.claimable += amount;
        emit Credited(taskId, to, amount, reason);
    }

    /// @inheritdoc ITreasury
    function withdraw() external nonReentrant returns (uint256 amount) {
        amount = _claimable[msg.sender];
        if (amount == 0) revert TreasuryNothingToWithdraw(msg.sender);
        _claimable[msg.sender] = 0;
        _totals.claimable -= amount;
        _totals.withdrawn += amount;
        emit Withdrawn(msg.sender, amount);
        (bool ok,) = msg.sender.call{value: amount}("");
        if (!ok) revert TreasuryTransferFailed(msg.sender, amount);
    }

    /// @inheritdoc ITreasury
    function claimable(address account) external view returns (uint256) {
        return _claimable[account];
    }

    /// @inheritdoc ITreasury
    function held(uint256 taskId) external view returns (uint256) {
        return _held[taskId];
    }

    /// @inheritdoc ITreasury
    function totals() external view returns (Totals memory) {
        return _totals;
    }

    /// @inheritdoc ITreasury
    function sink() external view returns (address) {
        return _sink;
    }

    /// @notice The four modules allowed to move money: (TaskRegistry, RoundLedger, FogAuction, Disputes).
    function modules() external view returns (address registry, address ledger, address auction, address disputes) {
        return (_registry, _ledger, _auction, _disputes);
    }
}
