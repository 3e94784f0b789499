"""Authenticated encryption of packets over the radio: ChaCha20-Poly1305, pre-shared key.

The radio link is open air: anyone with an nRF24L01+ on the right channel and address can
send frames. With a key, each packet handed to the fragmenter is sealed::

    epoch (4 bytes) || counter (4 bytes) || ChaCha20-Poly1305(packet) || tag (16 bytes)

and the receiver delivers only packets that authenticate under the link's key and have not
been seen before. Overhead: ``OVERHEAD`` = 24 bytes per packet, nothing per frame.

Keys
    One 256-bit pre-shared key per link (``./run.sh keygen``). Each direction seals with its own
    key, derived with HKDF-SHA256 (info ``longge/1 base->mobile`` or ``mobile->base``), so a
    packet sent one way is never accepted the other way (reflection).
Nonces
    nonce = 4 zero bytes || epoch || counter. The counter counts packets within an epoch; the
    epoch is read from a state file, incremented and written (fsync) before a sender seals its
    first packet, and again if the counter ever wraps. A restarted sender therefore never reuses
    a nonce under the same key, even after power loss (no real-time clock needed: a Pi has
    none).
Replays
    The receiver keeps the highest (epoch, counter) it accepted as one 64-bit number and a
    bitmap of the ``WINDOW`` numbers below it (as IPsec's anti-replay window). Anything older,
    or already seen, is dropped. The high-water mark is written to a state file at most once a
    second (and on every new epoch), so a restarted receiver goes on refusing what it had
    accepted, except, after a crash, packets of the last second before it.

Nothing about a packet that fails authentication is kept: a forger cannot move the window,
the reassembler's state or any counter but the drop counters.
"""

from __future__ import annotations

import enum
import os
import secrets
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from longge.errors import ConfigError, LongGeError

KEY_LEN = 32
SEQ_LEN = 8
TAG_LEN = 16
#: Bytes sealing adds to each packet.
OVERHEAD = SEQ_LEN + TAG_LEN
#: How far below the highest accepted number a late (unseen) packet is still accepted.
WINDOW = 64
COUNTER_SPACE = 1 << 32
#: The replay mark's range: (epoch << 32) | counter.
MARK_SPACE = 1 << 64
SAVE_EVERY_S = 1.0


class SecurityError(LongGeError):
    """Sealing cannot go on safely (e.g. the epoch state cannot be written)."""


class SecureDrop(enum.StrEnum):
    SHORT = "short"  # too short to hold a sequence number and a tag
    AUTH = "auth"  # the tag does not verify: forged, corrupted, or another key
    REPLAY = "replay"  # authentic but already accepted, or older than the window


def parse_key(text: str, key: str = "security.key") -> bytes:
    """A key as written in configs and key files: 64 hex digits (whitespace ignored)."""
    clean = "".join(text.split())
    try:
        raw = bytes.fromhex(clean)
    except ValueError as exc:
        raise ConfigError(key, "<hidden>", "64 hex digits (./run.sh keygen makes one)") from exc
    if len(raw) != KEY_LEN:
        raise ConfigError(key, f"<{len(raw)} bytes>", "64 hex digits = 32 bytes")
    if raw == bytes(KEY_LEN):
        raise ConfigError(key, "<all zero>", "a random key (./run.sh keygen)")
    return raw


def generate_key() -> str:
    return secrets.token_hex(KEY_LEN)


def direction_key(psk: bytes, sender_role: str) -> bytes:
    """The key one direction seals with: derived from the link key and the sender's role."""
    if sender_role not in ("base", "mobile"):
        raise ValueError(f"unknown role {sender_role!r}")
    receiver = "mobile" if sender_role == "base" else "base"
    info = f"longge/1 {sender_role}->{receiver}".encode()
    return HKDF(algorithm=hashes.SHA256(), length=KEY_LEN, salt=None, info=info).derive(psk)


def _write_atomic(path: Path, text: str, sync: bool) -> None:
    """``text`` in ``path``, whole or not at all; ``sync``: on disk before returning, also
    across a power cut (the epoch). Without it (the replay mark, once a second: an fsync on a
    Pi's SD card can hold the RX process for tens of ms) a power cut may leave it empty."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as f:
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


def _read_int(path: Path, limit: int, empty_ok: bool = False) -> int:
    """The number in ``path`` (0 if there is no file), in 0..limit-1. A file that is there but
    empty, negative or too large is refused: the epoch, read as 0, would start over and reuse
    nonces under the same key (it is written synced: a power cut cannot empty it). ``empty_ok``:
    an empty file reads as 0 (the replay mark, written unsynced: a power cut may empty it, and
    then packets older than the last start may be taken once, as before it was kept)."""
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return 0
    except (OSError, UnicodeDecodeError) as exc:
        raise SecurityError(f"cannot read {path}: {exc}") from exc
    if not text and empty_ok:
        return 0
    try:
        value = int(text)
        if not 0 <= value < limit:
            raise ValueError
    except ValueError as exc:
        raise SecurityError(
            f"{path}: {text[:20]!r} is not a number in 0..{limit - 1}; remove it only together "
            "with the key (make a new one: ./run.sh keygen)"
        ) from exc
    return value


def check_state_file(path: str | Path, limit: int, empty_ok: bool = False) -> None:
    """Refuse to start on an epoch or replay-mark file that is not one (see _read_int)."""
    _read_int(Path(path), limit, empty_ok)


def check_state_dir(path: str | Path) -> None:
    """Refuse to start sealing where the epoch cannot be recorded (a clear error up front
    rather than a radio process that dies at its first packet)."""
    d = Path(path)
    try:
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
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


class EpochStore:
    """The sender's epoch, persisted: each ``next()`` returns a number never returned before
    for this file (written and synced to disk before it is returned)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def next(self) -> int:
        epoch = _read_int(self.path, COUNTER_SPACE) + 1
        if epoch >= COUNTER_SPACE:
            raise SecurityError(f"{self.path}: epochs exhausted; generate a new key")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            _write_atomic(self.path, f"{epoch}\n", sync=True)
        except OSError as exc:
            raise SecurityError(f"cannot record the sealing epoch in {self.path}: {exc}") from exc
        return epoch


class Sealer:
    """Seals outgoing packets. ``next_epoch`` is called before the first packet and whenever
    the counter wraps (an ``EpochStore.next``)."""

    def __init__(self, key: bytes, next_epoch: Callable[[], int]) -> None:
        self._aead = ChaCha20Poly1305(key)
        self._next_epoch = next_epoch
        self._epoch = next_epoch()
        self._counter = 0
        self.sealed = 0

    @property
    def epoch(self) -> int:
        return self._epoch

    def seal(self, packet: bytes) -> bytes:
        if self._counter >= COUNTER_SPACE:
            self._epoch = self._next_epoch()
            self._counter = 0
        seq = self._epoch.to_bytes(4, "big") + self._counter.to_bytes(4, "big")
        self._counter += 1
        self.sealed += 1
        return seq + self._aead.encrypt(bytes(4) + seq, packet, None)


class Opener:
    """Checks and opens incoming packets; ``open`` returns the packet or ``None`` (counted in
    ``drops``). ``keys``: the current direction key first, then any previous one still
    accepted during a key rotation. ``state`` (optional) keeps the replay high-water mark
    across restarts."""

    def __init__(
        self,
        keys: Sequence[bytes],
        state: str | Path | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        if not keys:
            raise ValueError("at least one key")
        self._aeads = [ChaCha20Poly1305(k) for k in keys]
        self.drops: Counter[SecureDrop] = Counter()
        self.opened = 0
        self.state = Path(state) if state is not None else None
        self._clock = clock
        self._highest = _read_int(self.state, MARK_SPACE, empty_ok=True) if self.state else 0
        # Everything at or below a stored mark counts as seen.
        self._bitmap = (1 << WINDOW) - 1 if self._highest else 0
        self._saved = self._highest
        self._saved_at = 0.0

    @property
    def highest(self) -> int:
        return self._highest

    def _seen(self, seq: int) -> bool:
        if seq > self._highest:
            return False
        back = self._highest - seq
        return back >= WINDOW or bool(self._bitmap >> back & 1)

    def open(self, data: bytes) -> bytes | None:
        if len(data) < OVERHEAD:
            self.drops[SecureDrop.SHORT] += 1
            return None
        seq_bytes = data[:SEQ_LEN]
        seq = int.from_bytes(seq_bytes, "big")
        if self._seen(seq):  # cheap check first; repeated after authentication
            self.drops[SecureDrop.REPLAY] += 1
            return None
        nonce = bytes(4) + seq_bytes
        for aead in self._aeads:
            try:
                packet = aead.decrypt(nonce, data[SEQ_LEN:], None)
            except InvalidTag:
                continue
            self._accept(seq)
            self.opened += 1
            return packet
        self.drops[SecureDrop.AUTH] += 1
        return None

    def _accept(self, seq: int) -> None:
        if seq > self._highest:
            shift = seq - self._highest
            if shift >= WINDOW:  # (a new epoch jumps by 2^32: never shift that far)
                self._bitmap = 1
            else:
                self._bitmap = ((self._bitmap << shift) | 1) & ((1 << WINDOW) - 1)
            new_epoch = seq >> 32 != self._highest >> 32
            self._highest = seq
            self._maybe_save(force=new_epoch)
        else:
            self._bitmap |= 1 << (self._highest - seq)

    def _maybe_save(self, force: bool = False) -> None:
        if self.state is None or self._highest == self._saved:
            return
        now = self._clock() if self._clock is not None else 0.0
        if not force and self._clock is not None and now - self._saved_at < SAVE_EVERY_S:
            return
        try:
            self.state.parent.mkdir(parents=True, exist_ok=True)
            _write_atomic(self.state, f"{self._highest}\n", sync=force)
        except OSError:
            return  # try again next time; the window in memory still protects
        self._saved = self._highest
        self._saved_at = now

    def flush(self) -> None:
        """Write the high-water mark now (on a clean stop)."""
        self._maybe_save(force=True)

    def tick(self) -> None:
        """Write a mark that waited for the once-a-second limit (call from an idle loop)."""
        self._maybe_save()
