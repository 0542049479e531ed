"""Training transcripts: what a fog node commits with each update, and how a dispute judges one segment of it.

A fog node keeps its training state every k steps (:class:`~fedchain.trainer.local.Checkpoints`) and commits,
with the update's hash, the Merkle root over those checkpoints (contracts/README.md, "Training transcripts"):

* :mod:`~fedchain.transcripts.record`: the checkpoints into the store and the root to commit
  (:func:`~fedchain.transcripts.record.store_transcript`), and the transcript a lazy node fabricates;
* :mod:`~fedchain.transcripts.segments`: one segment re-executed the reference way, and how far its end is from
  the checkpoint that claims it (:data:`~fedchain.transcripts.segments.SEGMENT_TOLERANCE`);
* :mod:`~fedchain.transcripts.judge`: a committed transcript checked against its job (the start model, the update,
  the checkpoints in the root) and one of its segments judged, or every segment searched for the first bad one.
"""
