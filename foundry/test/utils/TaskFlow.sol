// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {FedChainBase} from "./FedChainBase.sol";
import {ITaskRegistry} from "../../../contracts/interfaces/ITaskRegistry.sol";
import {IRoundLedger} from "../../../contracts/interfaces/IRoundLedger.sol";
import {IFogAuction} from "../../../contracts/interfaces/IFogAuction.sol";

/// @title TaskFlow: one ether task driven through its steps by named participants
/// @notice Each client's job is won by the fog node of the same number, at `PRICE` per round; every fog node
/// commits `COMMIT_AFTER` seconds into a round, so an honest post's round time is that.
abstract contract TaskFlow is FedChainBase {
    address internal constant PUBLISHER = address(0xB0B);
    address internal constant AGGREGATOR = address(0xA66);
    address internal constant STRANGER = address(0x57A);
    uint96 internal constant PRICE = 1e14;
    uint64 internal constant FREQUENCY = 1e6;
    uint64 internal constant DATA_SIZE = 100;
    uint32 internal constant COMMIT_AFTER = 10;
    uint256 internal constant BUDGET = 1 ether;

    address[] internal clients;
    address[] internal fogs;

    function setUpParticipants(uint256 n) internal {
        for (uint256 i; i < n; ++i) {
            clients.push(address(uint160(0xC1000 + i)));
            fogs.push(address(uint160(0xF0000 + i)));
            vm.deal(clients[i], 100 ether);
            vm.deal(fogs[i], 100 ether);
        }
        vm.deal(PUBLISHER, 100 ether);
        vm.deal(AGGREGATOR, 100 ether);
        vm.deal(STRANGER, 100 ether);
    }

    function createTask(ITaskRegistry.TaskParams memory p) internal returns (uint256 taskId) {
        vm.prank(PUBLISHER);
        taskId = registry.createTask{value: BUDGET}(p, AGGREGATOR);
        vm.prank(AGGREGATOR);
        disputes.postBond{value: p.aggregatorBond}(taskId);
    }

    function salt(uint256 i) internal pure returns (bytes32) {
        return keccak256(abi.encode("salt", i));
    }

    /// @dev Every client joins; in an auction task each opens its auction, fog i wins job i; then the start.
    function joinAuctionAndStart(uint256 taskId, ITaskRegistry.TaskParams memory p) internal {
        for (uint256 i; i < clients.length; ++i) {
            vm.prank(clients[i]);
            ledger.join{value: p.clientDeposit}(taskId, dataCommitment(DATA_SIZE, salt(i)));
        }
        if (!p.selfTrained) {
            for (uint256 i; i < clients.length; ++i) {
                vm.prank(clients[i]);
                auction.openAuction(taskId, DATA_SIZE, salt(i));
                vm.prank(fogs[i]);
                auction.commitBid{value: p.fogDeposit}(taskId, i, bidCommitment(FREQUENCY, PRICE, salt(i), fogs[i]));
            }
            vm.warp(block.timestamp + p.biddingDuration + 1);
            for (uint256 i; i < clients.length; ++i) {
                vm.prank(fogs[i]);
                auction.revealBid(taskId, i, FREQUENCY, PRICE, salt(i));
            }
            vm.warp(block.timestamp + p.revealDuration + 1);
            for (uint256 i; i < clients.length; ++i) {
                vm.prank(clients[i]);
                auction.closeAuction{value: uint256(PRICE) * p.rounds}(taskId, i);
            }
        }
        vm.prank(PUBLISHER);
        registry.startTask(taskId);
    }

    /// @dev A stand-in for the transcript root of job `index`'s round `round` (any non-zero root is accepted).
    function transcript(uint256 taskId, uint16 round, uint256 index) internal pure returns (bytes32) {
        return keccak256(abi.encode("transcript", taskId, round, index));
    }

    /// @dev Every fog node (or, self-trained, every client) commits `round`, COMMIT_AFTER seconds into it.
    function commitRound(uint256 taskId, uint16 round, bool selfTrained) internal {
        vm.warp(registry.state(taskId).roundStartedAt + COMMIT_AFTER);
        for (uint256 i; i < clients.length; ++i) {
            bytes32 update = keccak256(abi.encode("update", taskId, round, i));
            if (selfTrained) {
                vm.prank(clients[i]);
                ledger.commitOwnUpdate(taskId, round, update);
            } else {
                vm.prank(fogs[i]);
                auction.commitUpdate(taskId, i, round, update, transcript(taskId, round, i));
            }
        }
    }

    /// @dev Every client at quality 1, committed COMMIT_AFTER seconds into the round.
    function honestMeasurements() internal view returns (IRoundLedger.Measurement[] memory ms) {
        ms = new IRoundLedger.Measurement[](clients.length);
        for (uint256 i; i < clients.length; ++i) {
            ms[i] = measurement(uint64(WAD), COMMIT_AFTER, true, true);
        }
    }

    function post(uint256 taskId, uint16 round, uint64 accuracy, IRoundLedger.Measurement[] memory ms) internal {
        vm.prank(AGGREGATOR);
        ledger.postRound(taskId, round, keccak256(abi.encode("model", round)), accuracy, bytes32(0), bytes32(0), ms);
    }

    /// @dev Past the round's challenge window and every verdict window, then finalise it (anyone).
    function finalizeAfterWindows(uint256 taskId, uint16 round, IRoundLedger.Measurement[] memory ms) internal {
        uint64 postedAt = ledger.roundRecord(taskId, round).postedAt;
        uint256 after_ = postedAt + registry.params(taskId).challengeWindow + 1;
        if (block.timestamp < after_) vm.warp(after_);
        vm.prank(STRANGER);
        ledger.finalizeRound(taskId, round, ms);
    }

    function openEntry(uint256 taskId, uint16 round, uint32 index, IRoundLedger.Measurement memory m, address who)
        internal
        returns (uint256 id)
    {
        uint96 bond = registry.params(taskId).challengeBond;
        vm.prank(who);
        id = disputes.openEntryChallenge{value: bond}(taskId, round, index, m);
    }

    /// @dev Withdraws everything `account` is owed in ether and returns it.
    function withdrawAll(address account) internal returns (uint256 amount) {
        if (treasury.claimable(account) == 0) return 0;
        vm.prank(account);
        amount = treasury.withdraw();
    }
}
