"""The arbiter committee's member agent: ``fedchain verifier run`` (:mod:`fedchain.verifier.service`)."""
