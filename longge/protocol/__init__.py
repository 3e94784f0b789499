"""The link protocol, sans-IO: packets in, frames out; frames in, packets or counted drops out.

This package has no I/O code at all: no sockets, no threads, no clock. Time is passed in.
"""

from longge.protocol.fragmenter import Fragmenter
from longge.protocol.reassembler import DropReason, Reassembler

__all__ = ["DropReason", "Fragmenter", "Reassembler"]
