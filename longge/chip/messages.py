"""The messages between a radio's host side and its chip's far side, one per datagram or
frame: the emulated air speaks them over a Unix socket (``air/wire.py``), the USB modem
over its serial line (``radio/serial_modem.py``), so the host side (``radio/mirror.py``) is
one code for both. The first byte says what a message is.

Host -> chip:
    ``H`` name                         attach as a radio called ``name`` (utf-8; the air only)
    ``C`` registers                    set the chip registers (the air: ``RadioRegisters`` as
                                       JSON; the modem: a 29- or 33-byte record)
    ``L`` on(1)                        listen (RX mode) or not
    ``T`` no_ack(1) payload            load a payload into the TX FIFO
    ``F``                              flush the TX FIFO (also clears MAX_RT)
    ``U``                              reuse the TX FIFO head after MAX_RT
    ``R`` count(1)                     the host read ``count`` frames from the RX FIFO
    ``X``                              flush the RX FIFO
    ``D``                              read the received power detector: reply ``d``
Chip -> host:
    ``h`` id(2)                        attached
    ``t`` ok(1) arc(1) fifo(1) accepted(4) flushes(4)
                                       a TX FIFO head finished: acknowledged (or no-ack sent),
                                       or MAX_RT; ``fifo`` frames remain after ``accepted``
                                       ``T`` messages and ``flushes`` ``F`` messages
    ``r`` pipe(1) payload              a received frame
    ``d`` rpd(1)                       the received power detector (after ``D``)
    ``e`` text                         the request was refused (text says why)
"""

from __future__ import annotations

import struct

TX_RESULT = struct.Struct("!cBBBII")
MAX_MESSAGE = 4096


def tx_result(ok: bool, arc: int, fifo: int, accepted: int, flushes: int) -> bytes:
    return TX_RESULT.pack(b"t", int(ok), arc, fifo, accepted & 0xFFFFFFFF, flushes & 0xFFFFFFFF)


def parse_tx_result(msg: bytes) -> tuple[bool, int, int, int, int]:
    _, ok, arc, fifo, accepted, flushes = TX_RESULT.unpack(msg)
    return bool(ok), arc, fifo, accepted, flushes
