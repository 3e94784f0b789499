"""TUN devices: the Linux one, and an in-memory twin for tests.

Both offer the same narrow interface (``name``, ``mtu``, ``read``, ``write``, ``fileno``,
``close``) and both are plain file descriptors, so they survive ``fork`` and work with
``select``. Reads and writes carry one whole IP packet each.
"""

from __future__ import annotations

import fcntl
import os
import socket
import struct
import subprocess
from typing import Protocol

from longge.errors import ConfigError, LongGeError

_TUNSETIFF = 0x400454CA
_IFF_TUN = 0x0001
_IFF_NO_PI = 0x1000
_IFNAMSIZ = 16


class TunError(LongGeError):
    """The TUN device could not be created or configured (names what to check)."""


class Tun(Protocol):
    name: str
    mtu: int

    def read(self) -> bytes: ...
    def write(self, packet: bytes) -> int: ...
    def fileno(self) -> int: ...
    def close(self) -> None: ...


def check_ifname(name: str) -> None:
    if not name or len(name.encode()) >= _IFNAMSIZ or "/" in name or " " in name:
        raise ConfigError("tun", name, "an interface name of 1..15 characters, no '/' or spaces")


class LinuxTun:
    """A kernel TUN interface (IFF_TUN | IFF_NO_PI): one IP packet per read/write."""

    def __init__(self, name: str, mtu: int = 1500) -> None:
        check_ifname(name)
        try:
            fd = os.open("/dev/net/tun", os.O_RDWR | os.O_CLOEXEC)
        except OSError as exc:
            raise TunError(
                f"cannot open /dev/net/tun ({exc.strerror}): is the tun module "
                "loaded and are you root (or CAP_NET_ADMIN)?"
            ) from exc
        try:
            ifr = struct.pack("16sH", name.encode(), _IFF_TUN | _IFF_NO_PI)
            result = fcntl.ioctl(fd, _TUNSETIFF, ifr)
        except OSError as exc:
            os.close(fd)
            raise TunError(f"cannot create TUN {name!r}: {exc.strerror}") from exc
        os.set_blocking(fd, False)
        self.fd = fd
        self.name = result[:_IFNAMSIZ].rstrip(b"\0").decode()
        self.mtu = mtu

    def read(self) -> bytes:
        """One packet, or b"" if none is waiting. TunError once the interface is gone (deleted
        under the daemon: its descriptor reads EBADFD from then on, and select() finds it
        readable every time)."""
        try:
            return os.read(self.fd, self.mtu + 64)
        except BlockingIOError:
            return b""
        except OSError as exc:
            raise TunError(
                f"the interface {self.name} cannot be read any more ({exc.strerror}): was it "
                "deleted? The daemon stops; start it again to create the interface"
            ) from exc

    def write(self, packet: bytes) -> int:
        try:
            return os.write(self.fd, packet)
        except (BlockingIOError, OSError):
            return 0  # the kernel refused it (e.g. not an IP packet): the caller counts

    def fileno(self) -> int:
        return self.fd

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class MemoryTun:
    """The twin: a SOCK_SEQPACKET socket pair. ``peer`` is the "kernel" side for tests."""

    def __init__(self, name: str = "memtun0", mtu: int = 1500) -> None:
        self.name = name
        self.mtu = mtu
        self._sock, self.peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._sock.setblocking(False)

    def read(self) -> bytes:
        try:
            return self._sock.recv(self.mtu + 64)
        except BlockingIOError:
            return b""

    def write(self, packet: bytes) -> int:
        try:
            return self._sock.send(packet)
        except OSError:
            return 0

    def fileno(self) -> int:
        return self._sock.fileno()

    def close(self) -> None:
        self._sock.close()
        self.peer.close()


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``ip ARGS``; on failure raise TunError with what ip said."""
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10)
    if check and proc.returncode != 0:
        raise TunError(f"ip {' '.join(args)}: {proc.stderr.strip() or proc.returncode}")
    return proc


def configure_link(name: str, address: str, mtu: int, txqueuelen: int) -> None:
    """Address, MTU and a short kernel queue (our own queue holds the deliberate budget)."""
    ip("link", "set", "dev", name, "mtu", str(mtu), "txqueuelen", str(txqueuelen))
    ip("addr", "replace", address, "dev", name)
    ip("link", "set", "dev", name, "up")
