"""Whose fault is it? Exceptions named after who must act (h11's habit).

- :class:`ConfigError` — the user's: a setting out of range. Names the key and what is allowed.
- :class:`UsageError` — the caller's (our own code or a script): an API used wrongly.
- Frames and probes that arrive malformed are nobody's exception: they are dropped and
  counted by reason where they arrive (see ``DropReason`` in the protocol).
"""

from __future__ import annotations


class LongGeError(Exception):
    """Base of every error LongGe raises on purpose."""


class ConfigError(LongGeError, ValueError):
    """A configuration value the user gave is not allowed."""

    def __init__(self, key: str, value: object, allowed: str) -> None:
        super().__init__(f"{key} = {value!r} is not allowed: {allowed}")
        self.key = key
        self.value = value
        self.allowed = allowed


class UsageError(LongGeError):
    """An API was called in a way it does not support (a bug in the caller)."""


class AirUnavailable(LongGeError):
    """The air emulator cannot be reached (not started, or it went away)."""


class HardwareError(LongGeError):
    """A radio (or its wiring) does not do what it must; the message says what to check."""
