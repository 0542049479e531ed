// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IRoundLedger} from "./IRoundLedger.sol";
import {ITaskRegistry} from "./ITaskRegistry.sol";

/// @title IDisputes: the aggregator's bond, challenges of posted rounds, and the committee's verdicts
/// @notice A task starts only once its aggregator's bond (the task's `aggregatorBond`) is posted, by the
/// aggregator or by anyone on its behalf. While a posted round's challenge window is open, anyone may
/// challenge one client's entry, naming the measurement it should be (an entry challenge, against the
/// aggregator), and the job's client may challenge the update its fog node committed (a fog challenge, against
/// that fog node); each challenge escrows the task's `challengeBond`. The ArbiterCommittee re-executes what is
/// disputed and M of its members sign the verdict, which anyone submits (`resolve`) before the verdict window
/// ends; after it anyone may `expire` the challenge. Outcomes (contracts/README.md):
/// - entry challenge upheld: the entry is corrected to the challenger's measurement; the challenger gets its
///   bond back and half of what is left of the aggregator's bond, the rest of that bond goes to the sink;
/// - fog challenge upheld: the client's round is void (no pay, no removal); the fog node, if it still holds the
///   job, loses its deposit (the round's price to the client, the rest to the sink) and the job moves on;
/// - rejected: the bond goes half to the accused, half to the sink;
/// - expired: the entry is neutral (no pay, no removal) and the bond goes back.
/// A round with an open challenge cannot be finalised (RoundLedger.finalizeRound).
interface IDisputes {
    /// @notice What a challenge disputes.
    enum ChallengeKind {
        None,
        Entry,
        Fog
    }

    /// @notice Where a challenge is.
    enum ChallengeStatus {
        None,
        Open,
        Upheld,
        Rejected,
        Expired
    }

    /// @notice What finalisation makes of one client's posted entry, strongest last.
    enum Fate {
        Posted,
        Neutral,
        Corrected,
        Void
    }

    /// @notice One challenge (fields ordered for packing: five storage slots).
    /// @param taskId the task
    /// @param challenger who opened it (and escrowed `bond`)
    /// @param openedAt block time of its opening, seconds
    /// @param round the disputed round
    /// @param kind entry or fog
    /// @param status where it is
    /// @param accused the aggregator (entry) or the fog node named (fog)
    /// @param bond wei escrowed
    /// @param clientIndex the client whose entry (or job) is disputed
    /// @param proposed what the entry should be (entry challenges; zero for fog challenges)
    struct Challenge {
        uint256 taskId;
        address challenger;
        uint64 openedAt;
        uint16 round;
        ChallengeKind kind;
        ChallengeStatus status;
        address accused;
        uint96 bond;
        uint32 clientIndex;
        IRoundLedger.Measurement proposed;
    }

    /// @notice The task is not in the status this call needs (unknown tasks are `None`).
    error DisputeWrongTaskStatus(uint256 taskId, ITaskRegistry.TaskStatus status);
    /// @notice `msg.value` is not what the call requires.
    /// @param sent wei sent
    /// @param required wei required
    error DisputeWrongValue(uint256 sent, uint256 required);
    /// @notice The task's aggregator bond was posted already.
    error DisputeAlreadyBonded(uint256 taskId);
    /// @notice The round has not been posted.
    error DisputeRoundNotPosted(uint256 taskId, uint16 round);
    /// @notice The round's challenge window is over (or the round is final).
    /// @param taskId the task
    /// @param round the round
    /// @param closedAt the last second of its window
    /// @param now_ the block time now
    error DisputeWindowClosed(uint256 taskId, uint16 round, uint64 closedAt, uint64 now_);
    /// @notice No client has this index in the task.
    error DisputeUnknownClient(uint256 taskId, uint256 clientIndex);
    /// @notice Only the job's client may challenge its fog node.
    error DisputeNotClient(uint256 taskId, uint256 clientIndex, address caller);
    /// @notice A fog challenge must name the fog node that committed the round; a self-trained task has none.
    error DisputeNoFog(uint256 taskId, uint256 clientIndex);
    /// @notice No challenge has this id.
    error DisputeUnknownChallenge(uint256 challengeId);
    /// @notice The challenge is resolved or expired already.
    error DisputeNotOpen(uint256 challengeId, ChallengeStatus status);
    /// @notice The verdict came after the verdict window; the challenge can only expire now.
    /// @param challengeId the challenge
    /// @param deadline the last second a verdict was accepted
    /// @param now_ the block time now
    error DisputeVerdictTooLate(uint256 challengeId, uint64 deadline, uint64 now_);
    /// @notice The challenge cannot expire before its verdict window is over.
    error DisputeVerdictNotDue(uint256 challengeId, uint64 deadline, uint64 now_);
    /// @notice Only the RoundLedger may release a task's bond.
    error DisputeNotLedger(address caller);

    /// @notice An aggregator bond was escrowed for a task.
    /// @param taskId the task
    /// @param bonder who paid it (and gets what is left of it back at settlement)
    /// @param amount wei
    event BondPosted(uint256 indexed taskId, address indexed bonder, uint256 amount);
    /// @notice What was left of a task's aggregator bond went back to whoever posted it, at settlement.
    event BondReleased(uint256 indexed taskId, address indexed bonder, uint256 amount);
    /// @notice A challenge was opened.
    /// @param challengeId its id (1, 2, ...)
    /// @param taskId the task
    /// @param round the disputed round
    /// @param clientIndex the client whose entry or job is disputed
    /// @param kind entry or fog
    /// @param challenger who opened it
    /// @param accused the aggregator (entry) or the named fog node (fog)
    /// @param proposed the measurement the entry should be (entry challenges)
    /// @param bond wei escrowed
    /// @param verdictDeadline the last second a verdict is accepted
    event ChallengeOpened(
        uint256 indexed challengeId,
        uint256 indexed taskId,
        uint16 round,
        uint32 clientIndex,
        ChallengeKind kind,
        address challenger,
        address accused,
        IRoundLedger.Measurement proposed,
        uint256 bond,
        uint64 verdictDeadline
    );
    /// @notice A challenge was resolved by the committee's verdict, or expired without one.
    /// @param challengeId the challenge
    /// @param taskId the task
    /// @param round the disputed round
    /// @param clientIndex the client
    /// @param status Upheld, Rejected or Expired
    /// @param fate the fate of the entry after this outcome
    event ChallengeResolved(
        uint256 indexed challengeId, uint256 indexed taskId, uint16 round, uint32 clientIndex, ChallengeStatus status, Fate fate
    );
    /// @notice An upheld entry challenge slashed what was left of the aggregator's bond.
    /// @param taskId the task
    /// @param challengeId the upheld challenge
    /// @param reward wei to the challenger (half of the bond left)
    /// @param burned wei to the sink (the rest)
    event BondSlashed(uint256 indexed taskId, uint256 indexed challengeId, uint256 reward, uint256 burned);

    /// @notice Escrow the task's aggregator bond: `msg.value` must be the task's `aggregatorBond`. While the
    /// task is `Open`, once; anyone may pay it (the aggregator, or the publisher on its behalf).
    function postBond(uint256 taskId) external payable;

    /// @notice Challenge client `clientIndex`'s entry in posted round `round`, naming what it should be.
    /// `msg.value` must be the task's `challengeBond`. Within the round's challenge window; anyone.
    /// @return challengeId the new challenge's id
    function openEntryChallenge(uint256 taskId, uint16 round, uint32 clientIndex, IRoundLedger.Measurement calldata proposed)
        external
        payable
        returns (uint256 challengeId);

    /// @notice Challenge the update fog node `fog` committed for the caller's job in posted round `round`.
    /// `msg.value` must be the task's `challengeBond`. Within the round's challenge window; the job's client only.
    /// @return challengeId the new challenge's id
    function openFogChallenge(uint256 taskId, uint16 round, uint32 clientIndex, address fog)
        external
        payable
        returns (uint256 challengeId);

    /// @notice Resolve an open challenge with the committee's verdict: `signatures` are at least `quorum`
    /// members' EIP-712 signatures of (challengeId, taskId, round, clientIndex, upheld), ordered by signer.
    /// Anyone may submit them, before the challenge's verdict deadline.
    function resolve(uint256 challengeId, bool upheld, bytes[] calldata signatures) external;

    /// @notice Expire an open challenge whose verdict deadline passed without a verdict: the entry becomes
    /// neutral for its round and the challenger's bond goes back. Anyone.
    function expire(uint256 challengeId) external;

    /// @notice Credit what is left of the task's aggregator bond back to whoever posted it. RoundLedger only
    /// (at settlement, when no challenge can be open any more).
    function releaseBond(uint256 taskId) external;

    /// @notice Whether the task's aggregator bond was posted.
    function bonded(uint256 taskId) external view returns (bool);

    /// @notice Wei left of the task's aggregator bond, and who posted it.
    function bond(uint256 taskId) external view returns (uint256 amount, address bonder);

    /// @notice A challenge.
    function challenge(uint256 challengeId) external view returns (Challenge memory);

    /// @notice Number of challenges opened so far (ids are 1..challengeCount).
    function challengeCount() external view returns (uint256);

    /// @notice Challenges of a round: still open, and opened in all.
    function roundChallenges(uint256 taskId, uint16 round) external view returns (uint16 open, uint16 total);

    /// @notice The fates of the first `clients` entries of a round, and the corrected measurement of each
    /// (meaningful where the fate is `Corrected`).
    function fates(uint256 taskId, uint16 round, uint256 clients)
        external
        view
        returns (Fate[] memory fates_, IRoundLedger.Measurement[] memory corrected);

    /// @notice Wei the task's pool holds for this contract: the bond left plus the open challenges' bonds.
    function heldFor(uint256 taskId) external view returns (uint256);
}
