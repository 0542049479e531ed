// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Vm} from "./Vm.sol";
import {IArbiterCommittee} from "../../../contracts/interfaces/IArbiterCommittee.sol";
import {IDisputes} from "../../../contracts/interfaces/IDisputes.sol";

/// @title VerdictSigner: the committee's EIP-712 verdict on a challenge, signed by the first members by address
library VerdictSigner {
    Vm internal constant vm = Vm(address(uint160(uint256(keccak256("hevm cheat code")))));

    /// @dev ``signers`` of ``keys`` sign the verdict ``upheld`` on ``challengeId``, ordered by signer address (the
    /// order ArbiterCommittee.requireQuorum checks).
    function sign(
        IArbiterCommittee committee,
        IDisputes disputes,
        uint256 challengeId,
        bool upheld,
        uint256[3] memory keys,
        uint256 signers
    ) internal view returns (bytes[] memory sigs) {
        IDisputes.Challenge memory c = disputes.challenge(challengeId);
        bytes32 digest = committee.verdictDigest(challengeId, c.taskId, c.round, c.clientIndex, upheld);
        // Three keys: a bubble sort by address is clearest.
        for (uint256 i; i < 3; ++i) {
            for (uint256 j; j + 1 < 3 - i; ++j) {
                if (vm.addr(keys[j]) > vm.addr(keys[j + 1])) (keys[j], keys[j + 1]) = (keys[j + 1], keys[j]);
            }
        }
        sigs = new bytes[](signers);
        for (uint256 i; i < signers; ++i) {
            (uint8 v, bytes32 r, bytes32 s) = vm.sign(keys[i], digest);
            sigs[i] = abi.encodePacked(r, s, v);
        }
    }
}
