// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {TaskFlow} from "./utils/TaskFlow.sol";
import {IFogAuction} from "../../contracts/interfaces/IFogAuction.sol";
import {IDisputes} from "../../contracts/interfaces/IDisputes.sol";
import {ITaskRegistry} from "../../contracts/interfaces/ITaskRegistry.sol";

/// @title Training transcripts: every fog commit carries its root, and a fog challenge names a segment of it
/// @notice contracts/README.md, "Training transcripts". The contracts check that a root is there and record it in
/// the commit's event; which segment a fog challenge names is its `value`, what the committee re-executes.
contract TranscriptsTest is TaskFlow {
    bytes32 private constant UPDATE = keccak256("update");
    bytes32 private constant ROOT = keccak256("root");

    function setUp() public {
        deployFedChain();
        setUpParticipants(2);
    }

    function _running() private returns (uint256 taskId, ITaskRegistry.TaskParams memory p) {
        p = defaultParams();
        taskId = createTask(p);
        joinAuctionAndStart(taskId, p);
        vm.warp(registry.state(taskId).roundStartedAt + COMMIT_AFTER);
    }

    function test_aCommitRecordsItsTranscriptRootInItsEvent() public {
        (uint256 t,) = _running();
        vm.expectEmit(true, true, true, true);
        emit IFogAuction.UpdateCommitted(
            t, 0, 1, fogs[0], UPDATE, ROOT, uint64(block.timestamp), auction.job(t, 0).winnerPrice
        );
        vm.prank(fogs[0]);
        auction.commitUpdate(t, 0, 1, UPDATE, ROOT);
        assertEq(auction.job(t, 0).paidUpTo, 1, "the round is committed");
    }

    function test_aCommitWithoutATranscriptReverts() public {
        (uint256 t,) = _running();
        vm.prank(fogs[0]);
        vm.expectRevert(abi.encodeWithSelector(IFogAuction.AuctionNoTranscript.selector, t, uint256(0)));
        auction.commitUpdate(t, 0, 1, UPDATE, bytes32(0));
        assertEq(auction.job(t, 0).paidUpTo, 0, "nothing committed");
    }

    function test_aBatchWithOneCommitWithoutATranscriptRevertsWhole() public {
        (uint256 t,) = _running();
        // fog 0 wins job 1 too: the batch commits both of its jobs
        uint256[] memory indices = new uint256[](1);
        bytes32[] memory hashes = new bytes32[](1);
        bytes32[] memory roots = new bytes32[](1);
        indices[0] = 0;
        hashes[0] = UPDATE;
        vm.prank(fogs[0]);
        vm.expectRevert(abi.encodeWithSelector(IFogAuction.AuctionNoTranscript.selector, t, uint256(0)));
        auction.commitUpdates(t, 1, indices, hashes, roots);
        roots[0] = ROOT;
        vm.prank(fogs[0]);
        auction.commitUpdates(t, 1, indices, hashes, roots);
        assertEq(auction.job(t, 0).paidUpTo, 1, "the batch committed");
    }

    function test_aBatchNeedsOneTranscriptRootPerJob() public {
        (uint256 t,) = _running();
        uint256[] memory indices = new uint256[](1);
        bytes32[] memory hashes = new bytes32[](1);
        bytes32[] memory roots = new bytes32[](2);
        vm.prank(fogs[0]);
        vm.expectRevert(abi.encodeWithSelector(IFogAuction.AuctionBatchLengthMismatch.selector, uint256(1), uint256(2)));
        auction.commitUpdates(t, 1, indices, hashes, roots);
    }

    function test_aFogChallengeKeepsTheSegmentItNames() public {
        (uint256 t, ITaskRegistry.TaskParams memory p) = _running();
        commitRound(t, 1, false);
        post(t, 1, 0, honestMeasurements());
        vm.prank(clients[1]);
        uint256 id = disputes.openFogChallenge{value: p.challengeBond}(t, 1, 1, fogs[1], 7);
        IDisputes.Challenge memory c = disputes.challenge(id);
        assertEq(c.value, 7, "the named segment is the challenge's value");
        assertTrue(c.kind == IDisputes.ChallengeKind.Fog && c.accused == fogs[1], "a fog challenge of the committer");
    }
}
