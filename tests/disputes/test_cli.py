"""``fedchain challenge`` by hand on a real chain: ``--wait`` starts a challenge ahead of its round's post."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from fedchain.chain import bindings as b
from fedchain.chain.keys import PRIVATE_KEY_ENV
from fedchain.cli import main
from fedchain.disputes.service import resolve
from fedchain.disputes.verdicts import Domain, Verdict, sign
from fedchain.fl.reputation import WAD
from fedchain.publisher.service import cancel_task
from tests.aggregator.conftest import CLIENTS, DEPLOYER, World
from tests.client.test_client_agent import events_of
from tests.fog.conftest import Agents, award, post_round

#: The account no participant of the tests' world uses: a stranger who challenges.
STRANGER = 15
#: Seconds a command started with --wait is seen still waiting for a post that does not come.
STILL_WAITING_S = 3.0
#: The most the command may take once the round is posted.
COMMAND_TIMEOUT_S = 120.0


def chain_args(world: World) -> list[str]:
    return [
        "--deployment",
        str(world.deployment_file),
        "--store",
        world.store_url,
        "--rpc-url",
        world.node.rpc_url,
    ]


def test_an_entry_challenge_started_with_wait_before_its_round_is_posted_opens_once_the_round_is(
    world: World, agents: Agents, monkeypatch: pytest.MonkeyPatch
) -> None:
    # prepare: round 1 trained and committed, not posted yet; a stranger starts a challenge of client 0's entry
    task_id = world.create()
    client, fog = agents.client(0, task_id, watch="off"), agents.fog(0, task_id, watch_entries=False)
    award(world, (client,), (fog,))
    monkeypatch.setenv(PRIVATE_KEY_ENV, "0x" + bytes(world.node.dev_account(STRANGER).key).hex())
    command = ["challenge", "entry", "--task", str(task_id), "--round", "1", "--client", "0", "--quality", "3.0"]

    with ThreadPoolExecutor(1) as pool:
        challenging = pool.submit(main, [*command, "--wait", *chain_args(world)])
        with pytest.raises(TimeoutError):
            challenging.result(timeout=STILL_WAITING_S)
        opened_before_the_post = events_of(world, b.ChallengeOpened, task_id)

        # execute: the aggregator posts round 1
        post_round(world, task_id, 1)
        status = challenging.result(timeout=COMMAND_TIMEOUT_S)

    # assert: nothing was sent before the post; then the stranger's challenge of round 1 opened, as it proposed
    assert opened_before_the_post == []
    assert status == 0
    (opened,) = events_of(world, b.ChallengeOpened, task_id)
    assert (opened.kind, opened.round, opened.client_index) == (b.ChallengeKind.ENTRY, 1, 0)
    assert opened.challenger == world.node.dev_account(STRANGER).address
    assert opened.proposed.quality == 3 * WAD


def test_a_challenge_waiting_for_a_round_of_a_task_that_ended_without_it_says_so(
    world: World, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # prepare: a task cancelled before it started
    task_id = world.create()
    cancel_task(world.publisher, task_id)
    monkeypatch.setenv(PRIVATE_KEY_ENV, "0x" + bytes(world.node.dev_account(STRANGER).key).hex())

    # execute
    status = main(["challenge", "fog", "--task", str(task_id), "--round", "1", "--wait", *chain_args(world)])

    # assert: refused at once, saying where the task ended
    err = capsys.readouterr().err
    assert status == 1
    assert f"task {task_id} is cancelled with 0 rounds posted: round 1 is never posted" in err


def as_client(world: World, monkeypatch: pytest.MonkeyPatch, number: int = 0) -> None:
    monkeypatch.setenv(PRIVATE_KEY_ENV, "0x" + bytes(world.node.dev_account(CLIENTS[number]).key).hex())


def test_a_fog_challenge_of_an_honest_node_on_another_engine_re_executes_its_segments_and_opens_nothing(
    world: World, agents: Agents, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # prepare: the fog node trains round 1 on the stacked engine with 2 threads (not the reference), posted
    task_id = world.create()
    client = agents.client(0, task_id, watch="off")
    fog = agents.fog(0, task_id, watch_entries=False, engine="stacked", threads=2)
    award(world, (client,), (fog,))
    post_round(world, task_id, 1)
    as_client(world, monkeypatch)

    # execute
    status = main(["challenge", "fog", "--task", str(task_id), "--round", "1", *chain_args(world)])

    # assert: every segment re-executed within tolerance, so nothing opened and the user is told how to insist
    err = capsys.readouterr().err
    assert status == 1
    assert "segments of your job's round 1 re-executes within tolerance" in err and "--segment N" in err
    assert events_of(world, b.ChallengeOpened, task_id) == []


def test_a_fog_challenge_of_a_lazy_node_names_the_first_segment_that_does_not_re_execute(
    world: World, agents: Agents, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # prepare: a free rider commits a zero update with a fabricated (interpolated) transcript
    task_id = world.create()
    client = agents.client(0, task_id, watch="off")
    fog = agents.fog(0, task_id, watch_entries=False, lazy="zero")
    award(world, (client,), (fog,))
    post_round(world, task_id, 1)
    as_client(world, monkeypatch)

    # execute
    status = main(["challenge", "fog", "--task", str(task_id), "--round", "1", *chain_args(world)])

    # assert: segment 0 named, against the node that committed
    out = capsys.readouterr().out
    assert status == 0, out
    (opened,) = events_of(world, b.ChallengeOpened, task_id)
    assert (opened.kind, opened.round, opened.client_index, opened.value) == (b.ChallengeKind.FOG, 1, 0, 0)
    assert opened.accused == fog.session.address
    assert "segment 0: ends 1 from its re-execution" in out


def test_a_fog_challenge_naming_a_segment_opens_without_re_executing(
    world: World, agents: Agents, monkeypatch: pytest.MonkeyPatch
) -> None:
    # prepare: an honest node's round 1, posted
    task_id = world.create()
    client, fog = agents.client(0, task_id, watch="off"), agents.fog(0, task_id, watch_entries=False)
    award(world, (client,), (fog,))
    post_round(world, task_id, 1)
    as_client(world, monkeypatch)

    # execute
    status = main(["challenge", "fog", "--task", str(task_id), "--round", "1", "--segment", "1", *chain_args(world)])

    # assert: opened as told, naming segment 1
    assert status == 0
    (opened,) = events_of(world, b.ChallengeOpened, task_id)
    assert (opened.kind, opened.value, opened.accused) == (b.ChallengeKind.FOG, 1, fog.session.address)


def test_a_fog_challenge_of_a_round_whose_earlier_challenge_was_rejected_warns_first(
    world: World, agents: Agents, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # prepare: a challenge of an honest node's round 1 naming segment 1, rejected by the committee
    task_id = world.create()
    client, fog = agents.client(0, task_id, watch="off"), agents.fog(0, task_id, watch_entries=False)
    award(world, (client,), (fog,))
    post_round(world, task_id, 1)
    as_client(world, monkeypatch)
    args = ["challenge", "fog", "--task", str(task_id), "--round", "1", "--segment", "1", *chain_args(world)]
    assert main(args) == 0
    (first,) = events_of(world, b.ChallengeOpened, task_id)
    domain = Domain(int(world.publisher.w3.eth.chain_id), world.publisher.contracts.arbiter_committee.address)
    verdict = sign(Verdict(first.challenge_id, task_id, 1, 0, False), world.node.dev_account(DEPLOYER), domain)
    resolve(world.publisher, first.challenge_id, False, [verdict.signature])
    capsys.readouterr()

    # execute: the client insists
    status = main(args)

    # assert: warned of the rejection, naming it, before the second challenge opened
    err = capsys.readouterr().err
    assert status == 0
    assert f"warning: challenge {first.challenge_id} of this job's round 1 (segment 1) was rejected" in err
    assert len(events_of(world, b.ChallengeOpened, task_id)) == 2
