"""What sealing keeps on disk (``security.state_dir``): each sender's epoch and each
receiver's replay mark, per pair of nodes. The protocol (``longge.protocol.secure``) does no
I/O; this module is where its state meets the file system.

Files, named by the link's interface and the two nodes' identities (link addresses), so that
two daemons may share a directory (the testbed's do)::

    longge0.10.24.0.2-10.24.0.1.tx-epoch        the epoch, synced before it is used
    longge0.10.24.0.1-10.24.0.2.rx-mark         sender-receiver: the mark, once a second
    longge0.10.24.0.1-10.24.0.2.rx-mark.floor   the same record, synced (docs/details.md, Security)

A mark is ``SEQ SALT``: the 64-bit (epoch << 32 | counter) and that epoch's salt in hex.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import stat
import sys
import tempfile
import time
from pathlib import Path

from longge.config import NodeConfig, PeerConfig
from longge.errors import ConfigError
from longge.protocol.arq_frames import ControlSeal, Crc8Seal, KeyedSeal, control_key
from longge.protocol.secure import (
    COUNTER_SPACE,
    MARK_SPACE,
    SALT_LEN,
    Mark,
    Opener,
    Sealer,
    SecurityError,
    direction_key,
)


def floor_file(mark: Path) -> Path:
    return mark.with_name(mark.name + ".floor")


def _write_atomic(path: Path, text: str, sync: bool) -> None:
    """``text`` in ``path``, whole or not at all; ``sync``: on disk before returning, also
    across a power cut (the epoch, the floor). Without it (the mark, once a second: an fsync on
    a Pi's SD card can hold the RX process for tens of ms) a power cut may leave it empty."""
    tmp = path.with_name(path.name + ".tmp")
    # a new file, never one that is there (a symlink planted at the fixed name would have the
    # daemon, root, write through it): one left by a crash is removed first
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
        if sync:
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)
    if sync:
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise SecurityError(f"cannot read {path}: {exc}") from exc


def _refuse(path: Path, text: str, what: str) -> SecurityError:
    return SecurityError(
        f"{path}: {text[:40]!r} is not {what}; remove it only together with the key "
        "(make a new one: ./run.sh keygen)"
    )


def read_epoch(path: Path) -> int:
    """The last epoch recorded (0 if there is no file). A file that is there but empty,
    negative or too large is refused: read as 0, the next epoch would start over and repeat
    nonces under the same key (it is written synced: a power cut cannot empty it)."""
    text = _read_text(path)
    if text is None:
        return 0
    try:
        value = int(text)
        if not 0 <= value < COUNTER_SPACE:
            raise ValueError
    except ValueError as exc:
        raise _refuse(path, text, f"a number in 0..{COUNTER_SPACE - 1}") from exc
    return value


def _parse_mark(path: Path, text: str) -> Mark:
    try:
        seq_text, salt_text, *rest = text.split()
        seq, salt = int(seq_text), bytes.fromhex(salt_text)
        if not 0 <= seq < MARK_SPACE or len(salt) != SALT_LEN or rest not in ([], ["whole"]):
            raise ValueError
    except ValueError as exc:
        raise _refuse(
            path, text, 'a replay mark (a 64-bit number, 8 hex digits, maybe "whole")'
        ) from exc
    return Mark(seq, salt, whole=rest == ["whole"])


def read_mark(path: Path) -> Mark | None:
    """The receiver's mark: the higher of the mark and its synced floor (None: neither is
    there). The unsynced mark may come back empty after a power cut: then the floor holds.
    Anything else that is not a mark is refused (a mark read as nothing accepts replays)."""
    found = []
    for p in (path, floor_file(path)):
        text = _read_text(p)
        if text is None:
            continue
        if not text and p == path:
            continue  # (the unsynced one, emptied by a power cut)
        found.append(_parse_mark(p, text))
    return max(found, key=lambda m: (m.seq, not m.whole), default=None)


class MarkStore:
    """Records a receiver's mark (``Opener``'s ``save``): the mark unsynced, the floor synced."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.failing = False  # the last save failed (said once in the log, and when it ends)

    def load(self) -> Mark | None:
        return read_mark(self.path)

    def save(self, mark: Mark, sync: bool) -> bool:
        text = f"{mark.seq} {mark.salt.hex()}{' whole' if mark.whole else ''}\n"
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            _write_atomic(self.path, text, sync=False)
            if sync:
                _write_atomic(floor_file(self.path), text, sync=True)
        except OSError as exc:
            if not self.failing:
                _say(
                    f"cannot record the replay mark in {self.path.parent}: {exc.strerror} "
                    "(the window in memory still refuses replays; trying again)"
                )
            self.failing = True
            return False
        if self.failing:
            _say(f"the replay mark is recorded in {self.path.parent} again")
            self.failing = False
        return True


def _say(line: str) -> None:
    print(f"longge: {line}", file=sys.stderr, flush=True)


class EpochStore:
    """A sender's epoch, persisted: each ``next(at_least)`` returns a number never returned
    before for this file and at least ``at_least`` (written and synced before it is returned)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def next(self, at_least: int = 0) -> int:
        epoch = max(read_epoch(self.path) + 1, at_least)
        if epoch >= COUNTER_SPACE:
            raise SecurityError(f"{self.path}: epochs exhausted; generate a new key")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            _write_atomic(self.path, f"{epoch}\n", sync=True)
        except OSError as exc:
            raise SecurityError(f"cannot record the sealing epoch in {self.path}: {exc}") from exc
        return epoch


def check_state_dir(path: str | Path) -> None:
    """Refuse to start sealing where the epoch cannot be recorded (a clear error up front
    rather than a radio process that dies at its first packet)."""
    d = Path(path)
    try:
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        st = d.lstat()
        if not stat.S_ISDIR(st.st_mode) or st.st_uid not in (0, os.geteuid()):
            raise ConfigError(
                "security.state_dir",
                str(d),
                f"a directory of root's (or of the user the daemon runs as), not a link: "
                f"whoever owns it can roll the nonce epochs back (chown root {d})",
            )
        if st.st_mode & 0o022:
            raise ConfigError(
                "security.state_dir",
                str(d),
                f"a directory others cannot write in: it is {st.st_mode & 0o777:03o} "
                f"(chmod 700 {d})",
            )
        # a probe of its own: the testbed's two daemons share one directory, and with one
        # name for both, one unlinked the other's probe (a start that failed 1 in ~20)
        with tempfile.NamedTemporaryFile(dir=d, prefix=".longge-write-test-"):
            pass
    except OSError as exc:
        raise ConfigError(
            "security.state_dir",
            str(d),
            f"a writable directory (nonce epochs and replay marks live there): {exc.strerror}",
        ) from exc


def identities(cfg: NodeConfig, peer: PeerConfig) -> tuple[str, str]:
    """This node's identity and its peer's: their link addresses."""
    return str(ipaddress.ip_interface(cfg.address).ip), str(ipaddress.ip_address(peer.address))


def node_epoch_file(cfg: NodeConfig, peer: PeerConfig) -> Path:
    own, them = identities(cfg, peer)
    return Path(cfg.state_dir) / f"{cfg.tun}.{own}-{them}.tx-epoch"


def node_mark_file(cfg: NodeConfig, peer: PeerConfig) -> Path:
    own, them = identities(cfg, peer)
    return Path(cfg.state_dir) / f"{cfg.tun}.{them}-{own}.rx-mark"


def make_sealer(cfg: NodeConfig, peer: PeerConfig) -> Sealer | None:
    """The sealer for what this node sends ``peer`` (None on an open link); its epoch is
    recorded before first use."""
    if peer.key is None:
        return None
    own, them = identities(cfg, peer)
    return Sealer(direction_key(peer.key, own, them), EpochStore(node_epoch_file(cfg, peer)).next)


def control_seal(cfg: NodeConfig, peer: PeerConfig, side: str) -> ControlSeal:
    """How the stream ARQ's control frames to and from ``peer`` are sealed and opened in this
    process: ``side`` "tx" (the sender: its RESETs out, the peer's ACKs and RESYNCs in) or
    "rx" (the receiver: its ACKs and RESYNCs out, the peer's RESETs in). Secured: keyed and
    fresh, with a control epoch of this side's recorded before first use (arq_frames.py); an
    open link: the CRC-8."""
    if peer.key is None:
        return Crc8Seal()
    own, them = identities(cfg, peer)
    out = control_key(direction_key(peer.key, own, them))
    ins = tuple(
        control_key(direction_key(k, them, own))
        for k in (peer.key, peer.previous_key)
        if k is not None
    )
    epoch = EpochStore(Path(cfg.state_dir) / f"{cfg.tun}.{own}-{them}.arq-{side}-epoch").next()
    return KeyedSeal(out, ins, epoch)


def make_opener(cfg: NodeConfig, peer: PeerConfig) -> Opener | None:
    """The opener for what ``peer`` sends (None on an open link): its direction key (and the
    previous one while rotating), with the replay mark kept in the state directory."""
    if peer.key is None:
        return None
    own, them = identities(cfg, peer)
    keys = [direction_key(k, them, own) for k in (peer.key, peer.previous_key) if k is not None]
    store = MarkStore(node_mark_file(cfg, peer))
    return Opener(keys, store.load(), store.save, clock=time.monotonic)


def check(cfg: NodeConfig) -> None:
    """Before the radio processes start: the state directory is writable and its files are
    what they say (a clear error now, not a radio process that dies at its first packet)."""
    check_state_dir(cfg.state_dir)
    for peer in cfg.peers:
        read_epoch(node_epoch_file(cfg, peer))
        read_mark(node_mark_file(cfg, peer))
