"""Accountability off chain: judging posted entries and fog updates, verdicts, and watching one's own entries.

The contracts hold the rules (contracts/README.md); this package holds what the
parties compute to apply them:

* :mod:`~fedchain.disputes.judging`: an entry against its reproduction with the auditor's code, and a committed
  update's training transcript against its job (segments re-executed by :mod:`fedchain.transcripts`);
* :mod:`~fedchain.disputes.verdicts`: the committee's EIP-712 verdicts, signed and exchanged on the store;
* :mod:`~fedchain.disputes.watch`: a client (or fog node) reviewing its own entries round by round;
* :mod:`~fedchain.disputes.service`: opening, resolving and expiring challenges on chain;
* :mod:`~fedchain.disputes.drift`: ``fedchain bench drift``, the re-scoring drift behind the quality tolerance.

The committee member's agent is :mod:`fedchain.verifier`.
"""
