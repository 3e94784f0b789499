"""TUN devices: the Linux one, and an in-memory twin for tests.

Both offer the same narrow interface (``name``, ``mtu``, ``read``, ``write``, ``fileno``,
``close``) and both are plain file descriptors, so they survive ``fork`` and work with
``select``. Reads and writes carry one whole IP packet each.
"""

from __future__ import annotations

import fcntl
import ipaddress
import os
import socket
import struct
import subprocess
from pathlib import Path
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


def link_local(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> ipaddress.IPv6Address:
    """A node's IPv6 link-local address on the link, from its link address (10.24.0.2 ->
    fe80::a18:2; an IPv6 one: its last 64 bits): the daemon gives its TUN this one and no
    other (configure_link), so that a base knows each mobile's and routes and checks it per peer
    (with one fe80::/10 for every mobile, the base's packet to mobile 2's link-local address
    went to mobile 1, the first of the tie)."""
    bits = int(address) & ((1 << (32 if address.version == 4 else 64)) - 1)
    return ipaddress.IPv6Address((0xFE80 << 112) | bits)


def configure_link(name: str, address: str, mtu: int, txqueuelen: int) -> None:
    """Address, MTU and a short kernel queue (our own queue holds the deliberate budget); the
    IPv6 link-local address derived from the link address (config.link_local) and no other:
    the kernel's own would be random, and a base could not tell its mobiles' apart."""
    ip("link", "set", "dev", name, "mtu", str(mtu), "txqueuelen", str(txqueuelen))
    ip("addr", "replace", address, "dev", name)
    conf = Path(f"/proc/sys/net/ipv6/conf/{name}")
    gen_mode, off = conf / "addr_gen_mode", conf / "disable_ipv6"
    if gen_mode.exists() and off.read_text().strip() == "0":  # (IPv6 off: nothing to do)
        gen_mode.write_text("1\n")
        own = link_local(ipaddress.ip_interface(address).ip)
        ip("-6", "addr", "replace", f"{own}/64", "dev", name, "nodad")
    ip("link", "set", "dev", name, "up")
