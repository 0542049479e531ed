// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IRoundLedger} from "./interfaces/IRoundLedger.sol";
import {ITaskRegistry} from "./interfaces/ITaskRegistry.sol";
import {ITreasury} from "./interfaces/ITreasury.sol";
import {IFogAuction} from "./interfaces/IFogAuction.sol";
import {IDisputes} from "./interfaces/IDisputes.sol";
import {Reasons} from "./libraries/Reasons.sol";
import {ReputationMath} from "./libraries/ReputationMath.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {MerkleProof} from "@openzeppelin/contracts/utils/cryptography/MerkleProof.sol";

/// @title RoundLedger: clients, reputation, per-round payments and settlement of FedChain tasks
/// @notice Per client and task two storage slots: (sumQuality, sumTimeRatio, lossReputation) and
/// (timeReputation, earned, rounds, status, prior). A round's post reads each client's status once and stores
/// one record for the round; its finalisation reads and writes each client's two slots once.
contract RoundLedger is IRoundLedger {
    using ReputationMath for uint256;

    /// @dev The packed per-client state; field order fixes the two-slot layout.
    struct ClientSlot {
        uint96 sumQuality;
        uint96 sumTimeRatio;
        uint64 lossReputation;
        uint64 timeReputation;
        uint96 earned;
        uint16 rounds;
        ClientStatus status;
        uint64 prior;
    }

    /// @dev A self-trained client's commit of one round's update, and the round time the chain observed.
    struct OwnCommit {
        bytes32 updateHash;
        uint64 committedAt;
        uint32 roundTime;
    }

    /// @dev A self-trained task's commits of one round: how many, and when the last came.
    struct OwnRound {
        uint32 commits;
        uint64 lastCommitAt;
    }

    /// @dev Where a task's rounds are, in one slot.
    struct TaskRounds {
        uint16 posted;
        uint16 finalized;
        bool settled;
        bool priorsPosted;
    }

    ITaskRegistry private immutable _registry;
    ITreasury private immutable _treasury;
    IFogAuction private immutable _auction;
    IDisputes private immutable _disputes;

    mapping(uint256 taskId => ClientSlot[]) private _clients;
    mapping(uint256 taskId => address[]) private _accounts;
    mapping(uint256 taskId => mapping(address account => uint256 indexPlusOne)) private _indexPlusOne;
    mapping(uint256 taskId => bytes32[]) private _dataCommitments;
    mapping(uint256 taskId => uint256 wei_) private _depositsHeld;
    mapping(uint256 taskId => uint256 wei_) private _rewardsHeld;
    mapping(uint256 taskId => TaskRounds) private _rounds;
    mapping(uint256 taskId => mapping(uint16 round => RoundRecord)) private _roundRecords;
    mapping(uint256 taskId => mapping(uint16 round => bytes32 root)) private _rewardRoots;
    /// @dev A self-trained client's commit of a round: its update hash, block time and round time.
    mapping(uint256 taskId => mapping(uint16 round => mapping(uint256 index => OwnCommit))) private _ownCommits;
    mapping(uint256 taskId => mapping(uint16 round => OwnRound)) private _ownRounds;
    /// @dev Clients that joined and were not removed by a final round.
    mapping(uint256 taskId => uint256 count) private _activeClients;

    /// @param registry the TaskRegistry
    /// @param treasury the Treasury
    /// @param auction the FogAuction (source of the fog commits' block times)
    /// @param disputes the Disputes contract (open challenges and the fates of challenged entries)
    constructor(ITaskRegistry registry, ITreasury treasury, IFogAuction auction, IDisputes disputes) {
        _registry = registry;
        _treasury = treasury;
        _auction = auction;
        _disputes = disputes;
    }

    /// @inheritdoc IRoundLedger
    function join(uint256 taskId, bytes32 commitment) external payable returns (uint256 index) {
        uint256 deposit;
        (index, deposit) = _join(taskId, commitment);
        _treasury.deposit{value: msg.value}(taskId, msg.sender, deposit);
    }

    /// @inheritdoc IRoundLedger
    function joinWithPermit(uint256 taskId, bytes32 commitment, ITreasury.Permit calldata permit)
        external
        returns (uint256 index)
    {
        uint256 deposit;
        (index, deposit) = _join(taskId, commitment);
        _treasury.usePermit(_treasury.tokenOf(taskId), msg.sender, deposit, permit);
        _treasury.deposit(taskId, msg.sender, deposit);
    }

    /// @dev Checks and records the caller's joining of `taskId` (its deposit d is the caller's to make).
    function _join(uint256 taskId, bytes32 commitment) private returns (uint256 index, uint256 deposit) {
        ITaskRegistry.TaskState memory s = _registry.state(taskId);
        _requireStatus(taskId, s.status, ITaskRegistry.TaskStatus.Open);
        ITaskRegistry.TaskParams memory p = _registry.params(taskId);
        deposit = p.clientDeposit;
        uint256 value = _treasury.expectedValue(taskId, deposit);
        if (msg.value != value) revert LedgerWrongDeposit(taskId, msg.value, value);
        if (_indexPlusOne[taskId][msg.sender] != 0) revert LedgerAlreadyJoined(taskId, msg.sender);
        index = _clients[taskId].length;
        if (index >= p.maxClients) revert LedgerTaskFull(taskId, p.maxClients);
        // The initial reputation makes both slots non-zero now, so the first round's post pays the
        // cheap non-zero to non-zero SSTORE instead of a fresh slot's 20,000 gas: the client pays it here.
        uint64 initial = uint64(_min(ReputationMath.ONE, p.reputationCap));
        _clients[taskId].push(ClientSlot(0, 0, initial, initial, 0, 0, ClientStatus.Active, 0));
        _accounts[taskId].push(msg.sender);
        _dataCommitments[taskId].push(commitment);
        _indexPlusOne[taskId][msg.sender] = index + 1;
        _activeClients[taskId] += 1;
        _depositsHeld[taskId] += deposit;
        emit ClientJoined(taskId, msg.sender, index, commitment, deposit);
    }

    /// @inheritdoc IRoundLedger
    function postRound(
        uint256 taskId,
        uint16 round,
        bytes32 modelHash,
        uint64 accuracy,
        bytes32 rewardsRoot,
        bytes32 rewardList,
        Measurement[] calldata measurements
    ) external {
        ITaskRegistry.TaskState memory s = _registry.state(taskId);
        _requireStatus(taskId, s.status, ITaskRegistry.TaskStatus.Running);
        if (msg.sender != s.aggregator) revert LedgerNotAggregator(taskId, msg.sender);
        if (round != s.currentRound) revert LedgerWrongRound(taskId, round, s.currentRound);
        if ((rewardsRoot == bytes32(0)) != (rewardList == bytes32(0))) {
            revert LedgerInconsistentRewards(taskId, round, rewardsRoot, rewardList);
        }
        ClientSlot[] storage clients = _clients[taskId];
        uint256 n = clients.length;
        if (measurements.length != n) revert LedgerWrongMeasurementCount(taskId, measurements.length, n);
        ITaskRegistry.TaskParams memory p = _registry.params(taskId);
        // The poster is bonded whenever it posts: upheld challenges that took from the bond stop the task's
        // rounds until the bonder tops it up.
        (uint256 bondLeft,) = _disputes.bond(taskId);
        if (bondLeft < p.aggregatorBond) revert LedgerBondShort(taskId, p.aggregatorBond - bondLeft);
        // The round time the chain observed for each client: a fog commit's from the round's start on chain; a
        // self-trained client's from when the round's work could start, recorded with its commit.
        (uint64[] memory commits, uint64[] memory observed) = p.selfTrained
            ? _ownCommitTimes(taskId, round, n)
            : _fogCommitTimes(taskId, round, n, s.roundStartedAt);
        for (uint256 i; i < n; ++i) {
            // Only the slot holding the status is read: the round is scored when it is finalised.
            if (clients[i].status != ClientStatus.Active) continue;
            Measurement calldata m = measurements[i];
            bool committed = commits[i] != 0;
            if (m.committed != committed) revert LedgerCommitMismatch(taskId, i, committed);
            if (committed) {
                _checkRoundTime(taskId, i, m.roundTime, observed[i], p.timeTolerance);
            } else {
                _requireSkippable(taskId, i, s, p, m.accepted);
            }
        }
        _rounds[taskId].posted = round;
        _roundRecords[taskId][round] =
            RoundRecord(_entriesHash(taskId, round, measurements), uint64(block.timestamp), accuracy);
        emit RoundPosted(taskId, round, modelHash, accuracy, measurements);
        if (rewardsRoot != bytes32(0)) {
            // One slot per round whatever the number of clients: the proofs live off chain.
            _rewardRoots[taskId][round] = rewardsRoot;
            emit RewardsCommitted(taskId, round, rewardsRoot, rewardList);
        }
        _registry.closeRound(taskId, p.targetAccuracy != 0 && accuracy >= p.targetAccuracy);
    }

    /// @inheritdoc IRoundLedger
    function commitOwnUpdate(uint256 taskId, uint16 round, bytes32 updateHash) external {
        ITaskRegistry.TaskState memory s = _registry.state(taskId);
        ITaskRegistry.TaskParams memory p = _registry.params(taskId);
        if (!p.selfTrained) revert LedgerNotSelfTrained(taskId);
        _requireStatus(taskId, s.status, ITaskRegistry.TaskStatus.Running);
        uint256 indexPlusOne = _indexPlusOne[taskId][msg.sender];
        if (indexPlusOne == 0) revert LedgerNotClient(taskId, msg.sender);
        uint256 index = indexPlusOne - 1;
        if (_clients[taskId][index].status != ClientStatus.Active) revert LedgerClientInactive(taskId, index);
        // The current round, or the next one: the Flower loop may be one round ahead of the chain's posts.
        uint16 current = s.currentRound;
        if (round < current || round > current + 1 || round > p.rounds) revert LedgerWrongRound(taskId, round, current);
        OwnCommit storage c = _ownCommits[taskId][round][index];
        if (c.committedAt != 0) revert LedgerAlreadyCommitted(taskId, round, index);
        uint64 now_ = uint64(block.timestamp);
        uint64 deadline = s.roundStartedAt + p.roundDuration;
        uint64 workStart;
        if (round == current) {
            if (now_ > deadline) revert LedgerCommitTooLate(taskId, round, deadline, now_);
            workStart = s.roundStartedAt;
        } else {
            // The next round's work starts from the current round's global model, which exists at the earliest once
            // every active client committed the current round, or once its deadline passed.
            OwnRound storage previous = _ownRounds[taskId][current];
            if (previous.commits >= _activeClients[taskId]) {
                workStart = previous.lastCommitAt;
            } else if (now_ > deadline) {
                workStart = deadline;
            } else {
                revert LedgerCommitTooEarly(taskId, round, current);
            }
        }
        // now_ >= workStart: both are block times and workStart is in the past or now.
        uint32 roundTime = SafeCast.toUint32(now_ - workStart);
        c.updateHash = updateHash;
        c.committedAt = now_;
        c.roundTime = roundTime;
        OwnRound storage thisRound = _ownRounds[taskId][round];
        thisRound.commits += 1;
        thisRound.lastCommitAt = now_;
        emit OwnUpdateCommitted(taskId, index, round, msg.sender, updateHash, now_, roundTime);
    }

    /// @inheritdoc IRoundLedger
    function finalizeRound(uint256 taskId, uint16 round, Measurement[] calldata measurements) external {
        TaskRounds storage t = _rounds[taskId];
        uint16 next = t.finalized + 1;
        if (round != next || round > t.posted) revert LedgerNotNextRound(taskId, round, next, t.posted);
        RoundRecord memory record = _roundRecords[taskId][round];
        ITaskRegistry.TaskParams memory p = _registry.params(taskId);
        uint64 closesAt = record.postedAt + p.challengeWindow;
        if (block.timestamp <= closesAt) revert LedgerWindowOpen(taskId, round, closesAt, uint64(block.timestamp));
        (uint32 open, uint32 challenged) = _disputes.roundChallenges(taskId, round);
        if (open != 0) revert LedgerChallengesOpen(taskId, round, open);
        if (_entriesHash(taskId, round, measurements) != record.entriesHash) revert LedgerMeasurementsMismatch(taskId, round);

        ClientSlot[] storage clients = _clients[taskId];
        uint256 n = clients.length;
        if (round == 1 && t.priorsPosted) _applyPriorFates(taskId, clients, n);
        IDisputes.EntryFate[] memory fates;
        if (challenged != 0) fates = _disputes.fates(taskId, round, n);
        ClientSlot[] memory updated = new ClientSlot[](n);
        uint256[] memory payments = new uint256[](n);
        uint256 total;
        uint256 removed;
        for (uint256 i; i < n; ++i) {
            ClientSlot memory c = clients[i];
            updated[i] = c;
            if (c.status != ClientStatus.Active) continue;
            Measurement memory m = measurements[i];
            if (challenged != 0 && fates[i].fate != IDisputes.Fate.Posted) {
                if (fates[i].fate != IDisputes.Fate.Corrected) continue; // void or neutral: skipped this round
                // A verdict corrects the quality and the acceptance; whether and when the fog committed is the chain's.
                m.quality = fates[i].corrected.quality;
                m.accepted = fates[i].corrected.accepted;
            }
            if (!m.committed) continue;
            uint256 payment = _score(c, p, m);
            if (c.status == ClientStatus.Removed) {
                ++removed;
                emit ClientRemoved(taskId, i, round, c.lossReputation, c.timeReputation);
            }
            payments[i] = payment;
            total += payment;
        }

        uint256 available = _registry.state(taskId).budgetLeft;
        uint256 paid;
        for (uint256 i; i < n; ++i) {
            ClientSlot memory c = updated[i];
            if (payments[i] != 0) {
                uint256 payment = payments[i].scaled(total, available);
                // Checked: the sum of a client's payments is at most the task's budget; a budget of 2^96 wei
                // (about 7.9e10 ether) or more reverts here rather than wrapping.
                c.earned = SafeCast.toUint96(c.earned + payment);
                paid += payment;
            }
            clients[i] = c;
        }
        uint256 forfeited = removed * p.clientDeposit;
        _activeClients[taskId] -= removed;
        _depositsHeld[taskId] -= forfeited;
        _rewardsHeld[taskId] += paid;
        t.finalized = round;
        emit RoundFinalized(taskId, round, paid, forfeited);
        _registry.spendBudget(taskId, round, paid);
        _treasury.creditSink(taskId, forfeited, Reasons.DEPOSIT_FORFEIT);
    }

    /// @inheritdoc IRoundLedger
    function postPriors(uint256 taskId, uint64[] calldata priors) external {
        ITaskRegistry.TaskState memory s = _registry.state(taskId);
        _requireStatus(taskId, s.status, ITaskRegistry.TaskStatus.Running);
        if (msg.sender != s.aggregator) revert LedgerNotAggregator(taskId, msg.sender);
        TaskRounds storage t = _rounds[taskId];
        if (t.priorsPosted) revert LedgerPriorsAlreadyPosted(taskId);
        if (s.currentRound != 1) revert LedgerPriorsTooLate(taskId, s.currentRound);
        ClientSlot[] storage clients = _clients[taskId];
        uint256 n = clients.length;
        if (priors.length != n) revert LedgerWrongPriorCount(taskId, priors.length, n);
        uint64 cap = _registry.params(taskId).reputationCap;
        for (uint256 i; i < n; ++i) {
            if (priors[i] > cap) revert LedgerPriorAboveCap(taskId, i, priors[i], cap);
            clients[i].prior = priors[i];
        }
        t.priorsPosted = true;
        // Round 0: the priors' record, from which their challenge window runs.
        uint64 now_ = uint64(block.timestamp);
        _roundRecords[taskId][0] = RoundRecord(keccak256(abi.encode(taskId, priors)), now_, 0);
        emit PriorsPosted(taskId, priors, now_);
    }

    /// @inheritdoc IRoundLedger
    function settle(uint256 taskId) external {
        ITaskRegistry.TaskState memory s = _registry.state(taskId);
        TaskRounds storage t = _rounds[taskId];
        if (t.settled) revert LedgerAlreadySettled(taskId);
        // A cancelled task pays no final bonus and refunded its budget already. An abandoned one pays the bonus of
        // its neutral rounds (its finishedAt counts them posted at their deadlines).
        bool cancelled = s.status == ITaskRegistry.TaskStatus.Cancelled;
        if (!cancelled && s.status != ITaskRegistry.TaskStatus.Abandoned) {
            _requireStatus(taskId, s.status, ITaskRegistry.TaskStatus.Finished);
        }
        if (t.finalized != t.posted) revert LedgerRoundsPending(taskId, t.posted, t.finalized);
        if (t.priorsPosted) {
            // Round 0 is final too: its window closed and none of its challenges open, so nothing can reach the
            // task's money after settlement.
            uint64 closesAt = _roundRecords[taskId][0].postedAt + _registry.params(taskId).challengeWindow;
            if (block.timestamp <= closesAt) revert LedgerWindowOpen(taskId, 0, closesAt, uint64(block.timestamp));
            (uint32 priorsOpen,) = _disputes.roundChallenges(taskId, 0);
            if (priorsOpen != 0) revert LedgerChallengesOpen(taskId, 0, priorsOpen);
        }
        t.settled = true;
        ITaskRegistry.TaskParams memory p = _registry.params(taskId);
        ClientSlot[] storage clients = _clients[taskId];
        uint256 n = clients.length;

        uint256[] memory bonuses = new uint256[](n);
        uint256 total;
        if (!cancelled) {
            uint256 actualDuration = s.finishedAt - s.startedAt;
            for (uint256 i; i < n; ++i) {
                ClientSlot storage c = clients[i];
                if (c.status != ClientStatus.Active || c.rounds == 0) continue;
                uint256 totalRep = ReputationMath.totalReputation(c.lossReputation, c.timeReputation, p.reputationCap);
                uint256 bonus = ReputationMath.finalBonus(p.phi, p.expectedDuration, actualDuration, totalRep);
                bonuses[i] = bonus;
                total += bonus;
            }
        }
        uint256 bonusesPaid;
        _depositsHeld[taskId] = 0;
        _rewardsHeld[taskId] = 0;
        address[] storage accounts = _accounts[taskId];
        for (uint256 i; i < n; ++i) {
            ClientSlot storage c = clients[i];
            uint256 bonus = bonuses[i].scaled(total, s.budgetLeft);
            bonusesPaid += bonus;
            uint256 earned = c.earned;
            uint256 deposit = c.status == ClientStatus.Active ? p.clientDeposit : 0;
            c.earned = 0;
            emit ClientSettled(taskId, i, earned, bonus, deposit);
            _treasury.credit(taskId, accounts[i], earned + bonus, Reasons.CLIENT_REWARD);
            _treasury.credit(taskId, accounts[i], deposit, Reasons.DEPOSIT_RETURN);
        }
        if (!cancelled) _registry.settleBudget(taskId, bonusesPaid);
        _disputes.releaseBond(taskId);
    }

    /// @inheritdoc IRoundLedger
    function client(uint256 taskId, uint256 index) external view returns (ClientInfo memory info) {
        ClientSlot memory c = _slot(taskId, index);
        info = ClientInfo({
            account: _accounts[taskId][index],
            status: c.status,
            rounds: c.rounds,
            sumQuality: c.sumQuality,
            sumTimeRatio: c.sumTimeRatio,
            lossReputation: c.lossReputation,
            timeReputation: c.timeReputation,
            earned: c.earned
        });
    }

    /// @inheritdoc IRoundLedger
    function clientIndex(uint256 taskId, address account) external view returns (uint256) {
        uint256 indexPlusOne = _indexPlusOne[taskId][account];
        if (indexPlusOne == 0) revert LedgerNotClient(taskId, account);
        return indexPlusOne - 1;
    }

    /// @inheritdoc IRoundLedger
    function clientCount(uint256 taskId) external view returns (uint256) {
        return _clients[taskId].length;
    }

    /// @inheritdoc IRoundLedger
    function dataCommitment(uint256 taskId, uint256 index) external view returns (bytes32) {
        _slot(taskId, index);
        return _dataCommitments[taskId][index];
    }

    /// @inheritdoc IRoundLedger
    function isActive(uint256 taskId, uint256 index) external view returns (bool) {
        return index < _clients[taskId].length && _clients[taskId][index].status == ClientStatus.Active;
    }

    /// @inheritdoc IRoundLedger
    function reputation(uint256 taskId, uint256 index) external view returns (uint64 lossRep, uint64 timeRep) {
        ClientSlot memory c = _slot(taskId, index);
        return (c.lossReputation, c.timeReputation);
    }

    /// @inheritdoc IRoundLedger
    function prior(uint256 taskId, uint256 index) external view returns (uint64) {
        return _slot(taskId, index).prior;
    }

    /// @inheritdoc IRoundLedger
    function priorsPosted(uint256 taskId) external view returns (bool) {
        return _rounds[taskId].priorsPosted;
    }

    /// @inheritdoc IRoundLedger
    function depositsHeld(uint256 taskId) external view returns (uint256) {
        return _depositsHeld[taskId];
    }

    /// @inheritdoc IRoundLedger
    function rewardsHeld(uint256 taskId) external view returns (uint256) {
        return _rewardsHeld[taskId];
    }

    /// @inheritdoc IRoundLedger
    function rewardRoot(uint256 taskId, uint16 round) external view returns (bytes32) {
        return _rewardRoots[taskId][round];
    }

    /// @inheritdoc IRoundLedger
    function verifyReward(uint256 taskId, uint16 round, uint256 index, bytes32 rewardHash, bytes32[] calldata proof)
        external
        view
        returns (bool)
    {
        bytes32 root = _rewardRoots[taskId][round];
        if (root == bytes32(0)) revert LedgerNoRewards(taskId, round);
        bytes32 leaf = keccak256(bytes.concat(keccak256(abi.encode(index, rewardHash))));
        return MerkleProof.verifyCalldata(proof, root, leaf);
    }

    /// @inheritdoc IRoundLedger
    function settled(uint256 taskId) external view returns (bool) {
        return _rounds[taskId].settled;
    }

    /// @inheritdoc IRoundLedger
    function roundRecord(uint256 taskId, uint16 round) external view returns (RoundRecord memory) {
        return _roundRecords[taskId][round];
    }

    /// @inheritdoc IRoundLedger
    function ownCommit(uint256 taskId, uint16 round, uint256 index)
        external
        view
        returns (bytes32 updateHash, uint64 committedAt, uint32 roundTime)
    {
        OwnCommit storage c = _ownCommits[taskId][round][index];
        return (c.updateHash, c.committedAt, c.roundTime);
    }

    /// @inheritdoc IRoundLedger
    function ownCommitTimes(uint256 taskId, uint16 round, uint256 clients) external view returns (uint64[] memory times) {
        (times,) = _ownCommitTimes(taskId, round, clients);
    }

    /// @inheritdoc IRoundLedger
    function activeClients(uint256 taskId) external view returns (uint256) {
        return _activeClients[taskId];
    }

    /// @inheritdoc IRoundLedger
    function rounds(uint256 taskId) external view returns (uint16 posted, uint16 finalized) {
        TaskRounds memory t = _rounds[taskId];
        return (t.posted, t.finalized);
    }

    /// @notice The contracts this ledger talks to: (TaskRegistry, Treasury, FogAuction, Disputes).
    function dependencies() external view returns (address registry, address treasury, address auction, address disputes) {
        return (address(_registry), address(_treasury), address(_auction), address(_disputes));
    }

    /// @dev What a round's record commits to: its task, its number and every measurement as posted.
    function _entriesHash(uint256 taskId, uint16 round, Measurement[] calldata measurements) private pure returns (bytes32) {
        return keccak256(abi.encode(taskId, round, measurements));
    }

    /// @dev Score one committed measurement into `c` (eqs. 4-10, 15); marks it Removed below the thresholds.
    /// @return payment the unscaled eq. 15 payment, wei
    function _score(ClientSlot memory c, ITaskRegistry.TaskParams memory p, Measurement memory m)
        private
        pure
        returns (uint256 payment)
    {
        uint256 cap = p.reputationCap;
        uint256 quality = m.accepted ? _min(m.quality, cap) : 0;
        uint256 timeFp = _max(m.roundTime, 1) * ReputationMath.ONE;
        uint256 k = uint256(c.rounds) + 1;
        uint256 sumQuality = c.sumQuality + k * quality;
        uint256 sumTimeRatio = c.sumTimeRatio + k * ReputationMath.timeRatio(p.expectedDuration, p.rounds, timeFp, cap);
        // Eq. 8: the weighted mean plus the cross-task prior, or decayed without the prior below q_min; capped.
        uint256 lossRep = ReputationMath.lossReputation(sumQuality, k, quality, p.minQuality, c.prior, cap);
        uint256 timeRep = ReputationMath.timeReputation(sumTimeRatio, k, p.maxRoundTime, timeFp, cap);
        // k <= MAX_ROUNDS and every term <= MAX_REPUTATION_CAP, so the sums stay below 2^96;
        // the reputations are capped at MAX_REPUTATION_CAP < 2^64.
        c.sumQuality = uint96(sumQuality);
        c.sumTimeRatio = uint96(sumTimeRatio);
        c.lossReputation = uint64(lossRep);
        c.timeReputation = uint64(timeRep);
        c.rounds = uint16(k);
        if (lossRep < p.minLossReputation || timeRep < p.minTimeReputation) {
            c.status = ClientStatus.Removed;
            return 0;
        }
        return ReputationMath.roundPayment(p.psi, lossRep, timeRep, p.minLossReputation, p.minTimeReputation);
    }

    /// @dev A client without a commit: not accepted, and the round may only be posted after its deadline unless
    /// no fog node owes the client's job this round (vacant, or handed to a standby from a later round).
    function _requireSkippable(
        uint256 taskId,
        uint256 index,
        ITaskRegistry.TaskState memory s,
        ITaskRegistry.TaskParams memory p,
        bool accepted
    ) private view {
        if (accepted) revert LedgerUncommittedUpdate(taskId, index);
        uint64 deadline = s.roundStartedAt + p.roundDuration;
        if (block.timestamp > deadline) return;
        // Before the deadline a self-trained client still has time to commit; a fog node owes its commit only
        // while it holds the job and has not committed the round.
        if (p.selfTrained) revert LedgerRoundNotReady(taskId, index, deadline);
        IFogAuction.Job memory j = _auction.job(taskId, index);
        if (j.status == IFogAuction.JobStatus.Awarded && j.paidUpTo < s.currentRound) {
            revert LedgerRoundNotReady(taskId, index, deadline);
        }
    }

    /// @dev Self-trained clients' commits of `round`: block times (0: none) and the round times they recorded.
    function _ownCommitTimes(uint256 taskId, uint16 round, uint256 clients)
        private
        view
        returns (uint64[] memory times, uint64[] memory roundTimes)
    {
        times = new uint64[](clients);
        roundTimes = new uint64[](clients);
        mapping(uint256 => OwnCommit) storage commits = _ownCommits[taskId][round];
        for (uint256 i; i < clients; ++i) {
            OwnCommit storage c = commits[i];
            times[i] = c.committedAt;
            roundTimes[i] = c.roundTime;
        }
    }

    /// @dev Fog commits of `round`: block times (0: none) and their times from the round's start on chain.
    function _fogCommitTimes(uint256 taskId, uint16 round, uint256 clients, uint64 roundStartedAt)
        private
        view
        returns (uint64[] memory times, uint64[] memory roundTimes)
    {
        times = _auction.commitTimes(taskId, round, clients);
        roundTimes = new uint64[](clients);
        for (uint256 i; i < clients; ++i) {
            // A fog commit of the current round comes after its start.
            if (times[i] > roundStartedAt) roundTimes[i] = times[i] - roundStartedAt;
        }
    }

    /// @dev Round 1 applies the fates of the priors' challenges (round 0): an upheld challenge's prior replaces the
    /// posted one, a neutral one is 0. Round 0 must have no open challenge.
    function _applyPriorFates(uint256 taskId, ClientSlot[] storage clients, uint256 n) private {
        (uint32 open, uint32 challenged) = _disputes.roundChallenges(taskId, 0);
        if (open != 0) revert LedgerChallengesOpen(taskId, 0, open);
        if (challenged == 0) return;
        IDisputes.EntryFate[] memory fates = _disputes.fates(taskId, 0, n);
        for (uint256 i; i < n; ++i) {
            if (fates[i].fate == IDisputes.Fate.Corrected) {
                clients[i].prior = fates[i].value;
            } else if (fates[i].fate == IDisputes.Fate.Neutral) {
                clients[i].prior = 0;
            }
        }
    }

    function _checkRoundTime(uint256 taskId, uint256 index, uint32 posted, uint64 observed, uint32 tolerance) private pure {
        uint256 gap = posted > observed ? posted - observed : observed - posted;
        if (gap > tolerance) revert LedgerRoundTimeMismatch(taskId, index, posted, observed);
    }

    function _slot(uint256 taskId, uint256 index) private view returns (ClientSlot memory) {
        if (index >= _clients[taskId].length) revert LedgerUnknownClientIndex(taskId, index);
        return _clients[taskId][index];
    }

    function _requireStatus(uint256 taskId, ITaskRegistry.TaskStatus status, ITaskRegistry.TaskStatus required) private pure {
        if (status != required) revert LedgerWrongTaskStatus(taskId, status);
    }

    function _min(uint256 a, uint256 b) private pure returns (uint256) {
        return a < b ? a : b;
    }

    function _max(uint256 a, uint256 b) private pure returns (uint256) {
        return a > b ? a : b;
    }
}
