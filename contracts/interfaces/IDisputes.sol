// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IRoundLedger} from "./IRoundLedger.sol";
import {ITaskRegistry} from "./ITaskRegistry.sol";

/// @title IDisputes: the aggregator's bond, challenges of posted rounds, and the committee's verdicts
/// @notice A task starts only once its aggregator's bond (the task's `aggregatorBond`) is posted, by the
/// aggregator or by anyone on its behalf. While a posted round's challenge window is open, anyone may
/// challenge one client's entry, naming the measurement it should be (an entry challenge), the accuracy of the
/// post that finished the task early (an accuracy challenge) or one client's cross-task prior (a prior
/// challenge, round 0), all against the aggregator; and the job's client may challenge the update its fog node
/// committed (a fog challenge, against the fog node that committed the round). Each challenge escrows the
/// task's `challengeBond`. The ArbiterCommittee re-executes what is disputed and M of its members sign the
/// verdict, which anyone submits (`resolve`) before the verdict window ends; after it anyone may `expire` the
/// challenge. Outcomes (contracts/README.md):
/// - entry or prior challenge upheld: the entry takes the proposed value of the earliest-opened upheld
///   challenge of that entry, which also takes the reward: half of one entry slash (`entrySlash`) of the
///   aggregator's bond, the rest of the slash to the sink; the entry is paid once, when its last open
///   challenge closes;
/// - accuracy challenge upheld: the early finish moves no money (ITaskRegistry.voidEarlyFinish), and an entry
///   slash as above;
/// - fog challenge upheld: the client's round is void (no pay, no removal); the fog node, if it still holds the
///   job, loses its deposit (the round's price to the client, the rest to the sink) and the job moves on;
/// - rejected: the bond goes half to the accused, half to the sink;
/// - expired: the entry is neutral (no pay, no removal; a neutral prior is 0, a neutral accuracy moves no
///   money) and the bond goes back.
/// A round with an open challenge cannot be finalised (RoundLedger.finalizeRound). A bond that upheld challenges
/// took from posts no round until its bonder tops it up (`topUpBond`).
interface IDisputes {
    /// @notice What a challenge disputes.
    enum ChallengeKind {
        None,
        Entry,
        Fog,
        Accuracy,
        Prior
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

    /// @notice One challenge (fields ordered for packing: four storage slots).
    /// @param taskId the task
    /// @param challenger who opened it (and escrowed `bond`)
    /// @param openedAt block time of its opening, seconds
    /// @param round the disputed round (0: the priors)
    /// @param kind entry, fog, accuracy or prior
    /// @param status where it is
    /// @param accused the aggregator (entry, accuracy, prior) or the fog node that committed the round (fog)
    /// @param bond wei escrowed
    /// @param clientIndex the client whose entry, job or prior is disputed; ACCURACY_ENTRY for an accuracy
    /// @param proposed what the entry should be (entry challenges; zero otherwise)
    /// @param value the transcript segment it names (fog challenges), the accuracy (accuracy challenges) or the
    /// prior (prior challenges) it should be, 1e18 fixed
    /// point; zero otherwise
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
        uint64 value;
    }

    /// @notice What finalisation makes of one entry, and where its challenges are (one storage slot).
    /// @param fate the strongest outcome of its challenges so far
    /// @param open its challenges still open
    /// @param paid whether its upheld challenges were paid (one entry slash taken, the reward credited)
    /// @param applied for an accuracy: whether its early finish was voided (the entry was corrected or neutral)
    /// @param corrected the measurement of its earliest-opened upheld entry challenge
    /// @param value the accuracy or prior of its earliest-opened upheld accuracy or prior challenge
    struct EntryFate {
        Fate fate;
        uint32 open;
        bool paid;
        bool applied;
        IRoundLedger.Measurement corrected;
        uint64 value;
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
    /// @notice A fog challenge needs a fog node that committed the round: a self-trained task has none, and a job
    /// with no commit of the round has nothing to dispute.
    error DisputeNoFog(uint256 taskId, uint256 clientIndex);
    /// @notice A fog challenge may only accuse the fog node that committed the round.
    /// @param taskId the task
    /// @param round the round
    /// @param clientIndex the job's client
    /// @param named the fog node the challenge named
    /// @param committer the fog node that committed the round
    error DisputeNotCommitter(uint256 taskId, uint16 round, uint256 clientIndex, address named, address committer);
    /// @notice Only the accuracy of the post that finished the task at its target before its last round moves
    /// money; no other accuracy can be challenged.
    error DisputeAccuracyMovesNothing(uint256 taskId, uint16 round);
    /// @notice An accuracy challenge must claim an accuracy below the task's target.
    /// @param taskId the task
    /// @param accuracy the accuracy proposed, 1e18 fixed point
    /// @param target the task's target accuracy, 1e18 fixed point
    error DisputeAccuracyReachesTarget(uint256 taskId, uint64 accuracy, uint64 target);
    /// @notice The task's priors were not posted: there is no prior to challenge.
    error DisputeNoPriors(uint256 taskId);
    /// @notice A proposed prior exceeds the task's reputation cap.
    error DisputePriorAboveCap(uint256 taskId, uint256 clientIndex, uint64 prior, uint64 cap);
    /// @notice Only whoever posted the bond tops it up (what is left of it goes back to that account).
    error DisputeNotBonder(uint256 taskId, address caller);
    /// @notice The bond is whole: there is nothing to top up.
    error DisputeBondWhole(uint256 taskId);
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
    /// @notice What was left of an abandoned task's aggregator bond went to the sink, at settlement.
    event BondForfeited(uint256 indexed taskId, uint256 amount);
    /// @notice The bonder made the task's bond whole again after upheld challenges took from it.
    /// @param taskId the task
    /// @param bonder who posted the bond
    /// @param amount wei added
    event BondToppedUp(uint256 indexed taskId, address indexed bonder, uint256 amount);
    /// @notice A challenge was opened.
    /// @param challengeId its id (1, 2, ...)
    /// @param taskId the task
    /// @param round the disputed round
    /// @param clientIndex the client whose entry, job or prior is disputed (ACCURACY_ENTRY for an accuracy)
    /// @param kind entry, fog, accuracy or prior
    /// @param challenger who opened it
    /// @param accused the aggregator (entry, accuracy, prior) or the fog node that committed the round (fog)
    /// @param proposed the measurement the entry should be (entry challenges)
    /// @param value the transcript segment it names (fog challenges), the accuracy or prior it should be (accuracy
    /// and prior challenges)
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
        uint64 value,
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
    /// @notice An entry's upheld challenges were paid: one entry slash of the aggregator's bond (at most what was
    /// left), half to the earliest-opened upheld challenge's challenger, the rest to the sink.
    /// @param taskId the task
    /// @param challengeId the earliest-opened upheld challenge of the entry
    /// @param reward wei to its challenger
    /// @param burned wei to the sink
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

    /// @notice Challenge the update fog node `fog` committed for the caller's job in posted round `round`: `fog`
    /// must be the node that committed it (FogAuction.roundCommit). `msg.value` must be the task's
    /// `challengeBond`. Within the round's challenge window; the job's client only.
    /// @param segment the segment of the commit's training transcript that does not re-execute (from checkpoint
    /// `segment` to `segment + 1`), kept as the challenge's `value`; the committee re-executes that segment
    /// @return challengeId the new challenge's id
    function openFogChallenge(uint256 taskId, uint16 round, uint32 clientIndex, address fog, uint32 segment)
        external
        payable
        returns (uint256 challengeId);

    /// @notice Challenge the accuracy of round `round`'s post, the one that finished the task at its target
    /// before its last round, naming the accuracy `accuracy` (below the target) it should be. `msg.value` must be
    /// the task's `challengeBond`. Within the round's challenge window; anyone.
    /// @return challengeId the new challenge's id
    function openAccuracyChallenge(uint256 taskId, uint16 round, uint64 accuracy)
        external
        payable
        returns (uint256 challengeId);

    /// @notice Challenge client `clientIndex`'s posted cross-task prior, naming the prior it should be (at most
    /// the task's reputation cap). `msg.value` must be the task's `challengeBond`. Within the challenge window
    /// of the priors' post (round 0); anyone.
    /// @return challengeId the new challenge's id
    function openPriorChallenge(uint256 taskId, uint32 clientIndex, uint64 prior)
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

    /// @notice Make the task's bond whole again: `msg.value` must be its shortfall (`bondShortfall`). Whoever
    /// posted the bond, while the task runs or is finished.
    function topUpBond(uint256 taskId) external payable;

    /// @notice Credit what is left of the task's aggregator bond back to whoever posted it, or to the sink when
    /// the task was abandoned. RoundLedger only (at settlement, when no challenge can be open any more).
    function releaseBond(uint256 taskId) external;

    /// @notice Whether the task's aggregator bond was posted.
    function bonded(uint256 taskId) external view returns (bool);

    /// @notice Wei left of the task's aggregator bond, and who posted it.
    function bond(uint256 taskId) external view returns (uint256 amount, address bonder);

    /// @notice What the task's bond lacks of its `aggregatorBond` after upheld challenges took from it (0: whole).
    function bondShortfall(uint256 taskId) external view returns (uint256);

    /// @notice What one upheld challenge takes from the task's bond: `aggregatorBond / maxClients`.
    function entrySlash(uint256 taskId) external view returns (uint256);

    /// @notice A challenge.
    function challenge(uint256 challengeId) external view returns (Challenge memory);

    /// @notice Number of challenges opened so far (ids are 1..challengeCount).
    function challengeCount() external view returns (uint256);

    /// @notice Challenges of a round (0: the priors): still open, and opened in all.
    function roundChallenges(uint256 taskId, uint16 round) external view returns (uint32 open, uint32 total);

    /// @notice The fates of the first `clients` entries of a round (their corrected measurement, or prior for
    /// round 0, meaningful where the fate is `Corrected`).
    function fates(uint256 taskId, uint16 round, uint256 clients) external view returns (EntryFate[] memory);

    /// @notice The fate of one entry; `clientIndex` ACCURACY_ENTRY is the round's accuracy.
    function entryFate(uint256 taskId, uint16 round, uint32 clientIndex) external view returns (EntryFate memory);

    /// @notice The earliest-opened upheld challenge of an entry (0: none yet).
    function firstUpheld(uint256 taskId, uint16 round, uint32 clientIndex) external view returns (uint256);

    /// @notice Wei the task's pool holds for this contract: the bond left plus the open challenges' bonds.
    function heldFor(uint256 taskId) external view returns (uint256);
}
