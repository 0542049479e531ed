// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Vm} from "../utils/Vm.sol";
import {ITreasury} from "../../../contracts/interfaces/ITreasury.sol";
import {ITaskRegistry} from "../../../contracts/interfaces/ITaskRegistry.sol";
import {IRoundLedger} from "../../../contracts/interfaces/IRoundLedger.sol";
import {IFogAuction} from "../../../contracts/interfaces/IFogAuction.sol";
import {IDataHandoff} from "../../../contracts/interfaces/IDataHandoff.sol";
import {IArbiterCommittee} from "../../../contracts/interfaces/IArbiterCommittee.sol";
import {IDisputes} from "../../../contracts/interfaces/IDisputes.sol";
import {VerdictSigner} from "../utils/VerdictSigner.sol";

/// @notice The mintable test token with EIP-2612 permit the handler's token tasks use.
interface IMintable {
    function mint(address to, uint256 amount) external;
    function approve(address spender, uint256 amount) external returns (bool);
    function balanceOf(address account) external view returns (uint256);
    function nonces(address owner) external view returns (uint256);
    function DOMAIN_SEPARATOR() external view returns (bytes32);
}

/// @title Handler: the actors of FedChain calling every entry point at random, with ghost books of every wei
/// @notice Two publishers, two aggregators, six clients, five fog nodes and two strangers act on tasks in ether and
/// in a token, auction and self-trained. Each action picks its task, actor and arguments from the fuzzer's seeds,
/// mostly among the calls that can succeed, and tries it: a revert is a refused call, not a failure. After each
/// action the handler reads the Treasury's events from the logs into ghost books (credits by account, reason and
/// task; deposits; withdrawals) and counts every credit that no documented flow allows (`violations`): the
/// invariant suite asserts on the books and on that count.
contract Handler {
    Vm internal constant vm = Vm(address(uint160(uint256(keccak256("hevm cheat code")))));

    uint256 internal constant WAD = 1e18;
    uint32 internal constant ACCURACY_ENTRY = type(uint32).max;
    uint256 internal constant MAX_TASKS = 3;
    uint64 internal constant DATA_SIZE = 100;

    bytes32 internal constant CREDITED = keccak256("Credited(uint256,address,uint256,bytes32)");
    bytes32 internal constant DEPOSITED = keccak256("Deposited(uint256,address,uint256,uint256)");
    bytes32 internal constant WITHDRAWN = keccak256("Withdrawn(address,address,address,uint256)");

    ITreasury internal immutable treasury;
    ITaskRegistry internal immutable registry;
    IRoundLedger internal immutable ledger;
    IFogAuction internal immutable auction;
    IDataHandoff internal immutable handoff;
    IArbiterCommittee internal immutable committee;
    IDisputes internal immutable disputes;
    address internal immutable token;
    address internal immutable sink;
    uint256[3] internal arbiterKeys;

    address[] public publishers;
    address[] public aggregators;
    address[] public clients;
    address[] public fogs;
    address[] public strangers;
    /// @dev Every account that acts, the sink included: the books are checked for each.
    address[] public everyone;

    /// @dev What the handler keeps of a task it created.
    struct TaskInfo {
        address publisher;
        address aggregator;
        bool tokenTask;
        bool selfTrained;
        uint256 budget;
        uint256 createdAt;
    }

    uint256[] public taskIds;
    mapping(uint256 taskId => TaskInfo) internal _tasks;
    /// @dev The measurements of each posted round, to finalise it with.
    mapping(uint256 taskId => mapping(uint16 round => IRoundLedger.Measurement[])) internal _posted;
    /// @dev Each bidder's sealed bid for each job: (frequency, price), the salt being derived.
    mapping(uint256 taskId => mapping(uint256 job => mapping(address fog => uint256 packed))) internal _sealed;
    uint256[] public challengeIds;

    // ------------------------------------------------------------------ ghost books

    /// @dev Credits by asset, account and reason; by task and reason; deposits and withdrawals by asset and account.
    mapping(address asset => mapping(address account => mapping(bytes32 reason => uint256))) public creditedBy;
    mapping(address asset => mapping(address account => uint256)) public credited;
    mapping(address asset => mapping(address account => uint256)) public withdrawn;
    mapping(address asset => mapping(address account => uint256)) public deposited;
    mapping(uint256 taskId => mapping(bytes32 reason => uint256)) public taskCredited;
    mapping(uint256 taskId => uint256) public taskDeposited;
    /// @dev Credits that no documented flow allows (a forfeit to anyone but the sink or a wronged party, ...).
    uint256 public violations;
    string public lastViolation;
    /// @dev The accounts whose balances the last call's events moved, checked once all its events are read.
    struct Touched {
        address asset;
        address account;
    }

    Touched[] private _touched;
    /// @dev How many calls each action made, and how many of them the contracts accepted.
    mapping(bytes32 action => uint256) public calls;
    mapping(bytes32 action => uint256) public accepted;
    bytes32[] public actions;
    /// @dev How often the events that mark the flows a campaign must reach were emitted (removals, slashes, ...).
    mapping(bytes32 topic => uint256) public seen;
    bytes32[] public milestones;
    string[] public milestoneNames;

    constructor(
        ITreasury treasury_,
        ITaskRegistry registry_,
        IRoundLedger ledger_,
        IFogAuction auction_,
        IDataHandoff handoff_,
        IArbiterCommittee committee_,
        IDisputes disputes_,
        address token_,
        address sink_,
        uint256[3] memory arbiterKeys_
    ) {
        treasury = treasury_;
        registry = registry_;
        ledger = ledger_;
        auction = auction_;
        handoff = handoff_;
        committee = committee_;
        disputes = disputes_;
        token = token_;
        sink = sink_;
        arbiterKeys = arbiterKeys_;
        _cast(publishers, 0xB0B0, 2);
        _cast(aggregators, 0xA660, 2);
        _cast(clients, 0xC100, 6);
        _cast(fogs, 0xF000, 5);
        _cast(strangers, 0x5700, 2);
        everyone.push(sink_);
        bytes32[29] memory names = [
            bytes32("createTask"), "createTaskPermit", "postBond", "join", "joinPermit", "openAuction", "commitBid", "commitBids", "revealBid",
            "revealBids", "closeAuction", "commitData", "startTask", "cancelTask", "postPriors", "commitUpdate",
            "commitUpdates", "commitOwnUpdate", "postRound", "challenge", "resolve", "expire", "finalizeRound",
            "reportMissedRound", "topUpBond", "abandonTask", "settle", "settleJobs", "withdraw"
        ];
        for (uint256 i; i < names.length; ++i) {
            actions.push(names[i]);
        }
        string[12] memory events = [
            "ClientRemoved(uint256,uint256,uint16,uint64,uint64)",
            "FogSlashed(uint256,uint256,address,uint16,uint256)",
            "FogFraudSlashed(uint256,uint256,address,uint16,uint256,uint256)",
            "JobReassigned(uint256,uint256,uint32,uint96,uint16)",
            "BidRejected(uint256,uint256,address,uint256,int256)",
            "BidOutranked(uint256,uint256,address,uint256)",
            "BondSlashed(uint256,uint256,uint256,uint256)",
            "BondToppedUp(uint256,address,uint256)",
            "BondForfeited(uint256,uint256)",
            "TaskAbandoned(uint256,uint16,uint64,uint64)",
            "EarlyFinishVoided(uint256,uint16,uint64)",
            "ClientSettled(uint256,uint256,uint256,uint256,uint256)"
        ];
        for (uint256 i; i < events.length; ++i) {
            milestones.push(keccak256(bytes(events[i])));
            milestoneNames.push(events[i]);
        }
    }

    /// @dev Each actor's private key (its address is the key's), to sign EIP-2612 permits.
    mapping(address account => uint256 key) private _keys;

    function _cast(address[] storage role, uint256 base, uint256 n) private {
        for (uint256 i; i < n; ++i) {
            address a = vm.addr(base + i);
            _keys[a] = base + i;
            role.push(a);
            everyone.push(a);
            vm.deal(a, 1e30);
            IMintable(token).mint(a, 1e30);
            vm.prank(a);
            IMintable(token).approve(address(treasury), type(uint256).max);
        }
    }

    // ------------------------------------------------------------------ the actions

    /// @notice A publisher creates a task in ether or in the token, auction or self-trained, 1 to 3 rounds.
    function createTask(uint256 seed) external {
        seed = _mix(seed);
        if (taskIds.length >= MAX_TASKS) return;
        ITaskRegistry.TaskParams memory p = _params(seed);
        address publisher = publishers[seed % 2];
        address aggregator = aggregators[(seed >> 8) % 2];
        uint256 budget = _bound(seed >> 16, 1e15, 3e17);
        p.aggregatorBond = uint96(registry.minimumBond(p, budget));
        bool tokenTask = (seed >> 24) % 3 == 0;
        vm.recordLogs();
        vm.prank(publisher);
        uint256 taskId;
        bool ok;
        bool permitted = tokenTask && (seed >> 28) % 2 == 0;
        if (permitted) {
            ITreasury.Permit memory permit = _permit(publisher, budget);
            vm.prank(publisher);
            try registry.createTokenTaskWithPermit(p, aggregator, token, budget, permit) returns (uint256 id) {
                (taskId, ok) = (id, true);
            } catch {}
            _reapprove(publisher);
        } else if (tokenTask) {
            try registry.createTokenTask(p, aggregator, token, budget) returns (uint256 id) {
                (taskId, ok) = (id, true);
            } catch {}
        } else {
            try registry.createTask{value: budget}(p, aggregator) returns (uint256 id) {
                (taskId, ok) = (id, true);
            } catch {}
        }
        if (ok) {
            taskIds.push(taskId);
            _tasks[taskId] = TaskInfo(publisher, aggregator, tokenTask, p.selfTrained, budget, block.timestamp);
        }
        _done(permitted ? bytes32("createTaskPermit") : bytes32("createTask"), ok);
    }

    function postBond(uint256 seed) external {
        seed = _mix(seed);
        (uint256 t, bool known) = _taskWhere(seed, _needsBond);
        if (!known) return;
        ITaskRegistry.TaskParams memory p = registry.params(t);
        // The aggregator posts it, or the publisher on its behalf.
        address payer = seed % 4 == 0 ? _tasks[t].publisher : _tasks[t].aggregator;
        vm.recordLogs();
        vm.prank(payer);
        bool ok = _call(address(disputes), _value(t, p.aggregatorBond), abi.encodeCall(IDisputes.postBond, (t)));
        _done("postBond", ok);
    }

    function join(uint256 seed) external {
        seed = _mix(seed);
        (uint256 t, bool known) = _taskWhere(seed, _isOpen);
        if (!known) return;
        address c = clients[(seed >> 8) % clients.length];
        for (uint256 k; k < clients.length && _isClientOf(t, c); ++k) {
            c = clients[((seed >> 8) + k + 1) % clients.length];
        }
        ITaskRegistry.TaskParams memory p = registry.params(t);
        bytes32 commitment = keccak256(abi.encode(uint256(DATA_SIZE), _salt(t, c)));
        bool ok;
        bool permitted = _tasks[t].tokenTask && (seed >> 20) % 2 == 0;
        if (permitted) {
            // A token task's client may sign an EIP-2612 permit for its deposit instead of approving first.
            ITreasury.Permit memory permit = _permit(c, p.clientDeposit);
            vm.recordLogs();
            vm.prank(c);
            ok = _call(address(ledger), 0, abi.encodeCall(IRoundLedger.joinWithPermit, (t, commitment, permit)));
            _reapprove(c);
        } else {
            vm.recordLogs();
            vm.prank(c);
            ok = _call(address(ledger), _value(t, p.clientDeposit), abi.encodeCall(IRoundLedger.join, (t, commitment)));
        }
        _done(permitted ? bytes32("joinPermit") : bytes32("join"), ok);
    }

    function openAuction(uint256 seed) external {
        seed = _mix(seed);
        (uint256 t, uint256 index, address c, bool known) = _jobWhere(seed, _unauctioned);
        if (!known) return;
        index;
        vm.recordLogs();
        vm.prank(c);
        bool ok = _call(address(auction), 0, abi.encodeCall(IFogAuction.openAuction, (t, DATA_SIZE, _salt(t, c))));
        _done("openAuction", ok);
    }

    /// @notice A fog node seals a bid: mostly a fair price, sometimes an absurd one (a squatter's).
    function commitBid(uint256 seed) external {
        seed = _mix(seed);
        (uint256 t, uint256 index, , bool known) = _jobWhere(seed, _takesBids);
        if (!known) return;
        address fog = fogs[(seed >> 16) % fogs.length];
        for (uint256 k; k < fogs.length && _sealed[t][index][fog] != 0; ++k) {
            fog = fogs[((seed >> 16) + k + 1) % fogs.length];
        }
        (uint64 f, uint96 price) = _bidTerms(seed >> 24);
        ITaskRegistry.TaskParams memory p = registry.params(t);
        vm.recordLogs();
        vm.prank(fog);
        bool ok = _call(
            address(auction),
            _value(t, p.fogDeposit),
            abi.encodeCall(IFogAuction.commitBid, (t, index, _bidCommitment(t, index, fog, f, price)))
        );
        if (ok) _sealed[t][index][fog] = (uint256(f) << 96) | price;
        _done("commitBid", ok);
    }

    /// @notice A fog node seals bids for every job of a task still taking bids that it has not bid for, in one call.
    function commitBids(uint256 seed) external {
        seed = _mix(seed);
        (uint256 t, uint256 first, , bool known) = _jobWhere(seed, _takesBids);
        if (!known) return;
        address fog = fogs[(seed >> 16) % fogs.length];
        for (uint256 k; k < fogs.length && _sealed[t][first][fog] != 0; ++k) {
            fog = fogs[((seed >> 16) + k + 1) % fogs.length];
        }
        uint256 n = ledger.clientCount(t);
        uint256 count;
        for (uint256 i; i < n; ++i) {
            if (_takesBids(t, i) && _sealed[t][i][fog] == 0) ++count;
        }
        if (count == 0) return;
        uint256[] memory indices = new uint256[](count);
        bytes32[] memory commitments = new bytes32[](count);
        uint256[] memory packed = new uint256[](count);
        uint256 k;
        for (uint256 i; i < n; ++i) {
            if (!_takesBids(t, i) || _sealed[t][i][fog] != 0) continue;
            (uint64 f, uint96 price) = _bidTerms(uint256(keccak256(abi.encode(seed, i))));
            (indices[k], commitments[k], packed[k]) = (i, _bidCommitment(t, i, fog, f, price), (uint256(f) << 96) | price);
            ++k;
        }
        ITaskRegistry.TaskParams memory p = registry.params(t);
        vm.recordLogs();
        vm.prank(fog);
        bool ok = _call(
            address(auction),
            _value(t, uint256(p.fogDeposit) * count),
            abi.encodeCall(IFogAuction.commitBids, (t, indices, commitments))
        );
        if (ok) {
            for (uint256 m; m < count; ++m) {
                _sealed[t][indices[m]][fog] = packed[m];
            }
        }
        _done("commitBids", ok);
    }

    /// @notice A fog node reveals a sealed bid, waiting for the reveal phase if it has not begun.
    function revealBid(uint256 seed) external {
        seed = _mix(seed);
        (uint256 t, uint256 index, , bool known) = _jobWhere(seed, _revealable);
        if (!known) return;
        _waitUntil(auction.job(t, index).biddingDeadline + 1);
        address fog = fogs[(seed >> 16) % fogs.length];
        for (uint256 k; k < fogs.length && !_unrevealed(t, index, fog); ++k) {
            fog = fogs[((seed >> 16) + k + 1) % fogs.length];
        }
        uint256 packed = _sealed[t][index][fog];
        if (packed == 0) return;
        vm.recordLogs();
        vm.prank(fog);
        bool ok = _call(
            address(auction),
            0,
            abi.encodeCall(
                IFogAuction.revealBid, (t, index, uint64(packed >> 96), uint96(packed), _bidSalt(t, index, fog))
            )
        );
        _done("revealBid", ok);
    }

    /// @notice A fog node reveals every bid it sealed in a task, in one call.
    function revealBids(uint256 seed) external {
        seed = _mix(seed);
        (uint256 t, uint256 first, , bool known) = _jobWhere(seed, _revealable);
        if (!known) return;
        _waitUntil(auction.job(t, first).biddingDeadline + 1);
        address fog = fogs[(seed >> 16) % fogs.length];
        for (uint256 k; k < fogs.length && !_unrevealed(t, first, fog); ++k) {
            fog = fogs[((seed >> 16) + k + 1) % fogs.length];
        }
        uint256 n = ledger.clientCount(t);
        uint256 count;
        for (uint256 i; i < n; ++i) {
            if (_revealsNow(t, i, fog)) ++count;
        }
        if (count == 0) return;
        uint256[] memory indices = new uint256[](count);
        uint64[] memory fs = new uint64[](count);
        uint96[] memory prices = new uint96[](count);
        bytes32[] memory salts = new bytes32[](count);
        uint256 k;
        for (uint256 i; i < n; ++i) {
            if (!_revealsNow(t, i, fog)) continue;
            uint256 packed = _sealed[t][i][fog];
            (indices[k], fs[k], prices[k], salts[k]) = (i, uint64(packed >> 96), uint96(packed), _bidSalt(t, i, fog));
            ++k;
        }
        vm.recordLogs();
        vm.prank(fog);
        bool ok = _call(address(auction), 0, abi.encodeCall(IFogAuction.revealBids, (t, indices, fs, prices, salts)));
        _done("revealBids", ok);
    }

    /// @notice A client closes its auction, waiting for the reveals to end if they have not.
    function closeAuction(uint256 seed) external {
        seed = _mix(seed);
        (uint256 t, uint256 index, address c, bool known) = _jobWhere(seed, _closable);
        if (!known) return;
        _waitUntil(auction.job(t, index).revealDeadline + 1);
        IFogAuction.Job memory j = auction.job(t, index);
        if (j.status != IFogAuction.JobStatus.Bidding) return;
        uint32[] memory ranked = auction.ranked(t, index);
        uint256 escrow;
        if (ranked.length != 0) {
            IFogAuction.Bid[] memory bids = auction.bids(t, index);
            uint256 price = bids[ranked[0]].price;
            if (registry.params(t).secondPrice && ranked.length > 1) {
                price += bids[ranked[0]].utility - bids[ranked[1]].utility;
            }
            escrow = price * registry.params(t).rounds;
        }
        vm.recordLogs();
        vm.prank(c);
        bool ok = _call(address(auction), _value(t, escrow), abi.encodeCall(IFogAuction.closeAuction, (t, index)));
        _done("closeAuction", ok);
    }

    function commitData(uint256 seed) external {
        seed = _mix(seed);
        (uint256 t, uint256 index, address c, bool known) = _jobWhere(seed, _isAwarded);
        if (!known) return;
        vm.recordLogs();
        vm.prank(c);
        bool ok = _call(address(handoff), 0, abi.encodeCall(IDataHandoff.commitData, (t, index, keccak256(abi.encode(t, c)))));
        _done("commitData", ok);
    }

    function startTask(uint256 seed) external {
        seed = _mix(seed);
        (uint256 t, bool known) = _taskWhere(seed, _startable);
        if (!known) return;
        vm.recordLogs();
        vm.prank(_tasks[t].publisher);
        bool ok = _call(address(registry), 0, abi.encodeCall(ITaskRegistry.startTask, (t)));
        _done("startTask", ok);
    }

    function cancelTask(uint256 seed) external {
        seed = _mix(seed);
        (uint256 t, bool known) = _task(seed);
        if (!known || seed % 32 != 0) return; // rarely: a cancelled task does nothing else
        vm.recordLogs();
        vm.prank(_tasks[t].publisher);
        bool ok = _call(address(registry), 0, abi.encodeCall(ITaskRegistry.cancelTask, (t)));
        _done("cancelTask", ok);
    }

    /// @notice The aggregator posts priors: zeros, or one client's at the cap (a favour a challenge can undo).
    function postPriors(uint256 seed) external {
        seed = _mix(seed);
        (uint256 t, bool known) = _taskWhere(seed, _isRunning);
        if (!known) return;
        uint256 n = ledger.clientCount(t);
        uint64[] memory priors = new uint64[](n);
        if (n != 0 && seed % 2 == 0) priors[(seed >> 8) % n] = registry.params(t).reputationCap;
        vm.recordLogs();
        vm.prank(_tasks[t].aggregator);
        bool ok = _call(address(ledger), 0, abi.encodeCall(IRoundLedger.postPriors, (t, priors)));
        _done("postPriors", ok);
    }

    /// @notice A job's winner commits the current round's update.
    function commitUpdate(uint256 seed) external {
        seed = _mix(seed);
        (uint256 t, uint256 index, , bool known) = _jobWhere(seed, _owesCommit);
        if (!known) return;
        address winner = _winner(t, index);
        if (winner == address(0)) return;
        uint16 round = registry.state(t).currentRound;
        vm.recordLogs();
        vm.prank(winner);
        bool ok = _call(
            address(auction), 0, abi.encodeCall(IFogAuction.commitUpdate, (t, index, round, keccak256(abi.encode(seed)), _transcript(seed)))
        );
        _done("commitUpdate", ok);
    }

    /// @notice A fog node commits the current round of every job it holds in the task, in one call.
    function commitUpdates(uint256 seed) external {
        seed = _mix(seed);
        (uint256 t, bool known) = _taskWhere(seed, _isRunning);
        if (!known) return;
        address fog = fogs[(seed >> 16) % fogs.length];
        uint256 n = ledger.clientCount(t);
        uint256 count;
        for (uint256 i; i < n; ++i) {
            if (_winner(t, i) == fog) ++count;
        }
        if (count == 0) return;
        uint256[] memory indices = new uint256[](count);
        bytes32[] memory hashes = new bytes32[](count);
        bytes32[] memory roots = new bytes32[](count);
        uint256 k;
        for (uint256 i; i < n; ++i) {
            if (_winner(t, i) != fog) continue;
            (indices[k], hashes[k], roots[k]) = (i, keccak256(abi.encode(seed, i)), _transcript(seed + i));
            ++k;
        }
        uint16 round = registry.state(t).currentRound;
        vm.recordLogs();
        vm.prank(fog);
        bool ok = _call(address(auction), 0, abi.encodeCall(IFogAuction.commitUpdates, (t, round, indices, hashes, roots)));
        _done("commitUpdates", ok);
    }

    /// @notice A self-trained client commits the current round, or the next one ahead of the chain.
    function commitOwnUpdate(uint256 seed) external {
        seed = _mix(seed);
        (uint256 t, , address c, bool known) = _jobWhere(seed, _ownCommitDue);
        if (!known) return;
        uint16 round = registry.state(t).currentRound + uint16((seed >> 24) % 2);
        vm.recordLogs();
        vm.prank(c);
        bool ok = _call(address(ledger), 0, abi.encodeCall(IRoundLedger.commitOwnUpdate, (t, round, keccak256(abi.encode(seed)))));
        _done("commitOwnUpdate", ok);
    }

    /// @notice The aggregator posts the current round as the chain has its commits, with qualities of its choice
    /// (some below q_min, some rejected) and sometimes an accuracy at the task's target.
    function postRound(uint256 seed) external {
        seed = _mix(seed);
        (uint256 t, bool known) = _taskWhere(seed, _isRunning);
        if (!known) return;
        ITaskRegistry.TaskState memory s = registry.state(t);
        if (s.status != ITaskRegistry.TaskStatus.Running) return;
        ITaskRegistry.TaskParams memory p = registry.params(t);
        uint256 n = ledger.clientCount(t);
        IRoundLedger.Measurement[] memory ms = new IRoundLedger.Measurement[](n);
        uint64[] memory times = p.selfTrained ? ledger.ownCommitTimes(t, s.currentRound, n) : auction.commitTimes(t, s.currentRound, n);
        for (uint256 i; i < n; ++i) {
            if (times[i] == 0) continue; // uncommitted: (0, 0, false, false)
            uint32 roundTime;
            if (p.selfTrained) {
                (,, roundTime) = ledger.ownCommit(t, s.currentRound, i);
            } else {
                roundTime = uint32(times[i] - s.roundStartedAt);
            }
            uint256 q = (seed >> (8 + 4 * i)) % 8; // 0..7 quarters of 1.0
            ms[i] = IRoundLedger.Measurement({
                quality: uint64(q * WAD / 4), roundTime: roundTime, accepted: q != 0, committed: true
            });
        }
        uint64 accuracy = seed % 5 == 0 ? p.targetAccuracy : uint64(WAD / 2);
        vm.recordLogs();
        vm.prank(_tasks[t].aggregator);
        bool ok = _call(
            address(ledger),
            0,
            abi.encodeCall(IRoundLedger.postRound, (t, s.currentRound, keccak256(abi.encode(seed)), accuracy, bytes32(0), bytes32(0), ms))
        );
        if (ok) {
            IRoundLedger.Measurement[] storage kept = _posted[t][s.currentRound];
            for (uint256 i; i < n; ++i) {
                kept.push(ms[i]);
            }
        }
        _done("postRound", ok);
    }

    /// @notice A challenge of one of the four kinds, by a client or a stranger (copies of others' included).
    function challenge(uint256 seed) external {
        seed = _mix(seed);
        (uint256 t, bool known) = _taskWhere(seed, _hasPosts);
        if (!known) return;
        uint256 n = ledger.clientCount(t);
        if (n == 0) return;
        ITaskRegistry.TaskParams memory p = registry.params(t);
        (uint16 posted, uint16 finalized) = ledger.rounds(t);
        uint16 round = posted > finalized ? finalized + 1 + uint16((seed >> 4) % (posted - finalized)) : posted;
        uint32 index = uint32((seed >> 8) % n);
        uint256 kind = (seed >> 16) % 4;
        address who = (seed >> 20) % 2 == 0 ? strangers[(seed >> 24) % 2] : ledger.client(t, index).account;
        bytes memory data;
        if (kind == 0) {
            IRoundLedger.Measurement memory proposed = IRoundLedger.Measurement({
                quality: uint64(((seed >> 28) % 8) * WAD / 4), roundTime: uint32((seed >> 32) % 50), accepted: true, committed: true
            });
            data = abi.encodeCall(IDisputes.openEntryChallenge, (t, round, index, proposed));
        } else if (kind == 1) {
            who = ledger.client(t, index).account;
            (address committer,) = auction.roundCommit(t, index, round);
            data = abi.encodeCall(IDisputes.openFogChallenge, (t, round, index, committer, uint32(seed >> 40) % 8));
        } else if (kind == 2) {
            data = abi.encodeCall(IDisputes.openAccuracyChallenge, (t, round, uint64(WAD / 4)));
        } else {
            data = abi.encodeCall(IDisputes.openPriorChallenge, (t, index, uint64(((seed >> 28) % 3) * WAD / 10)));
        }
        uint256 before = disputes.challengeCount();
        vm.recordLogs();
        vm.prank(who);
        bool ok = _call(address(disputes), _value(t, p.challengeBond), data);
        if (ok) challengeIds.push(before + 1);
        _done("challenge", ok);
    }

    /// @notice The committee's verdict on an open challenge, upheld or rejected at random.
    function resolve(uint256 seed) external {
        seed = _mix(seed);
        (uint256 id, bool any) = _openChallengeAt(seed);
        if (!any) return;
        bool upheld = (seed >> 8) % 2 == 0;
        bytes[] memory sigs = VerdictSigner.sign(committee, disputes, id, upheld, arbiterKeys, 2);
        vm.recordLogs();
        vm.prank(strangers[0]);
        bool ok = _call(address(disputes), 0, abi.encodeCall(IDisputes.resolve, (id, upheld, sigs)));
        _done("resolve", ok);
    }

    function expire(uint256 seed) external {
        seed = _mix(seed);
        (uint256 id, bool any) = _openChallengeAt(seed);
        if (!any) return;
        vm.recordLogs();
        bool ok = _call(address(disputes), 0, abi.encodeCall(IDisputes.expire, (id)));
        _done("expire", ok);
    }

    /// @notice Anyone finalises the next pending round; half the time it waits for the round's window to close.
    function finalizeRound(uint256 seed) external {
        seed = _mix(seed);
        (uint256 t, bool known) = _taskWhere(seed, _hasPending);
        if (!known) return;
        (uint16 posted, uint16 finalized) = ledger.rounds(t);
        if (finalized >= posted) return;
        uint16 round = finalized + 1;
        if ((seed >> 8) % 2 == 0) _waitUntil(ledger.roundRecord(t, round).postedAt + registry.params(t).challengeWindow + 1);
        vm.recordLogs();
        vm.prank(strangers[1]);
        bool ok = _call(address(ledger), 0, abi.encodeCall(IRoundLedger.finalizeRound, (t, round, _posted[t][round])));
        _done("finalizeRound", ok);
    }

    /// @notice Anyone reports a winner that missed a round; half the time it waits for the round's deadline first.
    function reportMissedRound(uint256 seed) external {
        seed = _mix(seed);
        (uint256 t, uint256 index, , bool known) = _jobWhere(seed, _isAwarded);
        if (!known) return;
        if ((seed >> 8) % 2 == 0 && _isRunning(t)) _waitUntil(registry.roundDeadline(t) + 1);
        vm.recordLogs();
        vm.prank(strangers[1]);
        bool ok = _call(address(auction), 0, abi.encodeCall(IFogAuction.reportMissedRound, (t, index)));
        _done("reportMissedRound", ok);
    }

    function topUpBond(uint256 seed) external {
        seed = _mix(seed);
        (uint256 t, bool known) = _taskWhere(seed, _bondShort);
        if (!known) return;
        (, address bonder) = disputes.bond(t);
        if (bonder == address(0)) return;
        uint256 shortfall = disputes.bondShortfall(t);
        vm.recordLogs();
        vm.prank(bonder);
        bool ok = _call(address(disputes), _value(t, shortfall), abi.encodeCall(IDisputes.topUpBond, (t)));
        _done("topUpBond", ok);
    }

    /// @notice Anyone abandons a running task; one time in eight it waits the day of grace for it.
    function abandonTask(uint256 seed) external {
        seed = _mix(seed);
        (uint256 t, bool known) = _taskWhere(seed, _isRunning);
        if (!known) return;
        if ((seed >> 8) % 8 == 0) _waitUntil(registry.roundDeadline(t) + 1 days + 1);
        vm.recordLogs();
        vm.prank(strangers[seed % 2]);
        bool ok = _call(address(registry), 0, abi.encodeCall(ITaskRegistry.abandonTask, (t)));
        _done("abandonTask", ok);
    }

    function settle(uint256 seed) external {
        seed = _mix(seed);
        (uint256 t, bool known) = _taskWhere(seed, _unsettledEnd);
        if (!known) return;
        vm.recordLogs();
        bool ok = _call(address(ledger), 0, abi.encodeCall(IRoundLedger.settle, (t)));
        _done("settle", ok);
    }

    /// @notice Settle one job, or every job of the task in one call.
    function settleJobs(uint256 seed) external {
        seed = _mix(seed);
        (uint256 t, uint256 index, , bool known) = _jobWhere(seed, _settleableJob);
        if (!known) return;
        vm.recordLogs();
        bool ok;
        if (seed % 2 == 0) {
            ok = _call(address(auction), 0, abi.encodeCall(IFogAuction.settleJob, (t, index)));
        } else {
            uint256 n = ledger.clientCount(t);
            uint256[] memory indices = new uint256[](n);
            for (uint256 i; i < n; ++i) {
                indices[i] = i;
            }
            ok = _call(address(auction), 0, abi.encodeCall(IFogAuction.settleJobs, (t, indices)));
        }
        _done("settleJobs", ok);
    }

    /// @notice Anyone withdraws its ether or its tokens.
    function withdraw(uint256 seed) external {
        seed = _mix(seed);
        address who = everyone[seed % everyone.length];
        for (uint256 k; k < everyone.length && _owedNothing(who); ++k) {
            who = everyone[(seed % everyone.length + k + 1) % everyone.length];
        }
        bytes memory data = treasury.claimable(who) != 0
            ? abi.encodeCall(ITreasury.withdraw, ())
            : abi.encodeCall(ITreasury.withdrawTo, (token, who));
        vm.recordLogs();
        vm.prank(who);
        bool ok = _call(address(treasury), 0, data);
        _done("withdraw", ok);
    }

    /// @notice Time passes: mostly seconds, sometimes minutes (a window), now and then a day and more (abandonment).
    function warp(uint256 seed) external {
        seed = _mix(seed);
        uint256 kind = seed % 200;
        uint256 step = kind == 0 ? 1 days + seed % 1000 : kind < 30 ? 20 + seed % 300 : 1 + seed % 10;
        vm.warp(block.timestamp + step);
    }

    // ------------------------------------------------------------------ views for the invariants

    function taskCount() external view returns (uint256) {
        return taskIds.length;
    }

    function everyoneCount() external view returns (uint256) {
        return everyone.length;
    }

    function actionCount() external view returns (uint256) {
        return actions.length;
    }

    function milestoneCount() external view returns (uint256) {
        return milestones.length;
    }

    function taskInfo(uint256 taskId) external view returns (TaskInfo memory) {
        return _tasks[taskId];
    }

    function assetOf(uint256 taskId) public view returns (address) {
        return _tasks[taskId].tokenTask ? token : address(0);
    }

    // ------------------------------------------------------------------ helpers

    function _params(uint256 seed) private pure returns (ITaskRegistry.TaskParams memory p) {
        p.modelId = keccak256("lenet5");
        p.datasetId = keccak256("mnist");
        p.rounds = uint16(1 + seed % 3);
        p.targetAccuracy = uint64(9 * WAD / 10);
        p.expectedDuration = uint32(600 + (seed >> 32) % 3000);
        p.psi = 1e13;
        p.phi = 1e9;
        p.minLossReputation = uint64(WAD / 10);
        p.minTimeReputation = uint64(WAD / 10);
        p.minQuality = uint64(WAD / 2);
        p.maxRoundTime = 300;
        p.reputationCap = uint64(2 * WAD);
        p.clientDeposit = 1e15;
        p.cyclesPerSample = 1000;
        p.roundDuration = 400;
        p.timeTolerance = 5;
        p.maxClients = 4;
        p.secondPrice = (seed >> 40) % 2 == 0;
        p.challengeWindow = uint32(30 + (seed >> 48) % 200);
        p.challengeBond = 5e14;
        p.selfTrained = (seed >> 56) % 3 == 0;
        if (!p.selfTrained) {
            p.fogDeposit = 2e15;
            p.biddingDuration = 300;
            p.revealDuration = 300;
        } else {
            p.secondPrice = false;
        }
    }

    function _bidTerms(uint256 seed) private pure returns (uint64 f, uint96 price) {
        f = uint64(1e5 + seed % 1e7);
        // One bid in eight is a squatter's: a price no client could accept.
        price = seed % 8 == 0 ? type(uint96).max : uint96(1e11 + (seed >> 32) % 1e13);
    }

    function _bidSalt(uint256 t, uint256 index, address fog) private pure returns (bytes32) {
        return keccak256(abi.encode("bid", t, index, fog));
    }

    function _bidCommitment(uint256 t, uint256 index, address fog, uint64 f, uint96 price) private pure returns (bytes32) {
        return keccak256(abi.encode(f, price, _bidSalt(t, index, fog), fog));
    }

    function _salt(uint256 t, address c) private pure returns (bytes32) {
        return keccak256(abi.encode("data", t, c));
    }

    function _task(uint256 seed) private view returns (uint256 taskId, bool known) {
        if (taskIds.length == 0) return (0, false);
        return (taskIds[seed % taskIds.length], true);
    }

    /// @dev The first task, from one the seed picks, that `wanted` accepts.
    function _taskWhere(uint256 seed, function(uint256) view returns (bool) wanted)
        private
        view
        returns (uint256 taskId, bool found)
    {
        uint256 n = taskIds.length;
        for (uint256 k; k < n; ++k) {
            uint256 t = taskIds[(seed % n + k) % n];
            if (wanted(t)) return (t, true);
        }
    }

    /// @dev The first job (task, client index, client), from one the seed picks, that `wanted` accepts.
    function _jobWhere(uint256 seed, function(uint256, uint256) view returns (bool) wanted)
        private
        view
        returns (uint256 taskId, uint256 index, address account, bool found)
    {
        uint256 n = taskIds.length;
        for (uint256 k; k < n; ++k) {
            uint256 t = taskIds[(seed % n + k) % n];
            uint256 clients_ = ledger.clientCount(t);
            for (uint256 m; m < clients_; ++m) {
                uint256 i = ((seed >> 8) + m) % clients_;
                if (wanted(t, i)) return (t, i, ledger.client(t, i).account, true);
            }
        }
    }

    function _status(uint256 t) private view returns (ITaskRegistry.TaskStatus) {
        return registry.state(t).status;
    }

    function _isOpen(uint256 t) private view returns (bool) {
        return _status(t) == ITaskRegistry.TaskStatus.Open;
    }

    function _isRunning(uint256 t) private view returns (bool) {
        return _status(t) == ITaskRegistry.TaskStatus.Running;
    }

    function _needsBond(uint256 t) private view returns (bool) {
        return _isOpen(t) && !disputes.bonded(t);
    }

    function _startable(uint256 t) private view returns (bool) {
        if (!_isOpen(t) || !disputes.bonded(t)) return false;
        uint256 n = ledger.clientCount(t);
        if (n == 0) return false;
        // Once every job's auction is closed, or the auctions had long enough (a task can start regardless).
        if (block.timestamp > _tasks[t].createdAt + 3000) return true;
        for (uint256 i; i < n && !_tasks[t].selfTrained; ++i) {
            IFogAuction.JobStatus s = auction.job(t, i).status;
            if (s == IFogAuction.JobStatus.None || s == IFogAuction.JobStatus.Bidding) return false;
        }
        return true;
    }

    function _hasPosts(uint256 t) private view returns (bool) {
        (uint16 posted, uint16 finalized) = ledger.rounds(t);
        return posted > finalized || ledger.priorsPosted(t);
    }

    function _hasPending(uint256 t) private view returns (bool) {
        (uint16 posted, uint16 finalized) = ledger.rounds(t);
        return posted > finalized;
    }

    function _bondShort(uint256 t) private view returns (bool) {
        ITaskRegistry.TaskStatus s = _status(t);
        if (s != ITaskRegistry.TaskStatus.Running && s != ITaskRegistry.TaskStatus.Finished) return false;
        return disputes.bondShortfall(t) != 0;
    }

    function _unsettledEnd(uint256 t) private view returns (bool) {
        ITaskRegistry.TaskStatus s = _status(t);
        bool ended = s == ITaskRegistry.TaskStatus.Finished || s == ITaskRegistry.TaskStatus.Cancelled
            || s == ITaskRegistry.TaskStatus.Abandoned;
        return ended && !ledger.settled(t);
    }

    function _unauctioned(uint256 t, uint256 i) private view returns (bool) {
        return _isOpen(t) && !_tasks[t].selfTrained && auction.job(t, i).status == IFogAuction.JobStatus.None;
    }

    function _takesBids(uint256 t, uint256 i) private view returns (bool) {
        IFogAuction.Job memory j = auction.job(t, i);
        return _isOpen(t) && j.status == IFogAuction.JobStatus.Bidding && block.timestamp <= j.biddingDeadline;
    }

    function _closable(uint256 t, uint256 i) private view returns (bool) {
        IFogAuction.Job memory j = auction.job(t, i);
        return _isOpen(t) && j.status == IFogAuction.JobStatus.Bidding && block.timestamp > j.biddingDeadline;
    }

    /// @dev A job still in its auction with a sealed bid not yet revealed, before its reveal deadline.
    function _revealable(uint256 t, uint256 i) private view returns (bool) {
        IFogAuction.Job memory j = auction.job(t, i);
        if (j.status != IFogAuction.JobStatus.Bidding || block.timestamp > j.revealDeadline) return false;
        IFogAuction.Bid[] memory bids = auction.bids(t, i);
        for (uint256 k; k < bids.length; ++k) {
            if (!bids[k].revealed) return true;
        }
        return false;
    }

    /// @dev Time passes until `when`, if it has not come yet: an actor waiting for a phase to begin.
    function _waitUntil(uint256 when) private {
        if (block.timestamp < when) vm.warp(when);
    }

    function _isAwarded(uint256 t, uint256 i) private view returns (bool) {
        return auction.job(t, i).status == IFogAuction.JobStatus.Awarded;
    }

    function _owesCommit(uint256 t, uint256 i) private view returns (bool) {
        if (!_isRunning(t) || !_isAwarded(t, i)) return false;
        return auction.job(t, i).paidUpTo < registry.state(t).currentRound && ledger.isActive(t, i);
    }

    function _ownCommitDue(uint256 t, uint256 i) private view returns (bool) {
        if (!_isRunning(t) || !_tasks[t].selfTrained || !ledger.isActive(t, i)) return false;
        (, uint64 committedAt,) = ledger.ownCommit(t, registry.state(t).currentRound, i);
        return committedAt == 0 || (registry.state(t).currentRound < registry.params(t).rounds);
    }

    function _settleableJob(uint256 t, uint256 i) private view returns (bool) {
        IFogAuction.JobStatus s = auction.job(t, i).status;
        return _status(t) != ITaskRegistry.TaskStatus.Open && _status(t) != ITaskRegistry.TaskStatus.Running
            && s != IFogAuction.JobStatus.None && s != IFogAuction.JobStatus.Settled;
    }

    /// @dev Whether `fog` sealed a bid for the job that it has not revealed yet.
    function _unrevealed(uint256 t, uint256 i, address fog) private view returns (bool) {
        if (_sealed[t][i][fog] == 0) return false;
        IFogAuction.Bid[] memory bids = auction.bids(t, i);
        for (uint256 k; k < bids.length; ++k) {
            if (bids[k].bidder == fog) return !bids[k].revealed;
        }
        return false;
    }

    /// @dev Whether `fog` has an unrevealed bid for the job and the job is in its reveal phase now.
    function _revealsNow(uint256 t, uint256 i, address fog) private view returns (bool) {
        IFogAuction.Job memory j = auction.job(t, i);
        bool phase = j.status == IFogAuction.JobStatus.Bidding && block.timestamp > j.biddingDeadline
            && block.timestamp <= j.revealDeadline;
        return phase && _unrevealed(t, i, fog);
    }

    function _owedNothing(address who) private view returns (bool) {
        return treasury.claimable(who) == 0 && treasury.claimableIn(token, who) == 0;
    }

    /// @dev An open challenge, from one the seed picks.
    function _openChallengeAt(uint256 seed) private view returns (uint256 id, bool found) {
        uint256 n = challengeIds.length;
        for (uint256 k; k < n; ++k) {
            uint256 c = challengeIds[(seed % n + k) % n];
            if (disputes.challenge(c).status == IDisputes.ChallengeStatus.Open) return (c, true);
        }
    }

    /// @dev A task and one of its clients (index, account).
    function _client(uint256 seed) private view returns (uint256 taskId, uint256 index, address account, bool known) {
        (taskId, known) = _task(seed);
        if (!known) return (0, 0, address(0), false);
        uint256 n = ledger.clientCount(taskId);
        if (n == 0) return (taskId, 0, address(0), false);
        index = (seed >> 8) % n;
        account = ledger.client(taskId, index).account;
    }

    function _winner(uint256 t, uint256 index) private view returns (address) {
        IFogAuction.Job memory j = auction.job(t, index);
        if (j.status != IFogAuction.JobStatus.Awarded) return address(0);
        return auction.bids(t, index)[j.winner].bidder;
    }

    function _value(uint256 t, uint256 amount) private view returns (uint256) {
        return _tasks[t].tokenTask ? 0 : amount;
    }

    /// @dev ``owner``'s EIP-2612 permit of ``amount`` of the token for the Treasury.
    function _permit(address owner, uint256 amount) private view returns (ITreasury.Permit memory permit) {
        bytes32 typehash = keccak256("Permit(address owner,address spender,uint256 value,uint256 nonce,uint256 deadline)");
        uint256 deadline = block.timestamp + 1 days;
        uint256 nonce = IMintable(token).nonces(owner);
        bytes32 structHash = keccak256(abi.encode(typehash, owner, address(treasury), amount, nonce, deadline));
        bytes32 digest = keccak256(abi.encodePacked("\x19\x01", IMintable(token).DOMAIN_SEPARATOR(), structHash));
        (uint8 v, bytes32 r, bytes32 s) = vm.sign(_keys[owner], digest);
        permit = ITreasury.Permit({deadline: deadline, v: v, r: r, s: s});
    }

    /// @dev A permit set the allowance to what it paid: the actor approves the Treasury for everything again.
    function _reapprove(address owner) private {
        vm.prank(owner);
        IMintable(token).approve(address(treasury), type(uint256).max);
    }

    /// @dev A commit's transcript root: any non-zero one (the contracts judge no transcript).
    function _transcript(uint256 seed) private pure returns (bytes32) {
        return keccak256(abi.encode("transcript", seed));
    }

    /// @dev The fuzzer favours edge values (0, 1, the largest): hashed, a seed picks uniformly among the choices.
    function _mix(uint256 seed) private pure returns (uint256) {
        return uint256(keccak256(abi.encode(seed)));
    }

    function _bound(uint256 x, uint256 lo, uint256 hi) private pure returns (uint256) {
        return lo + x % (hi - lo + 1);
    }

    function _call(address target, uint256 value, bytes memory data) private returns (bool ok) {
        (ok,) = target.call{value: value}(data);
    }

    /// @dev Counts the call, then reads the Treasury's events of the call into the books and checks each credit
    /// against the documented flows.
    function _done(bytes32 action, bool ok) private {
        calls[action] += 1;
        if (ok) accepted[action] += 1;
        Vm.Log[] memory logs = vm.getRecordedLogs();
        for (uint256 i; i < logs.length; ++i) {
            Vm.Log memory log_ = logs[i];
            if (log_.topics.length != 0) seen[log_.topics[0]] += 1;
            if (log_.emitter != address(treasury)) continue;
            bytes32 topic = log_.topics[0];
            if (topic == CREDITED) {
                uint256 taskId = uint256(log_.topics[1]);
                address to = address(uint160(uint256(log_.topics[2])));
                bytes32 reason = log_.topics[3];
                uint256 amount = abi.decode(log_.data, (uint256));
                address asset = assetOf(taskId);
                creditedBy[asset][to][reason] += amount;
                credited[asset][to] += amount;
                taskCredited[taskId][reason] += amount;
                _checkFlow(taskId, to, reason);
                _touched.push(Touched(asset, to));
            } else if (topic == DEPOSITED) {
                uint256 taskId = uint256(log_.topics[1]);
                address from = address(uint160(uint256(log_.topics[2])));
                (uint256 amount,) = abi.decode(log_.data, (uint256, uint256));
                deposited[assetOf(taskId)][from] += amount;
                taskDeposited[taskId] += amount;
            } else if (topic == WITHDRAWN) {
                address account = address(uint160(uint256(log_.topics[1])));
                address asset = address(uint160(uint256(log_.topics[2])));
                (, uint256 amount) = abi.decode(log_.data, (address, uint256));
                withdrawn[asset][account] += amount;
                _touched.push(Touched(asset, account));
            }
        }
        for (uint256 i; i < _touched.length; ++i) {
            _checkBalance(_touched[i].asset, _touched[i].account);
        }
        delete _touched;
    }

    /// @dev An account can withdraw exactly what it was credited less what it withdrew, in each asset.
    function _checkBalance(address asset, address account) private {
        if (treasury.claimableIn(asset, account) != credited[asset][account] - withdrawn[asset][account]) {
            violations += 1;
            lastViolation = "a claimable balance that is not credited less withdrawn";
        }
    }

    /// @dev The documented flows (contracts/README.md, "Money flows"): who may be credited for what.
    function _checkFlow(uint256 taskId, address to, bytes32 reason) private {
        TaskInfo memory info = _tasks[taskId];
        bool allowed;
        if (reason == "DEPOSIT_FORFEIT" || reason == "BOND_SLASH" || reason == "BOND_FORFEIT" || reason == "FOG_SLASH") {
            allowed = to == sink;
        } else if (reason == "BUDGET_REFUND") {
            allowed = to == info.publisher;
        } else if (reason == "BOND_REFUND") {
            (, address bonder) = disputes.bond(taskId);
            allowed = to == bonder;
        } else if (reason == "CLIENT_REWARD" || reason == "DEPOSIT_RETURN" || reason == "ESCROW_REFUND" || reason == "FOG_COMPENSATION"
            || reason == "BID_FORFEIT") {
            allowed = _isClientOf(taskId, to);
        } else if (reason == "FOG_PAYMENT" || reason == "BID_REFUND") {
            allowed = _isIn(fogs, to);
        } else if (reason == "CHALLENGE_REFUND" || reason == "CHALLENGE_REWARD") {
            allowed = _isIn(strangers, to) || _isClientOf(taskId, to);
        } else if (reason == "CHALLENGE_FORFEIT") {
            // Half to the accused (the aggregator, or the fog node that committed), half to the sink.
            allowed = to == sink || to == info.aggregator || _isIn(fogs, to);
        }
        if (!allowed) {
            violations += 1;
            lastViolation = string(abi.encodePacked(reason));
        }
        // Nobody who appoints or is the aggregator receives a forfeit it can trigger: the publisher is credited its
        // refund, and the bond's rest when it posted the bond on the aggregator's behalf.
        if (to == info.publisher && reason != "BUDGET_REFUND" && reason != "BOND_REFUND") {
            violations += 1;
            lastViolation = "a credit to the publisher other than its refund";
        }
    }

    function _isClientOf(uint256 taskId, address account) private view returns (bool) {
        try ledger.clientIndex(taskId, account) returns (uint256) {
            return true;
        } catch {
            return false;
        }
    }

    function _isIn(address[] storage role, address account) private view returns (bool) {
        for (uint256 i; i < role.length; ++i) {
            if (role[i] == account) return true;
        }
        return false;
    }
}
