// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

/// @title Reasons: why money moved, as recorded in ITreasury's `Credited` event
/// @notice The auditor groups credits by these codes to rebuild who was paid what and why.
library Reasons {
    /// @notice Unspent or cancelled budget back to the publisher.
    bytes32 internal constant BUDGET_REFUND = "BUDGET_REFUND";
    /// @notice Per-round payments (eq. 15) plus the final bonus (eq. 16) to a client.
    bytes32 internal constant CLIENT_REWARD = "CLIENT_REWARD";
    /// @notice A client's deposit d back, at settlement or cancellation.
    bytes32 internal constant DEPOSIT_RETURN = "DEPOSIT_RETURN";
    /// @notice A removed client's deposit d to the publisher.
    bytes32 internal constant DEPOSIT_FORFEIT = "DEPOSIT_FORFEIT";
    /// @notice A fog node's price for one round committed on time.
    bytes32 internal constant FOG_PAYMENT = "FOG_PAYMENT";
    /// @notice A fog deposit r back (winner at the end, standby or unawarded bids).
    bytes32 internal constant BID_REFUND = "BID_REFUND";
    /// @notice A fog deposit r to the client: the bid was never revealed, or the winner missed a round.
    bytes32 internal constant BID_FORFEIT = "BID_FORFEIT";
    /// @notice The part of a client's job escrow that no fog node earned, back to the client.
    bytes32 internal constant ESCROW_REFUND = "ESCROW_REFUND";
}
