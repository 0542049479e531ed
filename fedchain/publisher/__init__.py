"""The publisher's side: task terms, creating and managing tasks on chain, and the task overview.

Commands: ``fedchain task create|start|cancel|show|settle`` and ``fedchain withdraw``
(:mod:`fedchain.publisher.cli`). The functions below are what they call.
"""

from fedchain.publisher.service import (
    CreatedTask,
    Settlement,
    TaskView,
    cancel_task,
    create_task,
    settle_task,
    start_task,
    task_view,
    withdraw,
)
from fedchain.publisher.session import ChainSession, open_session
from fedchain.publisher.terms import PublishConfig, TaskTerms, load_publish_config, parse_wei

__all__ = [
    "ChainSession",
    "CreatedTask",
    "PublishConfig",
    "Settlement",
    "TaskTerms",
    "TaskView",
    "cancel_task",
    "create_task",
    "load_publish_config",
    "open_session",
    "parse_wei",
    "settle_task",
    "start_task",
    "task_view",
    "withdraw",
]
