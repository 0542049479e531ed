"""Accountability off chain: judging posted entries and fog updates, verdicts, and watching one's own entries.

The contracts hold the rules (contracts/README.md); this package holds what the
parties compute to apply them:

* :mod:`~fedchain.disputes.judging`: an entry against its reproduction with the auditor's code, a committed
  update against the honest re-execution of its job, and the tolerances both use;
* :mod:`~fedchain.disputes.reexecution`: training a fog node's job again from its committed inputs;
* :mod:`~fedchain.disputes.verdicts`: the committee's EIP-712 verdicts, signed and exchanged on the store;
* :mod:`~fedchain.disputes.watch`: a client (or fog node) reviewing its own entries round by round;
* :mod:`~fedchain.disputes.service`: opening, resolving and expiring challenges on chain;
* :mod:`~fedchain.disputes.drift`: ``fedchain bench drift``, the measurements behind the tolerances.

The committee member's agent is :mod:`fedchain.verifier`.
"""
