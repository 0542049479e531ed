"""Structured log lines for agents: a message followed by ``key=value`` fields.

Every line an agent logs about its work names the agent and, where they apply,
the round, the job and the transaction, so ``grep job=7`` follows one job
through bids, training and commits across processes::

    >>> import logging
    >>> log = AgentLogger(logging.getLogger("fog"), agent="fog-1")
    >>> log.bind(round=3).format("update committed", job=7, tx=bytes.fromhex("abcd"))
    'update committed agent=fog-1 round=3 job=7 tx=0xabcd'

The fields also travel as ``record.fields`` (a dict), which
:func:`record_fields` reads, for handlers that write JSON lines.
"""

from __future__ import annotations

import logging
from collections.abc import MutableMapping
from typing import Any

#: Keyword arguments that belong to :meth:`logging.Logger.log` itself, not to the fields.
LOGGING_KEYWORDS = frozenset({"exc_info", "stack_info", "stacklevel", "extra"})


def format_value(value: Any) -> str:
    """How one field value is written: bytes as 0x hex, text with spaces quoted, the rest by ``str``."""
    if isinstance(value, (bytes, bytearray)):
        return "0x" + bytes(value).hex()
    text = str(value)
    return repr(text) if isinstance(value, str) and (" " in text or not text) else text


class AgentLogger(logging.LoggerAdapter):
    """A logger adapter that appends bound and per-call fields to every message.

    ``log.info("bid sent", job=7, tx=tx_hash)``; fields whose value is ``None``
    are left out. :meth:`bind` returns a logger with more fields bound.
    """

    def __init__(self, logger: logging.Logger, **fields: Any) -> None:
        super().__init__(logger, fields)

    def merged(self, **fields: Any) -> dict[str, Any]:
        """The bound fields updated by ``fields``."""
        return {**(self.extra or {}), **fields}

    def bind(self, **fields: Any) -> AgentLogger:
        """A logger with ``fields`` added to (or replacing) the bound ones."""
        return AgentLogger(self.logger, **self.merged(**fields))

    def fields_text(self, **fields: Any) -> str:
        """``key=value`` text of the bound fields updated by ``fields`` (``None`` values left out)."""
        return " ".join(
            f"{key}={format_value(value)}" for key, value in self.merged(**fields).items() if value is not None
        )

    def format(self, msg: str, **fields: Any) -> str:
        """The line :meth:`info` and friends would log for ``msg`` and ``fields``."""
        text = self.fields_text(**fields)
        return f"{msg} {text}" if text else msg

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        fields = {key: kwargs.pop(key) for key in list(kwargs) if key not in LOGGING_KEYWORDS}
        kwargs["extra"] = {**(kwargs.get("extra") or {}), "fields": self.merged(**fields)}
        # The text is appended after the message's %-placeholders: a literal % in a value must stay literal.
        text = self.fields_text(**fields).replace("%", "%%")
        return (f"{msg} {text}" if text else msg), kwargs


def record_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The fields an :class:`AgentLogger` attached to ``record`` (empty for a record from a plain logger)."""
    fields = getattr(record, "fields", None)
    return dict(fields) if isinstance(fields, dict) else {}
