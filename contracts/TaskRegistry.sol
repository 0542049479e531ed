// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ITaskRegistry} from "./interfaces/ITaskRegistry.sol";
import {ITreasury} from "./interfaces/ITreasury.sol";
import {IRoundLedger} from "./interfaces/IRoundLedger.sol";
import {IDisputes} from "./interfaces/IDisputes.sol";
import {Reasons} from "./libraries/Reasons.sol";
import {ReputationMath} from "./libraries/ReputationMath.sol";

/// @title TaskRegistry: tasks, their parameters, escrowed budget and round clock
contract TaskRegistry is ITaskRegistry {
    /// @notice The most clients a task may admit (bounds the gas of one round's post).
    uint16 public constant MAX_CLIENTS = 500;
    /// @notice Seconds after a round's deadline during which only its aggregator can move the task on;
    /// after them anyone may abandon it (see abandonTask).
    uint64 public constant ABANDON_GRACE = 1 days;

    ITreasury private immutable _treasury;
    IRoundLedger private immutable _ledger;
    IDisputes private immutable _disputes;

    uint256 private _taskCount;
    mapping(uint256 taskId => TaskParams) private _params;
    mapping(uint256 taskId => TaskState) private _states;

    /// @param treasury the Treasury holding the budgets
    /// @param ledger the RoundLedger, the only caller of closeRound, spendBudget and settleBudget
    /// @param disputes the Disputes contract (whether a task's aggregator bond is posted)
    constructor(ITreasury treasury, IRoundLedger ledger, IDisputes disputes) {
        _treasury = treasury;
        _ledger = ledger;
        _disputes = disputes;
    }

    modifier onlyLedger() {
        if (msg.sender != address(_ledger)) revert TaskNotLedger(msg.sender);
        _;
    }

    modifier onlyDisputes() {
        if (msg.sender != address(_disputes)) revert TaskNotDisputes(msg.sender);
        _;
    }

    /// @inheritdoc ITaskRegistry
    function createTask(TaskParams calldata p, address aggregator) external payable returns (uint256 taskId) {
        taskId = _create(p, aggregator, msg.value);
        _treasury.deposit{value: msg.value}(taskId, msg.sender, msg.value);
    }

    /// @inheritdoc ITaskRegistry
    function createTokenTask(TaskParams calldata p, address aggregator, address token, uint256 budget)
        external
        returns (uint256 taskId)
    {
        taskId = _create(p, aggregator, budget);
        _treasury.bindToken(taskId, token);
        _treasury.deposit(taskId, msg.sender, budget);
    }

    /// @inheritdoc ITaskRegistry
    function createTokenTaskWithPermit(
        TaskParams calldata p,
        address aggregator,
        address token,
        uint256 budget,
        ITreasury.Permit calldata permit
    ) external returns (uint256 taskId) {
        taskId = _create(p, aggregator, budget);
        _treasury.bindToken(taskId, token);
        _treasury.usePermit(token, msg.sender, budget, permit);
        _treasury.deposit(taskId, msg.sender, budget);
    }

    /// @inheritdoc ITaskRegistry
    function cancelTask(uint256 taskId) external {
        TaskState storage s = _publisherTask(taskId, TaskStatus.Open);
        uint256 refund = s.budgetLeft;
        s.status = TaskStatus.Cancelled;
        s.budgetLeft = 0;
        emit TaskCancelled(taskId, refund);
        _treasury.credit(taskId, s.publisher, refund, Reasons.BUDGET_REFUND);
    }

    /// @inheritdoc ITaskRegistry
    function abandonTask(uint256 taskId) external {
        TaskState storage s = _states[taskId];
        _requireStatus(taskId, s.status, TaskStatus.Running);
        TaskParams storage p = _params[taskId];
        uint64 abandonableAfter = s.roundStartedAt + p.roundDuration + ABANDON_GRACE;
        uint64 now_ = uint64(block.timestamp);
        if (now_ <= abandonableAfter) revert TaskAbandonTooEarly(taskId, abandonableAfter, now_);
        // The rounds left count as neutral rounds posted at their deadlines: the clients are paid eq. 16's
        // bonus of that finish, not less because the aggregator went silent.
        uint64 finishedAt = s.roundStartedAt + uint64(p.rounds - s.currentRound + 1) * p.roundDuration;
        s.status = TaskStatus.Abandoned;
        s.finishedAt = finishedAt;
        emit TaskAbandoned(taskId, s.currentRound, now_, finishedAt);
    }

    /// @inheritdoc ITaskRegistry
    function voidEarlyFinish(uint256 taskId) external onlyDisputes {
        TaskState storage s = _states[taskId];
        _requireStatus(taskId, s.status, TaskStatus.Finished);
        uint16 round = s.currentRound;
        uint64 finishedAt = s.finishedAt + uint64(_params[taskId].rounds - round) * _params[taskId].roundDuration;
        s.finishedAt = finishedAt;
        emit EarlyFinishVoided(taskId, round, finishedAt);
    }

    /// @inheritdoc ITaskRegistry
    function startTask(uint256 taskId) external {
        TaskState storage s = _publisherTask(taskId, TaskStatus.Open);
        uint256 clients = _ledger.clientCount(taskId);
        if (clients == 0) revert TaskHasNoClients(taskId);
        if (!_disputes.bonded(taskId)) revert TaskNotBonded(taskId);
        uint64 now_ = uint64(block.timestamp);
        s.status = TaskStatus.Running;
        s.currentRound = 1;
        s.startedAt = now_;
        s.roundStartedAt = now_;
        emit TaskStarted(taskId, now_, clients);
    }

    /// @inheritdoc ITaskRegistry
    function closeRound(uint256 taskId, bool targetReached) external onlyLedger returns (bool finished) {
        TaskState storage s = _states[taskId];
        _requireStatus(taskId, s.status, TaskStatus.Running);
        uint16 round = s.currentRound;
        uint64 now_ = uint64(block.timestamp);
        finished = targetReached || round >= _params[taskId].rounds;
        if (finished) {
            s.status = TaskStatus.Finished;
            s.finishedAt = now_;
            emit RoundClosed(taskId, round, 0);
            emit TaskFinished(taskId, round, now_, targetReached);
        } else {
            s.currentRound = round + 1;
            s.roundStartedAt = now_;
            emit RoundClosed(taskId, round, now_);
        }
    }

    /// @inheritdoc ITaskRegistry
    function spendBudget(uint256 taskId, uint16 round, uint256 amount) external onlyLedger {
        TaskState storage s = _states[taskId];
        uint256 left = s.budgetLeft;
        if (amount > left) revert TaskBudgetExceeded(taskId, amount, left);
        // amount <= left was checked above.
        unchecked {
            left -= amount;
        }
        s.budgetLeft = left;
        emit BudgetSpent(taskId, round, amount, left);
    }

    /// @inheritdoc ITaskRegistry
    function settleBudget(uint256 taskId, uint256 bonuses) external onlyLedger returns (uint256 refund) {
        TaskState storage s = _states[taskId];
        if (s.status != TaskStatus.Abandoned) _requireStatus(taskId, s.status, TaskStatus.Finished);
        uint256 left = s.budgetLeft;
        if (bonuses > left) revert TaskBudgetExceeded(taskId, bonuses, left);
        // bonuses <= left was checked above.
        unchecked {
            refund = left - bonuses;
        }
        s.budgetLeft = 0;
        if (s.status == TaskStatus.Finished) s.status = TaskStatus.Settled;
        emit TaskSettled(taskId, bonuses, refund);
        _treasury.credit(taskId, s.publisher, refund, Reasons.BUDGET_REFUND);
    }

    /// @inheritdoc ITaskRegistry
    function minimumBond(TaskParams calldata p, uint256 budget) external pure returns (uint256) {
        return _minimumBond(p, budget);
    }

    /// @inheritdoc ITaskRegistry
    function minimumChallengeBond(uint256 clientDeposit) external pure returns (uint256) {
        return _minimumChallengeBond(clientDeposit);
    }

    /// @inheritdoc ITaskRegistry
    function params(uint256 taskId) external view returns (TaskParams memory) {
        _known(taskId);
        return _params[taskId];
    }

    /// @inheritdoc ITaskRegistry
    function state(uint256 taskId) external view returns (TaskState memory) {
        _known(taskId);
        return _states[taskId];
    }

    /// @inheritdoc ITaskRegistry
    function roundDeadline(uint256 taskId) external view returns (uint64) {
        _known(taskId);
        return _states[taskId].roundStartedAt + _params[taskId].roundDuration;
    }

    /// @inheritdoc ITaskRegistry
    function taskCount() external view returns (uint256) {
        return _taskCount;
    }

    /// @notice The contracts this registry talks to: (Treasury, RoundLedger, Disputes).
    function dependencies() external view returns (address treasury, address ledger, address disputes) {
        return (address(_treasury), address(_ledger), address(_disputes));
    }

    /// @dev What one round's post can move: every deposit it could forfeit plus the most one round can pay
    /// (eq. 15 at r_a = r_t = cap for every client, and never more than the budget).
    function _minimumBond(TaskParams calldata p, uint256 budget) private pure returns (uint256) {
        uint256 roundPay = p.maxClients * ReputationMath.maxRoundPayment(p.psi, p.reputationCap);
        return uint256(p.maxClients) * p.clientDeposit + (roundPay < budget ? roundPay : budget);
    }

    /// @dev Half a client deposit, rounded up, at least 1: a flood of challenges costs real money.
    function _minimumChallengeBond(uint256 clientDeposit) private pure returns (uint256) {
        uint256 half = (clientDeposit + 1) / 2;
        return half == 0 ? 1 : half;
    }

    /// @dev Checks and records a new task with `budget` (its deposit is the caller's to make).
    function _create(TaskParams calldata p, address aggregator, uint256 budget) private returns (uint256 taskId) {
        _validate(p);
        if (aggregator == address(0)) revert TaskInvalidAggregator(aggregator);
        if (budget == 0) revert TaskInvalidParameter("budget", 0);
        // A client's earnings are a uint96: a larger budget (a token's, ether has none that large) could pay past it
        // and lock every round's finalisation.
        if (budget > type(uint96).max) revert TaskInvalidParameter("budget", budget);
        uint256 minimum = _minimumBond(p, budget);
        if (p.aggregatorBond < minimum) revert TaskBondTooSmall(p.aggregatorBond, minimum);
        taskId = ++_taskCount;
        _params[taskId] = p;
        _states[taskId] = TaskState({
            publisher: msg.sender,
            aggregator: aggregator,
            status: TaskStatus.Open,
            currentRound: 0,
            budget: budget,
            budgetLeft: budget,
            startedAt: 0,
            roundStartedAt: 0,
            finishedAt: 0
        });
        emit TaskCreated(taskId, msg.sender, aggregator, budget, p);
    }

    function _validate(TaskParams calldata p) private pure {
        if (p.rounds == 0 || p.rounds > ReputationMath.MAX_ROUNDS) revert TaskInvalidParameter("rounds", p.rounds);
        if (p.expectedDuration == 0) revert TaskInvalidParameter("expectedDuration", 0);
        if (p.reputationCap == 0 || p.reputationCap > ReputationMath.MAX_REPUTATION_CAP) {
            revert TaskInvalidParameter("reputationCap", p.reputationCap);
        }
        if (p.maxRoundTime == 0) revert TaskInvalidParameter("maxRoundTime", 0);
        if (p.cyclesPerSample == 0) revert TaskInvalidParameter("cyclesPerSample", 0);
        if (p.roundDuration == 0) revert TaskInvalidParameter("roundDuration", 0);
        if (p.selfTrained) {
            // No auction: terms that only an auction reads would promise something that never happens.
            if (p.fogDeposit != 0) revert TaskInvalidParameter("fogDeposit", p.fogDeposit);
            if (p.biddingDuration != 0) revert TaskInvalidParameter("biddingDuration", p.biddingDuration);
            if (p.revealDuration != 0) revert TaskInvalidParameter("revealDuration", p.revealDuration);
            if (p.secondPrice) revert TaskInvalidParameter("secondPrice", 1);
        } else {
            if (p.biddingDuration == 0) revert TaskInvalidParameter("biddingDuration", 0);
            if (p.revealDuration == 0) revert TaskInvalidParameter("revealDuration", 0);
        }
        if (p.maxClients == 0 || p.maxClients > MAX_CLIENTS) revert TaskInvalidParameter("maxClients", p.maxClients);
        if (p.challengeWindow == 0) revert TaskInvalidParameter("challengeWindow", 0);
        if (p.challengeBond < _minimumChallengeBond(p.clientDeposit)) {
            revert TaskInvalidParameter("challengeBond", p.challengeBond);
        }
        // A bid's utility to its client is kept in 96 bits (FogAuction): the most one round pays must fit them.
        if (ReputationMath.maxRoundPayment(p.psi, p.reputationCap) > type(uint96).max) {
            revert TaskInvalidParameter("psi", p.psi);
        }
    }

    function _publisherTask(uint256 taskId, TaskStatus required) private view returns (TaskState storage s) {
        s = _states[taskId];
        _requireStatus(taskId, s.status, required);
        if (msg.sender != s.publisher) revert TaskNotPublisher(taskId, msg.sender);
    }

    function _requireStatus(uint256 taskId, TaskStatus status, TaskStatus required) private pure {
        if (status == TaskStatus.None) revert TaskUnknown(taskId);
        if (status != required) revert TaskWrongStatus(taskId, status, required);
    }

    function _known(uint256 taskId) private view {
        if (_states[taskId].status == TaskStatus.None) revert TaskUnknown(taskId);
    }
}
