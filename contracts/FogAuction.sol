// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {IFogAuction} from "./interfaces/IFogAuction.sol";
import {ITaskRegistry} from "./interfaces/ITaskRegistry.sol";
import {IRoundLedger} from "./interfaces/IRoundLedger.sol";
import {ITreasury} from "./interfaces/ITreasury.sol";
import {Reasons} from "./libraries/Reasons.sol";
import {ReputationMath} from "./libraries/ReputationMath.sol";

/// @title FogAuction: sealed-bid auctions of training jobs, fog commits, slashing and job settlement
contract FogAuction is IFogAuction {
    /// @notice The most revealed bids one job keeps in contention (bounds the gas of closing, reassigning and
    /// settling; any number of fog nodes may bid).
    uint256 public constant MAX_RANKED = 16;
    /// @notice `winner` value meaning "no winner".
    uint32 public constant NO_WINNER = type(uint32).max;

    ITaskRegistry private immutable _registry;
    IRoundLedger private immutable _ledger;
    ITreasury private immutable _treasury;
    address private immutable _disputes;

    mapping(uint256 taskId => mapping(uint256 clientIndex => Job)) private _jobs;
    mapping(uint256 taskId => mapping(uint256 clientIndex => Bid[])) private _bids;
    mapping(uint256 taskId => mapping(uint256 clientIndex => mapping(address bidder => uint256 indexPlusOne))) private
        _bidIndexPlusOne;
    /// @dev Each job's ranked bids, best first: indices into its bids.
    mapping(uint256 taskId => mapping(uint256 clientIndex => uint32[])) private _ranked;
    /// @dev Who committed each job's round, and when.
    mapping(uint256 taskId => mapping(uint256 clientIndex => mapping(uint16 round => RoundCommit))) private _roundCommits;
    mapping(uint256 taskId => uint256 wei_) private _held;

    /// @dev One job's commit of one round (one slot).
    struct RoundCommit {
        address fog;
        uint64 committedAt;
    }

    /// @dev What ranking a reveal needs of its job, read once per job.
    /// @param p the task's terms
    /// @param lossRep the client's loss reputation (its initial one: the task is `Open`)
    /// @param client the job's client, credited the deposit of a bid it could never accept
    struct RevealContext {
        ITaskRegistry.TaskParams p;
        uint256 lossRep;
        address client;
    }

    /// @dev What a commit needs of its task's round, read once per call.
    /// @param status the task's status
    /// @param round the current round
    /// @param deadline the current round's deadline, seconds
    struct RoundClock {
        ITaskRegistry.TaskStatus status;
        uint16 round;
        uint64 deadline;
    }

    /// @dev A fraud slash: the split of the deposit r (compensation + burned = r) and the job's next round.
    /// @param compensation wei to the client
    /// @param burned wei to the sink
    /// @param fromRound the round from which the next bid trains the job
    struct FraudSlash {
        uint256 compensation;
        uint256 burned;
        uint16 fromRound;
    }

    /// @dev What settling any job of an ended task needs of the task, read once per call.
    /// @param ended cancelled or abandoned: nobody is slashed at settlement
    /// @param round the task's current (last) round
    /// @param deposit r, wei
    struct Settlement {
        bool ended;
        uint16 round;
        uint256 deposit;
    }

    /// @dev The credits one job's settlement owes, made after the effects of every job in the call.
    /// @param client the job's client, credited the unearned escrow and a missed winner's deposit
    /// @param escrowRefund wei of escrow back to the client
    /// @param forfeited wei of fog deposit to the client
    /// @param refundTo the bidders whose deposit r goes back; the first `refunds` entries count
    /// @param refunds how many of `refundTo` are set
    struct Payout {
        address client;
        uint256 escrowRefund;
        uint256 forfeited;
        address[] refundTo;
        uint256 refunds;
    }

    /// @param registry the TaskRegistry
    /// @param ledger the RoundLedger (clients, their data commitments and reputations)
    /// @param treasury the Treasury
    /// @param disputes the Disputes contract, the only caller of slashFraud
    constructor(ITaskRegistry registry, IRoundLedger ledger, ITreasury treasury, address disputes) {
        _registry = registry;
        _ledger = ledger;
        _treasury = treasury;
        _disputes = disputes;
    }

    /// @inheritdoc IFogAuction
    function openAuction(uint256 taskId, uint64 dataSize, bytes32 salt) external {
        _requireTaskStatus(taskId, ITaskRegistry.TaskStatus.Open);
        ITaskRegistry.TaskParams memory p = _registry.params(taskId);
        if (p.selfTrained) revert AuctionSelfTrained(taskId);
        uint256 index = _ledger.clientIndex(taskId, msg.sender);
        Job storage j = _jobs[taskId][index];
        if (j.status != JobStatus.None) revert AuctionWrongJobStatus(taskId, index, j.status);
        if (dataSize == 0 || keccak256(abi.encode(uint256(dataSize), salt)) != _ledger.dataCommitment(taskId, index)) {
            revert AuctionDataSizeMismatch(taskId, index, dataSize);
        }
        uint64 biddingDeadline = uint64(block.timestamp) + p.biddingDuration;
        uint64 revealDeadline = biddingDeadline + p.revealDuration;
        j.status = JobStatus.Bidding;
        j.dataSize = dataSize;
        j.biddingDeadline = biddingDeadline;
        j.revealDeadline = revealDeadline;
        j.winner = NO_WINNER;
        emit AuctionOpened(taskId, index, dataSize, biddingDeadline, revealDeadline);
    }

    /// @inheritdoc IFogAuction
    function commitBid(uint256 taskId, uint256 index, bytes32 commitment) external payable returns (uint256 bidIndex) {
        uint256 deposits = _requireBidDeposits(taskId, 1);
        bidIndex = _commitBid(taskId, index, commitment);
        _takeBidDeposits(taskId, deposits);
    }

    /// @inheritdoc IFogAuction
    function commitBids(uint256 taskId, uint256[] calldata indices, bytes32[] calldata commitments)
        external
        payable
        returns (uint256[] memory bidIndices)
    {
        uint256 n = _batchLength(indices.length, commitments.length);
        uint256 deposits = _requireBidDeposits(taskId, n);
        bidIndices = new uint256[](n);
        for (uint256 i; i < n; ++i) {
            bidIndices[i] = _commitBid(taskId, indices[i], commitments[i]);
        }
        _takeBidDeposits(taskId, deposits);
    }

    /// @inheritdoc IFogAuction
    function revealBid(uint256 taskId, uint256 index, uint64 frequency, uint96 price, bytes32 salt) external {
        ITaskRegistry.TaskParams memory p = _registry.params(taskId);
        _revealBid(taskId, index, frequency, price, salt, p);
    }

    /// @inheritdoc IFogAuction
    function revealBids(
        uint256 taskId,
        uint256[] calldata indices,
        uint64[] calldata frequencies,
        uint96[] calldata prices,
        bytes32[] calldata salts
    ) external {
        uint256 n = _batchLength(indices.length, frequencies.length);
        _batchLength(n, prices.length);
        _batchLength(n, salts.length);
        ITaskRegistry.TaskParams memory p = _registry.params(taskId);
        for (uint256 i; i < n; ++i) {
            _revealBid(taskId, indices[i], frequencies[i], prices[i], salts[i], p);
        }
    }

    /// @inheritdoc IFogAuction
    function closeAuction(uint256 taskId, uint256 index) external payable {
        _requireTaskStatus(taskId, ITaskRegistry.TaskStatus.Open);
        _requireClient(taskId, index);
        Job storage j = _biddingJob(taskId, index);
        if (block.timestamp <= j.revealDeadline) {
            revert AuctionRevealNotOver(taskId, index, j.revealDeadline, uint64(block.timestamp));
        }
        ITaskRegistry.TaskParams memory p = _registry.params(taskId);
        Bid[] storage bids_ = _bids[taskId][index];
        uint32[] storage ranked_ = _ranked[taskId][index];
        // The bids were ranked as they were revealed; the unrevealed ones forfeit their deposits.
        uint256 forfeited = (bids_.length - j.reveals) * p.fogDeposit;
        uint256 best = ranked_.length == 0 ? NO_WINNER : ranked_[0];
        uint96 price;
        if (best != NO_WINNER) {
            price = bids_[best].price;
            if (p.secondPrice && ranked_.length > 1) {
                uint256 markup = bids_[best].utility - bids_[ranked_[1]].utility;
                price = SafeCast.toUint96(price + markup);
            }
        }
        uint256 escrow = uint256(price) * p.rounds;
        uint256 value = _treasury.expectedValue(taskId, escrow);
        if (msg.value != value) revert AuctionWrongValue(msg.value, value);

        j.status = best == NO_WINNER ? JobStatus.Vacant : JobStatus.Awarded;
        j.closed = true;
        j.winner = uint32(best);
        j.price = price;
        j.winnerPrice = price;
        j.escrow = escrow;
        _held[taskId] = _held[taskId] + escrow - forfeited;
        emit AuctionClosed(taskId, index, uint32(best), price, escrow);
        if (escrow != 0) _treasury.deposit{value: msg.value}(taskId, msg.sender, escrow);
        _treasury.credit(taskId, msg.sender, forfeited, Reasons.BID_FORFEIT);
    }

    /// @inheritdoc IFogAuction
    function commitUpdate(uint256 taskId, uint256 index, uint16 round, bytes32 updateHash, bytes32 transcriptRoot)
        external
    {
        RoundClock memory clock = _roundClock(taskId);
        _payFog(taskId, _commitUpdate(taskId, index, round, updateHash, transcriptRoot, clock));
    }

    /// @inheritdoc IFogAuction
    function commitUpdates(
        uint256 taskId,
        uint16 round,
        uint256[] calldata indices,
        bytes32[] calldata updateHashes,
        bytes32[] calldata transcriptRoots
    ) external {
        uint256 n = _batchLength(indices.length, updateHashes.length);
        _batchLength(n, transcriptRoots.length);
        RoundClock memory clock = _roundClock(taskId);
        uint256 payment;
        for (uint256 i; i < n; ++i) {
            payment += _commitUpdate(taskId, indices[i], round, updateHashes[i], transcriptRoots[i], clock);
        }
        // Every entry was checked to be the caller's job: one credit pays them all.
        _payFog(taskId, payment);
    }

    /// @inheritdoc IFogAuction
    function reportMissedRound(uint256 taskId, uint256 index) external {
        Job storage j = _jobs[taskId][index];
        if (j.status != JobStatus.Awarded) revert AuctionWrongJobStatus(taskId, index, j.status);
        ITaskRegistry.TaskState memory s = _registry.state(taskId);
        ITaskRegistry.TaskParams memory p = _registry.params(taskId);
        bool deadlinePassed = block.timestamp > s.roundStartedAt + p.roundDuration;
        uint16 missed = _missedRound(s, j.paidUpTo, deadlinePassed);
        if (missed == 0 || !_ledger.isActive(taskId, index)) revert AuctionNoMissedRound(taskId, index);

        Bid storage slashed = _bids[taskId][index][j.winner];
        slashed.settled = true;
        _held[taskId] -= p.fogDeposit;
        uint16 fromRound = _fromRound(j, s, p);
        address client_ = _ledger.client(taskId, index).account;
        emit FogSlashed(taskId, index, slashed.bidder, missed, p.fogDeposit);
        _reassign(taskId, index, j, fromRound);
        _treasury.credit(taskId, client_, p.fogDeposit, Reasons.BID_FORFEIT);
    }

    /// @inheritdoc IFogAuction
    function slashFraud(uint256 taskId, uint256 index, address fog, uint16 round) external returns (bool slashed) {
        if (msg.sender != _disputes) revert AuctionNotDisputes(msg.sender);
        Job storage j = _jobs[taskId][index];
        // Only a fog node that still holds the job has a deposit left to take: one slashed before (a missed
        // round, an earlier verdict) has none, and the job has moved on already.
        if (j.status != JobStatus.Awarded) return false;
        Bid storage b = _bids[taskId][index][j.winner];
        if (b.bidder != fog || b.settled) return false;
        ITaskRegistry.TaskState memory s = _registry.state(taskId);
        ITaskRegistry.TaskParams memory p = _registry.params(taskId);
        b.settled = true;
        FraudSlash memory f = _fraudSlash(j, s, p, round);
        _held[taskId] -= f.compensation + f.burned;
        address client_ = _ledger.client(taskId, index).account;
        emit FogFraudSlashed(taskId, index, fog, round, f.compensation, f.burned);
        _reassign(taskId, index, j, f.fromRound);
        _treasury.credit(taskId, client_, f.compensation, Reasons.FOG_COMPENSATION);
        _treasury.creditSink(taskId, f.burned, Reasons.FOG_SLASH);
        return true;
    }

    /// @dev The split of winner `j`'s deposit r after a fraud verdict on `round`, and the round the next bid starts
    /// at: the current one while it is open and the winner has not committed it (a commit is never replaced:
    /// contracts/README.md, "One commit per job and round"), else the next. The client is paid back what it paid
    /// the winner for the fraud round and every later round (at most r): a node found to cheat is trusted no more
    /// in its later rounds. The rest of r goes to the sink.
    function _fraudSlash(Job storage j, ITaskRegistry.TaskState memory s, ITaskRegistry.TaskParams memory p, uint16 round)
        private
        view
        returns (FraudSlash memory f)
    {
        f.fromRound = _fromRound(j, s, p);
        uint256 paidRounds = j.paidUpTo >= round ? j.paidUpTo + 1 - round : 1;
        uint256 owed = paidRounds * j.winnerPrice;
        f.compensation = owed < p.fogDeposit ? owed : p.fogDeposit;
        f.burned = p.fogDeposit - f.compensation;
    }

    /// @dev The first round job `j` trains once re-awarded now that its winner was slashed: the current one while
    /// the task runs, the round's deadline has not passed and the winner has not committed it (a commit is never
    /// replaced: contracts/README.md, "One commit per job and round"), else the next.
    function _fromRound(Job storage j, ITaskRegistry.TaskState memory s, ITaskRegistry.TaskParams memory p)
        private
        view
        returns (uint16)
    {
        bool open_ = s.status == ITaskRegistry.TaskStatus.Running && block.timestamp <= s.roundStartedAt + p.roundDuration;
        return open_ && j.paidUpTo < s.currentRound ? s.currentRound : s.currentRound + 1;
    }

    /// @inheritdoc IFogAuction
    function settleJob(uint256 taskId, uint256 index) external {
        Settlement memory t = _settlement(taskId);
        JobStatus status = _jobs[taskId][index].status;
        if (!_settleable(status)) revert AuctionWrongJobStatus(taskId, index, status);
        _payOut(taskId, _settleJob(taskId, index, t), t.deposit);
    }

    /// @inheritdoc IFogAuction
    function settleJobs(uint256 taskId, uint256[] calldata indices) external returns (uint256 settled) {
        uint256 n = indices.length;
        if (n == 0) revert AuctionEmptyBatch();
        Settlement memory t = _settlement(taskId);
        Payout[] memory payouts = new Payout[](n);
        for (uint256 i; i < n; ++i) {
            Job storage j = _jobs[taskId][indices[i]];
            // Settled by someone else first (or never auctioned): a lost race, not an error. An auction never
            // closed whose reveals are not over yet settles later: its bidders may still reveal.
            if (!_settleable(j.status) || (!j.closed && block.timestamp <= j.revealDeadline)) continue;
            payouts[settled++] = _settleJob(taskId, indices[i], t);
        }
        for (uint256 i; i < settled; ++i) {
            _payOut(taskId, payouts[i], t.deposit);
        }
    }

    /// @inheritdoc IFogAuction
    function utility(uint256 taskId, uint256 index, uint64 frequency, uint96 price) external view returns (int256) {
        Job storage j = _jobs[taskId][index];
        if (j.status == JobStatus.None) revert AuctionWrongJobStatus(taskId, index, j.status);
        if (frequency == 0) revert AuctionZeroFrequency(taskId, index, msg.sender);
        (uint64 lossRep,) = _ledger.reputation(taskId, index);
        return _utility(_registry.params(taskId), lossRep, j.dataSize, frequency, price);
    }

    /// @inheritdoc IFogAuction
    function job(uint256 taskId, uint256 index) external view returns (Job memory) {
        return _jobs[taskId][index];
    }

    /// @inheritdoc IFogAuction
    function bids(uint256 taskId, uint256 index) external view returns (Bid[] memory) {
        return _bids[taskId][index];
    }

    /// @inheritdoc IFogAuction
    function ranked(uint256 taskId, uint256 index) external view returns (uint32[] memory) {
        return _ranked[taskId][index];
    }

    /// @inheritdoc IFogAuction
    function roundCommit(uint256 taskId, uint256 index, uint16 round) external view returns (address fog, uint64 committedAt) {
        RoundCommit memory c = _roundCommits[taskId][index][round];
        return (c.fog, c.committedAt);
    }

    /// @inheritdoc IFogAuction
    function commitTimes(uint256 taskId, uint16 round, uint256 clients) external view returns (uint64[] memory times) {
        times = new uint64[](clients);
        mapping(uint256 => Job) storage jobs = _jobs[taskId];
        for (uint256 i; i < clients; ++i) {
            Job storage j = jobs[i];
            if (j.paidUpTo == round) times[i] = j.committedAt;
        }
    }

    /// @inheritdoc IFogAuction
    function heldFor(uint256 taskId) external view returns (uint256) {
        return _held[taskId];
    }

    /// @notice The contracts this auction talks to: (TaskRegistry, RoundLedger, Treasury, Disputes).
    function dependencies() external view returns (address registry, address ledger, address treasury, address disputes) {
        return (address(_registry), address(_ledger), address(_treasury), _disputes);
    }

    /// @dev Checks that the task takes bids and that `msg.value` pays the fog deposit r of `count` bids
    /// (0 for a token task, whose deposits the Treasury pulls); returns the deposits' total.
    function _requireBidDeposits(uint256 taskId, uint256 count) private view returns (uint256 required) {
        _requireTaskStatus(taskId, ITaskRegistry.TaskStatus.Open);
        required = _registry.params(taskId).fogDeposit * count;
        uint256 value = _treasury.expectedValue(taskId, required);
        if (msg.value != value) revert AuctionWrongValue(msg.value, value);
    }

    /// @dev One sealed bid of the caller for job `index`; its deposit is taken by `_takeBidDeposits`.
    function _commitBid(uint256 taskId, uint256 index, bytes32 commitment) private returns (uint256 bidIndex) {
        Job storage j = _biddingJob(taskId, index);
        if (block.timestamp > j.biddingDeadline) {
            revert AuctionBidTooLate(taskId, index, j.biddingDeadline, uint64(block.timestamp));
        }
        mapping(address bidder => uint256) storage bidIndexPlusOne = _bidIndexPlusOne[taskId][index];
        if (bidIndexPlusOne[msg.sender] != 0) revert AuctionAlreadyBid(taskId, index, msg.sender);
        Bid[] storage bids_ = _bids[taskId][index];
        bidIndex = bids_.length;
        bids_.push(
            Bid({
                bidder: msg.sender,
                revealed: false,
                settled: false,
                commitment: commitment,
                frequency: 0,
                price: 0,
                utility: 0
            })
        );
        bidIndexPlusOne[msg.sender] = bidIndex + 1;
        emit BidCommitted(taskId, index, msg.sender, bidIndex, commitment);
    }

    /// @dev Holds the call's deposits for the task: one Treasury deposit however many bids they pay for.
    function _takeBidDeposits(uint256 taskId, uint256 amount) private {
        _held[taskId] += amount;
        _treasury.deposit{value: msg.value}(taskId, msg.sender, amount);
    }

    /// @dev The caller's reveal of its bid for job `index`, ranked at once by its utility to the client: a bid of
    /// negative utility forfeits its deposit to the client; one that ranks below MAX_RANKED others, or that the
    /// new bid pushes out, gets its deposit back. The Treasury credits it makes move no tokens and call nothing.
    function _revealBid(
        uint256 taskId,
        uint256 index,
        uint64 frequency,
        uint96 price,
        bytes32 salt,
        ITaskRegistry.TaskParams memory p
    ) private {
        Job storage j = _biddingJob(taskId, index);
        uint64 now_ = uint64(block.timestamp);
        if (now_ <= j.biddingDeadline || now_ > j.revealDeadline) {
            revert AuctionNotRevealPhase(taskId, index, j.biddingDeadline, j.revealDeadline, now_);
        }
        uint256 bidIndexPlusOne = _bidIndexPlusOne[taskId][index][msg.sender];
        if (bidIndexPlusOne == 0) revert AuctionBadReveal(taskId, index, msg.sender);
        uint256 bidIndex = bidIndexPlusOne - 1;
        Bid storage b = _bids[taskId][index][bidIndex];
        if (b.revealed || b.commitment != keccak256(abi.encode(frequency, price, salt, msg.sender))) {
            revert AuctionBadReveal(taskId, index, msg.sender);
        }
        if (frequency == 0) revert AuctionZeroFrequency(taskId, index, msg.sender);
        b.frequency = frequency;
        b.price = price;
        b.revealed = true;
        j.reveals += 1;
        emit BidRevealed(taskId, index, msg.sender, bidIndex, frequency, price);
        // The client's reputation does not change while the task is `Open`: the utility now is the one at the close.
        (uint64 lossRep,) = _ledger.reputation(taskId, index);
        int256 u = _utility(p, lossRep, j.dataSize, frequency, price);
        if (u < 0) {
            b.settled = true;
            _held[taskId] -= p.fogDeposit;
            emit BidRejected(taskId, index, msg.sender, bidIndex, u);
            _treasury.credit(taskId, _ledger.client(taskId, index).account, p.fogDeposit, Reasons.BID_FORFEIT);
            return;
        }
        // u < 2^96: the task's terms keep the most one round pays below it (TaskRegistry).
        b.utility = uint96(uint256(u));
        _rank(taskId, index, bidIndex, p.fogDeposit);
    }

    /// @dev Inserts revealed bid `bidIndex` into its job's ranking (utility descending, earlier bid first on ties),
    /// refunding the deposit of whichever bid ends up past MAX_RANKED.
    function _rank(uint256 taskId, uint256 index, uint256 bidIndex, uint256 deposit) private {
        Bid[] storage bids_ = _bids[taskId][index];
        uint32[] storage ranked_ = _ranked[taskId][index];
        uint256 n = ranked_.length;
        uint96 u = bids_[bidIndex].utility;
        // Binary search for the first ranked bid the new one beats.
        uint256 lo;
        uint256 hi = n;
        while (lo < hi) {
            uint256 mid = (lo + hi) / 2;
            uint32 other = ranked_[mid];
            uint96 otherUtility = bids_[other].utility;
            if (otherUtility > u || (otherUtility == u && other < bidIndex)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        uint256 out = NO_WINNER;
        if (lo >= MAX_RANKED) {
            out = bidIndex;
        } else {
            if (n < MAX_RANKED) {
                ranked_.push(uint32(bidIndex));
            } else {
                out = ranked_[n - 1];
                n -= 1;
            }
            for (uint256 k = n; k > lo; --k) {
                ranked_[k] = ranked_[k - 1];
            }
            ranked_[lo] = uint32(bidIndex);
        }
        if (out == NO_WINNER) return;
        Bid storage dropped = bids_[out];
        dropped.settled = true;
        _held[taskId] -= deposit;
        emit BidOutranked(taskId, index, dropped.bidder, out);
        _treasury.credit(taskId, dropped.bidder, deposit, Reasons.BID_REFUND);
    }

    /// @dev The task's round as a commit sees it, read once per call however many jobs it commits.
    function _roundClock(uint256 taskId) private view returns (RoundClock memory) {
        ITaskRegistry.TaskState memory s = _registry.state(taskId);
        return RoundClock({status: s.status, round: s.currentRound, deadline: s.roundStartedAt + _registry.params(taskId).roundDuration});
    }

    /// @dev The caller's commit of `round` for job `index`; returns the payment it earned, credited by `_payFog`.
    function _commitUpdate(
        uint256 taskId,
        uint256 index,
        uint16 round,
        bytes32 updateHash,
        bytes32 transcriptRoot,
        RoundClock memory clock
    ) private returns (uint256 payment) {
        Job storage j = _jobs[taskId][index];
        if (j.status != JobStatus.Awarded) revert AuctionWrongJobStatus(taskId, index, j.status);
        if (msg.sender != _bids[taskId][index][j.winner].bidder) revert AuctionNotWinner(taskId, index, msg.sender);
        if (clock.status != ITaskRegistry.TaskStatus.Running) revert AuctionWrongTaskStatus(taskId, clock.status);
        if (round != clock.round || j.paidUpTo >= round) revert AuctionWrongRound(taskId, index, round, clock.round);
        if (!_ledger.isActive(taskId, index)) revert AuctionClientInactive(taskId, index);
        uint64 now_ = uint64(block.timestamp);
        if (now_ > clock.deadline) revert AuctionCommitTooLate(taskId, index, clock.deadline, now_);
        // Without a transcript no segment of the job can be re-executed, so no fog challenge could be judged.
        if (transcriptRoot == bytes32(0)) revert AuctionNoTranscript(taskId, index);
        payment = j.winnerPrice;
        j.paidUpTo = round;
        j.committedAt = now_;
        j.updateHash = updateHash;
        j.released += payment;
        _roundCommits[taskId][index][round] = RoundCommit(msg.sender, now_);
        emit UpdateCommitted(taskId, index, round, msg.sender, updateHash, transcriptRoot, now_, payment);
    }

    /// @dev Releases `payment` wei of the task's escrow to the caller, the winner of every job it committed.
    function _payFog(uint256 taskId, uint256 payment) private {
        _held[taskId] -= payment;
        _treasury.credit(taskId, msg.sender, payment, Reasons.FOG_PAYMENT);
    }

    /// @dev Checks that the task ended and reads what settling any of its jobs needs.
    function _settlement(uint256 taskId) private view returns (Settlement memory) {
        ITaskRegistry.TaskState memory s = _registry.state(taskId);
        // A cancelled or abandoned task slashes nobody at settlement: every deposit goes back.
        bool ended = s.status == ITaskRegistry.TaskStatus.Cancelled || s.status == ITaskRegistry.TaskStatus.Abandoned;
        if (!ended && s.status != ITaskRegistry.TaskStatus.Finished && s.status != ITaskRegistry.TaskStatus.Settled) {
            revert AuctionWrongTaskStatus(taskId, s.status);
        }
        // A pending round may still slash a fog node for fraud: deposits wait for every posted round to be final.
        (uint16 posted, uint16 finalized) = _ledger.rounds(taskId);
        if (posted != finalized) revert AuctionRoundsPending(taskId, posted, finalized);
        return Settlement({ended: ended, round: s.currentRound, deposit: _registry.params(taskId).fogDeposit});
    }

    /// @dev Settles job `index` (neither None nor Settled): every effect and the event; the credits it owes
    /// come back as a Payout for `_payOut`, so that a batch makes its external calls after all its effects.
    function _settleJob(uint256 taskId, uint256 index, Settlement memory t) private returns (Payout memory out) {
        Job storage j = _jobs[taskId][index];
        // A job whose auction was never closed settles once its reveals are over: its unrevealed bids forfeit
        // their deposits to the client then, as at a close.
        if (!j.closed) {
            if (block.timestamp <= j.revealDeadline) {
                revert AuctionRevealNotOver(taskId, index, j.revealDeadline, uint64(block.timestamp));
            }
            out.forfeited = (_bids[taskId][index].length - j.reveals) * t.deposit;
        }
        // A winner that still owes the last round of a finished task loses its deposit, as in reportMissedRound.
        bool winnerMissed = j.status == JobStatus.Awarded && !t.ended && j.paidUpTo < t.round && _ledger.isActive(taskId, index);
        Bid[] storage bids_ = _bids[taskId][index];
        uint32[] storage ranked_ = _ranked[taskId][index];
        uint256 n = ranked_.length;
        out.client = _ledger.client(taskId, index).account;
        out.escrowRefund = j.escrow - j.released;
        out.refundTo = new address[](n);
        j.status = JobStatus.Settled;
        j.released = j.escrow;
        // Only ranked bids hold deposits still: the others were refunded, forfeited or unrevealed.
        for (uint256 k; k < n; ++k) {
            uint256 i = ranked_[k];
            Bid storage b = bids_[i];
            if (b.settled) continue;
            b.settled = true;
            if (winnerMissed && i == j.winner) {
                out.forfeited += t.deposit;
            } else {
                out.refundTo[out.refunds++] = b.bidder;
            }
        }
        uint256 refunded = out.refunds * t.deposit;
        _held[taskId] -= out.escrowRefund + refunded + out.forfeited;
        emit JobSettled(taskId, index, out.escrowRefund, refunded, out.forfeited);
    }

    /// @dev Whether a job in `status` has anything to settle: it was auctioned and is not settled yet.
    function _settleable(JobStatus status) private pure returns (bool) {
        return status != JobStatus.None && status != JobStatus.Settled;
    }

    /// @dev The credits of one settled job: unearned escrow and forfeited deposits to its client, refunds to the bidders.
    function _payOut(uint256 taskId, Payout memory out, uint256 deposit) private {
        _treasury.credit(taskId, out.client, out.escrowRefund, Reasons.ESCROW_REFUND);
        _treasury.credit(taskId, out.client, out.forfeited, Reasons.BID_FORFEIT);
        for (uint256 i; i < out.refunds; ++i) {
            _treasury.credit(taskId, out.refundTo[i], deposit, Reasons.BID_REFUND);
        }
    }

    /// @dev Hands job `index`, whose winner was just slashed, to the best standby bid from round `fromRound` on
    /// (or leaves it vacant), and emits JobReassigned.
    function _reassign(uint256 taskId, uint256 index, Job storage j, uint16 fromRound) private {
        Bid[] storage bids_ = _bids[taskId][index];
        uint256 next = _bestStandby(j, bids_, _ranked[taskId][index]);
        j.paidUpTo = fromRound - 1;
        j.committedAt = 0;
        j.winner = uint32(next);
        if (next == NO_WINNER) {
            j.status = JobStatus.Vacant;
            j.winnerPrice = 0;
        } else {
            j.winnerPrice = bids_[next].price;
        }
        emit JobReassigned(taskId, index, uint32(next), j.winnerPrice, next == NO_WINNER ? 0 : fromRound);
    }

    /// @dev The length of a batch, that of `indices`; `values` is the length of an array that must match it.
    function _batchLength(uint256 indices, uint256 values) private pure returns (uint256) {
        if (values != indices) revert AuctionBatchLengthMismatch(indices, values);
        if (indices == 0) revert AuctionEmptyBatch();
        return indices;
    }

    /// @dev Eq. 18: P_i(r_a, r_t_x) - price, with r_t_x the time reputation of one round of T_x = c * D / f.
    function _utility(ITaskRegistry.TaskParams memory p, uint256 lossRep, uint256 dataSize, uint256 frequency, uint256 price)
        private
        pure
        returns (int256)
    {
        uint256 jobTime = ReputationMath.jobTime(p.cyclesPerSample, dataSize, frequency);
        if (jobTime == 0) jobTime = 1;
        uint256 ratio = ReputationMath.timeRatio(p.expectedDuration, p.rounds, jobTime, p.reputationCap);
        uint256 timeRep = ReputationMath.timeReputation(ratio, 1, p.maxRoundTime, jobTime, p.reputationCap);
        uint256 payment = ReputationMath.roundPayment(p.psi, lossRep, timeRep, p.minLossReputation, p.minTimeReputation);
        return int256(payment) - int256(price);
    }

    /// @dev The ranked standby bid with the highest utility (earliest on ties) whose price fits the escrowed price.
    function _bestStandby(Job storage j, Bid[] storage bids_, uint32[] storage ranked_) private view returns (uint256) {
        for (uint256 k; k < ranked_.length; ++k) {
            uint256 i = ranked_[k];
            Bid storage b = bids_[i];
            if (!b.settled && b.price <= j.price) return i;
        }
        return NO_WINNER;
    }

    /// @dev The first round the winner missed, or 0: a round before the current one that it did not
    /// commit, or the current one once its deadline passed (finished tasks: any round up to the last).
    function _missedRound(ITaskRegistry.TaskState memory s, uint16 paidUpTo, bool deadlinePassed) private pure returns (uint16) {
        uint16 current = s.currentRound;
        if (s.status == ITaskRegistry.TaskStatus.Running) {
            if (paidUpTo + 1 < current || (paidUpTo < current && deadlinePassed)) return paidUpTo + 1;
            return 0;
        }
        if (s.status == ITaskRegistry.TaskStatus.Finished || s.status == ITaskRegistry.TaskStatus.Settled) {
            return paidUpTo < current ? paidUpTo + 1 : 0;
        }
        return 0;
    }

    function _biddingJob(uint256 taskId, uint256 index) private view returns (Job storage j) {
        j = _jobs[taskId][index];
        if (j.status != JobStatus.Bidding) revert AuctionWrongJobStatus(taskId, index, j.status);
    }

    function _requireClient(uint256 taskId, uint256 index) private view {
        if (_ledger.clientIndex(taskId, msg.sender) != index) revert AuctionNotClient(taskId, index, msg.sender);
    }

    function _requireTaskStatus(uint256 taskId, ITaskRegistry.TaskStatus required) private view {
        ITaskRegistry.TaskStatus status = _registry.state(taskId).status;
        if (status != required) revert AuctionWrongTaskStatus(taskId, status);
    }
}
