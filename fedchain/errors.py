"""FedChain's one exception tree.

Every error the project raises on purpose derives from :class:`FedchainError`.
Each carries a ``hint``: what the user should do about it. The command line
catches ``FedchainError`` in one place, prints the message and the hint, and
exits non-zero; nothing else in the code base prints errors.
"""

from __future__ import annotations

import enum


class FedchainError(Exception):
    """Base of every error FedChain raises on purpose."""

    #: What the user should do; subclasses set a default, callers may refine it.
    hint: str = ""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        if hint is not None:
            self.hint = hint

    def __str__(self) -> str:
        message = super().__str__()
        return f"{message}\n  hint: {self.hint}" if self.hint else message


class ConfigError(FedchainError):
    """A configuration file, flag or parameter is invalid."""

    hint = "check the option against `fedchain COMMAND --help`"


class TermOutOfRange(ConfigError):
    """A task term or the budget is outside what the contracts can hold; refused before anything is sent."""

    hint = "change the values named above: each says its largest value, its flag and its config key"


class WindowsTooShort(ConfigError):
    """A task's bidding, reveal or round window or its time tolerance is too short for this chain's blocks."""

    hint = (
        "lengthen the windows named above (each gives the flag and config key), or pass the --confirmations "
        "your agents really use; configs/system/task.yaml has windows for a 12 s chain"
    )


class TaskSpecError(ConfigError):
    """A task spec read from the blob store is malformed or not in canonical form."""

    hint = "the publisher must write the spec with `fedchain task create`; check the task's datasetId and --store"


class DataError(FedchainError):
    """A dataset, data root or partition cannot be used."""

    hint = "point --data-root (or FEDCHAIN_DATA_ROOT) at a folder holding the dataset files"


class ModelError(FedchainError):
    """A model name or model parameters are invalid."""


class TrainingError(FedchainError):
    """Local training failed (a worker process died or raised, or the engine cannot run this model)."""

    hint = "run with engine='sequential' to see the underlying error, or -vv for the worker's traceback"


class RejectReason(str, enum.Enum):
    """Stable codes for why an update was rejected (logged, reported by the audit)."""

    MISSING = "missing"
    OVERSIZED = "oversized"
    HASH_MISMATCH = "hash_mismatch"
    NOT_SAFETENSORS = "not_safetensors"
    WRONG_METADATA = "wrong_metadata"
    WRONG_NAMES = "wrong_names"
    WRONG_SHAPE = "wrong_shape"
    WRONG_DTYPE = "wrong_dtype"
    NON_FINITE = "non_finite"
    BAD_LOCAL_LOSSES = "bad_local_losses"
    BAD_SIGNATURE = "bad_signature"


class UpdateRejected(FedchainError):
    """A client update is malformed (wrong hash, shape, dtype, NaN/inf, size) and was not aggregated."""

    hint = "the update was excluded from the round; the client's quality check fails"

    #: Why, as a stable code the aggregator records as the failed quality check.
    reason: RejectReason = RejectReason.NOT_SAFETENSORS

    def __init__(self, message: str, *, reason: RejectReason | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        if reason is not None:
            self.reason = reason


class UpdateMissing(UpdateRejected):
    """The update's committed hash names no object in the blob store."""

    reason = RejectReason.MISSING


class UpdateTooLarge(UpdateRejected):
    """The update is larger than the size limit of the round's model."""

    reason = RejectReason.OVERSIZED


class UpdateHashMismatch(UpdateRejected):
    """The update's bytes do not hash to the hash committed on chain."""

    reason = RejectReason.HASH_MISMATCH


class UpdateNotSafetensors(UpdateRejected):
    """The update is not a well-formed safetensors file (a pickle, garbage, a truncated file)."""

    reason = RejectReason.NOT_SAFETENSORS


class UpdateMetadataMismatch(UpdateRejected):
    """The update's metadata (format, task, round, job, model) is not the one expected."""

    reason = RejectReason.WRONG_METADATA


class UpdateSpecMismatch(UpdateRejected):
    """The update's tensor names, shapes or dtypes differ from the model's (reason says which)."""

    reason = RejectReason.WRONG_SHAPE


class UpdateNonFinite(UpdateRejected):
    """The update holds NaN or infinite values."""

    reason = RejectReason.NON_FINITE


class UpdateLocalLossesRejected(UpdateRejected):
    """The update's per-sample local losses (fedave) are missing, unexpected, or malformed."""

    reason = RejectReason.BAD_LOCAL_LOSSES
    hint = "a fog node ships the local losses of its trained model only for tasks whose strategy needs them"


class UpdateSignatureRejected(UpdateRejected):
    """A self-trained client's reply is not signed by the wallet that joined, or its data size does not open
    the commitment made at join."""

    reason = RejectReason.BAD_SIGNATURE


class StoreError(FedchainError):
    """The blob store cannot read or write an object."""

    hint = "check the --store URL and that the folder or bucket is reachable"


class StoreURLError(StoreError):
    """A blob store URL has an unknown scheme or needs a package that is not installed."""

    hint = "use a folder path, file://, memory:// or another fsspec URL (s3:// needs `pip install 'fedchain[s3]'`)"


class StoreUnavailable(StoreError):
    """The blob store cannot be used from here: its bucket is missing, it refuses the credentials, or it cannot be
    reached. Checked when a store is opened, so that a process stops at its start."""

    hint = "check the --store URL, the bucket, and the AWS_* credentials and endpoint"


class BlobNotFound(StoreError):
    """No object with this hash is in the blob store."""

    hint = "check that writer and reader use the same --store URL, and that the writer finished"


class BlobCorrupted(StoreError):
    """A stored object's bytes no longer hash to its name: it was altered or damaged."""

    hint = "delete the damaged object and ask its writer to upload it again"


class BlobTooLarge(StoreError):
    """An object is larger than the reader's size limit."""

    hint = "raise the size limit only if the object is expected to be this large"


class RewardError(FedchainError):
    """A reward in kind cannot be had: the task has none, the round committed none, or it is missing or does not verify."""

    hint = "check --task and --round: `fedchain client reward --task N` lists the rounds whose rewards were committed"


class NoRewardsInKind(RewardError):
    """The task's strategy gives no rewards in kind (only fedfaim and fedave do)."""

    hint = "rewards in kind exist only for tasks created with strategy fedfaim, fedave or fair; the global model is the result"


class RewardMissing(RewardError):
    """A committed reward (or the round's reward list) is not in the blob store, or its bytes do not match its hash."""

    hint = "open the store the aggregator writes to (--store); the aggregator may also still be writing the round"


class RewardNotVerified(RewardError):
    """A reward's hash is not proven by the Merkle root committed on chain for its round."""

    hint = "do not use this model: the store or the reward list was altered; run `fedchain audit --task N`"


class MerkleError(FedchainError):
    """A Merkle tree of rewards cannot be built or holds no leaf for a client."""

    hint = "give each client index at most one reward hash per round"


class TranscriptError(FedchainError):
    """A fog node's training transcript is not the one committed, or does not bind its job."""

    hint = "a transcript lists its checkpoints' hashes under its root in the store (fedchain.transcripts)"


class ChainError(FedchainError):
    """The chain cannot be reached or used (RPC, node, keys, deployment)."""

    hint = "check --rpc-url and that the node is running"


class ContractRevert(ChainError):
    """A transaction or call reverted; subclasses are named after the contract's custom error."""

    hint = "the contract refused the call; the error's name and arguments say why"
    #: The revert data as the node returned it (selector, then the ABI-encoded arguments); empty if none.
    data: bytes = b""


class TaskNotAbandonable(ContractRevert):
    """A task cannot be abandoned: it is not running (never started, finished, or already ended)."""

    hint = "only a running task whose aggregator stopped posting rounds can be abandoned; `fedchain task show` tells its status"


class AbandonTooEarly(TaskNotAbandonable):
    """A running task cannot be abandoned yet: its aggregator still has time to post the current round."""

    hint = "run `fedchain task abandon` again after the time given above"

    def __init__(self, message: str, *, abandonable_from: int, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        #: The first block time, seconds, at which the task can be abandoned.
        self.abandonable_from = abandonable_from


class TaskNotFound(ChainError):
    """No task has this id on the deployment's chain."""

    hint = "check --task and --deployment: task ids count from 1 on each deployment"


class TaskNotReady(ChainError):
    """A task cannot start yet: a client's job is still in its auction or its data is not handed off."""

    hint = (
        "wait: `fedchain task start --wait` starts the task as soon as every hand-off is in; or --force to start "
        "without them (a job still in its auction can then no longer be won, and its client trains nothing)"
    )


class InsufficientFunds(ChainError):
    """The sending account cannot pay for a transaction (gas at the current fees plus value)."""

    hint = "fund the account (its address is in the message) or point at another key"


class FeeCapExceeded(ChainError):
    """The chain's base fee stayed above the operator's cap on the max fee per gas for the whole timeout."""

    hint = (
        "raise TxSettings.max_fee_per_gas_cap_wei (the operator's fee cap) above the base fee, "
        "or retry when the chain's fees have fallen"
    )

    def __init__(self, message: str, *, base_fee_wei: int, cap_wei: int, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        #: The chain's base fee per gas when the transactor gave up (wei).
        self.base_fee_wei = base_fee_wei
        #: The cap it was held to (wei per gas).
        self.cap_wei = cap_wei


class RpcUnavailable(ChainError):
    """A JSON-RPC endpoint kept failing (refused, reset, timed out, HTTP 429 or 5xx) for the whole retry time."""

    hint = (
        "check that the node at that URL runs and is reachable (or pass another --rpc-url); "
        "a public endpoint may be rate-limiting this key"
    )


class SigningKeyError(ChainError):
    """No usable signing key: none given, malformed, or a keystore that does not open."""

    hint = "set FEDCHAIN_PRIVATE_KEY, or pass --keystore FILE with FEDCHAIN_KEYSTORE_PASSWORD set"


class DeploymentError(ChainError):
    """A deployment file is missing or malformed, or does not match the chain it names."""

    hint = "run `fedchain deploy` (it writes .fedchain/deployment.json) or pass --deployment FILE"


class AgentError(FedchainError):
    """A long-running agent (fog node, aggregator, client) cannot proceed."""


class JobDataRejected(AgentError):
    """A client's job data does not match its on-chain hash, its revealed data size, or the task's data format."""

    hint = "the fog node does not train on it; the client must hand off the data it committed (same store, same bytes)"


class ParticipantDied(AgentError):
    """A participant's process (fog node, client, aggregator) exited while the system still needed it."""

    hint = "read the tail of its log above (the whole log is in the run folder); fix the cause and run again"


class SystemTimeout(FedchainError):
    """A running system did not reach the state it was waited for in time."""

    hint = "look at the participants' logs in the run folder; on a busy machine, allow more time or use smaller data"


class AuditFailed(FedchainError):
    """An audit found at least one failed check: the chain, the store or the mechanism disagree."""

    hint = (
        "read the failed checks' findings (tables, --json or --html): each names the event and the values that differ"
    )


class AuditError(FedchainError):
    """The auditor (or a party re-scoring a round with its code) cannot read what a round needs."""

    hint = (
        "check that the store (--store) holds the task's spec, models and updates, and the data root its validation set"
    )


class DisputeError(FedchainError):
    """A challenge, a verdict or a re-execution cannot go on as asked."""


class VerdictError(DisputeError):
    """A verdict's signatures are missing, malformed, or not of the committee's members."""

    hint = "each member signs with its own key (`fedchain verifier run`); a verdict needs the committee's quorum"


class ReexecutionError(DisputeError):
    """A training job cannot be re-executed from its committed inputs (start model, data, settings)."""

    hint = "the job's inputs must be in the store: the round's global model (or reward) and the handed-off data"
