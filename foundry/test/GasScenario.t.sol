// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {TaskFlow} from "./utils/TaskFlow.sol";
import {ITaskRegistry} from "../../contracts/interfaces/ITaskRegistry.sol";
import {IRoundLedger} from "../../contracts/interfaces/IRoundLedger.sol";

/// @title GasScenario: every entry point called in the flows a task goes through, for `forge test --gas-report`
/// @notice Not a check of behaviour (the other suites are): a fixed scenario whose gas report says what each entry
/// point costs, so that a change of the contracts can be priced against the report of the code before it.
/// `make gas-report` prints it.
contract GasScenarioTest is TaskFlow {
    function setUp() public {
        deployFedChain();
        setUpParticipants(4);
    }

    /// @dev An auction task of 4 clients through its rounds: bids, commits, posts, the priors, every kind of
    /// verdict, an expiry, finalisation, settlement of the task and its jobs, withdrawals.
    function test_gas_auctionTaskWithDisputes() public {
        ITaskRegistry.TaskParams memory p = defaultParams();
        uint256 t = createTask(p);
        joinAuctionAndStart(t, p);
        uint64[] memory priors = new uint64[](4);
        priors[0] = uint64(WAD / 10);
        vm.prank(AGGREGATOR);
        ledger.postPriors(t, priors);

        // Round 1: client 0's entry posted at 0 and corrected; client 1's fog node accused and cleared; a
        // frivolous challenge of client 2's entry that nobody answers.
        commitRound(t, 1, false);
        IRoundLedger.Measurement[] memory ms = honestMeasurements();
        ms[0].quality = 0;
        post(t, 1, 0, ms);
        uint256 upheld = openEntry(t, 1, 0, measurement(uint64(WAD), COMMIT_AFTER, true, true), clients[0]);
        vm.prank(clients[1]);
        uint256 rejected = disputes.openFogChallenge{value: p.challengeBond}(t, 1, 1, fogs[1], 0);
        uint256 expired = openEntry(t, 1, 2, measurement(uint64(2 * WAD), COMMIT_AFTER, true, true), STRANGER);
        disputes.resolve(upheld, true, verdict(upheld, true));
        disputes.resolve(rejected, false, verdict(rejected, false));
        vm.warp(block.timestamp + VERDICT_WINDOW + 1);
        disputes.expire(expired);
        finalizeAfterWindows(t, 1, ms);
        uint256 shortfall = disputes.bondShortfall(t);
        vm.prank(AGGREGATOR);
        disputes.topUpBond{value: shortfall}(t);

        // Round 2: client 3's fog node found to cheat; round 3: honest.
        commitRound(t, 2, false);
        ms = honestMeasurements();
        post(t, 2, 0, ms);
        vm.prank(clients[3]);
        uint256 fraud = disputes.openFogChallenge{value: p.challengeBond}(t, 2, 3, fogs[3], 2);
        disputes.resolve(fraud, true, verdict(fraud, true));
        finalizeAfterWindows(t, 2, ms);
        vm.warp(registry.state(t).roundStartedAt + COMMIT_AFTER);
        for (uint256 i; i < 3; ++i) {
            vm.prank(fogs[i]);
            auction.commitUpdate(t, i, 3, keccak256(abi.encode("update", t, uint16(3), i)), transcript(t, 3, i));
        }
        // Job 3 went to no standby (one bid each): its client is posted uncommitted after the deadline.
        vm.warp(registry.roundDeadline(t) + 1);
        ms = honestMeasurements();
        ms[3] = measurement(0, 0, false, false);
        post(t, 3, 0, ms);
        finalizeAfterWindows(t, 3, ms);

        ledger.settle(t);
        uint256[] memory jobs = new uint256[](4);
        for (uint256 i; i < 4; ++i) {
            jobs[i] = i;
        }
        auction.settleJob(t, 0);
        auction.settleJobs(t, jobs);
        for (uint256 i; i < 4; ++i) {
            withdrawAll(clients[i]);
            withdrawAll(fogs[i]);
        }
        withdrawAll(PUBLISHER);
        withdrawAll(AGGREGATOR);
    }

    /// @dev A self-trained task whose aggregator goes silent after round 1: own commits, abandonment, settlement.
    function test_gas_selfTrainedTaskAbandoned() public {
        ITaskRegistry.TaskParams memory p = selfTrainedParams();
        uint256 t = createTask(p);
        joinAuctionAndStart(t, p);
        commitRound(t, 1, true);
        IRoundLedger.Measurement[] memory ms = honestMeasurements();
        post(t, 1, 0, ms);
        commitRound(t, 2, true);
        finalizeAfterWindows(t, 1, ms);
        vm.warp(registry.roundDeadline(t) + 1 days + 1);
        registry.abandonTask(t);
        ledger.settle(t);
    }
}
