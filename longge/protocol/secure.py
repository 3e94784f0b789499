"""Authenticated encryption of packets over the radio: ChaCha20-Poly1305, pre-shared key.

The radio link is open air: anyone with an nRF24L01+ on the right channel and address can
send frames. With a key, each packet handed to the fragmenter is sealed::

    stamp (4) || epoch (4) || counter (4) || salt (4) || ChaCha20-Poly1305(packet) || tag (16)

and the receiver delivers only packets that authenticate under the link's key and have not
been seen before. Overhead: ``OVERHEAD`` = 32 bytes per packet, nothing per frame.

Keys
    One 256-bit pre-shared key per pair of nodes (``./run.sh keygen``). Each direction seals
    with its own key, derived with HKDF-SHA256 from the key and the two nodes' identities (their
    link addresses: info ``longge/2 10.24.0.2->10.24.0.1``), not their roles: a packet sent one
    way is never accepted the other way (reflection). The addresses are no secret: two mobiles
    that shared one key could each derive the other's direction keys (read its packets, send as
    it), so a base refuses two peers with one key (config.py).
Nonces
    nonce = epoch || counter || salt, the 12 bytes in front of the ciphertext. The counter counts
    packets within an epoch; the epoch is read from a state file, incremented and written
    (fsync) before a sender seals its first packet, and again if the counter ever wraps, so a
    restarted sender never reuses a nonce (no real-time clock needed: a Pi has none). The salt
    is 32 random bits drawn with each epoch: a sender whose state file was rolled back (an SD
    card image restored, a cloned node) repeats an epoch, but not with the same salt (one
    chance in 2^32 per repeated epoch). It costs 4 bytes per packet.
Replays
    The receiver keeps the highest (epoch, counter) it accepted as one 64-bit number, that
    epoch's salt, and a bitmap of the ``WINDOW`` numbers below it (as IPsec's anti-replay
    window). Anything older, already seen, or of another incarnation of the epoch (another salt)
    is dropped. The mark is written to a state file at most once a second; a floor (the same
    record) is written and synced at every new epoch and every ``FLOOR_EVERY_S``: a restarted
    receiver goes on refusing what it had accepted, except, after a power cut that emptied the
    unsynced mark, the packets since the floor was last synced.
Stale senders
    An authentic packet from an epoch before the current one is a replay, or a sender that
    restarted with an older state (a restored card): both are dropped (``stale``), and
    ``Opener.stale_floor`` says which epoch the sender must move past, and which epoch and salt
    the refused packet had (``Floor``). The daemon sends it back (``floor_message``) and the
    sender skips ahead (``Sealer.skip_past``) only if the refused packet was sealed under its
    own epoch and salt: the restored sender moves and the link comes back, while a stranger's
    replay of an old packet moves nobody (it moved the genuine sender to a new epoch, an fsync
    on its side and a synced floor on ours, once a second for as long as it went on).
A restarted receiver
    The mark on disk may lag what was accepted (it is written at most once a second, synced
    every ``FLOOR_EVERY_S``): after a kill -9 or a power cut the packets since could be
    replayed once. So a receiver that starts from a recorded mark takes that epoch as closed,
    as a sender's epoch is never used again once it restarts: its packets are stale, the sender
    is told the floor and moves to a new epoch (one round trip), and nothing sealed under the
    old one is accepted again, however late the mark was written. Unless the mark is whole: a
    clean stop records it synced with all it accepted (``flush``: ``Mark.whole``), and the
    receiver goes on in that epoch, after recording at once (synced) that its mark is no longer
    whole, so that an unclean end after this start closes the epoch again. A clean restart so
    costs the peer's sender nothing; a kill -9 or a power cut costs it a new epoch.

First frames
    A packet's frames come one by one, and the AEAD can judge it only once all are in; but a
    receiver rebuilding a packet must decide at once what a new first frame in the same place
    means (the sender started over, or the next packet began). A stranger who sent a first
    frame after each genuine one cost every packet (``experiment hostile``'s ``first``: 0.00 of
    the goodput). So the first frame proves itself: the stamp is BLAKE2s-32, under a key
    derived from the direction's key, of the packet's number (the fragmenter's 2 bytes, which
    pick its place in the reassembler) and the nonce, all in the first frame (the fragmenter's
    number, stamp and nonce: 18 bytes, so a secured link's frames are at least 19 bytes:
    config.py). ``Opener.first`` checks it and says how fresh the packet is (epoch || counter);
    a first frame takes the place of a packet in progress only if it checks and is fresher
    (``reassembler.py``). A replayed genuine first frame is no fresher; a forged one does not
    check (one chance in 2^32). 4 bytes per packet.

Nothing about a packet that fails authentication is kept: a forger cannot move the window,
the reassembler's state or any counter but the drop counters.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import secrets
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from longge.errors import ConfigError, LongGeError

KEY_LEN = 32
SEQ_LEN = 8  # epoch || counter
SALT_LEN = 4
#: The nonce, sent in front of each sealed packet: epoch || counter || salt.
HEADER_LEN = SEQ_LEN + SALT_LEN
TAG_LEN = 16
#: The first frame's proof (the module's "First frames"), in front of the nonce.
STAMP_LEN = 4
#: What a packet's first frame must hold of the sealed packet: stamp and nonce.
FIRST_HEAD = STAMP_LEN + HEADER_LEN
#: Bytes sealing adds to each packet.
OVERHEAD = STAMP_LEN + HEADER_LEN + TAG_LEN
#: How far below the highest accepted number a late (unseen) packet is still accepted.
WINDOW = 64
COUNTER_SPACE = 1 << 32
#: The replay mark's range: (epoch << 32) | counter.
MARK_SPACE = 1 << 64
SAVE_EVERY_S = 1.0
#: How often the receiver's floor is synced to disk (and at every new epoch).
FLOOR_EVERY_S = 10.0
#: A link-control packet (never an IP packet: version 0), sealed like any other: the epoch the
#: peer's sender must move past.
FLOOR_MAGIC = b"\x00LGfloor"


class SecurityError(LongGeError):
    """Sealing cannot go on safely (e.g. the epoch state cannot be written)."""


class SecureDrop(enum.StrEnum):
    SHORT = "short"  # too short to hold a sequence number and a tag
    AUTH = "auth"  # the tag does not verify: forged, corrupted, or another key
    REPLAY = "replay"  # authentic but already accepted, or older than the window
    STALE = "stale"  # authentic, from an earlier epoch (or another salt): replayed or restored
    # first frames (``Opener.first``), refused before they cost a packet in progress anything
    FORGED_FIRST = "forged_first"  # its stamp does not check (or too short to hold one)
    REPLAYED_FIRST = "replayed_first"  # authentic, of a packet accepted or older than the window


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


def direction_key(psk: bytes, sender: str, receiver: str) -> bytes:
    """The key one direction seals with: derived from the pair's key and the two nodes'
    identities (their link addresses), sender first."""
    if not sender or not receiver or sender == receiver:
        raise ValueError(f"two different node identities, not {sender!r} and {receiver!r}")
    info = f"longge/2 {sender}->{receiver}".encode()
    return HKDF(algorithm=hashes.SHA256(), length=KEY_LEN, salt=None, info=info).derive(psk)


def keyed_hash(key: bytes, data: bytes, size: int = KEY_LEN) -> bytes:
    """BLAKE2s of ``data`` under ``key``, ``size`` bytes: a key of its own for one purpose
    (``data``: the purpose's name, full size), or a short tag (a first frame's stamp, a stream
    ARQ control frame's: arq_frames.py)."""
    return hashlib.blake2s(data, key=key, digest_size=size).digest()


def stamp_key(key: bytes) -> bytes:
    """The key of a direction's first-frame stamps, apart from its packet key."""
    return keyed_hash(key, b"longge/first-frame")


def stamp(key: bytes, number: int, nonce: bytes) -> bytes:
    """A first frame's proof: BLAKE2s-32 of the packet's number (2 bytes) and nonce."""
    return keyed_hash(key, number.to_bytes(2, "big") + nonce, STAMP_LEN)


class Floor(NamedTuple):
    """What a receiver tells a stale sender: seal past ``epoch``; the packet it refused was
    sealed under epoch ``refused`` with ``salt`` (the sender moves only if that is its own)."""

    epoch: int
    refused: int
    salt: bytes


def floor_message(floor: Floor) -> bytes:
    """The link-control packet that tells the peer's sender its floor."""
    return (
        FLOOR_MAGIC + floor.epoch.to_bytes(4, "big") + floor.refused.to_bytes(4, "big") + floor.salt
    )


def parse_floor_message(packet: bytes) -> Floor | None:
    """The floor in a floor message, or None if ``packet`` is not one."""
    if len(packet) != len(FLOOR_MAGIC) + 8 + SALT_LEN or not packet.startswith(FLOOR_MAGIC):
        return None
    at = len(FLOOR_MAGIC)
    epoch, refused = (int.from_bytes(packet[i : i + 4], "big") for i in (at, at + 4))
    return Floor(epoch, refused, packet[at + 8 :])


@dataclass(frozen=True)
class Mark:
    """A receiver's replay mark: the highest (epoch << 32 | counter) it accepted and that
    epoch's salt (what a state file keeps: ``longge.daemon.keystate``)."""

    seq: int = 0
    salt: bytes = bytes(SALT_LEN)
    #: recorded on a clean stop: nothing accepted is missing from it (``Opener.flush``)
    whole: bool = False


class Sealer:
    """Seals outgoing packets. ``next_epoch(at_least)`` returns an epoch never returned before
    and at least ``at_least`` (recorded first: ``keystate.EpochStore.next``); it is called
    before the first packet, when the counter wraps, and when the peer says our epoch is stale
    (``skip_past``). ``salt``: where the per-epoch random salt comes from."""

    def __init__(
        self,
        key: bytes,
        next_epoch: Callable[[int], int],
        salt: Callable[[int], bytes] = secrets.token_bytes,
    ) -> None:
        self._aead = ChaCha20Poly1305(key)
        self._stamp_key = stamp_key(key)
        self._next_epoch = next_epoch
        self._salt_source = salt
        self._counter = 0
        self.sealed = 0
        self._new_epoch(0)

    def _new_epoch(self, at_least: int) -> None:
        self._epoch = self._next_epoch(at_least)
        self._salt = self._salt_source(SALT_LEN)
        self._counter = 0

    @property
    def epoch(self) -> int:
        return self._epoch

    @property
    def salt(self) -> bytes:
        return self._salt

    def skip_past(self, floor: Floor) -> bool:
        """The peer refused a packet of ours as stale (we restarted with an older state, or it
        restarted: ``Opener``): seal under an epoch past ``floor.epoch`` from the next packet
        on, if the packet refused was sealed under our epoch and salt (a replay of an older
        one of ours moves nothing). True if that moved us."""
        if (floor.refused, floor.salt) != (self._epoch, self._salt):
            return False
        if floor.epoch < self._epoch or floor.epoch >= COUNTER_SPACE - 1:
            return False
        self._new_epoch(floor.epoch + 1)
        return True

    def seal(self, packet: bytes, number: int) -> bytes:
        """``packet`` sealed, to be sent as the fragmenter's packet ``number``
        (``Fragmenter.number_for``): its first frame's stamp covers the number."""
        if self._counter >= COUNTER_SPACE:
            self._new_epoch(0)
        header = self._epoch.to_bytes(4, "big") + self._counter.to_bytes(4, "big") + self._salt
        self._counter += 1
        self.sealed += 1
        head = stamp(self._stamp_key, number, header) + header  # (authenticated data too)
        return head + self._aead.encrypt(header, packet, head)


class Opener:
    """Checks and opens incoming packets; ``open`` returns the packet or ``None`` (counted in
    ``drops``). ``keys``: the current direction key first, then any previous one still
    accepted during a key rotation. ``mark``: where the receiver stopped last time; ``save``
    (optional) records the mark: ``save(mark, sync)``, called with ``sync`` for the floor (every
    new epoch, every FLOOR_EVERY_S) and without it at most every SAVE_EVERY_S (``clock``)."""

    def __init__(
        self,
        keys: Sequence[bytes],
        mark: Mark | None = None,
        save: Callable[[Mark, bool], bool] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        if not keys:
            raise ValueError("at least one key")
        self._aeads = [ChaCha20Poly1305(k) for k in keys]
        self._stamp_keys = [stamp_key(k) for k in keys]
        self.drops: Counter[SecureDrop] = Counter()
        self.opened = 0
        #: packets not (yet) received: sealing numbers skipped by a later packet (a new
        #: epoch's from its first, 0), less those that came late within the window (lost on
        #: the way, or given up by the sender after they were sealed)
        self.missing = 0
        self._save = save
        self._clock = clock
        start = mark or Mark()
        self._highest = start.seq
        self._salt = start.salt
        # Everything at or below a stored mark counts as seen, and its epoch is closed (the
        # module's "A restarted receiver").
        self._bitmap = (1 << WINDOW) - 1 if self._highest else 0
        self._closed = bool(self._highest) and not start.whole
        if start.whole and save is not None:  # (an unclean end after this start: closed)
            save(Mark(self._highest, self._salt), True)
        self._stale_seen = Floor(0, 0, bytes(SALT_LEN))  # (epoch, salt of the last stale one)
        self._saved = self._synced = self._highest
        self._saved_at = self._synced_at = self._now()

    def _now(self) -> float:
        return self._clock() if self._clock is not None else 0.0

    @property
    def highest(self) -> int:
        return self._highest

    @property
    def stale_floor(self) -> Floor:
        """What to tell a stale sender (``floor_message``): seal past the current mark's epoch
        (authentic packets of it under another salt, or of a closed or earlier one, are stale),
        naming the epoch and salt of the last stale packet."""
        return self._stale_seen._replace(epoch=self._highest >> 32)

    @property
    def mark(self) -> Mark:
        return Mark(self._highest, self._salt)

    def _seen(self, seq: int, salt: bytes) -> bool:
        """Refused without a look at the tag: already accepted, or older than the window, in
        the current epoch and incarnation."""
        if seq > self._highest or seq >> 32 != self._highest >> 32 or salt != self._salt:
            return False
        back = self._highest - seq
        return back >= WINDOW or bool(self._bitmap >> back & 1)

    def first(self, number: int, head: bytes) -> int | None:
        """A packet's first frame (``head``: what it holds of the sealed packet, the stamp and
        nonce first), to be packet ``number``: how fresh it is ((epoch << 32) | counter), or
        None if its stamp does not check or it is of a packet accepted already (counted). The
        packet itself is judged once whole (``open``)."""
        if len(head) < FIRST_HEAD:
            self.drops[SecureDrop.FORGED_FIRST] += 1
            return None
        proof, nonce = head[:STAMP_LEN], head[STAMP_LEN:FIRST_HEAD]
        if not any(hmac.compare_digest(stamp(k, number, nonce), proof) for k in self._stamp_keys):
            self.drops[SecureDrop.FORGED_FIRST] += 1
            return None
        seq = int.from_bytes(nonce[:SEQ_LEN], "big")
        if self._seen(seq, nonce[SEQ_LEN:]):
            self.drops[SecureDrop.REPLAYED_FIRST] += 1
            return None
        return seq

    def open(self, data: bytes) -> bytes | None:
        """A whole sealed packet (stamp first: checked with its first frame, ``first``)."""
        if len(data) < OVERHEAD:
            self.drops[SecureDrop.SHORT] += 1
            return None
        head, header = data[:FIRST_HEAD], data[STAMP_LEN:FIRST_HEAD]
        seq = int.from_bytes(header[:SEQ_LEN], "big")
        salt = header[SEQ_LEN:]
        if self._seen(seq, salt):  # cheap check first
            self.drops[SecureDrop.REPLAY] += 1
            return None
        for aead in self._aeads:
            try:
                packet = aead.decrypt(header, data[FIRST_HEAD:], head)
            except InvalidTag:
                continue
            if not self._current(seq, salt):
                self.drops[SecureDrop.STALE] += 1
                self._stale_seen = Floor(0, seq >> 32, salt)
                return None
            self._accept(seq, salt)
            self.opened += 1
            return packet
        self.drops[SecureDrop.AUTH] += 1
        return None

    def _current(self, seq: int, salt: bytes) -> bool:
        """An authentic packet's epoch is the current one (same salt, not closed by a restart)
        or a later one."""
        epoch, mine = seq >> 32, self._highest >> 32
        if epoch > mine:
            return True
        return epoch == mine and salt == self._salt and self._highest > 0 and not self._closed

    def _accept(self, seq: int, salt: bytes) -> None:
        if seq > self._highest:
            shift = seq - self._highest
            new_epoch = seq >> 32 != self._highest >> 32  # (same epoch: same salt, _current)
            if shift >= WINDOW or new_epoch:  # (a new epoch jumps by 2^32: never shift that far)
                self._bitmap = 1
            else:
                self._bitmap = ((self._bitmap << shift) | 1) & ((1 << WINDOW) - 1)
            if self._highest:  # (a receiver that starts fresh knows no gap)
                # a new epoch's numbers start at 0 (Sealer): those below the first heard
                self.missing += seq % COUNTER_SPACE if new_epoch else shift - 1
            self._highest, self._salt = seq, salt
            self._closed = False
            self._maybe_save(sync=new_epoch)
        else:
            self._bitmap |= 1 << (self._highest - seq)
            self.missing = max(0, self.missing - 1)  # (a hole filled: it came late)

    def _maybe_save(self, sync: bool = False) -> None:
        if self._save is None or self._highest == self._saved:
            return
        now = self._now()
        sync = sync or (self._clock is not None and now - self._synced_at >= FLOOR_EVERY_S)
        if not sync and self._clock is not None and now - self._saved_at < SAVE_EVERY_S:
            return
        if not self._save(self.mark, sync):
            return  # try again next time; the window in memory still protects
        self._saved, self._saved_at = self._highest, now
        if sync:
            self._synced, self._synced_at = self._highest, now

    def flush(self) -> None:
        """Record the mark now, synced and whole (on a clean stop: the module's "A restarted
        receiver")."""
        if self._save is None or not self._highest:
            return
        if self._save(Mark(self._highest, self._salt, whole=True), True):
            self._saved = self._synced = self._highest

    def tick(self) -> None:
        """Record a mark that waited for the once-a-second limit (call from an idle loop)."""
        self._maybe_save()
