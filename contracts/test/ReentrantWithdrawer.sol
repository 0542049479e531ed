// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ITreasury} from "../interfaces/ITreasury.sol";
import {IRoundLedger} from "../interfaces/IRoundLedger.sol";

/// @title ReentrantWithdrawer: a test-only client that tries to withdraw twice by re-entering the Treasury
/// @notice It joins a task as a client; when the Treasury pays it, its `receive` calls `withdraw` again.
/// The Treasury's ReentrancyGuard makes the inner call revert, the transfer then fails and the
/// outer withdrawal reverts as a whole: the attacker gains nothing.
contract ReentrantWithdrawer {
    ITreasury private immutable _treasury;
    /// @notice How many times `receive` was entered.
    uint256 public reentries;

    constructor(ITreasury treasury) {
        _treasury = treasury;
    }

    /// @notice Join `taskId` of `ledger` as a client with `msg.value` as the deposit.
    function join(IRoundLedger ledger, uint256 taskId, bytes32 dataCommitment) external payable {
        ledger.join{value: msg.value}(taskId, dataCommitment);
    }

    /// @notice Withdraw the claimable balance (and try again from inside `receive`).
    function attack() external {
        _treasury.withdraw();
    }

    receive() external payable {
        ++reentries;
        _treasury.withdraw();
    }
}
