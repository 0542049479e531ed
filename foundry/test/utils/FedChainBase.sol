// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Vm} from "./Vm.sol";
import {ITreasury} from "../../../contracts/interfaces/ITreasury.sol";
import {ITaskRegistry} from "../../../contracts/interfaces/ITaskRegistry.sol";
import {IRoundLedger} from "../../../contracts/interfaces/IRoundLedger.sol";
import {IFogAuction} from "../../../contracts/interfaces/IFogAuction.sol";
import {IDataHandoff} from "../../../contracts/interfaces/IDataHandoff.sol";
import {IArbiterCommittee} from "../../../contracts/interfaces/IArbiterCommittee.sol";
import {IDisputes} from "../../../contracts/interfaces/IDisputes.sol";
import {VerdictSigner} from "./VerdictSigner.sol";

/// @title FedChainBase: the seven contracts deployed as the recipe deploys them, and the steps of a task
/// @notice The contracts are deployed from their build artifacts (`vm.deployCode`), compiled with the project's
/// settings (via IR), at addresses computed from this contract's nonces, as `fedchain/chain/recipe.py` does.
/// The committee has three members (quorum 2) whose keys sign verdicts here; the sink is an address of its own,
/// so that what it is credited can be read.
abstract contract FedChainBase {
    Vm internal constant vm = Vm(address(uint160(uint256(keccak256("hevm cheat code")))));

    uint256 internal constant WAD = 1e18;
    address internal constant SINK = address(0x5111C);
    uint32 internal constant VERDICT_WINDOW = 600;
    uint8 internal constant QUORUM = 2;
    /// @dev The arbiters' private keys; their addresses are the committee's members.
    uint256 internal constant ARBITER_KEY_0 = 0xA1B1;
    uint256 internal constant ARBITER_KEY_1 = 0xA1B2;
    uint256 internal constant ARBITER_KEY_2 = 0xA1B3;

    ITreasury internal treasury;
    ITaskRegistry internal registry;
    IRoundLedger internal ledger;
    IFogAuction internal auction;
    IDataHandoff internal handoff;
    IArbiterCommittee internal committee;
    IDisputes internal disputes;

    /// @dev Deploys the seven contracts in the recipe's order, each given the others' future addresses.
    function deployFedChain() internal {
        uint256 nonce = vm.getNonce(address(this));
        address treasuryAt = vm.computeCreateAddress(address(this), nonce);
        address registryAt = vm.computeCreateAddress(address(this), nonce + 1);
        address ledgerAt = vm.computeCreateAddress(address(this), nonce + 2);
        address auctionAt = vm.computeCreateAddress(address(this), nonce + 3);
        address handoffAt = vm.computeCreateAddress(address(this), nonce + 4);
        address committeeAt = vm.computeCreateAddress(address(this), nonce + 5);
        address disputesAt = vm.computeCreateAddress(address(this), nonce + 6);
        address[] memory members = new address[](3);
        members[0] = vm.addr(ARBITER_KEY_0);
        members[1] = vm.addr(ARBITER_KEY_1);
        members[2] = vm.addr(ARBITER_KEY_2);

        _deploy("Treasury.sol:Treasury", abi.encode(registryAt, ledgerAt, auctionAt, disputesAt, SINK), treasuryAt);
        _deploy("TaskRegistry.sol:TaskRegistry", abi.encode(treasuryAt, ledgerAt, disputesAt), registryAt);
        _deploy("RoundLedger.sol:RoundLedger", abi.encode(registryAt, treasuryAt, auctionAt, disputesAt), ledgerAt);
        _deploy("FogAuction.sol:FogAuction", abi.encode(registryAt, ledgerAt, treasuryAt, disputesAt), auctionAt);
        _deploy("DataHandoff.sol:DataHandoff", abi.encode(ledgerAt, auctionAt), handoffAt);
        _deploy("ArbiterCommittee.sol:ArbiterCommittee", abi.encode(members, QUORUM, VERDICT_WINDOW), committeeAt);
        _deploy(
            "Disputes.sol:Disputes", abi.encode(registryAt, ledgerAt, auctionAt, treasuryAt, committeeAt), disputesAt
        );
        treasury = ITreasury(treasuryAt);
        registry = ITaskRegistry(registryAt);
        ledger = IRoundLedger(ledgerAt);
        auction = IFogAuction(auctionAt);
        handoff = IDataHandoff(handoffAt);
        committee = IArbiterCommittee(committeeAt);
        disputes = IDisputes(disputesAt);
    }

    function _deploy(string memory artifact, bytes memory args, address expected) private {
        address deployed = vm.deployCode(artifact, args);
        require(deployed == expected, string.concat(artifact, " deployed at an unexpected address"));
    }

    /// @dev Small terms that keep the arithmetic readable; tests change what they exercise.
    function defaultParams() internal pure returns (ITaskRegistry.TaskParams memory p) {
        p.modelId = keccak256("lenet5");
        p.datasetId = keccak256("mnist");
        p.rounds = 3;
        p.expectedDuration = 600;
        p.psi = 1e15;
        p.phi = 1e12;
        p.minLossReputation = uint64(WAD / 10);
        p.minTimeReputation = uint64(WAD / 10);
        p.minQuality = uint64(WAD / 2);
        p.maxRoundTime = 300;
        p.reputationCap = uint64(2 * WAD);
        p.clientDeposit = 1e16;
        p.fogDeposit = 2e16;
        p.cyclesPerSample = 1000;
        p.roundDuration = 400;
        p.biddingDuration = 100;
        p.revealDuration = 100;
        p.timeTolerance = 5;
        p.maxClients = 4;
        p.challengeWindow = 50;
        p.challengeBond = 5e15;
        p.aggregatorBond = 1e17;
    }

    /// @dev The terms of a self-trained task (no auction).
    function selfTrainedParams() internal pure returns (ITaskRegistry.TaskParams memory p) {
        p = defaultParams();
        p.selfTrained = true;
        p.fogDeposit = 0;
        p.biddingDuration = 0;
        p.revealDuration = 0;
    }

    /// @dev A verdict on `challengeId` signed by the first `signers` arbiters, ordered by signer address.
    function verdict(uint256 challengeId, bool upheld, uint256 signers) internal view returns (bytes[] memory) {
        uint256[3] memory keys = [ARBITER_KEY_0, ARBITER_KEY_1, ARBITER_KEY_2];
        return VerdictSigner.sign(committee, disputes, challengeId, upheld, keys, signers);
    }

    /// @dev The quorum's verdict.
    function verdict(uint256 challengeId, bool upheld) internal view returns (bytes[] memory) {
        return verdict(challengeId, upheld, QUORUM);
    }

    function dataCommitment(uint256 dataSize, bytes32 salt) internal pure returns (bytes32) {
        return keccak256(abi.encode(dataSize, salt));
    }

    function bidCommitment(uint64 frequency, uint96 price, bytes32 salt, address bidder) internal pure returns (bytes32) {
        return keccak256(abi.encode(frequency, price, salt, bidder));
    }

    function measurement(uint64 quality, uint32 roundTime, bool accepted, bool committed)
        internal
        pure
        returns (IRoundLedger.Measurement memory)
    {
        return IRoundLedger.Measurement({quality: quality, roundTime: roundTime, accepted: accepted, committed: committed});
    }

    /// @dev What `account` can withdraw in the task's asset.
    function claimableOf(uint256 taskId, address account) internal view returns (uint256) {
        return treasury.claimableIn(treasury.tokenOf(taskId), account);
    }

    function assertEq(uint256 actual, uint256 expected, string memory what) internal pure {
        if (actual != expected) {
            revert(string.concat(what, ": expected ", _str(expected), ", got ", _str(actual)));
        }
    }

    function assertTrue(bool condition, string memory what) internal pure {
        if (!condition) revert(what);
    }

    function _str(uint256 value) internal pure returns (string memory out) {
        if (value == 0) return "0";
        bytes memory digits;
        while (value != 0) {
            digits = abi.encodePacked(bytes1(uint8(48 + (value % 10))), digits);
            value /= 10;
        }
        out = string(digits);
    }
}
