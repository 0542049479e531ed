// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {TaskFlow} from "./utils/TaskFlow.sol";
import {ITaskRegistry} from "../../contracts/interfaces/ITaskRegistry.sol";
import {IRoundLedger} from "../../contracts/interfaces/IRoundLedger.sol";
import {IFogAuction} from "../../contracts/interfaces/IFogAuction.sol";
import {IDisputes} from "../../contracts/interfaces/IDisputes.sol";
import {ReputationMath} from "../../contracts/libraries/ReputationMath.sol";

/// @title The nine paths by which one party could gain from another's loss, or lock others out, each closed
/// @notice One test (or a few) per finding of issue 52, in its order; each failed on the contracts before the fix.
contract FindingsTest is TaskFlow {
    uint32 private constant ACCURACY_ENTRY = type(uint32).max;

    function setUp() public {
        deployFedChain();
        setUpParticipants(2);
    }

    function _running(ITaskRegistry.TaskParams memory p) private returns (uint256 taskId) {
        taskId = createTask(p);
        joinAuctionAndStart(taskId, p);
    }

    function _postedRound1(ITaskRegistry.TaskParams memory p, IRoundLedger.Measurement[] memory ms)
        private
        returns (uint256 taskId)
    {
        taskId = _running(p);
        commitRound(taskId, 1, p.selfTrained);
        post(taskId, 1, 0, ms);
    }

    /// @dev A task whose first client joined and opened its job's auction.
    function _openedAuction(ITaskRegistry.TaskParams memory p) private returns (uint256 t) {
        t = createTask(p);
        vm.prank(clients[0]);
        ledger.join{value: p.clientDeposit}(t, dataCommitment(DATA_SIZE, salt(0)));
        vm.prank(clients[0]);
        auction.openAuction(t, DATA_SIZE, salt(0));
    }

    function _good() private pure returns (IRoundLedger.Measurement memory) {
        return measurement(uint64(WAD), COMMIT_AFTER, true, true);
    }

    // 1. A fog challenge can only accuse the node that committed the round.

    function test_1_aFogChallengeNamingAnyoneButTheCommitterReverts() public {
        ITaskRegistry.TaskParams memory p = defaultParams();
        uint256 t = _postedRound1(p, honestMeasurements());
        address[2] memory wrong = [PUBLISHER, clients[0]];
        for (uint256 i; i < 2; ++i) {
            vm.prank(clients[0]);
            vm.expectRevert(
                abi.encodeWithSelector(IDisputes.DisputeNotCommitter.selector, t, uint16(1), uint256(0), wrong[i], fogs[0])
            );
            disputes.openFogChallenge{value: p.challengeBond}(t, 1, 0, wrong[i], 0);
        }
        vm.prank(clients[0]);
        uint256 id = disputes.openFogChallenge{value: p.challengeBond}(t, 1, 0, fogs[0], 0);
        assertTrue(disputes.challenge(id).accused == fogs[0], "the committer is accused");
        (address committer, uint64 committedAt) = auction.roundCommit(t, 0, 1);
        assertTrue(committer == fogs[0] && committedAt == registry.state(t).startedAt + COMMIT_AFTER, "round commit recorded");
    }

    function test_1_aRoundThatNoFogNodeCommittedCannotBeBlamedOnOne() public {
        ITaskRegistry.TaskParams memory p = defaultParams();
        uint256 t = _running(p);
        vm.warp(registry.state(t).roundStartedAt + COMMIT_AFTER);
        vm.prank(fogs[1]);
        auction.commitUpdate(t, 1, 1, keccak256("u"), keccak256("transcript"));
        vm.warp(registry.roundDeadline(t) + 1);
        IRoundLedger.Measurement[] memory ms = honestMeasurements();
        ms[0] = measurement(0, 0, false, false);
        post(t, 1, 0, ms);
        vm.prank(clients[0]);
        vm.expectRevert(abi.encodeWithSelector(IDisputes.DisputeNoFog.selector, t, uint256(0)));
        disputes.openFogChallenge{value: p.challengeBond}(t, 1, 0, fogs[0], 0);
    }

    // 2. No number of challenges locks a round; every challenge costs real money.

    function test_2_aRoundTakesAChallengePast65535() public {
        ITaskRegistry.TaskParams memory p = defaultParams();
        uint256 t = _postedRound1(p, honestMeasurements());
        // Disputes' storage slot 4 is `_rounds`: _rounds[t][1] packs (uint32 open, uint32 total).
        bytes32 slot = keccak256(abi.encode(uint256(1), keccak256(abi.encode(t, uint256(4)))));
        vm.store(address(disputes), slot, bytes32(uint256(65535) << 32));
        (, uint32 before) = disputes.roundChallenges(t, 1);
        assertEq(before, 65535, "opened before");
        openEntry(t, 1, 1, _good(), clients[1]);
        (uint32 open, uint32 total) = disputes.roundChallenges(t, 1);
        assertEq(total, 65536, "opened in all");
        assertEq(open, 1, "open");
    }

    function test_2_aChallengeBondBelowHalfADepositIsRefused() public {
        ITaskRegistry.TaskParams memory p = defaultParams();
        p.challengeBond = uint96(p.clientDeposit / 2 - 1);
        vm.prank(PUBLISHER);
        vm.expectRevert(
            abi.encodeWithSelector(ITaskRegistry.TaskInvalidParameter.selector, bytes32("challengeBond"), p.challengeBond)
        );
        registry.createTask{value: BUDGET}(p, AGGREGATOR);
        assertEq(registry.minimumChallengeBond(p.clientDeposit), p.clientDeposit / 2, "floor");
        assertEq(registry.minimumChallengeBond(7), 4, "rounded up");
        assertEq(registry.minimumChallengeBond(0), 1, "at least 1");
    }

    // 3. A silent aggregator loses its bond; the clients that delivered are paid as for neutral rounds.

    function test_3_abandoningSendsTheBondToTheSinkAndPaysTheNeutralRoundsBonus() public {
        ITaskRegistry.TaskParams memory p = defaultParams();
        p.rounds = 2;
        p.expectedDuration = 1000;
        uint256 t = _postedRound1(p, honestMeasurements());
        finalizeAfterWindows(t, 1, honestMeasurements());
        commitRound(t, 2, false);
        uint64 round2Start = registry.state(t).roundStartedAt;
        vm.warp(registry.roundDeadline(t) + 1 days + 1);
        registry.abandonTask(t);

        ITaskRegistry.TaskState memory s = registry.state(t);
        assertEq(s.finishedAt, round2Start + p.roundDuration, "finished as if round 2 were posted at its deadline");
        ledger.settle(t);
        assertEq(claimableOf(t, AGGREGATOR), 0, "the silent aggregator gets nothing back");
        assertEq(claimableOf(t, SINK), p.aggregatorBond, "its bond went to the sink");
        // Each client: its round-1 pay, the bonus of a task finished at round 2's deadline, its deposit.
        for (uint256 i; i < 2; ++i) {
            IRoundLedger.ClientInfo memory c = ledger.client(t, i);
            uint256 totalRep = ReputationMath.totalReputation(c.lossReputation, c.timeReputation, p.reputationCap);
            uint256 bonus = ReputationMath.finalBonus(p.phi, p.expectedDuration, s.finishedAt - s.startedAt, totalRep);
            assertTrue(bonus > 0, "a bonus is due");
            uint256 round1 = ReputationMath.roundPayment(p.psi, c.lossReputation, c.timeReputation, 0, 0);
            assertEq(claimableOf(t, clients[i]), round1 + bonus + p.clientDeposit, "client paid as for neutral rounds");
        }
    }

    // 4. The accuracy that ends a task early can be challenged; found wrong, it moves no money.

    function _earlyFinish(ITaskRegistry.TaskParams memory p) private returns (uint256 t) {
        p.targetAccuracy = uint64(9 * WAD / 10);
        t = _running(p);
        commitRound(t, 1, false);
        post(t, 1, uint64(95 * WAD / 100), honestMeasurements());
        assertTrue(registry.state(t).status == ITaskRegistry.TaskStatus.Finished, "finished at its target");
    }

    function test_4_anUpheldAccuracyChallengeVoidsTheEarlyFinishAndSlashesTheBond() public {
        ITaskRegistry.TaskParams memory p = defaultParams();
        uint256 t = _earlyFinish(p);
        uint64 finishedAt = registry.state(t).finishedAt;
        vm.prank(STRANGER);
        uint256 id = disputes.openAccuracyChallenge{value: p.challengeBond}(t, 1, uint64(WAD / 2));
        disputes.resolve(id, true, verdict(id, true));

        assertEq(registry.state(t).finishedAt, finishedAt + 2 * p.roundDuration, "finish moved past rounds 2 and 3");
        uint256 slash = p.aggregatorBond / p.maxClients;
        assertEq(claimableOf(t, STRANGER), p.challengeBond + slash / 2, "bond back and half the entry slash");
        (uint256 left,) = disputes.bond(t);
        assertEq(left, p.aggregatorBond - slash, "one entry slash taken");
        IDisputes.EntryFate memory f = disputes.entryFate(t, 1, ACCURACY_ENTRY);
        assertTrue(f.fate == IDisputes.Fate.Corrected && f.value == WAD / 2 && f.applied, "accuracy corrected");
    }

    function test_4_onlyTheAccuracyThatEndedTheTaskEarlyCanBeChallenged() public {
        ITaskRegistry.TaskParams memory p = defaultParams();
        p.targetAccuracy = uint64(9 * WAD / 10);
        uint256 t = _postedRound1(p, honestMeasurements());
        vm.prank(STRANGER);
        vm.expectRevert(abi.encodeWithSelector(IDisputes.DisputeAccuracyMovesNothing.selector, t, uint16(1)));
        disputes.openAccuracyChallenge{value: p.challengeBond}(t, 1, 0);
    }

    function test_4_anAccuracyChallengeMustClaimLessThanTheTarget() public {
        ITaskRegistry.TaskParams memory p = defaultParams();
        uint256 t = _earlyFinish(p);
        uint64 target = registry.params(t).targetAccuracy;
        vm.prank(STRANGER);
        vm.expectRevert(abi.encodeWithSelector(IDisputes.DisputeAccuracyReachesTarget.selector, t, target, target));
        disputes.openAccuracyChallenge{value: p.challengeBond}(t, 1, target);
    }

    // 5. The cross-task priors can be challenged.

    function test_5_anUpheldPriorChallengeCorrectsThePriorRound1Uses() public {
        ITaskRegistry.TaskParams memory p = defaultParams();
        uint256 t = _running(p);
        uint64[] memory priors = new uint64[](2);
        priors[0] = p.reputationCap;
        vm.prank(AGGREGATOR);
        ledger.postPriors(t, priors);
        vm.prank(clients[1]);
        uint256 id = disputes.openPriorChallenge{value: p.challengeBond}(t, 1, p.reputationCap);
        vm.prank(clients[1]);
        uint256 frivolous = disputes.openPriorChallenge{value: p.challengeBond}(t, 0, 0);
        disputes.resolve(id, true, verdict(id, true));
        disputes.resolve(frivolous, false, verdict(frivolous, false));
        // The upheld challenge took an entry slash: the bond is whole again before round 1 is posted.
        uint256 shortfall = disputes.bondShortfall(t);
        vm.prank(AGGREGATOR);
        disputes.topUpBond{value: shortfall}(t);
        commitRound(t, 1, false);
        post(t, 1, 0, honestMeasurements());
        finalizeAfterWindows(t, 1, honestMeasurements());

        assertEq(ledger.prior(t, 1), p.reputationCap, "the corrected prior");
        (uint64 rep0,) = ledger.reputation(t, 0);
        (uint64 rep1,) = ledger.reputation(t, 1);
        assertEq(rep1, rep0, "identical entries, identical priors, identical reputations");
    }

    function test_5_round1WaitsForThePriorsChallenges() public {
        ITaskRegistry.TaskParams memory p = defaultParams();
        uint256 t = _running(p);
        vm.prank(AGGREGATOR);
        ledger.postPriors(t, new uint64[](2));
        vm.prank(STRANGER);
        disputes.openPriorChallenge{value: p.challengeBond}(t, 0, p.reputationCap);
        commitRound(t, 1, false);
        post(t, 1, 0, honestMeasurements());
        vm.warp(block.timestamp + p.challengeWindow + 1);
        vm.expectRevert(abi.encodeWithSelector(IRoundLedger.LedgerChallengesOpen.selector, t, uint16(0), uint32(1)));
        ledger.finalizeRound(t, 1, honestMeasurements());
    }

    function test_5_noPriorsNoPriorChallenge() public {
        ITaskRegistry.TaskParams memory p = defaultParams();
        uint256 t = _running(p);
        vm.prank(STRANGER);
        vm.expectRevert(abi.encodeWithSelector(IDisputes.DisputeNoPriors.selector, t));
        disputes.openPriorChallenge{value: p.challengeBond}(t, 0, 0);
    }

    // 6. Squatting the bid slots shuts no honest fog node out, and costs the squatter.

    function test_6_squattersDoNotShutOutAnHonestFogNodeAndLoseTheirDeposits() public {
        ITaskRegistry.TaskParams memory p = defaultParams();
        uint256 t = _openedAuction(p);
        uint256 squatters = 20;
        for (uint256 i; i < squatters; ++i) {
            address squatter = address(uint160(0x5000 + i));
            vm.deal(squatter, 1 ether);
            vm.prank(squatter);
            auction.commitBid{value: p.fogDeposit}(t, 0, bidCommitment(1, type(uint96).max, salt(i), squatter));
        }
        vm.prank(fogs[0]);
        auction.commitBid{value: p.fogDeposit}(t, 0, bidCommitment(FREQUENCY, PRICE, salt(0), fogs[0]));
        vm.warp(block.timestamp + p.biddingDuration + 1);
        for (uint256 i; i < squatters; ++i) {
            address squatter = address(uint160(0x5000 + i));
            vm.prank(squatter);
            auction.revealBid(t, 0, 1, type(uint96).max, salt(i));
        }
        vm.prank(fogs[0]);
        auction.revealBid(t, 0, FREQUENCY, PRICE, salt(0));
        vm.warp(block.timestamp + p.revealDuration + 1);
        vm.prank(clients[0]);
        auction.closeAuction{value: uint256(PRICE) * p.rounds}(t, 0);

        IFogAuction.Job memory j = auction.job(t, 0);
        assertTrue(j.status == IFogAuction.JobStatus.Awarded, "awarded");
        assertEq(j.winner, squatters, "the honest bid won");
        assertEq(claimableOf(t, clients[0]), squatters * p.fogDeposit, "each squatter's deposit went to the client");
        assertEq(auction.ranked(t, 0).length, 1, "only the honest bid is ranked");
    }

    function test_6_aBidOutrankedBySixteenBetterOnesGetsItsDepositBackAtOnce() public {
        ITaskRegistry.TaskParams memory p = defaultParams();
        uint256 t = _openedAuction(p);
        uint256 bidders = 18;
        for (uint256 i; i < bidders; ++i) {
            address fog = address(uint160(0x6000 + i));
            vm.deal(fog, 1 ether);
            vm.prank(fog);
            auction.commitBid{value: p.fogDeposit}(t, 0, bidCommitment(FREQUENCY, uint96(PRICE + i), salt(i), fog));
        }
        vm.warp(block.timestamp + p.biddingDuration + 1);
        // Revealed dearest first: each cheaper reveal pushes the dearest ranked one out once 16 are ranked.
        for (uint256 i = bidders; i > 0; --i) {
            address fog = address(uint160(0x6000 + i - 1));
            vm.prank(fog);
            auction.revealBid(t, 0, FREQUENCY, uint96(PRICE + i - 1), salt(i - 1));
        }
        uint32[] memory r = auction.ranked(t, 0);
        assertEq(r.length, 16, "sixteen ranked");
        assertEq(r[0], 0, "the cheapest first");
        assertEq(r[15], 15, "the sixteenth cheapest last");
        assertEq(claimableOf(t, address(0x6000 + 16)), p.fogDeposit, "outranked: refunded");
        assertEq(claimableOf(t, address(0x6000 + 17)), p.fogDeposit, "outranked: refunded");
    }

    // 7. Every upheld challenge slashes; a short bond posts nothing until topped up.

    function test_7_everyUpheldChallengeTakesOneEntrySlash() public {
        ITaskRegistry.TaskParams memory p = defaultParams();
        IRoundLedger.Measurement[] memory ms = honestMeasurements();
        ms[0].quality = 0;
        ms[1].quality = 0;
        uint256 t = _postedRound1(p, ms);
        uint256 a = openEntry(t, 1, 0, _good(), clients[0]);
        uint256 b = openEntry(t, 1, 1, _good(), clients[1]);
        disputes.resolve(a, true, verdict(a, true));
        disputes.resolve(b, true, verdict(b, true));

        uint256 slash = p.aggregatorBond / p.maxClients;
        assertEq(disputes.entrySlash(t), slash, "entry slash");
        assertEq(claimableOf(t, clients[0]), p.challengeBond + slash / 2, "first finder");
        assertEq(claimableOf(t, clients[1]), p.challengeBond + slash / 2, "second finder");
        (uint256 left,) = disputes.bond(t);
        assertEq(left, p.aggregatorBond - 2 * slash, "two slashes");
    }

    function test_7_aShortBondPostsNoRoundUntilItsBonderTopsItUp() public {
        ITaskRegistry.TaskParams memory p = defaultParams();
        IRoundLedger.Measurement[] memory ms = honestMeasurements();
        ms[0].quality = 0;
        uint256 t = _postedRound1(p, ms);
        uint256 a = openEntry(t, 1, 0, _good(), clients[0]);
        disputes.resolve(a, true, verdict(a, true));
        commitRound(t, 2, false);
        uint256 slash = disputes.entrySlash(t);
        vm.prank(AGGREGATOR);
        vm.expectRevert(abi.encodeWithSelector(IRoundLedger.LedgerBondShort.selector, t, slash));
        ledger.postRound(t, 2, bytes32(0), 0, bytes32(0), bytes32(0), honestMeasurements());

        vm.prank(STRANGER);
        vm.expectRevert(abi.encodeWithSelector(IDisputes.DisputeNotBonder.selector, t, STRANGER));
        disputes.topUpBond{value: slash}(t);
        vm.prank(AGGREGATOR);
        vm.expectRevert(abi.encodeWithSelector(IDisputes.DisputeWrongValue.selector, slash - 1, slash));
        disputes.topUpBond{value: slash - 1}(t);
        vm.prank(AGGREGATOR);
        disputes.topUpBond{value: slash}(t);
        assertEq(disputes.bondShortfall(t), 0, "whole again");
        post(t, 2, 0, honestMeasurements());
        vm.prank(AGGREGATOR);
        vm.expectRevert(abi.encodeWithSelector(IDisputes.DisputeBondWhole.selector, t));
        disputes.topUpBond{value: 0}(t);
    }

    // 8. The first challenge opened wins, whichever verdict lands first.

    function test_8_theFinderIsRewardedThoughTheCopysVerdictLandsFirst() public {
        ITaskRegistry.TaskParams memory p = defaultParams();
        IRoundLedger.Measurement[] memory ms = honestMeasurements();
        ms[0].quality = 0;
        uint256 t = _postedRound1(p, ms);
        uint256 finder = openEntry(t, 1, 0, _good(), clients[0]);
        uint256 copy = openEntry(t, 1, 0, _good(), STRANGER);
        disputes.resolve(copy, true, verdict(copy, true));
        assertEq(claimableOf(t, STRANGER), p.challengeBond, "the copy: its bond back, nothing paid yet");
        disputes.resolve(finder, true, verdict(finder, true));

        uint256 slash = p.aggregatorBond / p.maxClients;
        assertEq(claimableOf(t, clients[0]), p.challengeBond + slash / 2, "the finder takes the reward");
        assertEq(claimableOf(t, STRANGER), p.challengeBond, "the copy takes nothing more");
        assertEq(disputes.firstUpheld(t, 1, 0), finder, "first upheld");
        (uint256 left,) = disputes.bond(t);
        assertEq(left, p.aggregatorBond - slash, "one fraud, one slash");
    }

    function test_8_aFrivolousFirstChallengeDoesNotTakeTheVictimsReward() public {
        ITaskRegistry.TaskParams memory p = defaultParams();
        IRoundLedger.Measurement[] memory ms = honestMeasurements();
        ms[0].quality = 0;
        uint256 t = _postedRound1(p, ms);
        uint256 frivolous = openEntry(t, 1, 0, measurement(uint64(2 * WAD), 1, true, true), STRANGER);
        uint256 victim = openEntry(t, 1, 0, _good(), clients[0]);
        disputes.resolve(victim, true, verdict(victim, true));
        disputes.resolve(frivolous, false, verdict(frivolous, false));
        uint256 slash = p.aggregatorBond / p.maxClients;
        assertEq(claimableOf(t, clients[0]), p.challengeBond + slash / 2, "the victim is rewarded");
        IDisputes.EntryFate memory f = disputes.entryFate(t, 1, 0);
        assertEq(f.corrected.quality, WAD, "the victim's measurement");
    }

    // 9. A self-trained round's time counts from when its work could start.

    function test_9_laterRoundsCannotBeCommittedAheadOfTheirStartModels() public {
        ITaskRegistry.TaskParams memory p = selfTrainedParams();
        uint256 t = _running(p);
        vm.warp(block.timestamp + COMMIT_AFTER);
        vm.startPrank(clients[0]);
        ledger.commitOwnUpdate(t, 1, keccak256("u1"));
        vm.expectRevert(abi.encodeWithSelector(IRoundLedger.LedgerCommitTooEarly.selector, t, uint16(2), uint16(1)));
        ledger.commitOwnUpdate(t, 2, keccak256("u2"));
        vm.expectRevert(abi.encodeWithSelector(IRoundLedger.LedgerWrongRound.selector, t, uint16(3), uint16(1)));
        ledger.commitOwnUpdate(t, 3, keccak256("u3"));
        vm.stopPrank();
    }

    function test_9_aRoundCommittedAheadCountsFromTheLastCommitOfTheRoundBefore() public {
        ITaskRegistry.TaskParams memory p = selfTrainedParams();
        uint256 t = _running(p);
        uint64 start = registry.state(t).startedAt;
        vm.warp(start + 10);
        vm.prank(clients[0]);
        ledger.commitOwnUpdate(t, 1, keccak256("a1"));
        vm.warp(start + 30);
        vm.prank(clients[1]);
        ledger.commitOwnUpdate(t, 1, keccak256("b1"));
        // Round 1 is whole at start + 30: round 2's work may start then, before round 1's post.
        vm.warp(start + 75);
        vm.prank(clients[0]);
        ledger.commitOwnUpdate(t, 2, keccak256("a2"));
        (,, uint32 roundTime) = ledger.ownCommit(t, 2, 0);
        assertEq(roundTime, 45, "from the last commit of round 1");
        (,, uint32 first) = ledger.ownCommit(t, 1, 1);
        assertEq(first, 30, "round 1 from its start");
    }

    function test_9_afterTheDeadlineTheNextRoundCountsFromIt() public {
        ITaskRegistry.TaskParams memory p = selfTrainedParams();
        uint256 t = _running(p);
        vm.warp(registry.state(t).startedAt + 10);
        vm.prank(clients[0]);
        ledger.commitOwnUpdate(t, 1, keccak256("a1"));
        uint64 deadline = registry.roundDeadline(t);
        vm.warp(deadline + 20);
        vm.prank(clients[0]);
        ledger.commitOwnUpdate(t, 2, keccak256("a2"));
        (,, uint32 roundTime) = ledger.ownCommit(t, 2, 0);
        assertEq(roundTime, 20, "from round 1's deadline");
    }
}
