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
/// a fog verdict's slash is made by the FogAuction.
contract Disputes is IDisputes {
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

    /// @dev Challenges of one round: still open, and opened in all.
    struct RoundCount {
        uint16 open;
        uint16 total;
    }

    /// @dev What finalisation makes of one entry.
    struct EntryFate {
        Fate fate;
        IRoundLedger.Measurement corrected;
    }

    uint256 private _challengeCount;
    mapping(uint256 challengeId => Challenge) private _challenges;
    mapping(uint256 taskId => Bond) private _bonds;
    mapping(uint256 taskId => uint256 wei_) private _challengeBondsHeld;
    mapping(uint256 taskId => mapping(uint16 round => RoundCount)) private _rounds;
    mapping(uint256 taskId => mapping(uint16 round => mapping(uint256 clientIndex => EntryFate))) private _fates;

    /// @param registry the TaskRegistry (terms and status)
    /// @param ledger the RoundLedger (posted rounds, clients), the only caller of releaseBond
    /// @param auction the FogAuction (fraud slashes)
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
    function openEntryChallenge(uint256 taskId, uint16 round, uint32 clientIndex, IRoundLedger.Measurement calldata proposed)
        external
        payable
        returns (uint256 challengeId)
    {
        ITaskRegistry.TaskParams memory p = _openable(taskId, round, clientIndex);
        address aggregator = _registry.state(taskId).aggregator;
        challengeId = _open(taskId, round, clientIndex, ChallengeKind.Entry, aggregator, proposed, p.challengeBond);
    }

    /// @inheritdoc IDisputes
    function openFogChallenge(uint256 taskId, uint16 round, uint32 clientIndex, address fog)
        external
        payable
        returns (uint256 challengeId)
    {
        ITaskRegistry.TaskParams memory p = _openable(taskId, round, clientIndex);
        if (_ledger.client(taskId, clientIndex).account != msg.sender) revert DisputeNotClient(taskId, clientIndex, msg.sender);
        if (fog == address(0) || p.selfTrained) revert DisputeNoFog(taskId, clientIndex);
        IRoundLedger.Measurement memory none;
        challengeId = _open(taskId, round, clientIndex, ChallengeKind.Fog, fog, none, p.challengeBond);
    }

    /// @inheritdoc IDisputes
    function resolve(uint256 challengeId, bool upheld, bytes[] calldata signatures) external {
        Challenge storage c = _openChallenge(challengeId);
        uint64 deadline = c.openedAt + _committee.verdictWindow();
        if (block.timestamp > deadline) revert DisputeVerdictTooLate(challengeId, deadline, uint64(block.timestamp));
        _committee.requireQuorum(_committee.verdictDigest(challengeId, c.taskId, c.round, c.clientIndex, upheld), signatures);
        uint256 taskId = c.taskId;
        ChallengeStatus status = upheld ? ChallengeStatus.Upheld : ChallengeStatus.Rejected;
        Fate fate = _close(c, status);
        if (!upheld) {
            // The accused gets half: a poster that challenges itself through a puppet loses the other half.
            uint256 accusedShare = c.bond / 2;
            emit ChallengeResolved(challengeId, taskId, c.round, c.clientIndex, status, fate);
            _treasury.credit(taskId, c.accused, accusedShare, Reasons.CHALLENGE_FORFEIT);
            _treasury.creditSink(taskId, c.bond - accusedShare, Reasons.CHALLENGE_FORFEIT);
            return;
        }
        if (c.kind == ChallengeKind.Entry) {
            Bond storage b = _bonds[taskId];
            uint256 left = b.amount;
            uint256 reward = left / 2;
            b.amount = 0;
            emit ChallengeResolved(challengeId, taskId, c.round, c.clientIndex, status, fate);
            if (left != 0) emit BondSlashed(taskId, challengeId, reward, left - reward);
            _treasury.credit(taskId, c.challenger, c.bond, Reasons.CHALLENGE_REFUND);
            _treasury.credit(taskId, c.challenger, reward, Reasons.CHALLENGE_REWARD);
            _treasury.creditSink(taskId, left - reward, Reasons.BOND_SLASH);
        } else {
            emit ChallengeResolved(challengeId, taskId, c.round, c.clientIndex, status, fate);
            _treasury.credit(taskId, c.challenger, c.bond, Reasons.CHALLENGE_REFUND);
            _auction.slashFraud(taskId, c.clientIndex, c.accused, c.round);
        }
    }

    /// @inheritdoc IDisputes
    function expire(uint256 challengeId) external {
        Challenge storage c = _openChallenge(challengeId);
        uint64 deadline = c.openedAt + _committee.verdictWindow();
        if (block.timestamp <= deadline) revert DisputeVerdictNotDue(challengeId, deadline, uint64(block.timestamp));
        Fate fate = _close(c, ChallengeStatus.Expired);
        emit ChallengeResolved(challengeId, c.taskId, c.round, c.clientIndex, ChallengeStatus.Expired, fate);
        _treasury.credit(c.taskId, c.challenger, c.bond, Reasons.CHALLENGE_REFUND);
    }

    /// @inheritdoc IDisputes
    function releaseBond(uint256 taskId) external {
        if (msg.sender != address(_ledger)) revert DisputeNotLedger(msg.sender);
        Bond storage b = _bonds[taskId];
        if (b.bonder == address(0)) return; // cancelled before any bond was posted
        uint256 amount = b.amount;
        b.amount = 0;
        emit BondReleased(taskId, b.bonder, amount);
        _treasury.credit(taskId, b.bonder, amount, Reasons.BOND_REFUND);
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
    function challenge(uint256 challengeId) external view returns (Challenge memory) {
        return _challenges[challengeId];
    }

    /// @inheritdoc IDisputes
    function challengeCount() external view returns (uint256) {
        return _challengeCount;
    }

    /// @inheritdoc IDisputes
    function roundChallenges(uint256 taskId, uint16 round) external view returns (uint16 open, uint16 total) {
        RoundCount memory r = _rounds[taskId][round];
        return (r.open, r.total);
    }

    /// @inheritdoc IDisputes
    function fates(uint256 taskId, uint16 round, uint256 clients)
        external
        view
        returns (Fate[] memory fates_, IRoundLedger.Measurement[] memory corrected)
    {
        fates_ = new Fate[](clients);
        corrected = new IRoundLedger.Measurement[](clients);
        mapping(uint256 => EntryFate) storage entries = _fates[taskId][round];
        for (uint256 i; i < clients; ++i) {
            EntryFate storage e = entries[i];
            fates_[i] = e.fate;
            corrected[i] = e.corrected;
        }
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

    /// @dev Checks that round `round` of the task is posted and within its challenge window, and that the client
    /// exists; returns the task's terms.
    function _openable(uint256 taskId, uint16 round, uint32 clientIndex)
        private
        view
        returns (ITaskRegistry.TaskParams memory p)
    {
        uint64 postedAt = _ledger.roundRecord(taskId, round).postedAt;
        if (postedAt == 0) revert DisputeRoundNotPosted(taskId, round);
        p = _registry.params(taskId);
        uint64 closesAt = postedAt + p.challengeWindow;
        if (block.timestamp > closesAt) revert DisputeWindowClosed(taskId, round, closesAt, uint64(block.timestamp));
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
            proposed: proposed
        });
        RoundCount storage r = _rounds[taskId][round];
        r.open += 1;
        r.total += 1;
        _challengeBondsHeld[taskId] += bond_;
        emit ChallengeOpened(
            challengeId, taskId, round, clientIndex, kind, msg.sender, accused, proposed, bond_, now_ + _committee.verdictWindow()
        );
        _treasury.deposit{value: msg.value}(taskId, msg.sender, bond_);
    }

    function _openChallenge(uint256 challengeId) private view returns (Challenge storage c) {
        c = _challenges[challengeId];
        if (c.kind == ChallengeKind.None) revert DisputeUnknownChallenge(challengeId);
        if (c.status != ChallengeStatus.Open) revert DisputeNotOpen(challengeId, c.status);
    }

    /// @dev Closes an open challenge with `status`: its round's count, its bond's accounting and its entry's fate
    /// (the strongest outcome wins: void by a fog verdict, then the first correction, then neutral).
    function _close(Challenge storage c, ChallengeStatus status) private returns (Fate) {
        c.status = status;
        _rounds[c.taskId][c.round].open -= 1;
        _challengeBondsHeld[c.taskId] -= c.bond;
        EntryFate storage e = _fates[c.taskId][c.round][c.clientIndex];
        Fate outcome = Fate.Posted;
        if (status == ChallengeStatus.Expired) {
            outcome = Fate.Neutral;
        } else if (status == ChallengeStatus.Upheld) {
            outcome = c.kind == ChallengeKind.Fog ? Fate.Void : Fate.Corrected;
        }
        if (outcome > e.fate) {
            e.fate = outcome;
            if (outcome == Fate.Corrected) e.corrected = c.proposed;
        }
        return e.fate;
    }
}
