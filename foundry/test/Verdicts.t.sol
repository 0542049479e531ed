// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {TaskFlow} from "./utils/TaskFlow.sol";
import {ITaskRegistry} from "../../contracts/interfaces/ITaskRegistry.sol";
import {IRoundLedger} from "../../contracts/interfaces/IRoundLedger.sol";
import {IArbiterCommittee} from "../../contracts/interfaces/IArbiterCommittee.sol";
import {IDisputes} from "../../contracts/interfaces/IDisputes.sol";

/// @title Verdicts: what a challenge's resolution needs, and where its bond goes
contract VerdictsTest is TaskFlow {
    uint256 private t;
    uint256 private challengeId;
    ITaskRegistry.TaskParams private p;

    function setUp() public {
        deployFedChain();
        setUpParticipants(2);
        p = defaultParams();
        t = createTask(p);
        joinAuctionAndStart(t, p);
        commitRound(t, 1, false);
        post(t, 1, 0, honestMeasurements());
        challengeId = openEntry(t, 1, 0, measurement(uint64(2 * WAD), COMMIT_AFTER, true, true), STRANGER);
    }

    function test_aVerdictNeedsTheQuorum() public {
        bytes[] memory one = verdict(challengeId, false, 1);
        vm.expectRevert(abi.encodeWithSelector(IArbiterCommittee.CommitteeNoQuorum.selector, uint256(1), QUORUM));
        disputes.resolve(challengeId, false, one);
    }

    function test_aVerdictSignedForAnotherOutcomeOrChallengeDoesNotResolve() public {
        bytes[] memory rejected = verdict(challengeId, false);
        // The same signatures, read as an upheld verdict, recover other signers: not members.
        vm.expectRevert();
        disputes.resolve(challengeId, true, rejected);
        uint256 other = openEntry(t, 1, 1, measurement(uint64(2 * WAD), COMMIT_AFTER, true, true), STRANGER);
        vm.expectRevert();
        disputes.resolve(other, false, rejected);
    }

    function test_aRejectedChallengesBondGoesHalfToTheAccusedHalfToTheSink() public {
        disputes.resolve(challengeId, false, verdict(challengeId, false));
        assertEq(claimableOf(t, AGGREGATOR), p.challengeBond / 2, "the accused's half");
        assertEq(claimableOf(t, SINK), p.challengeBond - p.challengeBond / 2, "the sink's half");
        assertEq(claimableOf(t, STRANGER), 0, "the challenger's bond is lost");
        (uint256 left,) = disputes.bond(t);
        assertEq(left, p.aggregatorBond, "the bond is untouched");
    }

    function test_anExpiredChallengeReturnsTheBondAndMakesTheEntryNeutral() public {
        uint64 deadline = disputes.challenge(challengeId).openedAt + VERDICT_WINDOW;
        vm.warp(deadline);
        vm.expectRevert(abi.encodeWithSelector(IDisputes.DisputeVerdictNotDue.selector, challengeId, deadline, deadline));
        disputes.expire(challengeId);
        vm.warp(deadline + 1);
        disputes.expire(challengeId);
        assertEq(claimableOf(t, STRANGER), p.challengeBond, "bond back");
        assertTrue(disputes.entryFate(t, 1, 0).fate == IDisputes.Fate.Neutral, "neutral");
        bytes[] memory late = verdict(challengeId, false);
        vm.expectRevert(
            abi.encodeWithSelector(IDisputes.DisputeNotOpen.selector, challengeId, IDisputes.ChallengeStatus.Expired)
        );
        disputes.resolve(challengeId, false, late);
    }

    function test_aVerdictAfterTheVerdictWindowIsRefused() public {
        uint64 deadline = disputes.challenge(challengeId).openedAt + VERDICT_WINDOW;
        vm.warp(deadline + 1);
        bytes[] memory sigs = verdict(challengeId, true);
        vm.expectRevert(
            abi.encodeWithSelector(IDisputes.DisputeVerdictTooLate.selector, challengeId, deadline, deadline + 1)
        );
        disputes.resolve(challengeId, true, sigs);
    }
}
