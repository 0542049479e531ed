// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {IERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/IERC20Permit.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {ReentrancyGuard} from "@openzeppelin/contracts/utils/ReentrancyGuard.sol";
import {ITreasury} from "./interfaces/ITreasury.sol";

/// @title Treasury: custody of all of FedChain's money, ether and ERC-20 tokens, pull payments only
/// @notice The four modules and the sink are fixed at deployment (immutables); nobody else can move money.
/// Each task's money is in one asset (`tokenOf`, address(0) for ether); pools, balances and totals are per asset.
contract Treasury is ITreasury, ReentrancyGuard {
    using SafeERC20 for IERC20;

    /// @dev The asset key of ether in the per-asset mappings.
    address private constant ETHER = address(0);

    address private immutable _registry;
    address private immutable _ledger;
    address private immutable _auction;
    address private immutable _disputes;
    address private immutable _sink;

    mapping(uint256 taskId => uint256 units) private _held;
    mapping(uint256 taskId => address token) private _tokenOf;
    mapping(address token => mapping(address account => uint256 units)) private _claimable;
    mapping(address token => Totals) private _totals;

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
    function bindToken(uint256 taskId, address token) external {
        if (msg.sender != _registry) revert TreasuryUnauthorized(msg.sender);
        if (_tokenOf[taskId] != ETHER || _held[taskId] != 0) revert TreasuryTokenAlreadyBound(taskId);
        if (token.code.length == 0) revert TreasuryNotAToken(token);
        _tokenOf[taskId] = token;
        emit TokenBound(taskId, token);
    }

    /// @inheritdoc ITreasury
    function deposit(uint256 taskId, address from, uint256 amount) external payable onlyModule nonReentrant {
        address token = _tokenOf[taskId];
        uint256 value = token == ETHER ? amount : 0;
        if (msg.value != value) revert TreasuryWrongValue(msg.value, value);
        uint256 pool = _held[taskId] + amount;
        _held[taskId] = pool;
        Totals storage t = _totals[token];
        t.deposited += amount;
        t.held += amount;
        emit Deposited(taskId, from, amount, pool);
        if (token != ETHER && amount != 0) _pull(IERC20(token), from, amount);
    }

    /// @inheritdoc ITreasury
    function usePermit(address token, address owner, uint256 amount, Permit calldata permit) external onlyModule {
        // A permit that someone else submitted first reverts here; the allowance it set is what counts.
        try IERC20Permit(token).permit(owner, address(this), amount, permit.deadline, permit.v, permit.r, permit.s) {}
            catch {}
        _requireAllowance(IERC20(token), owner, amount);
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
        Totals storage t = _totals[_tokenOf[taskId]];
        unchecked {
            _held[taskId] = pool - amount;
            t.held -= amount;
        }
        _claimable[_tokenOf[taskId]][to] += amount;
        t.claimable += amount;
        emit Credited(taskId, to, amount, reason);
    }

    /// @inheritdoc ITreasury
    function withdraw() external nonReentrant returns (uint256 amount) {
        return _withdraw(ETHER, msg.sender);
    }

    /// @inheritdoc ITreasury
    function withdrawTo(address token, address to) external nonReentrant returns (uint256 amount) {
        return _withdraw(token, to);
    }

    /// @inheritdoc ITreasury
    function claimable(address account) external view returns (uint256) {
        return _claimable[ETHER][account];
    }

    /// @inheritdoc ITreasury
    function claimableIn(address token, address account) external view returns (uint256) {
        return _claimable[token][account];
    }

    /// @inheritdoc ITreasury
    function tokenOf(uint256 taskId) external view returns (address) {
        return _tokenOf[taskId];
    }

    /// @inheritdoc ITreasury
    function expectedValue(uint256 taskId, uint256 amount) external view returns (uint256) {
        return _tokenOf[taskId] == ETHER ? amount : 0;
    }

    /// @inheritdoc ITreasury
    function totalsIn(address token) external view returns (Totals memory) {
        return _totals[token];
    }

    /// @inheritdoc ITreasury
    function held(uint256 taskId) external view returns (uint256) {
        return _held[taskId];
    }

    /// @inheritdoc ITreasury
    function totals() external view returns (Totals memory) {
        return _totals[ETHER];
    }

    /// @inheritdoc ITreasury
    function sink() external view returns (address) {
        return _sink;
    }

    /// @notice The four modules allowed to move money: (TaskRegistry, RoundLedger, FogAuction, Disputes).
    function modules() external view returns (address registry, address ledger, address auction, address disputes) {
        return (_registry, _ledger, _auction, _disputes);
    }

    /// @dev Sends the caller's whole balance in `token` to `to`; any failure reverts everything (pull payments).
    function _withdraw(address token, address to) private returns (uint256 amount) {
        amount = _claimable[token][msg.sender];
        if (amount == 0) revert TreasuryNothingToWithdraw(msg.sender);
        _claimable[token][msg.sender] = 0;
        Totals storage t = _totals[token];
        t.claimable -= amount;
        t.withdrawn += amount;
        emit Withdrawn(msg.sender, token, to, amount);
        if (token == ETHER) {
            (bool ok,) = to.call{value: amount}("");
            if (!ok) revert TreasuryTransferFailed(to, amount);
        } else {
            IERC20(token).safeTransfer(to, amount);
        }
    }

    /// @dev Pulls `amount` of `token` from `from` and checks that exactly `amount` arrived.
    function _pull(IERC20 token, address from, uint256 amount) private {
        _requireAllowance(token, from, amount);
        uint256 before = token.balanceOf(address(this));
        token.safeTransferFrom(from, address(this), amount);
        uint256 after_ = token.balanceOf(address(this));
        uint256 received = after_ > before ? after_ - before : 0;
        if (received != amount) revert TreasuryTokenShortfall(address(token), amount, received);
    }

    function _requireAllowance(IERC20 token, address owner, uint256 amount) private view {
        uint256 allowance = token.allowance(owner, address(this));
        if (allowance < amount) revert TreasuryAllowanceTooLow(address(token), owner, allowance, amount);
    }
}
