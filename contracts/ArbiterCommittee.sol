// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {IArbiterCommittee} from "./interfaces/IArbiterCommittee.sol";

/// @title ArbiterCommittee: M of N members fixed at deployment; checks their EIP-712 verdict signatures
/// @notice Holds no money and has no owner: the members, the quorum and the verdict window are set in the
/// constructor and nothing can change them.
contract ArbiterCommittee is IArbiterCommittee, EIP712 {
    /// @notice The most members a committee may have (Chainlink OCR's bound: n <= 31).
    uint256 public constant MAX_MEMBERS = 31;
    /// @notice The EIP-712 type hash of a verdict.
    bytes32 public constant VERDICT_TYPEHASH =
        keccak256("Verdict(uint256 challengeId,uint256 taskId,uint16 round,uint32 clientIndex,bool upheld)");

    uint8 private immutable _quorum;
    uint32 private immutable _verdictWindow;
    address[] private _members;
    mapping(address account => bool) private _isMember;

    /// @param members_ the members (distinct, non-zero, at most MAX_MEMBERS)
    /// @param quorum_ M: more than half of the members, at most all of them
    /// @param verdictWindow_ seconds from a challenge's opening within which its verdict must be submitted
    constructor(address[] memory members_, uint8 quorum_, uint32 verdictWindow_) EIP712("FedChain Arbiter Committee", "1") {
        uint256 n = members_.length;
        if (n == 0 || n > MAX_MEMBERS || quorum_ > n || 2 * uint256(quorum_) <= n) revert CommitteeInvalid(n, quorum_);
        if (verdictWindow_ == 0) revert CommitteeInvalidWindow(verdictWindow_);
        for (uint256 i; i < n; ++i) {
            address member = members_[i];
            if (member == address(0) || _isMember[member]) revert CommitteeBadMember(member);
            _isMember[member] = true;
        }
        _members = members_;
        _quorum = quorum_;
        _verdictWindow = verdictWindow_;
        emit CommitteeFormed(members_, quorum_, verdictWindow_);
    }

    /// @inheritdoc IArbiterCommittee
    function verdictDigest(uint256 challengeId, uint256 taskId, uint16 round, uint32 clientIndex, bool upheld)
        external
        view
        returns (bytes32)
    {
        return _hashTypedDataV4(keccak256(abi.encode(VERDICT_TYPEHASH, challengeId, taskId, round, clientIndex, upheld)));
    }

    /// @inheritdoc IArbiterCommittee
    function requireQuorum(bytes32 digest, bytes[] calldata signatures) external view {
        uint256 n = signatures.length;
        if (n < _quorum) revert CommitteeNoQuorum(n, _quorum);
        address previous;
        for (uint256 i; i < n; ++i) {
            (address signer, ECDSA.RecoverError failure,) = ECDSA.tryRecover(digest, signatures[i]);
            if (failure != ECDSA.RecoverError.NoError) revert CommitteeBadSignature(i);
            if (!_isMember[signer]) revert CommitteeNotMember(signer);
            if (signer <= previous) revert CommitteeSignersNotSorted(i);
            previous = signer;
        }
    }

    /// @inheritdoc IArbiterCommittee
    function members() external view returns (address[] memory) {
        return _members;
    }

    /// @inheritdoc IArbiterCommittee
    function isMember(address account) external view returns (bool) {
        return _isMember[account];
    }

    /// @inheritdoc IArbiterCommittee
    function quorum() external view returns (uint8) {
        return _quorum;
    }

    /// @inheritdoc IArbiterCommittee
    function verdictWindow() external view returns (uint32) {
        return _verdictWindow;
    }
}
