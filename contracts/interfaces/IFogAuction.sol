// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ITaskRegistry} from "./ITaskRegistry.sol";

/// @title IFogAuction: sealed-bid auctions of clients' training jobs to fog nodes, and the jobs' rounds
/// @notice Once per client per task (while the task is `Open`) the client opens an auction for its
/// training job, revealing its data size D against its join commitment. Fog nodes commit sealed bids
/// keccak256(abi.encode(uint64 frequency, uint96 price, bytes32 salt, address bidder)) with deposit r,
/// then reveal them. When the client closes the auction, the winner maximises the client's utility
/// U = P_i(r_a_i, r_t_x) - P_x (eq. 18), with r_t_x the time reputation implied by the fog's
/// frequency (T_x = c * D / f_x, eq. 11) and P_i the per-round payment of eq. 15. Any number of fog nodes
/// may bid; bids are ranked as they are revealed, by utility (the client's reputation and the terms do not
/// change while the task is `Open`). A bid of negative utility forfeits its deposit to the client at its
/// reveal; the MAX_RANKED best are kept, and a bid outranked by them gets its deposit back at once. First
/// price by default: the winner is paid its bid per round; second price as a task option: the price at which
/// its utility equals the runner-up's. The client escrows price * N. Unrevealed bids forfeit their
/// deposit to the client; ranked losers stay on standby (deposit held) until the job ends.
/// Each round the winner commits its update's hash; a commit before the round's deadline releases
/// one round's price to the fog node. A winner that misses a deadline is slashed (deposit to the
/// client) by anyone's `reportMissedRound`, and the job goes to the best standby bid whose price is
/// at most the escrowed price. A winner whose update the arbiter committee found fraudulent (Disputes) is
/// slashed the same way, its client compensated with the round's price. After the task ends and every posted
/// round is final, `settleJob` returns deposits and unearned escrow.
interface IFogAuction {
    /// @notice Where a job's auction is.
    enum JobStatus {
        None,
        Bidding,
        Awarded,
        Vacant,
        Settled
    }

    /// @notice One sealed bid (three storage slots).
    /// @param bidder the fog node
    /// @param revealed whether it was revealed
    /// @param settled whether its deposit was paid out (refunded or forfeited); an unrevealed bid's deposit is
    /// forfeited by the close (or the settlement of a job never closed) without this flag
    /// @param commitment keccak256(abi.encode(frequency, price, salt, bidder))
    /// @param frequency f_x, CPU cycles per second (0 until revealed)
    /// @param price P_x, wei per round (0 until revealed)
    /// @param utility the client's utility U of the bid (eq. 18), wei; set when a bid of utility >= 0 is revealed
    struct Bid {
        address bidder;
        bool revealed;
        bool settled;
        bytes32 commitment;
        uint64 frequency;
        uint96 price;
        uint96 utility;
    }

    /// @notice One client's training job. Field order is the storage layout: the first slot holds
    /// everything RoundLedger reads when a round is posted.
    /// @param status where it is
    /// @param paidUpTo the last round the current winner committed (or was excused from, after a reassignment), 0 before
    /// @param committedAt block time of the current winner's last commit, seconds (0 after a reassignment)
    /// @param winner index into the job's bids of the fog node training it (meaningful when Awarded)
    /// @param dataSize D, samples
    /// @param reveals how many of its bids were revealed
    /// @param closed whether its auction was closed (its unrevealed deposits then went to the client)
    /// @param biddingDeadline last second for sealed bids
    /// @param revealDeadline last second for reveals
    /// @param price wei per round the client escrowed for (the awarded price)
    /// @param winnerPrice wei per round the current winner is paid (a standby winner is paid its own bid)
    /// @param escrow wei the client escrowed (price * N)
    /// @param released wei of the escrow paid to fog nodes so far
    /// @param updateHash hash of the last committed update
    struct Job {
        JobStatus status;
        uint16 paidUpTo;
        uint64 committedAt;
        uint32 winner;
        uint64 dataSize;
        uint32 reveals;
        bool closed;
        uint64 biddingDeadline;
        uint64 revealDeadline;
        uint96 price;
        uint96 winnerPrice;
        uint256 escrow;
        uint256 released;
        bytes32 updateHash;
    }

    /// @notice The task is not in the status this call needs.
    /// @param taskId the task
    /// @param status its status now
    error AuctionWrongTaskStatus(uint256 taskId, ITaskRegistry.TaskStatus status);
    /// @notice The task is self-trained: each client trains its own job and nothing is auctioned.
    error AuctionSelfTrained(uint256 taskId);
    /// @notice The job is not in the status this call needs.
    /// @param taskId the task
    /// @param clientIndex the job's client
    /// @param status its status now
    error AuctionWrongJobStatus(uint256 taskId, uint256 clientIndex, JobStatus status);
    /// @notice Only the job's client may do this.
    error AuctionNotClient(uint256 taskId, uint256 clientIndex, address caller);
    /// @notice The revealed data size does not match the client's join commitment.
    error AuctionDataSizeMismatch(uint256 taskId, uint256 clientIndex, uint64 dataSize);
    /// @notice `msg.value` is not what the call requires.
    /// @param sent wei sent
    /// @param required wei required
    error AuctionWrongValue(uint256 sent, uint256 required);
    /// @notice The bid came after the bidding deadline.
    error AuctionBidTooLate(uint256 taskId, uint256 clientIndex, uint64 deadline, uint64 now_);
    /// @notice This fog node already bid for the job.
    error AuctionAlreadyBid(uint256 taskId, uint256 clientIndex, address bidder);
    /// @notice A reveal outside [biddingDeadline, revealDeadline).
    error AuctionNotRevealPhase(uint256 taskId, uint256 clientIndex, uint64 biddingDeadline, uint64 revealDeadline, uint64 now_);
    /// @notice The caller has no unrevealed bid for the job, or the reveal does not match its commitment.
    error AuctionBadReveal(uint256 taskId, uint256 clientIndex, address bidder);
    /// @notice A revealed frequency must be positive.
    error AuctionZeroFrequency(uint256 taskId, uint256 clientIndex, address bidder);
    /// @notice The auction cannot close before its reveal deadline.
    error AuctionRevealNotOver(uint256 taskId, uint256 clientIndex, uint64 revealDeadline, uint64 now_);
    /// @notice Only the job's current winner may commit updates.
    error AuctionNotWinner(uint256 taskId, uint256 clientIndex, address caller);
    /// @notice A commit for a round other than the task's current one, or a second commit for a round.
    error AuctionWrongRound(uint256 taskId, uint256 clientIndex, uint16 round, uint16 current);
    /// @notice A commit after the round's deadline.
    error AuctionCommitTooLate(uint256 taskId, uint256 clientIndex, uint64 deadline, uint64 now_);
    /// @notice The job's client was removed from the task; its job takes no more commits.
    error AuctionClientInactive(uint256 taskId, uint256 clientIndex);
    /// @notice A commit without a training transcript (its root is zero): no segment of it could be judged.
    error AuctionNoTranscript(uint256 taskId, uint256 clientIndex);
    /// @notice The winner has not missed a round (or the client is no longer active).
    error AuctionNoMissedRound(uint256 taskId, uint256 clientIndex);
    /// @notice A batch call's arrays differ in length: every array of values needs one entry per job index.
    /// @param indices the number of job (client) indices
    /// @param values the length of the array of values that differs
    error AuctionBatchLengthMismatch(uint256 indices, uint256 values);
    /// @notice A batch call named no job.
    error AuctionEmptyBatch();
    /// @notice Only the Disputes contract may slash a fog node for fraud.
    error AuctionNotDisputes(address caller);
    /// @notice Jobs are settled once every posted round is final (a pending round may still slash for fraud).
    /// @param taskId the task
    /// @param posted the last posted round
    /// @param finalized the last final round
    error AuctionRoundsPending(uint256 taskId, uint16 posted, uint16 finalized);

    /// @notice A client opened the auction for its job.
    /// @param taskId the task
    /// @param clientIndex the client
    /// @param dataSize D, samples
    /// @param biddingDeadline last second for bids
    /// @param revealDeadline last second for reveals
    event AuctionOpened(uint256 indexed taskId, uint256 indexed clientIndex, uint64 dataSize, uint64 biddingDeadline, uint64 revealDeadline);
    /// @notice A fog node committed a sealed bid with deposit r.
    event BidCommitted(uint256 indexed taskId, uint256 indexed clientIndex, address indexed bidder, uint256 bidIndex, bytes32 commitment);
    /// @notice A fog node revealed its bid.
    /// @param frequency cycles per second
    /// @param price wei per round
    event BidRevealed(uint256 indexed taskId, uint256 indexed clientIndex, address indexed bidder, uint256 bidIndex, uint64 frequency, uint96 price);
    /// @notice A revealed bid's utility to the client is negative: the client could never accept it. Its deposit r
    /// went to the client (BID_FORFEIT).
    /// @param utility the client's utility U of the bid, wei (< 0)
    event BidRejected(uint256 indexed taskId, uint256 indexed clientIndex, address indexed bidder, uint256 bidIndex, int256 utility);
    /// @notice A bid left the ranking: MAX_RANKED better bids are revealed. Its deposit r went back (BID_REFUND).
    event BidOutranked(uint256 indexed taskId, uint256 indexed clientIndex, address indexed bidder, uint256 bidIndex);
    /// @notice The client closed the auction. `winner` is type(uint32).max when no bid was revealed.
    /// @param winner bid index of the winner
    /// @param price wei per round the winner is paid
    /// @param escrow wei the client escrowed (price * N)
    event AuctionClosed(uint256 indexed taskId, uint256 indexed clientIndex, uint32 winner, uint96 price, uint256 escrow);
    /// @notice A fog node committed the hash of its update for a round; an on-time commit released one round's price to
    /// it. The chain keeps who committed each round and when (`roundCommit`).
    /// @param round the round
    /// @param updateHash hash of the update in the blob store
    /// @param transcriptRoot Merkle root of the training's checkpoints (contracts/README.md, "Training transcripts")
    /// @param committedAt block time, seconds
    /// @param payment wei released to the fog node
    event UpdateCommitted(
        uint256 indexed taskId,
        uint256 indexed clientIndex,
        uint16 indexed round,
        address fog,
        bytes32 updateHash,
        bytes32 transcriptRoot,
        uint64 committedAt,
        uint256 payment
    );
    /// @notice A winner missed a round deadline and lost its deposit to the client.
    /// @param round the missed round
    /// @param forfeited wei of deposit credited to the client
    event FogSlashed(uint256 indexed taskId, uint256 indexed clientIndex, address indexed fog, uint16 round, uint256 forfeited);
    /// @notice The committee upheld a fog challenge: the job's winner committed an update its honest re-execution
    /// does not reproduce. Its deposit r was slashed: the client got back what it paid the node for the fraud round
    /// and every later round (at most r); the rest went to the sink.
    /// @param round the round whose update was fraudulent
    /// @param compensation wei credited to the client
    /// @param burned wei credited to the sink
    event FogFraudSlashed(
        uint256 indexed taskId, uint256 indexed clientIndex, address indexed fog, uint16 round, uint256 compensation, uint256 burned
    );
    /// @notice The job went to a standby bid after a slash. `winner` is type(uint32).max when none was eligible (job vacant).
    /// @param winner bid index of the new winner
    /// @param price wei per round the new winner is paid
    /// @param fromRound first round the new winner must commit
    event JobReassigned(uint256 indexed taskId, uint256 indexed clientIndex, uint32 winner, uint96 price, uint16 fromRound);
    /// @notice The job was settled after the task ended: deposits and unearned escrow were credited.
    /// @param escrowRefund wei of escrow back to the client
    /// @param depositsRefunded wei of fog deposits returned
    /// @param depositsForfeited wei of fog deposits credited to the client: a winner that missed the last round,
    /// and the unrevealed bids of a job whose auction was never closed
    event JobSettled(uint256 indexed taskId, uint256 indexed clientIndex, uint256 escrowRefund, uint256 depositsRefunded, uint256 depositsForfeited);

    /// @notice Open the auction of the caller's job while the task is `Open`.
    /// @param taskId the task
    /// @param dataSize D, samples; must match the join commitment with `salt`
    /// @param salt the salt of the join commitment
    function openAuction(uint256 taskId, uint64 dataSize, bytes32 salt) external;

    /// @notice Commit a sealed bid with `msg.value` == r before the bidding deadline.
    /// @param commitment keccak256(abi.encode(uint64 frequency, uint96 price, bytes32 salt, address bidder))
    /// @return bidIndex the bid's index
    function commitBid(uint256 taskId, uint256 clientIndex, bytes32 commitment) external payable returns (uint256 bidIndex);

    /// @notice `commitBid` for several jobs of one task in one transaction, all or nothing: each entry is
    /// checked and emits `BidCommitted` as `commitBid` would, and `msg.value` == r * `indices.length`
    /// pays every deposit (one `Deposited` event of the Treasury for the total).
    /// @param indices the jobs, one bid each (a job named twice reverts `AuctionAlreadyBid`)
    /// @param commitments one sealed bid per job, as for `commitBid`
    /// @return bidIndices each bid's index in its job's bids
    function commitBids(uint256 taskId, uint256[] calldata indices, bytes32[] calldata commitments)
        external
        payable
        returns (uint256[] memory bidIndices);

    /// @notice Reveal the caller's bid between the bidding and reveal deadlines.
    /// @param frequency f_x, cycles per second (> 0)
    /// @param price P_x, wei per round
    /// @param salt the commitment's salt
    function revealBid(uint256 taskId, uint256 clientIndex, uint64 frequency, uint96 price, bytes32 salt) external;

    /// @notice `revealBid` for several jobs of one task in one transaction, all or nothing: each entry is
    /// checked and emits `BidRevealed` as `revealBid` would. The arrays run in parallel, one entry per job.
    /// @param indices the jobs
    /// @param frequencies f_x per job, cycles per second (> 0)
    /// @param prices P_x per job, wei per round
    /// @param salts each commitment's salt
    function revealBids(
        uint256 taskId,
        uint256[] calldata indices,
        uint64[] calldata frequencies,
        uint96[] calldata prices,
        bytes32[] calldata salts
    ) external;

    /// @notice Close the caller's auction after the reveal deadline, escrowing `msg.value` == price * N
    /// (0 when no bid is ranked). The winner is the best ranked bid. Unrevealed deposits are credited to the client.
    function closeAuction(uint256 taskId, uint256 clientIndex) external payable;

    /// @notice Commit the update hash of the current round as the job's winner, with the root of its training
    /// transcript (non-zero); on time, one round's price is released.
    function commitUpdate(uint256 taskId, uint256 clientIndex, uint16 round, bytes32 updateHash, bytes32 transcriptRoot)
        external;

    /// @notice `commitUpdate` of the same round for several jobs the caller won, in one transaction, all or
    /// nothing: each entry is checked and emits `UpdateCommitted` as `commitUpdate` would; the payments
    /// they release reach the caller as one `Credited` (FOG_PAYMENT) event of the Treasury for the total.
    /// @param round the task's current round
    /// @param indices the jobs
    /// @param updateHashes one update hash per job
    /// @param transcriptRoots one transcript root per job
    function commitUpdates(
        uint256 taskId,
        uint16 round,
        uint256[] calldata indices,
        bytes32[] calldata updateHashes,
        bytes32[] calldata transcriptRoots
    ) external;

    /// @notice Slash a winner that missed a round deadline and hand the job to the best eligible standby bid. Anyone.
    function reportMissedRound(uint256 taskId, uint256 clientIndex) external;

    /// @notice After an upheld fog challenge: if `fog` still holds job `clientIndex` (it is the winner and its
    /// deposit is held), slash its deposit and hand the job to the best eligible standby bid, from the current
    /// round while its deadline has not passed and `fog` has not committed it (a commit is never replaced), else
    /// from the next; the client is paid back for the rounds it paid `fog` for from `round` on, the rest goes to
    /// the sink (FogFraudSlashed). Disputes only.
    /// @param round the round whose update the committee found fraudulent
    /// @return slashed false when `fog` no longer holds the job (nothing left to slash)
    function slashFraud(uint256 taskId, uint256 clientIndex, address fog, uint16 round) external returns (bool slashed);

    /// @notice After the task ended (`Finished`, `Settled`, `Cancelled` or `Abandoned`): return the ranked bids'
    /// fog deposits and the unearned escrow. A cancelled or abandoned task slashes nobody here. A job whose auction
    /// was never closed is settled after its reveal deadline (`AuctionRevealNotOver`), its unrevealed deposits
    /// going to the client as at a close. Anyone, once per job.
    function settleJob(uint256 taskId, uint256 clientIndex) external;

    /// @notice `settleJob` for several jobs of one ended task in one transaction. A job that has nothing to
    /// settle (never auctioned, or settled already, by an earlier call or an earlier entry) is skipped, not
    /// an error: several agents may race to settle the same jobs. So is a job whose auction was never closed and
    /// whose reveals are not over yet: it settles after its reveal deadline. Reverts `AuctionWrongTaskStatus` before
    /// the task ended, as `settleJob` does. Anyone.
    /// @param indices the jobs
    /// @return settled how many of them this call settled
    function settleJobs(uint256 taskId, uint256[] calldata indices) external returns (uint256 settled);

    /// @notice Eq. 18 for one revealed bid: the client's utility P_i(r_a, r_t_x) - price, wei (may be negative).
    function utility(uint256 taskId, uint256 clientIndex, uint64 frequency, uint96 price) external view returns (int256);

    /// @notice A job.
    function job(uint256 taskId, uint256 clientIndex) external view returns (Job memory);

    /// @notice A job's bids in commit order.
    function bids(uint256 taskId, uint256 clientIndex) external view returns (Bid[] memory);

    /// @notice A job's ranked bids, best first (bid indices): the revealed bids of utility >= 0 still in contention,
    /// at most MAX_RANKED.
    function ranked(uint256 taskId, uint256 clientIndex) external view returns (uint32[] memory);

    /// @notice Who committed job `clientIndex`'s update of `round`, and when (address(0), 0: nobody).
    function roundCommit(uint256 taskId, uint256 clientIndex, uint16 round) external view returns (address fog, uint64 committedAt);

    /// @notice For every client of the task in join order: the block time of its job's commit for
    /// `round`, seconds, or 0 when there is none. RoundLedger reads it when a round is posted.
    function commitTimes(uint256 taskId, uint16 round, uint256 clients) external view returns (uint64[] memory);

    /// @notice Wei the auction holds for the task now (fog deposits not yet paid out plus unreleased escrow).
    function heldFor(uint256 taskId) external view returns (uint256);
}
