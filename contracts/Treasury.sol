// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ReentrancyGuard} from "@openzeppelin/contracts/utils/ReentrancyGuard.sol";
import {ITreasury} from "./interfaces/ITreasury.sol";

/// @title Treasury: custody of every wei in FedChain, pull payments only
/// @notice The three modules are fixed at deployment (immutables); nobody else can move money.
contract Treasury is ITreasury, ReentrancyGuard {
    address private immutable _registry;
    address private immutable _ledger;
    address private immutable _auction;

    mapping(uint256 taskId => uint256 wei_) private _held;
    mapping(address account => uint256 wei_) private _claimable;
    Totals private _totals;

    /// @param registry the TaskRegistry
    /// @param ledger the RoundLedger
    /// @param auction the FogAuction
    constructor(address registry, address ledger, address auction) {
        _registry = registry;
        _ledger = ledger;
        _auction = auction;
    }

    modifier onlyModule() {
        if (msg.sender != _registry && msg.sender != _ledger && msg.sender != _auction) {
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

    /// @notice The three modules allowed to move money: (TaskRegistry, RoundLedger, FogAuction).
    function modules() external view returns (address registry, address ledger, address auction) {
        return (_registry, _ledger, _auction);
    }
}
