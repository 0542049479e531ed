"""The running system: a task's participants as separate OS processes over one chain and one blob store.

``fedchain demo`` and the end-to-end and fault tests use it:

* :mod:`fedchain.system.roster`: who takes part (clients' data and noise, fog nodes' costs and faults) and their keys;
* :mod:`fedchain.system.launch`: the run folder and each participant's command line;
* :mod:`fedchain.system.supervisor`: start, watch, signal and stop the processes, read their logs;
* :mod:`fedchain.system.progress`: follow the task from the chain (events, progress numbers);
* :mod:`fedchain.system.run`: :class:`SystemRun`, one deployment and task driven step by step.
"""

from fedchain.system.launch import AgentOptions, RunFolder, aggregator_process, client_process, fog_process
from fedchain.system.progress import EventLog, TaskProgress, read_progress
from fedchain.system.roster import (
    AuctionScale,
    ClientPlan,
    FogPlan,
    Roster,
    demo_roster,
    participant_account,
    required_funds,
)
from fedchain.system.run import AGGREGATOR, PUBLISHER, RunSettings, SystemRun
from fedchain.system.supervisor import Child, ProcessSpec, Supervisor

__all__ = [
    "AGGREGATOR",
    "PUBLISHER",
    "AgentOptions",
    "AuctionScale",
    "Child",
    "ClientPlan",
    "EventLog",
    "FogPlan",
    "ProcessSpec",
    "Roster",
    "RunFolder",
    "RunSettings",
    "Supervisor",
    "SystemRun",
    "TaskProgress",
    "aggregator_process",
    "client_process",
    "demo_roster",
    "fog_process",
    "participant_account",
    "read_progress",
    "required_funds",
]
