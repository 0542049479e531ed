// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IDataHandoff} from "./interfaces/IDataHandoff.sol";
import {IFogAuction} from "./interfaces/IFogAuction.sol";
import {IRoundLedger} from "./interfaces/IRoundLedger.sol";

/// @title DataHandoff: one data hash per training job, committed by the job's client
/// @notice It holds no money and no other state; it reads the ledger (who the client is) and the
/// auction (whether the job was awarded).
contract DataHandoff is IDataHandoff {
    IRoundLedger private immutable _ledger;
    IFogAuction private immutable _auction;

    mapping(uint256 taskId => mapping(uint256 clientIndex => bytes32 dataHash)) private _dataHashes;

    /// @param ledger the RoundLedger (the task's clients)
    /// @param auction the FogAuction (the jobs)
    constructor(IRoundLedger ledger, IFogAuction auction) {
        _ledger = ledger;
        _auction = auction;
    }

    /// @inheritdoc IDataHandoff
    function commitData(uint256 taskId, uint256 clientIndex, bytes32 dataHash_) external {
        if (dataHash_ == bytes32(0)) revert HandoffZeroHash(taskId, clientIndex);
        if (_ledger.client(taskId, clientIndex).account != msg.sender) {
            revert HandoffNotClient(taskId, clientIndex, msg.sender);
        }
        IFogAuction.JobStatus status = _auction.job(taskId, clientIndex).status;
        if (status != IFogAuction.JobStatus.Awarded) revert HandoffJobNotAwarded(taskId, clientIndex, status);
        bytes32 committed = _dataHashes[taskId][clientIndex];
        if (committed != bytes32(0)) revert HandoffAlreadyCommitted(taskId, clientIndex, committed);
        _dataHashes[taskId][clientIndex] = dataHash_;
        emit DataCommitted(taskId, clientIndex, dataHash_);
    }

    /// @inheritdoc IDataHandoff
    function dataHash(uint256 taskId, uint256 clientIndex) external view returns (bytes32) {
        return _dataHashes[taskId][clientIndex];
    }

    /// @notice The contracts it reads: (RoundLedger, FogAuction).
    function dependencies() external view returns (address ledger, address auction) {
        return (address(_ledger), address(_auction));
    }
}
