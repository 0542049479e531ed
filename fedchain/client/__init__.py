"""The client's side: join a task, auction the training job, hand the data to the winner, settle.

``fedchain client run`` (:mod:`fedchain.client.cli`) runs a :class:`ClientAgent`.
The job data codec (:mod:`fedchain.client.handoff`), the commitments
(:mod:`fedchain.client.commitments`) are shared with the fog node, which
imports them without the dataset code: names here are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fedchain._lazy import lazy_exports

#: public name -> defining module.
_EXPORTS: dict[str, str] = {
    "Award": "fedchain.client.agent",
    "ClientAgent": "fedchain.client.agent",
    "winning_bid": "fedchain.client.agent",
    "bid_commitment": "fedchain.client.commitments",
    "data_commitment": "fedchain.client.commitments",
    "derive_salt": "fedchain.client.commitments",
    "ClientConfig": "fedchain.client.config",
    "load_client_config": "fedchain.client.config",
    "client_dataset": "fedchain.client.data",
    "ExpectedJobData": "fedchain.client.handoff",
    "JobData": "fedchain.client.handoff",
    "JobDataMeta": "fedchain.client.handoff",
    "decode_job_data": "fedchain.client.handoff",
    "encode_job_data": "fedchain.client.handoff",
    "fetch_job_data": "fedchain.client.handoff",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from fedchain.client.agent import Award, ClientAgent, winning_bid
    from fedchain.client.commitments import bid_commitment, data_commitment, derive_salt
    from fedchain.client.config import ClientConfig, load_client_config
    from fedchain.client.data import client_dataset
    from fedchain.client.handoff import (
        ExpectedJobData,
        JobData,
        JobDataMeta,
        decode_job_data,
        encode_job_data,
        fetch_job_data,
    )

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
