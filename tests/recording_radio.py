"""A radio that records who writes its settings: a stand-in in front of any backend's radio
(every call and attribute passes through to it), noting each settings write and whether the
radio's owner (``daemon/radio_owner.py``) made it, in a file the test reads afterwards (the
radio processes are forked: a list in memory would stay in them)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

#: The chip settings a daemon may write (pyrf24's names): properties set, methods called.
SETTING_PROPERTIES = frozenset(
    {
        "channel",
        "data_rate",
        "pa_level",
        "payload_size",
        "dynamic_payloads",
        "address_width",
        "crc_length",
        "power",
        "listen",
    }
)
SETTING_METHODS = frozenset(
    {
        "set_retries",
        "set_auto_ack",
        "set_pa_level",
        "stop_listening",
        "start_listening",
        "open_rx_pipe",
        "close_rx_pipe",
        "open_tx_pipe",
        "enable_dynamic_ack",
    }
)
OWNER_FILE = str(Path("longge") / "daemon" / "radio_owner.py")


def _writer() -> str:
    """ "owner" if the radio's owner is on the stack; else the first frame in the package
    (file:line), the stray writer."""
    frame = sys._getframe(2)
    stray = "?"
    while frame is not None:
        name = frame.f_code.co_filename
        if name.endswith(OWNER_FILE):
            return "owner"
        if stray == "?" and f"{Path('longge')}/" in name:
            stray = f"{name.split('longge/', 1)[1]}:{frame.f_lineno}"
        frame = frame.f_back  # type: ignore[assignment]
    return stray


class RecordingRadio:
    """``radio`` with its settings writes noted in ``log`` (one line each: the name, what it
    was given, who wrote it)."""

    def __init__(self, radio: Any, log: Path) -> None:
        object.__setattr__(self, "_radio", radio)
        object.__setattr__(self, "_log", log)

    def _note(self, name: str, args: tuple[Any, ...]) -> None:
        with self._log.open("a") as f:
            f.write(f"{name}\t{args!r}\t{_writer()}\n")

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._radio, name)
        if name in SETTING_METHODS:

            def call(*args: Any, **kwargs: Any) -> Any:
                self._note(name, args)
                return value(*args, **kwargs)

            return call
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        if name in SETTING_PROPERTIES:
            self._note(name, (value,))
        setattr(self._radio, name, value)


def records(log: Path) -> list[tuple[str, str, str]]:
    """The notes: (name, arguments, writer) each."""
    if not log.exists():
        return []
    return [tuple(line.split("\t")) for line in log.read_text().splitlines()]  # type: ignore[misc]
