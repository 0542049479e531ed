"""A client watches its own entries: an entry posted below what it reproduces is challenged, and an upheld verdict
corrects it and pays the client out of the aggregator's bond (a real chain, a real fog node and client).

The test plays the publisher, the aggregator (posting each round from the fog node's commit) and the committee
(the deployer alone is the committee of the tests' deployment).
"""

from __future__ import annotations

import pytest

from fedchain.agent.finality import finalize_due, pending_rounds
from fedchain.audit.replay import (
    BOND_SLASH,
    CHALLENGE_REFUND,
    CHALLENGE_REWARD,
    DEPOSIT_FORFEIT,
    FORFEIT_REASONS,
    reason_name,
)
from fedchain.chain import bindings as b
from fedchain.client import ClientConfig
from fedchain.disputes.service import resolve
from fedchain.disputes.verdicts import Domain, Verdict, sign
from fedchain.errors import ConfigError
from fedchain.fl.reputation import WAD
from tests.aggregator.conftest import DEPLOYER, World
from tests.client.test_client_agent import events_of
from tests.fog.conftest import Agents, award, post_round


@pytest.mark.parametrize("watch", ["reexecute", "committee", "off"])
def test_a_client_challenges_an_entry_posted_below_what_it_reproduces_unless_it_watches_nothing(
    world: World, agents: Agents, watch: str
) -> None:
    # prepare: the fog node trains and commits round 1; the aggregator posts it at quality 0 where honest scoring
    # of the only client gives 1 (a removal at finalisation: quality 0 < q_min)
    task_id = world.create()
    client, fog = agents.client(0, task_id, watch=watch), agents.fog(0, task_id, watch_entries=False)
    award(world, (client,), (fog,))
    post_round(world, task_id, 1, qualities={0: 0})
    (posted,) = events_of(world, b.RoundPosted, task_id)

    # execute
    client.step()

    # assert: an entry challenge against the aggregator naming the reproduced entry, with the task's challenge bond
    opened = events_of(world, b.ChallengeOpened, task_id)
    if watch == "off":
        assert opened == [] and "reviewed" not in client.state.data
        return
    (challenge,) = opened
    params = world.publisher.contracts.task_registry.params(task_id)
    assert (challenge.kind, challenge.round, challenge.client_index) == (b.ChallengeKind.ENTRY, 1, 0)
    assert (challenge.challenger, challenge.accused) == (client.address, world.aggregator.address)
    assert challenge.bond == params.challenge_bond
    assert challenge.proposed == posted.measurements[0]._replace(quality=WAD)
    assert client.state.data["reviewed"] == {"1": str(challenge.challenge_id)}


def test_an_upheld_challenge_corrects_the_entry_pays_the_client_half_an_entry_slash_and_burns_the_rest(
    world: World, agents: Agents
) -> None:
    # prepare: round 1 posted at quality 0 for an honest update; the client challenges it
    task_id = world.create()
    client, fog = agents.client(0, task_id), agents.fog(0, task_id, watch_entries=False)
    award(world, (client,), (fog,))
    contracts = world.publisher.contracts
    bond, _ = contracts.disputes.bond(task_id)
    slash = contracts.disputes.entry_slash(task_id)
    challenge_bond = contracts.task_registry.params(task_id).challenge_bond
    post_round(world, task_id, 1, qualities={0: 0})
    client.step()
    (challenge,) = events_of(world, b.ChallengeOpened, task_id)

    # execute: round 2 is trained and posted honestly; both windows pass with the challenge open (the rounds wait);
    # the committee upholds it; then the client finalises both rounds and settles
    fog.step()  # trains round 2 from the model posted with round 1
    post_round(world, task_id, 2)
    client.step()  # reviews round 2: as it should be
    world.pass_challenge_window(task_id)
    held = (finalize_due(world.publisher, task_id), tuple(pending_rounds(world.publisher, task_id)))
    committee = world.node.dev_account(DEPLOYER)
    domain = Domain(int(world.publisher.w3.eth.chain_id), contracts.arbiter_committee.address)
    verdict = sign(Verdict(challenge.challenge_id, task_id, 1, 0, True), committee, domain)
    resolve(world.publisher, challenge.challenge_id, True, [verdict.signature])
    client.step()

    # assert: the rounds waited for the verdict; the challenger got its bond back and half an entry slash of the
    # aggregator's bond, the sink the other half; the corrected entry scored the client (not removed, its deposit back); no forfeit
    # reached the publisher or the aggregator
    assert held == ((), (1, 2))
    assert client.state.data["reviewed"] == {"1": str(challenge.challenge_id), "2": None}
    (resolved,) = events_of(world, b.ChallengeResolved, task_id)
    assert (resolved.status, resolved.fate) == (b.ChallengeStatus.UPHELD, b.Fate.CORRECTED)
    final = events_of(world, b.RoundFinalized, task_id)
    assert [(f.round, f.forfeited) for f in final] == [(1, 0), (2, 0)] and final[
        0
    ].paid > 0  # round 1 paid as corrected
    credits = events_of(world, b.Credited, task_id)
    by_reason: dict[str, list[tuple[str, int]]] = {}
    for credit in credits:
        by_reason.setdefault(reason_name(credit.reason), []).append((credit.to, credit.amount))
    sink = contracts.treasury.sink()
    assert by_reason[CHALLENGE_REFUND] == [(client.address, challenge_bond)]
    assert slash == bond // contracts.task_registry.params(task_id).max_clients
    assert by_reason[CHALLENGE_REWARD] == [(client.address, slash // 2)]
    assert by_reason[BOND_SLASH] == [(sink, slash - slash // 2)]
    assert DEPOSIT_FORFEIT not in by_reason
    assert not [c for c in credits if reason_name(c.reason) in FORFEIT_REASONS and c.to != sink]
    info = contracts.round_ledger.client(task_id, 0)
    assert info.status == b.ClientStatus.ACTIVE and info.rounds == 2
    assert client.state.finished and contracts.round_ledger.settled(task_id)
    assert contracts.disputes.bond(task_id)[0] == 0  # the rest of the bond went back at settlement


def test_an_unknown_watch_mode_is_refused_naming_the_modes() -> None:
    with pytest.raises(ConfigError, match="unknown watch mode 'paranoid'") as refused:
        ClientConfig(task_id=1, watch="paranoid")

    assert "reexecute, committee, off" in (refused.value.hint or "")
