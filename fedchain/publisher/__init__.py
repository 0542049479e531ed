"""The publisher's side: task terms, creating and managing tasks on chain, and the task overview.

Commands: ``fedchain task create|start|cancel|abandon|show|settle`` and ``fedchain withdraw``
(:mod:`fedchain.publisher.cli`). The functions below are what they call.

Names are imported on first use, so that a command importing
:mod:`fedchain.publisher.terms` does not load torch through the task
spec. The chain session every command opens is
:class:`fedchain.agent.session.ChainSession`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fedchain._lazy import lazy_exports

#: public name -> defining module.
_EXPORTS: dict[str, str] = {
    "CreatedTask": "service",
    "Settlement": "service",
    "TaskView": "service",
    "abandon_task": "service",
    "cancel_task": "service",
    "check_task_windows": "service",
    "create_task": "service",
    "settle_task": "service",
    "start_task": "service",
    "task_view": "service",
    "withdraw": "service",
    "PublishConfig": "terms",
    "TaskTerms": "terms",
    "WindowProblem": "terms",
    "check_windows": "terms",
    "load_publish_config": "terms",
    "parse_wei": "terms",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from fedchain.publisher.service import (
        CreatedTask,
        Settlement,
        TaskView,
        abandon_task,
        cancel_task,
        check_task_windows,
        create_task,
        settle_task,
        start_task,
        task_view,
        withdraw,
    )
    from fedchain.publisher.terms import (
        PublishConfig,
        TaskTerms,
        WindowProblem,
        check_windows,
        load_publish_config,
        parse_wei,
    )

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
