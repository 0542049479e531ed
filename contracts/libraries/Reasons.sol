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
    /// @notice A removed client's deposit d to the sink (never to the publisher, who appoints the aggregator).
    bytes32 internal constant DEPOSIT_FORFEIT = "DEPOSIT_FORFEIT";
    /// @notice A fog node's price for one round committed on time.
    bytes32 internal constant FOG_PAYMENT = "FOG_PAYMENT";
    /// @notice A fog deposit r back (winner at the end, standby or unawarded bids).
    bytes32 internal constant BID_REFUND = "BID_REFUND";
    /// @notice A fog deposit r to the client: the bid was never revealed, or the winner missed a round.
    bytes32 internal constant BID_FORFEIT = "BID_FORFEIT";
    /// @notice The part of a client's job escrow that no fog node earned, back to the client.
    bytes32 internal constant ESCROW_REFUND = "ESCROW_REFUND";
    /// @notice What is left of the aggregator's bond, back to whoever posted it, at settlement.
    bytes32 internal constant BOND_REFUND = "BOND_REFUND";
    /// @notice What is left of an abandoned task's aggregator bond, to the sink, at settlement.
    bytes32 internal constant BOND_FORFEIT = "BOND_FORFEIT";
    /// @notice One entry slash of the aggregator's bond after an upheld challenge, less the reward, to the sink.
    bytes32 internal constant BOND_SLASH = "BOND_SLASH";
    /// @notice Half of one entry slash to the challenger whose challenge of the entry was upheld and opened first.
    bytes32 internal constant CHALLENGE_REWARD = "CHALLENGE_REWARD";
    /// @notice A challenge bond back to its challenger: the challenge was upheld, or expired without a verdict.
    bytes32 internal constant CHALLENGE_REFUND = "CHALLENGE_REFUND";
    /// @notice A rejected challenge's bond: half to the accused, the rest to the sink.
    bytes32 internal constant CHALLENGE_FORFEIT = "CHALLENGE_FORFEIT";
    /// @notice A fraudulent fog node's deposit to its client: the price of the voided round, at most r.
    bytes32 internal constant FOG_COMPENSATION = "FOG_COMPENSATION";
    /// @notice The rest of a fraudulent fog node's deposit, to the sink.
    bytes32 internal constant FOG_SLASH = "FOG_SLASH";
}
