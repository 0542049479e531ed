// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ITreasury} from "./ITreasury.sol";

/// @title ITaskRegistry: federated-learning tasks, their parameters, budget and round clock
/// @notice A publisher creates a task with every parameter of the mechanism (DESIGN.md) and escrows
/// the reward budget (ether) in the same transaction. Life cycle:
/// `Open` (clients join, fog auctions run, the aggregator's bond is posted) -> `Running` (rounds 1..N are
/// posted) -> `Finished` (after round N or the target accuracy is posted) -> `Settled` (once every posted round
/// is final: bonus paid, deposits returned, unspent budget refunded); or `Open` -> `Cancelled` (full refund);
/// or `Running` -> `Abandoned` when the aggregator stops posting (anyone may call `abandonTask` once the
/// current round is ABANDON_GRACE seconds past its deadline; the clients are then paid as if every remaining
/// round had been posted neutral at its deadline, and the aggregator's bond goes to the sink at settlement).
/// The budget is spent when a round is finalised (RoundLedger.finalizeRound), not when it is posted. Fixed
/// point values are 1e18 = 1.0.
interface ITaskRegistry {
    /// @notice Where a task is in its life cycle.
    enum TaskStatus {
        None,
        Open,
        Running,
        Finished,
        Settled,
        Cancelled,
        Abandoned
    }

    /// @notice Everything a publisher fixes when it creates a task.
    /// @param modelId identifier of the model architecture (e.g. keccak256("mnist-cnn"))
    /// @param datasetId identifier of the dataset
    /// @param rounds N, number of rounds, 1..MAX_ROUNDS
    /// @param targetAccuracy accuracy at which the task may finish early, 1e18 fixed point (0: never early)
    /// @param expectedDuration T_ex, expected total training time, seconds; T = T_ex / N per round
    /// @param psi per-round payment coefficient of eq. 15, wei per unit of r_t^2 * r_a
    /// @param phi final-bonus coefficient of eq. 16, wei per second per unit of r_at
    /// @param minLossReputation r_a_min, 1e18 fixed point
    /// @param minTimeReputation r_t_min, 1e18 fixed point
    /// @param minQuality q_min: a round quality below it multiplies r_a by the quality, 1e18 fixed point
    /// @param maxRoundTime t_max: a round time above it multiplies r_t by t_max / t, seconds
    /// @param reputationCap cap on every quality, time ratio and reputation, 1e18 fixed point, <= MAX_REPUTATION_CAP
    /// @param clientDeposit d, wei
    /// @param fogDeposit r, wei
    /// @param cyclesPerSample c, CPU cycles per training sample (T_x = c * D / f_x, eq. 11)
    /// @param roundDuration seconds from a round's start to its deadline for fog commits
    /// @param biddingDuration seconds a fog auction accepts sealed bids after it opens
    /// @param revealDuration seconds after bidding during which bids are revealed
    /// @param timeTolerance seconds a posted round time may differ from the fog commit's block time
    /// @param maxClients most clients that may join, 1..MAX_CLIENTS
    /// @param secondPrice true: the auction winner is paid the second-price (Vickrey) price; false: its own bid
    /// @param challengeWindow seconds after a round's post during which its entries can be challenged; the round
    /// is final only after it
    /// @param challengeBond wei a challenger escrows with each challenge, at least half of clientDeposit (rounded up)
    /// and at least 1
    /// @param aggregatorBond wei the aggregator's bond must be (Disputes.postBond), at least what one round's post
    /// can move: maxClients * clientDeposit + min(budget, maxClients * psi * cap^3)
    /// @param selfTrained true: each client trains its own job (no fog auction; fogDeposit, biddingDuration and
    /// revealDuration are 0, secondPrice false) and the aggregator posts `committed` from the clients' signed replies
    struct TaskParams {
        bytes32 modelId;
        bytes32 datasetId;
        uint16 rounds;
        uint64 targetAccuracy;
        uint32 expectedDuration;
        uint128 psi;
        uint128 phi;
        uint64 minLossReputation;
        uint64 minTimeReputation;
        uint64 minQuality;
        uint32 maxRoundTime;
        uint64 reputationCap;
        uint96 clientDeposit;
        uint96 fogDeposit;
        uint64 cyclesPerSample;
        uint32 roundDuration;
        uint32 biddingDuration;
        uint32 revealDuration;
        uint32 timeTolerance;
        uint16 maxClients;
        bool secondPrice;
        uint32 challengeWindow;
        uint96 challengeBond;
        uint96 aggregatorBond;
        bool selfTrained;
    }

    /// @notice A task's state apart from its parameters.
    /// @param publisher who created it and receives the unspent budget back
    /// @param aggregator the only account that may post rounds
    /// @param status life-cycle stage
    /// @param currentRound the round being trained (1-based; 0 before start; N or the last posted round once finished; the unposted round once abandoned)
    /// @param budget wei escrowed at creation
    /// @param budgetLeft wei of the budget not yet spent on final rounds or refunded
    /// @param startedAt block time of `startTask`, seconds (0 before)
    /// @param roundStartedAt block time at which the current round began, seconds
    /// @param finishedAt block time of the last posted round, seconds (0 before); for an abandoned task, or one
    /// whose early finish was voided, the time it would have finished with every remaining round posted at its
    /// deadline (the time eq. 16's bonus counts)
    struct TaskState {
        address publisher;
        address aggregator;
        TaskStatus status;
        uint16 currentRound;
        uint256 budget;
        uint256 budgetLeft;
        uint64 startedAt;
        uint64 roundStartedAt;
        uint64 finishedAt;
    }

    /// @notice A parameter is out of its allowed range.
    /// @param field the parameter's name, as in TaskParams
    /// @param value the offending value
    error TaskInvalidParameter(bytes32 field, uint256 value);
    /// @notice The aggregator is the zero address.
    error TaskInvalidAggregator(address aggregator);
    /// @notice No task has this id.
    error TaskUnknown(uint256 taskId);
    /// @notice Only the task's publisher may do this.
    /// @param taskId the task
    /// @param caller the rejected caller
    error TaskNotPublisher(uint256 taskId, address caller);
    /// @notice The task is not in the status this call needs.
    /// @param taskId the task
    /// @param status its status now
    /// @param required the status the call needs
    error TaskWrongStatus(uint256 taskId, TaskStatus status, TaskStatus required);
    /// @notice The task cannot be abandoned yet: its current round is not past deadline + ABANDON_GRACE; the
    /// aggregator may still post it. Call again after `abandonableAfter`.
    /// @param taskId the task
    /// @param abandonableAfter the block time after which `abandonTask` succeeds, seconds
    /// @param now_ the block time now, seconds
    error TaskAbandonTooEarly(uint256 taskId, uint64 abandonableAfter, uint64 now_);
    /// @notice A task cannot start without clients.
    error TaskHasNoClients(uint256 taskId);
    /// @notice A task cannot start before its aggregator's bond is posted (Disputes.postBond).
    error TaskNotBonded(uint256 taskId);
    /// @notice The aggregator bond the terms ask for is less than what one round's post can move.
    /// @param bond the terms' aggregatorBond, wei
    /// @param minimum maxClients * clientDeposit + min(budget, maxClients * psi * cap^3), wei
    error TaskBondTooSmall(uint256 bond, uint256 minimum);
    /// @notice Only the RoundLedger may move the round clock and spend the budget.
    error TaskNotLedger(address caller);
    /// @notice Only the Disputes contract may void an early finish.
    error TaskNotDisputes(address caller);
    /// @notice The ledger tried to spend more budget than is left.
    /// @param taskId the task
    /// @param amount wei asked for
    /// @param budgetLeft wei left
    error TaskBudgetExceeded(uint256 taskId, uint256 amount, uint256 budgetLeft);

    /// @notice A task was created and its budget escrowed.
    /// @param taskId the new task's id (1, 2, ...)
    /// @param publisher its publisher
    /// @param aggregator its aggregator
    /// @param budget wei escrowed
    /// @param params all its parameters
    event TaskCreated(
        uint256 indexed taskId, address indexed publisher, address indexed aggregator, uint256 budget, TaskParams params
    );
    /// @notice The publisher cancelled an open task; the budget went back to it.
    /// @param taskId the task
    /// @param refund wei credited to the publisher
    event TaskCancelled(uint256 indexed taskId, uint256 refund);
    /// @notice A running task's aggregator did not post `round` in time; the task is `Abandoned`. Its rounds
    /// left count as neutral rounds posted at their deadlines: the task finishes at `finishedAt` for eq. 16's
    /// bonus. At settlement, once the rounds posted before are final, the unspent budget goes back to the
    /// publisher and what is left of the aggregator's bond to the sink.
    /// @param taskId the task
    /// @param round the round that was never posted
    /// @param abandonedAt block time, seconds
    /// @param finishedAt roundStartedAt + (N - round + 1) * roundDuration, seconds
    event TaskAbandoned(uint256 indexed taskId, uint16 round, uint64 abandonedAt, uint64 finishedAt);
    /// @notice The accuracy that finished the task early was found wrong (or its challenge went unanswered):
    /// the early finish moves no money. The task stays finished; its finish time becomes what it would have been
    /// with every remaining round posted at its deadline.
    /// @param taskId the task
    /// @param round the round whose accuracy finished it
    /// @param finishedAt the new finish time: the old one + (N - round) * roundDuration, seconds
    event EarlyFinishVoided(uint256 indexed taskId, uint16 round, uint64 finishedAt);
    /// @notice Round 1 began.
    /// @param taskId the task
    /// @param startedAt block time, seconds
    /// @param clients number of clients that joined
    event TaskStarted(uint256 indexed taskId, uint64 startedAt, uint256 clients);
    /// @notice A round was posted and the clock moved on (its payments wait for its finalisation).
    /// @param taskId the task
    /// @param round the round that was posted
    /// @param nextRoundStartedAt block time at which the next round began (0 when the task finished)
    event RoundClosed(uint256 indexed taskId, uint16 indexed round, uint64 nextRoundStartedAt);
    /// @notice A final round's payments were taken from the budget.
    /// @param taskId the task
    /// @param round the round that was finalised
    /// @param spent wei of budget credited to the clients' earnings for it
    /// @param budgetLeft wei left after it
    event BudgetSpent(uint256 indexed taskId, uint16 indexed round, uint256 spent, uint256 budgetLeft);
    /// @notice The task finished (round N posted or target accuracy reached).
    /// @param taskId the task
    /// @param lastRound the last posted round
    /// @param finishedAt block time, seconds
    /// @param targetReached whether the aggregator reported the target accuracy
    event TaskFinished(uint256 indexed taskId, uint16 lastRound, uint64 finishedAt, bool targetReached);
    /// @notice The task's budget was settled: the final bonuses were paid and the rest refunded (a finished task
    /// becomes `Settled`; an abandoned one stays `Abandoned`).
    /// @param taskId the task
    /// @param bonuses wei of budget credited as final bonuses
    /// @param refund wei credited back to the publisher
    event TaskSettled(uint256 indexed taskId, uint256 bonuses, uint256 refund);

    /// @notice Create a task, escrowing `msg.value` wei as its budget.
    /// @param params the mechanism's parameters
    /// @param aggregator the account that will post rounds
    /// @return taskId the new task's id
    function createTask(TaskParams calldata params, address aggregator) external payable returns (uint256 taskId);

    /// @notice Publish a task whose money is the ERC-20 `token`: the Treasury pulls `budget` from the caller
    /// (approve it first). Every amount of the task (d, r, bids, bonds) is then in that token's units.
    /// @param params the task's terms, in token units
    /// @param aggregator the aggregator's address
    /// @param token the ERC-20 token (fee-on-transfer tokens are refused: `TreasuryTokenShortfall`)
    /// @param budget the budget, token units
    /// @return taskId the new task's id
    function createTokenTask(TaskParams calldata params, address aggregator, address token, uint256 budget)
        external
        returns (uint256 taskId);

    /// @notice `createTokenTask` with an EIP-2612 permit of `budget` for the Treasury, in one transaction.
    /// @param params the task's terms, in token units
    /// @param aggregator the aggregator's address
    /// @param token the ERC-20 token, with permit
    /// @param budget the budget, token units
    /// @param permit the caller's permit signature
    /// @return taskId the new task's id
    function createTokenTaskWithPermit(
        TaskParams calldata params,
        address aggregator,
        address token,
        uint256 budget,
        ITreasury.Permit calldata permit
    ) external returns (uint256 taskId);

    /// @notice Cancel an `Open` task; its whole budget is credited back to the publisher. Publisher only.
    /// Clients then take their deposits back through RoundLedger.settle, fog nodes theirs through FogAuction.settleJob.
    function cancelTask(uint256 taskId) external;

    /// @notice Abandon a `Running` task whose current round was not posted by its deadline plus
    /// ABANDON_GRACE seconds. Anyone may call it. The task becomes `Abandoned` and finishes, for eq. 16, at the
    /// time it would have with every remaining round posted neutral at its deadline; once its posted rounds are
    /// final, RoundLedger.settle credits the clients their earnings, that bonus and their deposits, the
    /// publisher the unspent budget and the sink what is left of the aggregator's bond; fog nodes take their
    /// deposits and the clients the unearned escrow back through FogAuction.settleJob.
    function abandonTask(uint256 taskId) external;

    /// @notice Void the early finish of a task that finished at its target accuracy before round N: its finish
    /// time moves to what it would have been with every remaining round posted at its deadline. Disputes only,
    /// when the accuracy was found wrong or its challenge expired.
    function voidEarlyFinish(uint256 taskId) external;

    /// @notice Start round 1 of an `Open` task with at least one client and its aggregator's bond. Publisher only.
    function startTask(uint256 taskId) external;

    /// @notice Close the current (just posted) round: move the clock on, or finish the task after round N or
    /// when `targetReached`. RoundLedger only.
    /// @return finished whether the task is now `Finished`
    function closeRound(uint256 taskId, bool targetReached) external returns (bool finished);

    /// @notice Spend `amount` wei of budget on the final round `round`'s payments. RoundLedger only.
    function spendBudget(uint256 taskId, uint16 round, uint256 amount) external;

    /// @notice Spend `bonuses` wei of budget and refund the rest to the publisher: a `Finished` task becomes
    /// `Settled`, an `Abandoned` one stays `Abandoned`. RoundLedger only, once.
    /// @return refund wei credited to the publisher
    function settleBudget(uint256 taskId, uint256 bonuses) external returns (uint256 refund);

    /// @notice The least aggregator bond a task with these terms and budget may ask for, wei: what one round's
    /// post can move (every deposit it could forfeit plus the most one round can pay).
    function minimumBond(TaskParams calldata params, uint256 budget) external pure returns (uint256);

    /// @notice The least challenge bond a task with this client deposit may ask for: half of it, rounded up,
    /// and at least 1 (wei, or the task token's units). Every challenge then costs real money.
    function minimumChallengeBond(uint256 clientDeposit) external pure returns (uint256);

    /// @notice A task's parameters.
    function params(uint256 taskId) external view returns (TaskParams memory);

    /// @notice A task's state.
    function state(uint256 taskId) external view returns (TaskState memory);

    /// @notice The deadline of the current round for fog commits: roundStartedAt + roundDuration, seconds.
    function roundDeadline(uint256 taskId) external view returns (uint64);

    /// @notice Number of tasks created so far (ids are 1..taskCount).
    function taskCount() external view returns (uint256);
}
