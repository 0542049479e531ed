// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IDisputes} from "./interfaces/IDisputes.sol";
import {IArbiterCommittee} from "./interfaces/IArbiterCommittee.sol";
import {IFogAuction} from "./interfaces/IFogAuction.sol";
import {IRoundLedger} from "./interfaces/IRoundLedger.sol";
import {ITaskRegistry} from "./interfaces/ITaskRegistry.sol";
import {ITreasury} from "./interfaces/ITreasury.sol";
import {Reasons} from "./libraries/Reasons.sol";

/// @title Disputes: aggregator bonds, challenges of posted rounds and the committee's verdicts
/// @notice It owns the bonds' accounting (their wei sit in the task's Treasury pool) and the fate of every
/// challenged entry, which RoundLedger.finalizeRound applies. A verdict is checked by the ArbiterCommittee;
/// a fog verdict's slash is made by the FogAuction; a wrong accuracy's early finish is voided by the
/// TaskRegistry.
contract Disputes is IDisputes {
    /// @notice The entry (client index) of a round's accuracy.
    uint32 public constant ACCURACY_ENTRY = type(uint32).max;

    ITaskRegistry private immutable _registry;
    IRoundLedger private immutable _ledger;
    IFogAuction private immutable _auction;
    ITreasury private immutable _treasury;
    IArbiterCommittee private immutable _committee;

    /// @dev A task's aggregator bond: who posted it and what is left of it (one slot).
    struct Bond {
        address bonder;
        uint96 amount;
    }

    /// @dev Challenges of one round: still open, and opened in all. 32 bits each: no number of challenges that
    /// anyone can pay for reaches their end, so none locks a round.
    struct RoundCount {
        uint32 open;
        uint32 total;
    }

    uint256 private _challengeCount;
    mapping(uint256 challengeId => Challenge) private _challenges;
    mapping(uint256 taskId => Bond) private _bonds;
    mapping(uint256 taskId => uint256 wei_) private _challengeBondsHeld;
    mapping(uint256 taskId => mapping(uint16 round => RoundCount)) private _rounds;
    mapping(uint256 taskId => mapping(uint16 round => mapping(uint256 clientIndex => EntryFate))) private _fates;
    /// @dev The earliest-opened upheld entry, accuracy or prior challenge of each entry: it takes the reward.
    mapping(uint256 taskId => mapping(uint16 round => mapping(uint256 clientIndex => uint256 challengeId))) private
        _firstUpheld;

    /// @param registry the TaskRegistry (terms and status; voids a wrong early finish)
    /// @param ledger the RoundLedger (posted rounds, clients), the only caller of releaseBond
    /// @param auction the FogAuction (who committed a round; fraud slashes)
    /// @param treasury the Treasury
    /// @param committee the ArbiterCommittee whose verdicts resolve challenges
    constructor(ITaskRegistry registry, IRoundLedger ledger, IFogAuction auction, ITreasury treasury, IArbiterCommittee committee) {
        _registry = registry;
        _ledger = ledger;
        _auction = auction;
        _treasury = treasury;
        _committee = committee;
    }

    /// @inheritdoc IDisputes
    function postBond(uint256 taskId) external payable {
        ITaskRegistry.TaskStatus status = _registry.state(taskId).status;
        if (status != ITaskRegistry.TaskStatus.Open) revert DisputeWrongTaskStatus(taskId, status);
        Bond storage b = _bonds[taskId];
        if (b.bonder != address(0)) revert DisputeAlreadyBonded(taskId);
        uint96 required = _registry.params(taskId).aggregatorBond;
        uint256 value = _treasury.expectedValue(taskId, required);
        if (msg.value != value) revert DisputeWrongValue(msg.value, value);
        b.bonder = msg.sender;
        b.amount = required;
        emit BondPosted(taskId, msg.sender, required);
        _treasury.deposit{value: msg.value}(taskId, msg.sender, required);
    }

    /// @inheritdoc IDisputes
    function topUpBond(uint256 taskId) external payable {
        ITaskRegistry.TaskStatus status = _registry.state(taskId).status;
        if (status != ITaskRegistry.TaskStatus.Running && status != ITaskRegistry.TaskStatus.Finished) {
            revert DisputeWrongTaskStatus(taskId, status);
        }
        Bond storage b = _bonds[taskId];
        if (msg.sender != b.bonder) revert DisputeNotBonder(taskId, msg.sender);
        uint96 required = _registry.params(taskId).aggregatorBond;
        uint96 shortfall = required - b.amount;
        if (shortfall == 0) revert DisputeBondWhole(taskId);
        uint256 value = _treasury.expectedValue(taskId, shortfall);
        if (msg.value != value) revert DisputeWrongValue(msg.value, value);
        b.amount = required;
        emit BondToppedUp(taskId, msg.sender, shortfall);
        _treasury.deposit{value: msg.value}(taskId, msg.sender, shortfall);
    }

    /// @inheritdoc IDisputes
    function openEntryChallenge(uint256 taskId, uint16 round, uint32 clientIndex, IRoundLedger.Measurement calldata proposed)
        external
        payable
        returns (uint256 challengeId)
    {
        ITaskRegistry.TaskParams memory p = _openableRound(taskId, round);
        _requireClient(taskId, clientIndex);
        address aggregator = _registry.state(taskId).aggregator;
        challengeId = _open(taskId, round, clientIndex, ChallengeKind.Entry, aggregator, proposed, 0, p.challengeBond);
    }

    /// @inheritdoc IDisputes
    function openFogChallenge(uint256 taskId, uint16 round, uint32 clientIndex, address fog, uint32 segment)
        external
        payable
        returns (uint256 challengeId)
    {
        ITaskRegistry.TaskParams memory p = _openableRound(taskId, round);
        _requireClient(taskId, clientIndex);
        if (_ledger.client(taskId, clientIndex).account != msg.sender) revert DisputeNotClient(taskId, clientIndex, msg.sender);
        if (p.selfTrained) revert DisputeNoFog(taskId, clientIndex);
        // Only the node that committed the round can be accused: a rejected challenge pays the accused half its
        // bond, and naming anyone else would halve the price of a frivolous challenge.
        (address committer,) = _auction.roundCommit(taskId, clientIndex, round);
        if (committer == address(0)) revert DisputeNoFog(taskId, clientIndex);
        if (fog != committer) revert DisputeNotCommitter(taskId, round, clientIndex, fog, committer);
        IRoundLedger.Measurement memory none;
        challengeId = _open(taskId, round, clientIndex, ChallengeKind.Fog, fog, none, segment, p.challengeBond);
    }

    /// @inheritdoc IDisputes
    function openAccuracyChallenge(uint256 taskId, uint16 round, uint64 accuracy)
        external
        payable
        returns (uint256 challengeId)
    {
        ITaskRegistry.TaskParams memory p = _openableRound(taskId, round);
        ITaskRegistry.TaskState memory s = _registry.state(taskId);
        // A task finishes before its last round only at its target: that post's accuracy is the one that moves money.
        bool earlyFinish = s.status == ITaskRegistry.TaskStatus.Finished && s.currentRound == round && round < p.rounds;
        if (!earlyFinish) revert DisputeAccuracyMovesNothing(taskId, round);
        if (accuracy >= p.targetAccuracy) revert DisputeAccuracyReachesTarget(taskId, accuracy, p.targetAccuracy);
        IRoundLedger.Measurement memory none;
        challengeId =
            _open(taskId, round, ACCURACY_ENTRY, ChallengeKind.Accuracy, s.aggregator, none, accuracy, p.challengeBond);
    }

    /// @inheritdoc IDisputes
    function openPriorChallenge(uint256 taskId, uint32 clientIndex, uint64 prior)
        external
        payable
        returns (uint256 challengeId)
    {
        if (!_ledger.priorsPosted(taskId)) revert DisputeNoPriors(taskId);
        ITaskRegistry.TaskParams memory p = _openable(taskId, 0);
        _requireClient(taskId, clientIndex);
        if (prior > p.reputationCap) revert DisputePriorAboveCap(taskId, clientIndex, prior, p.reputationCap);
        address aggregator = _registry.state(taskId).aggregator;
        IRoundLedger.Measurement memory none;
        challengeId = _open(taskId, 0, clientIndex, ChallengeKind.Prior, aggregator, none, prior, p.challengeBond);
    }

    /// @inheritdoc IDisputes
    function resolve(uint256 challengeId, bool upheld, bytes[] calldata signatures) external {
        Challenge storage c = _openChallenge(challengeId);
        uint64 deadline = c.openedAt + _committee.verdictWindow();
        if (block.timestamp > deadline) revert DisputeVerdictTooLate(challengeId, deadline, uint64(block.timestamp));
        _committee.requireQuorum(_committee.verdictDigest(challengeId, c.taskId, c.round, c.clientIndex, upheld), signatures);
        uint256 taskId = c.taskId;
        ChallengeStatus status = upheld ? ChallengeStatus.Upheld : ChallengeStatus.Rejected;
        EntryFate storage e = _close(c, challengeId, status);
        emit ChallengeResolved(challengeId, taskId, c.round, c.clientIndex, status, e.fate);
        if (!upheld) {
            // The accused gets half: a poster that challenges itself through a puppet loses the other half.
            uint256 accusedShare = c.bond / 2;
            _treasury.credit(taskId, c.accused, accusedShare, Reasons.CHALLENGE_FORFEIT);
            _treasury.creditSink(taskId, c.bond - accusedShare, Reasons.CHALLENGE_FORFEIT);
        } else {
            _treasury.credit(taskId, c.challenger, c.bond, Reasons.CHALLENGE_REFUND);
            if (c.kind == ChallengeKind.Fog) _auction.slashFraud(taskId, c.clientIndex, c.accused, c.round);
        }
        _settleEntry(taskId, c.round, c.clientIndex, e);
    }

    /// @inheritdoc IDisputes
    function expire(uint256 challengeId) external {
        Challenge storage c = _openChallenge(challengeId);
        uint64 deadline = c.openedAt + _committee.verdictWindow();
        if (block.timestamp <= deadline) revert DisputeVerdictNotDue(challengeId, deadline, uint64(block.timestamp));
        EntryFate storage e = _close(c, challengeId, ChallengeStatus.Expired);
        emit ChallengeResolved(challengeId, c.taskId, c.round, c.clientIndex, ChallengeStatus.Expired, e.fate);
        _treasury.credit(c.taskId, c.challenger, c.bond, Reasons.CHALLENGE_REFUND);
        _settleEntry(c.taskId, c.round, c.clientIndex, e);
    }

    /// @inheritdoc IDisputes
    function releaseBond(uint256 taskId) external {
        if (msg.sender != address(_ledger)) revert DisputeNotLedger(msg.sender);
        Bond storage b = _bonds[taskId];
        if (b.bonder == address(0)) return; // cancelled before any bond was posted
        uint256 amount = b.amount;
        b.amount = 0;
        // A silent aggregator loses its bond: its task was abandoned.
        if (_registry.state(taskId).status == ITaskRegistry.TaskStatus.Abandoned) {
            emit BondForfeited(taskId, amount);
            _treasury.creditSink(taskId, amount, Reasons.BOND_FORFEIT);
        } else {
            emit BondReleased(taskId, b.bonder, amount);
            _treasury.credit(taskId, b.bonder, amount, Reasons.BOND_REFUND);
        }
    }

    /// @inheritdoc IDisputes
    function bonded(uint256 taskId) external view returns (bool) {
        return _bonds[taskId].bonder != address(0);
    }

    /// @inheritdoc IDisputes
    function bond(uint256 taskId) external view returns (uint256 amount, address bonder) {
        Bond memory b = _bonds[taskId];
        return (b.amount, b.bonder);
    }

    /// @inheritdoc IDisputes
    function bondShortfall(uint256 taskId) external view returns (uint256) {
        return _registry.params(taskId).aggregatorBond - _bonds[taskId].amount;
    }

    /// @inheritdoc IDisputes
    function entrySlash(uint256 taskId) public view returns (uint256) {
        ITaskRegistry.TaskParams memory p = _registry.params(taskId);
        return p.aggregatorBond / p.maxClients;
    }

    /// @inheritdoc IDisputes
    function challenge(uint256 challengeId) external view returns (Challenge memory) {
        return _challenges[challengeId];
    }

    /// @inheritdoc IDisputes
    function challengeCount() external view returns (uint256) {
        return _challengeCount;
    }

    /// @inheritdoc IDisputes
    function roundChallenges(uint256 taskId, uint16 round) external view returns (uint32 open, uint32 total) {
        RoundCount memory r = _rounds[taskId][round];
        return (r.open, r.total);
    }

    /// @inheritdoc IDisputes
    function fates(uint256 taskId, uint16 round, uint256 clients) external view returns (EntryFate[] memory fates_) {
        fates_ = new EntryFate[](clients);
        mapping(uint256 => EntryFate) storage entries = _fates[taskId][round];
        for (uint256 i; i < clients; ++i) {
            fates_[i] = entries[i];
        }
    }

    /// @inheritdoc IDisputes
    function entryFate(uint256 taskId, uint16 round, uint32 clientIndex) external view returns (EntryFate memory) {
        return _fates[taskId][round][clientIndex];
    }

    /// @inheritdoc IDisputes
    function firstUpheld(uint256 taskId, uint16 round, uint32 clientIndex) external view returns (uint256) {
        return _firstUpheld[taskId][round][clientIndex];
    }

    /// @inheritdoc IDisputes
    function heldFor(uint256 taskId) external view returns (uint256) {
        return _bonds[taskId].amount + _challengeBondsHeld[taskId];
    }

    /// @notice The contracts it talks to: (TaskRegistry, RoundLedger, FogAuction, Treasury, ArbiterCommittee).
    function dependencies()
        external
        view
        returns (address registry, address ledger, address auction, address treasury, address committee)
    {
        return (address(_registry), address(_ledger), address(_auction), address(_treasury), address(_committee));
    }

    /// @dev Checks that round `round` (> 0) of the task is posted and within its challenge window.
    function _openableRound(uint256 taskId, uint16 round) private view returns (ITaskRegistry.TaskParams memory) {
        if (round == 0) revert DisputeRoundNotPosted(taskId, 0);
        return _openable(taskId, round);
    }

    /// @dev Checks that round `round` of the task (0: the priors) is posted and within its challenge window;
    /// returns the task's terms.
    function _openable(uint256 taskId, uint16 round) private view returns (ITaskRegistry.TaskParams memory p) {
        uint64 postedAt = _ledger.roundRecord(taskId, round).postedAt;
        if (postedAt == 0) revert DisputeRoundNotPosted(taskId, round);
        p = _registry.params(taskId);
        uint64 closesAt = postedAt + p.challengeWindow;
        if (block.timestamp > closesAt) revert DisputeWindowClosed(taskId, round, closesAt, uint64(block.timestamp));
    }

    function _requireClient(uint256 taskId, uint32 clientIndex) private view {
        if (clientIndex >= _ledger.clientCount(taskId)) revert DisputeUnknownClient(taskId, clientIndex);
    }

    /// @dev Records a new open challenge with the caller's bond `bond_` (in `msg.value` for an ether task).
    function _open(
        uint256 taskId,
        uint16 round,
        uint32 clientIndex,
        ChallengeKind kind,
        address accused,
        IRoundLedger.Measurement memory proposed,
        uint64 value_,
        uint96 bond_
    ) private returns (uint256 challengeId) {
        uint256 value = _treasury.expectedValue(taskId, bond_);
        if (msg.value != value) revert DisputeWrongValue(msg.value, value);
        challengeId = ++_challengeCount;
        uint64 now_ = uint64(block.timestamp);
        _challenges[challengeId] = Challenge({
            taskId: taskId,
            challenger: msg.sender,
            openedAt: now_,
            round: round,
            kind: kind,
            status: ChallengeStatus.Open,
            accused: accused,
            bond: bond_,
            clientIndex: clientIndex,
            proposed: proposed,
            value: value_
        });
        RoundCount storage r = _rounds[taskId][round];
        r.open += 1;
        r.total += 1;
        _fates[taskId][round][clientIndex].open += 1;
        _challengeBondsHeld[taskId] += bond_;
        emit ChallengeOpened(
            challengeId,
            taskId,
            round,
            clientIndex,
            kind,
            msg.sender,
            accused,
            proposed,
            value_,
            bond_,
            now_ + _committee.verdictWindow()
        );
        _treasury.deposit{value: msg.value}(taskId, msg.sender, bond_);
    }

    function _openChallenge(uint256 challengeId) private view returns (Challenge storage c) {
        c = _challenges[challengeId];
        if (c.kind == ChallengeKind.None) revert DisputeUnknownChallenge(challengeId);
        if (c.status != ChallengeStatus.Open) revert DisputeNotOpen(challengeId, c.status);
    }

    /// @dev Closes an open challenge with `status`: its round's and entry's counts, its bond's accounting and its
    /// entry's fate (the strongest outcome wins: void by a fog verdict, then corrected, then neutral). An upheld
    /// entry, accuracy or prior challenge opened before the entry's earliest upheld one so far takes its place,
    /// with its proposed value: the first challenge opened wins, whichever verdict lands first.
    function _close(Challenge storage c, uint256 challengeId, ChallengeStatus status) private returns (EntryFate storage e) {
        c.status = status;
        _rounds[c.taskId][c.round].open -= 1;
        _challengeBondsHeld[c.taskId] -= c.bond;
        e = _fates[c.taskId][c.round][c.clientIndex];
        e.open -= 1;
        Fate outcome = Fate.Posted;
        if (status == ChallengeStatus.Expired) {
            outcome = Fate.Neutral;
        } else if (status == ChallengeStatus.Upheld && c.kind == ChallengeKind.Fog) {
            outcome = Fate.Void;
        } else if (status == ChallengeStatus.Upheld) {
            outcome = Fate.Corrected;
            mapping(uint256 => uint256) storage first = _firstUpheld[c.taskId][c.round];
            uint256 earliest = first[c.clientIndex];
            if (earliest == 0 || challengeId < earliest) {
                first[c.clientIndex] = challengeId;
                e.corrected = c.proposed;
                e.value = c.value;
            }
        }
        if (outcome > e.fate) e.fate = outcome;
    }

    /// @dev Once an entry has no open challenge left: pays its upheld challenges once (one entry slash of the bond,
    /// at most what is left: half to the earliest-opened upheld challenger, the rest to the sink), and voids the
    /// early finish of a corrected or neutral accuracy.
    function _settleEntry(uint256 taskId, uint16 round, uint32 clientIndex, EntryFate storage e) private {
        if (e.open != 0) return;
        uint256 earliest = _firstUpheld[taskId][round][clientIndex];
        if (earliest != 0 && !e.paid) {
            e.paid = true;
            Bond storage b = _bonds[taskId];
            uint256 slash = entrySlash(taskId);
            uint256 taken = slash < b.amount ? slash : b.amount;
            uint256 reward = taken / 2;
            // taken <= b.amount was just checked.
            unchecked {
                b.amount -= uint96(taken);
            }
            emit BondSlashed(taskId, earliest, reward, taken - reward);
            _treasury.credit(taskId, _challenges[earliest].challenger, reward, Reasons.CHALLENGE_REWARD);
            _treasury.creditSink(taskId, taken - reward, Reasons.BOND_SLASH);
        }
        bool moot = e.fate == Fate.Corrected || e.fate == Fate.Neutral;
        if (clientIndex == ACCURACY_ENTRY && moot && !e.applied) {
            e.applied = true;
            _registry.voidEarlyFinish(taskId);
        }
    }
}
