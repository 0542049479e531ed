"""The fog node's job records: typed in memory, the same JSON objects in its state file."""

from __future__ import annotations

import json

import pytest

from fedchain.agent import AgentState
from fedchain.errors import AgentError
from fog.jobs import FogJob, Phase, jobs_of

#: A job as a state file written before the record was typed keeps it (the keys every version wrote).
SAVED = {
    "task": 3,
    "client": 1,
    "data_size": 600,
    "bidding_deadline": 1000,
    "reveal_deadline": 1060,
    "phase": "won",
    "bid_index": 0,
    "data_hash": None,
    "data_status": None,
    "from_round": 1,
    "committed": [1, 2],
    "settled": False,
}


def test_a_saved_job_is_read_typed_changed_and_saved_as_the_same_json_object() -> None:
    state = AgentState.from_json(json.dumps({"version": 1, "agent": "fog-1", "last_block": 7, "jobs": {"3:1": SAVED}}))

    job = jobs_of(state)["3:1"]
    job.phase = Phase.LOST
    job.committed.append(3)

    saved = json.loads(state.to_json())["jobs"]["3:1"]
    assert (job.phase, job.committed, job.reviewed) == (Phase.LOST, [1, 2, 3], {})
    assert saved == {
        **SAVED,
        "phase": "lost",
        "committed": [1, 2, 3],
        # the fields a job gets as the node goes on, at their defaults
        **dict.fromkeys(("frequency", "price", "cost", "salt", "data_error", "client_account")),
        "refused_rewards": {},
        "reviewed": {},
    }
    assert jobs_of(state.copy())["3:1"] == job


@pytest.mark.parametrize(
    ("change", "said"),
    [({"phase": "dreaming"}, "'dreaming' is not a valid Phase"), ({"colour": "red"}, "unknown fields ['colour']")],
    ids=["phase", "field"],
)
def test_a_damaged_job_record_is_refused_by_name(change: dict[str, str], said: str) -> None:
    state = AgentState("fog-1", 7, jobs={"3:1": {**SAVED, **change}})

    with pytest.raises(AgentError, match="job 3:1 of the fog node's state file is not a job record") as caught:
        jobs_of(state)

    assert said in str(caught.value)


def test_a_bid_without_its_salt_says_the_state_file_was_edited() -> None:
    with pytest.raises(AgentError, match="job 3:1 has a bid on chain but no price or salt"):
        FogJob(3, 1, 600, 1000, 1060, phase=Phase.BID, bid_index=0).sealed_salt()
