// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

/// @title IArbiterCommittee: the deployment's arbiters, whose signed verdicts resolve challenges
/// @notice N members and a quorum M (a strict majority: two contrary verdicts can never both reach it) and
/// the seconds a verdict may take, all fixed in the constructor: no task party chooses or changes them.
/// Each member runs `fedchain verifier run`, re-executes what a challenge disputes (the round's scoring, or
/// a training job) and signs its verdict as EIP-712 typed data, domain "FedChain Arbiter Committee",
/// version "1", this contract's address and the chain id:
/// `Verdict(uint256 challengeId,uint256 taskId,uint16 round,uint32 clientIndex,bool upheld)`.
/// Anyone submits M such signatures (Disputes.resolve); a signer outside the committee, a signature twice,
/// or fewer than M valid signatures are refused.
interface IArbiterCommittee {
    /// @notice The constructor's members or quorum are unusable.
    /// @param members how many members were given
    /// @param quorum the quorum given
    error CommitteeInvalid(uint256 members, uint256 quorum);
    /// @notice A member address is zero or appears twice among the constructor's members.
    error CommitteeBadMember(address member);
    /// @notice The verdict window must be positive.
    error CommitteeInvalidWindow(uint32 verdictWindow);
    /// @notice A signature does not recover to an address (malformed, or a high-s signature).
    /// @param position its position among the submitted signatures
    error CommitteeBadSignature(uint256 position);
    /// @notice A signature recovers to an address outside the committee.
    /// @param signer the recovered address
    error CommitteeNotMember(address signer);
    /// @notice Signatures must come in strictly increasing order of their signers' addresses (no member twice).
    /// @param position the position of the first signature out of order
    error CommitteeSignersNotSorted(uint256 position);
    /// @notice Fewer signatures than the quorum.
    /// @param signatures how many were submitted
    /// @param quorum how many are needed
    error CommitteeNoQuorum(uint256 signatures, uint256 quorum);

    /// @notice The committee was formed (in the constructor; it never changes).
    /// @param members the members, in the order given
    /// @param quorum M, the signatures a verdict needs
    /// @param verdictWindow seconds from a challenge's opening within which its verdict must be submitted
    event CommitteeFormed(address[] members, uint8 quorum, uint32 verdictWindow);

    /// @notice The EIP-712 digest the members sign for a verdict.
    /// @param challengeId the challenge (Disputes)
    /// @param taskId its task
    /// @param round the round it disputes
    /// @param clientIndex the client whose entry or job it disputes
    /// @param upheld true: the challenge is right
    function verdictDigest(uint256 challengeId, uint256 taskId, uint16 round, uint32 clientIndex, bool upheld)
        external
        view
        returns (bytes32);

    /// @notice Reverts unless `signatures` are at least `quorum` valid signatures of distinct members over
    /// `digest`, ordered by signer address (ascending).
    function requireQuorum(bytes32 digest, bytes[] calldata signatures) external view;

    /// @notice The members, in the order given at deployment.
    function members() external view returns (address[] memory);

    /// @notice Whether `account` is a member.
    function isMember(address account) external view returns (bool);

    /// @notice M, the signatures a verdict needs.
    function quorum() external view returns (uint8);

    /// @notice Seconds from a challenge's opening within which its verdict must be submitted.
    function verdictWindow() external view returns (uint32);
}
