"""A fog node watches the entries of the updates it trained: one posted below what it reproduces is challenged
(against the aggregator, for its client), unless the node is told not to watch (``FogConfig.watch_entries``)."""

from __future__ import annotations

import pytest

from fedchain.chain import bindings as b
from fedchain.fl.reputation import WAD
from tests.aggregator.conftest import World
from tests.client.test_client_agent import events_of
from tests.fog.conftest import Agents, award, post_round


@pytest.mark.parametrize("watch_entries", [True, False], ids=["watching", "not-watching"])
def test_a_fog_node_challenges_the_aggregator_over_a_wrong_entry_of_its_update(
    world: World, agents: Agents, watch_entries: bool
) -> None:
    # prepare: the fog node trains and commits round 1; the aggregator posts it at quality 0 where honest scoring of
    # the only client gives 1; the client does not watch (only the fog node's review is under test)
    task_id = world.create()
    client, fog = agents.client(0, task_id, watch="off"), agents.fog(0, task_id, watch_entries=watch_entries)
    award(world, (client,), (fog,))
    post_round(world, task_id, 1, qualities={0: 0})
    (posted,) = events_of(world, b.RoundPosted, task_id)

    # execute: the node's next step (it trains round 2, then reviews round 1)
    fog.step()

    # assert: one entry challenge by the fog node, naming the reproduced entry, with the task's challenge bond
    opened = events_of(world, b.ChallengeOpened, task_id)
    if not watch_entries:
        assert opened == []
        return
    (challenge,) = opened
    assert (challenge.kind, challenge.round, challenge.client_index) == (b.ChallengeKind.ENTRY, 1, 0)
    assert (challenge.challenger, challenge.accused) == (fog.session.address, world.aggregator.address)
    assert challenge.bond == world.publisher.contracts.task_registry.params(task_id).challenge_bond
    assert challenge.proposed == posted.measurements[0]._replace(quality=WAD)
    assert fog.jobs[f"{task_id}:0"].reviewed == {"1": str(challenge.challenge_id)}
