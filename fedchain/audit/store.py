"""The blob store against the chain: every hash the task committed names an intact object.

Updates (``UpdateCommitted.updateHash``, or for a self-trained task the hash its client signed) fall under
``store.updates``; the task
spec (``datasetId``), the initial model (``modelId``) and every round's global
model (``RoundPosted.modelHash``) under ``store.models``. The store checks each
object's bytes against its name on read, so a missing object and an altered
one are told apart.

An update the aggregator scored as accepted must be there intact: the posted
score rests on it. An update it posted as rejected (or never scored: a removed
client, a round not posted yet) may be missing or damaged; that is what the
rejection says, so it is reported as a note, not a failure. The clients' job
data (``DataCommitted.dataHash``) is private and may be deleted after the task:
its state is a note too.
"""

from __future__ import annotations

import logging

from fedchain.audit.checks import CheckName, Tally
from fedchain.audit.history import TaskHistory
from fedchain.errors import BlobCorrupted, BlobNotFound, StoreError
from fedchain.store import BlobStore, to_hex

log = logging.getLogger(__name__)


def check_store(history: TaskHistory, store: BlobStore) -> Tally:
    """Fetch and verify every object the task's events name; each distinct hash is read once."""
    tally = Tally()
    verdicts: dict[bytes, str | None] = {}

    def verify(check: CheckName, digest: bytes, what: str, *, required: bool = True) -> None:
        if digest not in verdicts:
            verdicts[digest] = _verdict(store, digest)
        problem = verdicts[digest]
        if problem is None or required:
            tally.require(check, problem is None, f"{what} {to_hex(digest)}: {problem}")
        else:
            tally.note(check, f"{what} {to_hex(digest)}: {problem}")

    accepted = {
        (index, posted.round): scored and m.accepted
        for posted in history.rounds
        for index, (scored, m) in enumerate(zip(posted.scored, posted.measurements, strict=True))
    }
    for commit in history.commits:
        scored = accepted.get((commit.client_index, commit.round), False)
        what = f"update of client {commit.client_index} in round {commit.round}"
        verify(
            CheckName.STORE_UPDATES, commit.update_hash, what if scored else what + " (not accepted)", required=scored
        )
    replies = _signed_updates(history, store)
    for (round_number, index), digest in sorted(replies.items()):
        scored = accepted.get((index, round_number), False)
        what = f"signed update of client {index} in round {round_number}"
        verify(CheckName.STORE_UPDATES, digest, what if scored else what + " (not accepted)", required=scored)
    for client in history.clients:
        if client.data_hash is not None:
            verify(CheckName.STORE_UPDATES, client.data_hash, f"job data of client {client.index}", required=False)
    params = history.task.params
    if params is not None:
        verify(CheckName.STORE_MODELS, params.dataset_id, "task spec (datasetId)")
        verify(CheckName.STORE_MODELS, params.model_id, "initial model (modelId)")
    for posted in history.rounds:
        verify(CheckName.STORE_MODELS, posted.model_hash, f"global model of round {posted.round}")
    if not history.commits and not replies:
        tally.skip(CheckName.STORE_UPDATES, "the task committed no updates")
    log.debug("checked %d objects in %s", len(verdicts), store.url)
    return tally


def _signed_updates(history: TaskHistory, store: BlobStore) -> dict[tuple[int, int], bytes]:
    """(round, client) -> update hash of a self-trained task's signed replies (none for an auction task); whether
    each is signed by its client is ``scores.reproduced``'s to check."""
    params = history.task.params
    if params is None or not params.self_trained:
        return {}
    from fedchain.flower.protocol import stored_replies

    try:
        replies = stored_replies(store, history.task.task_id)
    except StoreError as err:
        log.warning("cannot read the signed replies: %s", err)
        return {}
    return {key: reply.claim.update_hash for key, reply in replies.items()}


def _verdict(store: BlobStore, digest: bytes) -> str | None:
    """None when the object is there and intact, else what is wrong with it."""
    try:
        store.get(digest)
    except BlobNotFound:
        return f"missing from the store {store.url}"
    except BlobCorrupted as err:
        return f"altered: {str(err).splitlines()[0]}"
    except StoreError as err:
        return f"unreadable: {str(err).splitlines()[0]}"
    return None
