"""The client's side: join a task, auction the training job, hand the data to the winner, settle.

``fedchain client run`` (:mod:`fedchain.client.cli`) runs a :class:`ClientAgent`.
The job data codec (:mod:`fedchain.client.handoff`) and the commitments
(:mod:`fedchain.client.commitments`) are shared with the fog node.
"""

from fedchain.client.agent import Award, ClientAgent, winning_bid
from fedchain.client.commitments import bid_commitment, data_commitment, derive_salt
from fedchain.client.config import ClientConfig, load_client_config
from fedchain.client.data import client_dataset
from fedchain.client.handoff import JobData, JobDataMeta, decode_job_data, encode_job_data, fetch_job_data

__all__ = [
    "Award",
    "ClientAgent",
    "ClientConfig",
    "JobData",
    "JobDataMeta",
    "bid_commitment",
    "client_dataset",
    "data_commitment",
    "decode_job_data",
    "derive_salt",
    "encode_job_data",
    "fetch_job_data",
    "load_client_config",
    "winning_bid",
]
