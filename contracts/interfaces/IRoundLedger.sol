// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ITreasury} from "./ITreasury.sol";

import {ITaskRegistry} from "./ITaskRegistry.sol";

/// @title IRoundLedger: clients of a task, their reputation, round posting and settlement
/// @notice Clients join an open task with deposit d and a commitment to their data size. Each round
/// the task's aggregator posts ONE transaction with every client's measurements; the post is pending (it
/// moves no money and changes no reputation) until the task's challenge window has passed and no challenge of
/// it is open (IDisputes). Then anyone finalises it, rounds in order: the ledger applies the verdicts' fates,
/// updates each client's loss reputation r_a (eqs. 5, 8), time reputation r_t (eq. 9) and
/// r_at = min(cap, r_a * r_t) (eq. 10) in O(1) storage (running sums with linear weights
/// w^j = 2j / (k(k+1))), credits the per-round payment of eq. 15 to its earnings (pro rata when the budget
/// runs short) and removes clients below r_a_min or r_t_min, forfeiting their deposit to the sink. After the
/// task finishes and every posted round is final, `settle` pays the final bonus of eq. 16, returns deposits of
/// clients in good standing, refunds the unspent budget and releases what is left of the aggregator's bond. Membership lives here, not in a contract of its own, because the per-client
/// state must sit next to the round posting for its gas to stay O(1) per client.
/// Reputations are 1e18 fixed point; a client starts with r_a = r_t = min(1e18, cap) and earns no
/// final bonus unless it was scored in at least one round.
interface IRoundLedger {
    /// @notice A client's standing in a task.
    enum ClientStatus {
        None,
        Active,
        Removed
    }

    /// @notice One client's measurements in one round, posted by the aggregator.
    /// @param quality q_i^n, 1e18 fixed point (loss_avg / loss_i, or a rescaled contribution)
    /// @param roundTime t_i^n, seconds from the round's start to the fog commit, as measured by the aggregator
    /// @param accepted false when the update was rejected (scored with quality 0) or is missing (round skipped)
    /// @param committed whether the client's fog node committed an update this round (checked at the post)
    struct Measurement {
        uint64 quality;
        uint32 roundTime;
        bool accepted;
        bool committed;
    }

    /// @notice A posted round (round 0: the cross-task priors).
    /// @param entriesHash keccak256(abi.encode(taskId, round, measurements)); for round 0
    /// keccak256(abi.encode(taskId, priors))
    /// @param postedAt block time of the post, seconds (its challenge window runs from here)
    /// @param accuracy the posted accuracy of the round's global model, 1e18 fixed point (0 for round 0)
    struct RoundRecord {
        bytes32 entriesHash;
        uint64 postedAt;
        uint64 accuracy;
    }

    /// @notice A client's state in a task (one storage slot pair per client).
    /// @param account the client's address
    /// @param status its standing
    /// @param rounds k: rounds in which it was scored
    /// @param sumQuality sum over its scored rounds j of j * q_j (capped qualities), 1e18 fixed point
    /// @param sumTimeRatio sum over its scored rounds j of j * min(cap, T / t_j), 1e18 fixed point
    /// @param lossReputation r_a after its last scored round (min(1e18, cap) before the first), 1e18 fixed point
    /// @param timeReputation r_t after its last scored round (min(1e18, cap) before the first), 1e18 fixed point
    /// @param earned wei credited by eq. 15 in final rounds so far and not yet paid out
    struct ClientInfo {
        address account;
        ClientStatus status;
        uint16 rounds;
        uint96 sumQuality;
        uint96 sumTimeRatio;
        uint64 lossReputation;
        uint64 timeReputation;
        uint128 earned;
    }

    /// @notice The task is unknown or not in the status this call needs.
    /// @param taskId the task
    /// @param status its status now
    error LedgerWrongTaskStatus(uint256 taskId, ITaskRegistry.TaskStatus status);
    /// @notice `msg.value` is not the task's client deposit d.
    /// @param taskId the task
    /// @param sent wei sent
    /// @param required wei required
    error LedgerWrongDeposit(uint256 taskId, uint256 sent, uint256 required);
    /// @notice The account already joined this task.
    error LedgerAlreadyJoined(uint256 taskId, address client);
    /// @notice The task already has its maximum number of clients.
    error LedgerTaskFull(uint256 taskId, uint16 maxClients);
    /// @notice The account is not a client of this task.
    error LedgerNotClient(uint256 taskId, address account);
    /// @notice No client has this index in the task.
    error LedgerUnknownClientIndex(uint256 taskId, uint256 clientIndex);
    /// @notice Only the task's aggregator may post rounds.
    /// @param taskId the task
    /// @param caller the rejected caller
    error LedgerNotAggregator(uint256 taskId, address caller);
    /// @notice The posted round is not the task's current round (already posted, or not begun).
    /// @param taskId the task
    /// @param posted the round in the call
    /// @param current the task's current round
    error LedgerWrongRound(uint256 taskId, uint16 posted, uint16 current);
    /// @notice There must be exactly one measurement per client, in join order.
    /// @param taskId the task
    /// @param posted measurements posted
    /// @param clients clients of the task
    error LedgerWrongMeasurementCount(uint256 taskId, uint256 posted, uint256 clients);
    /// @notice The round cannot be posted yet: an active client's update (its fog node's, or in a self-trained task
    /// its own) is not committed and the deadline has not passed.
    /// @param taskId the task
    /// @param clientIndex the first client still awaited
    /// @param deadline the round's deadline, seconds
    error LedgerRoundNotReady(uint256 taskId, uint256 clientIndex, uint64 deadline);
    /// @notice A measurement was accepted although no update was committed for the client in this round.
    error LedgerUncommittedUpdate(uint256 taskId, uint256 clientIndex);
    /// @notice A measurement's `committed` flag disagrees with the chain: the client's update was or was not committed
    /// (by its fog node, or in a self-trained task by the client).
    /// @param taskId the task
    /// @param clientIndex the client
    /// @param committed whether the round's update was committed
    error LedgerCommitMismatch(uint256 taskId, uint256 clientIndex, bool committed);
    /// @notice Rounds are finalised in order: this is not the next round to finalise, or it is not posted.
    /// @param taskId the task
    /// @param round the round in the call
    /// @param next the next round to finalise
    /// @param posted the last posted round
    error LedgerNotNextRound(uint256 taskId, uint16 round, uint16 next, uint16 posted);
    /// @notice The round's challenge window is still open.
    /// @param taskId the task
    /// @param round the round
    /// @param closesAt the last second of its window
    /// @param now_ the block time now
    error LedgerWindowOpen(uint256 taskId, uint16 round, uint64 closesAt, uint64 now_);
    /// @notice A challenge of the round awaits its verdict (or its expiry); round 0 is the priors.
    error LedgerChallengesOpen(uint256 taskId, uint16 round, uint32 open);
    /// @notice The aggregator's bond is not whole: upheld challenges took `shortfall` of it. No round is posted
    /// until whoever posted the bond tops it up (Disputes.topUpBond).
    /// @param taskId the task
    /// @param shortfall what the bond lacks, wei (or token units)
    error LedgerBondShort(uint256 taskId, uint256 shortfall);
    /// @notice The measurements given are not the ones posted for the round.
    error LedgerMeasurementsMismatch(uint256 taskId, uint16 round);
    /// @notice Settlement waits for every posted round to be final.
    /// @param taskId the task
    /// @param posted the last posted round
    /// @param finalized the last final round
    error LedgerRoundsPending(uint256 taskId, uint16 posted, uint16 finalized);
    /// @notice A posted round time disagrees with the block time of the update's commit.
    /// @param taskId the task
    /// @param clientIndex the client
    /// @param posted the posted round time, seconds
    /// @param observed the round time the chain observed: commit block time minus round start (a fog commit), or
    /// the round time a self-trained client's commit recorded, seconds
    error LedgerRoundTimeMismatch(uint256 taskId, uint256 clientIndex, uint32 posted, uint64 observed);
    /// @notice Only a self-trained task's clients commit their own updates (an auction task's fog nodes commit).
    error LedgerNotSelfTrained(uint256 taskId);
    /// @notice A removed client commits no more updates.
    error LedgerClientInactive(uint256 taskId, uint256 clientIndex);
    /// @notice The round's deadline passed before the commit.
    /// @param taskId the task
    /// @param round the round
    /// @param deadline the round's deadline, seconds
    /// @param now_ the block time now
    error LedgerCommitTooLate(uint256 taskId, uint16 round, uint64 deadline, uint64 now_);
    /// @notice The next round's work cannot have started: the current round is neither committed by every active
    /// client nor past its deadline, so its global model (the next round's start) cannot exist yet.
    /// @param taskId the task
    /// @param round the round committed
    /// @param current the task's current round
    error LedgerCommitTooEarly(uint256 taskId, uint16 round, uint16 current);
    /// @notice The client already committed its update of this round (a commit is final).
    error LedgerAlreadyCommitted(uint256 taskId, uint16 round, uint256 clientIndex);
    /// @notice The task's clients were already settled.
    error LedgerAlreadySettled(uint256 taskId);
    /// @notice The task's cross-task priors were already posted (they are posted once).
    error LedgerPriorsAlreadyPosted(uint256 taskId);
    /// @notice Priors can only be posted while the task runs round 1, before it is posted.
    /// @param taskId the task
    /// @param currentRound the task's current round
    error LedgerPriorsTooLate(uint256 taskId, uint16 currentRound);
    /// @notice There must be exactly one prior per client, in join order.
    /// @param taskId the task
    /// @param posted priors posted
    /// @param clients clients of the task
    error LedgerWrongPriorCount(uint256 taskId, uint256 posted, uint256 clients);
    /// @notice A prior exceeds the task's reputation cap.
    /// @param taskId the task
    /// @param clientIndex the client
    /// @param prior the posted prior, 1e18 fixed point
    /// @param cap the task's reputation cap, 1e18 fixed point
    error LedgerPriorAboveCap(uint256 taskId, uint256 clientIndex, uint64 prior, uint64 cap);

    /// @notice A round's reward root and reward list must both be zero (no rewards in kind) or both be set.
    /// @param taskId the task
    /// @param round the round
    /// @param rewardsRoot the posted Merkle root
    /// @param rewardList the posted hash of the reward list
    error LedgerInconsistentRewards(uint256 taskId, uint16 round, bytes32 rewardsRoot, bytes32 rewardList);
    /// @notice No rewards in kind were committed for this round (not posted yet, or a strategy without them).
    /// @param taskId the task
    /// @param round the round
    error LedgerNoRewards(uint256 taskId, uint16 round);

    /// @notice A self-trained task's client committed the update it trained in `round`.
    /// @param taskId the task
    /// @param clientIndex the client
    /// @param round the round
    /// @param client the client's account
    /// @param updateHash the update's content hash (the store's key)
    /// @param committedAt the block time of the commit, seconds
    /// @param roundTime seconds from when the round's work could start to the commit (contracts/README.md)
    event OwnUpdateCommitted(
        uint256 indexed taskId,
        uint256 indexed clientIndex,
        uint16 indexed round,
        address client,
        bytes32 updateHash,
        uint64 committedAt,
        uint32 roundTime
    );

    /// @notice A client joined a task and deposited d.
    /// @param taskId the task
    /// @param client the client
    /// @param clientIndex its position in join order (0-based), the index of its measurement in every round
    /// @param dataCommitment keccak256(abi.encode(dataSize, salt)): its data size, revealed when it opens its auction
    /// @param deposit wei
    event ClientJoined(uint256 indexed taskId, address indexed client, uint256 clientIndex, bytes32 dataCommitment, uint256 deposit);
    /// @notice The aggregator posted a round; it is pending until finalised. Together with the task's parameters and
    /// the fates of challenged entries this is enough to recompute every reputation and payment of the round.
    /// @param taskId the task
    /// @param round the round
    /// @param modelHash hash of the round's global model (as stored in the blob store)
    /// @param accuracy the global model's accuracy on the validation set, 1e18 fixed point
    /// @param measurements one per client in join order (entries of removed clients are ignored)
    event RoundPosted(uint256 indexed taskId, uint16 indexed round, bytes32 modelHash, uint64 accuracy, Measurement[] measurements);
    /// @notice A posted round became final: reputations updated, payments credited to earnings, removals made.
    /// @param taskId the task
    /// @param round the round
    /// @param paid wei credited to clients' earnings for the round, after pro-rata scaling
    /// @param forfeited wei of removed clients' deposits sent to the sink
    event RoundFinalized(uint256 indexed taskId, uint16 indexed round, uint256 paid, uint256 forfeited);
    /// @notice The aggregator committed a round's rewards in kind (each client's rewarded model) with the round.
    /// @param taskId the task
    /// @param round the round
    /// @param rewardsRoot OpenZeppelin standard Merkle root over the leaves (uint256 clientIndex, bytes32 rewardHash),
    /// each leaf keccak256(bytes.concat(keccak256(abi.encode(clientIndex, rewardHash)))); the reward hash names the
    /// rewarded model in the blob store
    /// @param rewardList hash of the round's reward list in the blob store (every client index with its reward hash),
    /// from which anyone rebuilds the tree and its proofs
    event RewardsCommitted(uint256 indexed taskId, uint16 indexed round, bytes32 rewardsRoot, bytes32 rewardList);
    /// @notice A client fell below r_a_min or r_t_min in a finalised round; it was removed and its deposit forfeited
    /// to the sink.
    /// @param taskId the task
    /// @param clientIndex the client
    /// @param round the round after which it was removed
    /// @param lossReputation its r_a, 1e18 fixed point
    /// @param timeReputation its r_t, 1e18 fixed point
    event ClientRemoved(uint256 indexed taskId, uint256 indexed clientIndex, uint16 indexed round, uint64 lossReputation, uint64 timeReputation);
    /// @notice The aggregator posted the task's cross-task priors H_i (eq. 6), computed off chain from earlier
    /// similar tasks (fedchain/fl/crosstask.py) and re-checked by the auditor.
    /// @param taskId the task
    /// @param priors one per client in join order, 1e18 fixed point (all zeros when no earlier task is similar)
    /// @param postedAt block time of the post: round 0's, from which the priors' challenge window runs, seconds
    event PriorsPosted(uint256 indexed taskId, uint64[] priors, uint64 postedAt);
    /// @notice A client was settled: its rewards and (in good standing) its deposit were credited.
    /// @param taskId the task
    /// @param clientIndex the client
    /// @param earned wei of eq. 15 payments over all rounds
    /// @param bonus wei of final bonus (eq. 16, after pro-rata scaling)
    /// @param depositReturned wei of deposit returned (0 for a removed client)
    event ClientSettled(uint256 indexed taskId, uint256 indexed clientIndex, uint256 earned, uint256 bonus, uint256 depositReturned);

    /// @notice Join an `Open` task with `msg.value` == d.
    /// @param taskId the task
    /// @param dataCommitment keccak256(abi.encode(uint256 dataSize, bytes32 salt))
    /// @return clientIndex the client's index
    function join(uint256 taskId, bytes32 dataCommitment) external payable returns (uint256 clientIndex);

    /// @notice `join` for a token task with an EIP-2612 permit of d for the Treasury, in one transaction.
    /// @param taskId the task (its asset must be a token with permit)
    /// @param commitment keccak256(abi.encode(uint256 dataSize, bytes32 salt)), as for `join`
    /// @param permit the caller's permit signature
    /// @return index the client's index
    function joinWithPermit(uint256 taskId, bytes32 commitment, ITreasury.Permit calldata permit)
        external
        returns (uint256 index);

    /// @notice Post the current round: one measurement per client in join order. Aggregator only, with its bond
    /// whole (`LedgerBondShort` otherwise). Allowed once every active client whose job a fog node holds has its
    /// commit, or after the round's deadline. An active client's measurement is `committed` exactly when its fog
    /// node committed this round; a committed measurement's `roundTime` is within the task's time tolerance of
    /// the round time the chain observed (the commit's block time minus the round's start; for a self-trained
    /// client, what its commit recorded); an uncommitted one is not accepted. The round is pending: nothing is scored or paid until
    /// `finalizeRound`. The clock moves on at once (the next round starts, or the task finishes).
    /// @param taskId the task
    /// @param round the current round
    /// @param modelHash hash of the round's global model
    /// @param accuracy the global model's validation accuracy, 1e18 fixed point; at or above the target the task finishes
    /// @param rewardsRoot Merkle root of the round's rewards in kind (see `RewardsCommitted`); zero for a strategy without them
    /// @param rewardList hash of the round's reward list in the blob store; zero exactly when `rewardsRoot` is
    /// @param measurements one per client in join order
    function postRound(
        uint256 taskId,
        uint16 round,
        bytes32 modelHash,
        uint64 accuracy,
        bytes32 rewardsRoot,
        bytes32 rewardList,
        Measurement[] calldata measurements
    ) external;

    /// @notice A self-trained task's client commits the update it trained in `round` (contracts/README.md,
    /// "Tasks trained by their own clients"): the current round up to its deadline, or the next round once its
    /// work could start (every active client committed the current round, or its deadline passed). The commit
    /// records the round time counted from then.
    /// @param taskId the task
    /// @param round the round the update was trained in
    /// @param updateHash the update's content hash
    function commitOwnUpdate(uint256 taskId, uint16 round, bytes32 updateHash) external;

    /// @notice Finalise posted round `round` (the one after the last final round) once its challenge window is over
    /// and no challenge of it is open (for round 1, none of the priors either: their fates apply then). Anyone. `measurements` are the round's posted ones (from `RoundPosted`);
    /// each challenged entry takes its fate (IDisputes): corrected, or skipped when void or neutral. A client
    /// without a commit (or a void or neutral entry) is skipped (no reputation change, no payment); a rejected
    /// update counts with quality 0. A scored client's r_a is min(cap, H_i + the weighted mean of eq. 8) when its
    /// quality reaches q_min, else the weighted mean times its quality (the prior H_i left out); below r_a_min or
    /// r_t_min it is removed and its deposit goes to the sink. Payments are credited to earnings (paid at
    /// settlement), scaled pro rata when the budget left cannot cover them.
    function finalizeRound(uint256 taskId, uint16 round, Measurement[] calldata measurements) external;

    /// @notice Post the task's cross-task priors H_i (eq. 6), once, while the task runs round 1 and before
    /// it is posted. Aggregator only. From then on a client's loss reputation after a round whose quality
    /// reaches q_min is min(cap, H_i + the weighted mean of eq. 8); after a round below q_min it is the
    /// decayed weighted mean alone, so a good history cannot carry a client through a garbage round.
    /// Without this call every prior is 0. The post is round 0: its priors can be challenged, one client's at a
    /// time, for the task's challenge window (Disputes.openPriorChallenge).
    /// @param taskId the task
    /// @param priors one per client in join order, each at most the task's reputation cap, 1e18 fixed point
    function postPriors(uint256 taskId, uint64[] calldata priors) external;

    /// @notice Settle a `Finished` task (final bonuses, deposits back, unspent budget refunded), a
    /// `Cancelled` one (deposits back) or an `Abandoned` one (as a finished one, the bonus counted from the
    /// finish time of neutral rounds: ITaskRegistry.TaskState.finishedAt), once every posted round is final;
    /// what is left of the aggregator's bond goes back to whoever posted it, or to the sink when the task was
    /// abandoned. Anyone, once.
    function settle(uint256 taskId) external;

    /// @notice A client's state.
    function client(uint256 taskId, uint256 clientIndex) external view returns (ClientInfo memory);

    /// @notice A client's index; reverts with LedgerNotClient if `account` did not join.
    function clientIndex(uint256 taskId, address account) external view returns (uint256);

    /// @notice Number of clients that joined the task.
    function clientCount(uint256 taskId) external view returns (uint256);

    /// @notice The client's data-size commitment from `join`.
    function dataCommitment(uint256 taskId, uint256 clientIndex) external view returns (bytes32);

    /// @notice Whether the client is `Active` (joined and not removed).
    function isActive(uint256 taskId, uint256 clientIndex) external view returns (bool);

    /// @notice The client's current loss and time reputation (min(1e18, cap) before its first scored round), 1e18 fixed point.
    function reputation(uint256 taskId, uint256 clientIndex) external view returns (uint64 lossReputation, uint64 timeReputation);

    /// @notice The client's cross-task prior H_i (0 unless posted; added to r_a only in rounds at or above q_min), 1e18 fixed point.
    function prior(uint256 taskId, uint256 clientIndex) external view returns (uint64);

    /// @notice Whether the task's priors were posted.
    function priorsPosted(uint256 taskId) external view returns (bool);

    /// @notice Wei of client deposits the ledger holds for the task now (active clients, before settlement).
    function depositsHeld(uint256 taskId) external view returns (uint256);

    /// @notice Wei of per-round payments credited to the task's clients and not yet paid out (they are paid at settlement).
    function rewardsHeld(uint256 taskId) external view returns (uint256);

    /// @notice The Merkle root of a round's rewards in kind; zero when none were committed.
    function rewardRoot(uint256 taskId, uint16 round) external view returns (bytes32);

    /// @notice Whether `proof` proves that client `clientIndex`'s reward in `round` is the model hashed `rewardHash`.
    /// Reverts with LedgerNoRewards when the round committed no rewards.
    /// @param taskId the task
    /// @param round the round
    /// @param clientIndex the client
    /// @param rewardHash keccak256 of the rewarded model's bytes in the blob store
    /// @param proof the sibling hashes from the leaf to the root (OpenZeppelin `MerkleProof`)
    function verifyReward(uint256 taskId, uint16 round, uint256 clientIndex, bytes32 rewardHash, bytes32[] calldata proof)
        external
        view
        returns (bool);

    /// @notice Whether `settle` ran for the task.
    function settled(uint256 taskId) external view returns (bool);

    /// @notice A posted round's record (zeros when not posted).
    function roundRecord(uint256 taskId, uint16 round) external view returns (RoundRecord memory);

    /// @notice A self-trained client's commit of `round`: its update hash, block time and the round time the chain
    /// observed, seconds (0, 0, 0: none).
    function ownCommit(uint256 taskId, uint16 round, uint256 clientIndex)
        external
        view
        returns (bytes32 updateHash, uint64 committedAt, uint32 roundTime);

    /// @notice The block times of the first `clients` clients' own commits of `round` (0: none).
    function ownCommitTimes(uint256 taskId, uint16 round, uint256 clients) external view returns (uint64[] memory times);

    /// @notice The last posted and the last final round of the task (0 before any).
    function rounds(uint256 taskId) external view returns (uint16 posted, uint16 finalized);

    /// @notice Active clients of the task: joined and not removed by a final round.
    function activeClients(uint256 taskId) external view returns (uint256);
}
