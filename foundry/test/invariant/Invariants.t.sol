// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {FedChainBase} from "../utils/FedChainBase.sol";
import {Handler, IMintable} from "./Handler.sol";
import {ITreasury} from "../../../contracts/interfaces/ITreasury.sol";
import {ITaskRegistry} from "../../../contracts/interfaces/ITaskRegistry.sol";
import {IFogAuction} from "../../../contracts/interfaces/IFogAuction.sol";

/// @title The money invariants of FedChain, over handler-driven actors (Handler.sol)
/// @notice After every call of a campaign:
/// - solvency per asset: the Treasury holds at least what it owes, and what came in equals what went out plus what
///   it holds and owes;
/// - solvency per task: each task's pool is exactly its budget left, deposits, rewards, auction and dispute holdings;
/// - every balance within the documented flows: each account can withdraw exactly what the ghost books say it was
///   credited less what it withdrew, and no credit went where no flow sends it (forfeits only to the sink or the
///   wronged party, nothing to the publisher but its refund);
/// - payments within the budget: a task's rewards and refunds never exceed its budget;
/// - nothing locked after a task ends: a settled task whose jobs are all settled holds nothing but the bonds of
///   challenges still open.
contract InvariantsTest is FedChainBase {
    /// forge-config: default.invariant.fail-on-revert = false
    Handler internal handler;
    address internal token;

    struct FuzzSelector {
        address addr;
        bytes4[] selectors;
    }

    function setUp() public {
        deployFedChain();
        token = vm.deployCode("PermitToken.sol:PermitToken", abi.encode(uint8(6)));
        uint256[3] memory keys = [ARBITER_KEY_0, ARBITER_KEY_1, ARBITER_KEY_2];
        handler = new Handler(treasury, registry, ledger, auction, handoff, committee, disputes, token, SINK, keys);
    }

    function targetContracts() public view returns (address[] memory targets) {
        targets = new address[](1);
        targets[0] = address(handler);
    }

    function targetSelectors() public view returns (FuzzSelector[] memory selectors) {
        bytes4[] memory s = new bytes4[](29);
        s[0] = Handler.createTask.selector;
        s[1] = Handler.postBond.selector;
        s[2] = Handler.join.selector;
        s[3] = Handler.openAuction.selector;
        s[4] = Handler.commitBid.selector;
        s[5] = Handler.commitBids.selector;
        s[6] = Handler.revealBid.selector;
        s[7] = Handler.revealBids.selector;
        s[8] = Handler.closeAuction.selector;
        s[9] = Handler.commitData.selector;
        s[10] = Handler.startTask.selector;
        s[11] = Handler.cancelTask.selector;
        s[12] = Handler.postPriors.selector;
        s[13] = Handler.commitUpdate.selector;
        s[14] = Handler.commitUpdates.selector;
        s[15] = Handler.commitOwnUpdate.selector;
        s[16] = Handler.postRound.selector;
        s[17] = Handler.challenge.selector;
        s[18] = Handler.resolve.selector;
        s[19] = Handler.expire.selector;
        s[20] = Handler.finalizeRound.selector;
        s[21] = Handler.reportMissedRound.selector;
        s[22] = Handler.topUpBond.selector;
        s[23] = Handler.abandonTask.selector;
        s[24] = Handler.settle.selector;
        s[25] = Handler.settleJobs.selector;
        s[26] = Handler.withdraw.selector;
        s[27] = Handler.warp.selector;
        s[28] = Handler.warp.selector; // time passes twice as often as any one action
        selectors = new FuzzSelector[](1);
        selectors[0] = FuzzSelector(address(handler), s);
    }

    function _theTreasuryIsSolventInEveryAsset() internal view {
        address[2] memory assets = [address(0), token];
        for (uint256 a; a < 2; ++a) {
            ITreasury.Totals memory t = treasury.totalsIn(assets[a]);
            uint256 balance = assets[a] == address(0) ? address(treasury).balance : IMintable(token).balanceOf(address(treasury));
            assertTrue(balance >= t.held + t.claimable, "the Treasury holds less than it owes");
            assertEq(t.deposited, t.withdrawn + t.held + t.claimable, "in != out + held + owed");
            assertEq(balance, t.held + t.claimable, "nobody sends money to the Treasury outside the flows here");
        }
    }

    function _everyTaskPoolIsExactlyItsParts() internal view {
        uint256 n = handler.taskCount();
        for (uint256 i; i < n; ++i) {
            uint256 t = handler.taskIds(i);
            uint256 parts = registry.state(t).budgetLeft + ledger.depositsHeld(t) + ledger.rewardsHeld(t)
                + auction.heldFor(t) + disputes.heldFor(t);
            assertEq(treasury.held(t), parts, "a task's pool is not its parts");
        }
    }

    /// @dev The handler checks each credited or withdrawing account's balance against its books as the events come
    /// (cheaper than every account after every call) and counts what does not match, or goes where no flow sends it.
    function _everyBalanceIsWhatTheFlowsCredited() internal view {
        assertEq(handler.violations(), 0, string.concat("a credit outside the documented flows: ", handler.lastViolation()));
    }

    function _paymentsStayWithinTheBudget() internal view {
        uint256 n = handler.taskCount();
        for (uint256 i; i < n; ++i) {
            uint256 t = handler.taskIds(i);
            ITaskRegistry.TaskState memory s = registry.state(t);
            uint256 paidOut = handler.taskCredited(t, "CLIENT_REWARD") + handler.taskCredited(t, "BUDGET_REFUND");
            assertEq(paidOut + s.budgetLeft + ledger.rewardsHeld(t), s.budget, "budget != paid + left + owed");
            assertEq(handler.taskInfo(t).budget, s.budget, "budget escrowed");
        }
    }

    function _nothingStaysLockedAfterATaskEnds() internal view {
        uint256 n = handler.taskCount();
        for (uint256 i; i < n; ++i) {
            uint256 t = handler.taskIds(i);
            if (!ledger.settled(t)) continue;
            assertEq(registry.state(t).budgetLeft, 0, "budget left after settlement");
            assertEq(ledger.depositsHeld(t) + ledger.rewardsHeld(t), 0, "deposits or rewards left after settlement");
            (uint256 bondLeft,) = disputes.bond(t);
            assertEq(bondLeft, 0, "bond left after settlement");
            uint256 clients = ledger.clientCount(t);
            bool jobsSettled = true;
            for (uint256 c; c < clients; ++c) {
                IFogAuction.JobStatus status = auction.job(t, c).status;
                if (status != IFogAuction.JobStatus.None && status != IFogAuction.JobStatus.Settled) jobsSettled = false;
            }
            if (jobsSettled) assertEq(auction.heldFor(t), 0, "fog deposits or escrow left after every job settled");
            assertEq(treasury.held(t), auction.heldFor(t) + disputes.heldFor(t), "a settled task's pool");
        }
    }

    /// @notice Every money invariant, checked after every call of one campaign (forge runs a campaign per
    /// invariant function: one function keeps the calls of a run to one campaign).
    function invariant_money() public view {
        _theTreasuryIsSolventInEveryAsset();
        _everyTaskPoolIsExactlyItsParts();
        _everyBalanceIsWhatTheFlowsCredited();
        _paymentsStayWithinTheBudget();
        _nothingStaysLockedAfterATaskEnds();
    }

    /// @notice What the campaign did: one line per run, every action's calls and accepted calls, appended to
    /// `build/foundry/campaign.tsv` (`make invariants` sums them up).
    function afterInvariant() public {
        string memory line = "run";
        for (uint256 i; i < handler.actionCount(); ++i) {
            bytes32 action = handler.actions(i);
            line = string.concat(
                line,
                "\t",
                _name(action),
                "=",
                vm.toString(handler.accepted(action)),
                "/",
                vm.toString(handler.calls(action))
            );
        }
        for (uint256 i; i < handler.milestoneCount(); ++i) {
            string memory name = handler.milestoneNames(i);
            line = string.concat(line, "\tevent:", name, "=", vm.toString(handler.seen(handler.milestones(i))));
        }
        vm.writeLine("build/foundry/campaign.tsv", line);
    }

    function _name(bytes32 action) private pure returns (string memory) {
        uint256 n;
        while (n < 32 && action[n] != 0) ++n;
        bytes memory out = new bytes(n);
        for (uint256 i; i < n; ++i) {
            out[i] = action[i];
        }
        return string(out);
    }
}
