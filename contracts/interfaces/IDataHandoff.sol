// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IFogAuction} from "./IFogAuction.sol";

/// @title IDataHandoff: the hash of the data a client handed to the fog node training its job
/// @notice After its auction closed with a winner, a client writes its (locally noised) training data
/// to the blob store, off chain, and commits the data's keccak256 here, once. The fog node that
/// trains the job (the winner, or a standby winner after a reassignment) fetches the data by this
/// hash and refuses data that does not hash to it. The hash never changes, so every fog node of the
/// job trains on the same committed data and an auditor can check which data that was.
interface IDataHandoff {
    /// @notice Only the job's client may commit its data.
    /// @param taskId the task
    /// @param clientIndex the job's client
    /// @param caller the rejected caller
    error HandoffNotClient(uint256 taskId, uint256 clientIndex, address caller);
    /// @notice The job has no fog node to hand data to: its auction is not closed with a winner.
    /// @param taskId the task
    /// @param clientIndex the job's client
    /// @param status the job's status now
    error HandoffJobNotAwarded(uint256 taskId, uint256 clientIndex, IFogAuction.JobStatus status);
    /// @notice The job's data hash was already committed; it cannot change.
    /// @param taskId the task
    /// @param clientIndex the job's client
    /// @param dataHash the hash committed before
    error HandoffAlreadyCommitted(uint256 taskId, uint256 clientIndex, bytes32 dataHash);
    /// @notice The zero hash names no data.
    /// @param taskId the task
    /// @param clientIndex the job's client
    error HandoffZeroHash(uint256 taskId, uint256 clientIndex);

    /// @notice A client committed the hash of the data it handed to its job's fog node.
    /// @param taskId the task
    /// @param clientIndex the job's client
    /// @param dataHash keccak256 of the data's exact bytes (the blob store's key)
    event DataCommitted(uint256 indexed taskId, uint256 indexed clientIndex, bytes32 dataHash);

    /// @notice Commit the hash of the job's data, once, as the job's client, after its auction awarded the job.
    /// @param taskId the task
    /// @param clientIndex the caller's client index in the task
    /// @param dataHash keccak256 of the data's bytes in the blob store
    function commitData(uint256 taskId, uint256 clientIndex, bytes32 dataHash) external;

    /// @notice The committed data hash of a job, or zero before the client committed it.
    /// @param taskId the task
    /// @param clientIndex the job's client
    function dataHash(uint256 taskId, uint256 clientIndex) external view returns (bytes32);
}
