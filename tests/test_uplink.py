"""The shared uplink: the base grants it to one mobile at a time; a mobile sends only in its
grants and ends each with a release (early when it has nothing to send); the base grants the
next mobile once it heard the release; a mobile sends freely when no base grants."""

from __future__ import annotations

import itertools

import pytest

from longge.protocol.uplink import (
    ANSWER_S,
    DRAIN_S,
    FREE_AFTER_S,
    UplinkPermit,
    asks_answer,
    grant_message,
    parse_grant,
    parse_release,
    release_message,
)
from longge.protocol.uplink_hold import HOLD_S, PROBE_AFTER_S, RENEW_BEFORE_S
from longge.protocol.uplink_scheduler import (
    ACTIVE_MAX_BUSY_DOWN_S,
    ACTIVE_MAX_S,
    ANSWER_ASIDE_S,
    ARRIVING_MAX_S,
    DEFER_MAX_S,
    GRANT_LONG_S,
    GRANT_S,
    IDLE_FIRST_S,
    IDLE_MAX_S,
    PROBE_S,
    RELEASE_WAIT_S,
    REVOKE_AFTER_S,
    REVOKE_S,
    SILENT_FIRST_S,
    SILENT_MAX_S,
    UplinkScheduler,
)

TURN = GRANT_S + RELEASE_WAIT_S  # a grant whose release was not heard


def test_a_grant_says_its_length_and_number_and_nothing_else_parses_as_one() -> None:
    assert parse_grant(grant_message(0.020)) == (0.020, False, 0, False)
    assert parse_grant(grant_message(0.050, hold=True, number=7)) == (0.050, True, 7, False)
    assert parse_grant(grant_message(5.0, number=300)) == (1.0, False, 44, False)  # (<= 1 s)
    assert parse_grant(grant_message(1.0, True, 9, deaf=True)) == (1.0, True, 9, True)
    assert parse_grant(grant_message(0.001, deaf=True)) == (0.001, False, 0, True)
    for junk in (
        b"",
        b"\x00LGgrant",
        b"\x00LGgrant\x00\x00",
        b"\x00LGgrant\x00\x14",  # (no number)
        b"\x00LGgrant\x00\x00\x01",
        b"\x00LGgrant\x00\x14\x01\x02",
        b"\x00LGgranT\x00\x14\x01",
        b"\x00LGgrant\xff\xff\x01",
        b"\x00LGgrant\x80\x00\x01",  # (held, but no length)
        b"\x00LGgrant\x40\x00\x01",  # (deaf, but no length)
        b"\x00LGgrant\x23\xe9\x01",  # (1001 ms beside a bit no grant has)
        release_message(3),
    ):
        assert parse_grant(junk) is None
    assert parse_release(release_message(3)) == 3 and parse_release(release_message(256)) == 0
    for junk in (b"\x00LGdone", b"\x00LGdone\x01\x02", grant_message(0.02, number=3)):
        assert parse_release(junk) is None


def test_a_late_release_ends_no_later_grant() -> None:
    """Stream mode delivers in order: a release behind a lost frame comes after its
    retransmission, perhaps in the mobile's next grant. It names its grant, and ends only that
    one (counted otherwise): the base does not grant another mobile while this one sends."""
    s = UplinkScheduler(2)
    assert s.due(0.0) == 0
    first = s.number
    s.released(0, 0.040, first)  # (its time was up)
    assert s.due(0.041) == 1
    s.released(1, 0.050, s.number)
    assert s.due(0.051) == 0
    s.released(0, 0.052, first)  # the first grant's release, once more (late)
    assert s.due(0.053) is None and s.holder == 0  # mobile 0 holds on
    assert s.counters.stale_releases == 1
    s.released(0, 0.060, s.number)
    assert s.due(0.061) == 1


def test_busy_mobiles_take_the_uplink_in_turn_each_till_its_release() -> None:
    s = UplinkScheduler(3, grant_long_s=GRANT_S)
    now, holders = 0.0, []
    for _ in range(9):
        i = s.due(now)
        assert i is not None and s.due(now + GRANT_S) is None  # the grant runs
        s.heard(i)  # it sends ...
        now += GRANT_S + 0.0015  # (its release came a little late: it heard its grant late)
        assert s.due(now) is None  # the next waits for the release, not for a clock
        s.released(i, now)
        holders.append(i)
    assert holders == [0, 1, 2] * 3 and s.counters.silent == 0


def test_a_lost_release_holds_the_uplink_only_release_wait_s_longer() -> None:
    s = UplinkScheduler(2, grant_long_s=GRANT_S)
    assert s.due(0.0) == 0
    s.heard(0)
    assert s.due(TURN - 1e-6) is None and s.due(TURN) == 1


def test_a_mobile_with_nothing_to_send_hands_its_grant_back_at_once() -> None:
    s = UplinkScheduler(2, grant_long_s=GRANT_S)
    assert s.due(0.0) == 0
    s.released(0, 0.002)
    assert s.due(0.003) == 1  # no waiting for the rest of mobile 0's grant
    assert s.counters.releases == 1


def test_a_silent_mobile_is_asked_less_and_less_often_and_at_once_when_heard() -> None:
    s = UplinkScheduler(2, grant_long_s=GRANT_S)
    now = 0.0
    asked0: list[float] = []
    while now < 10.0:
        i = s.due(now)
        if i == 0:
            asked0.append(now)  # never answers
        elif i == 1:
            s.heard(1)
        now += 0.0005
    gaps = [b - a for a, b in itertools.pairwise(asked0)]
    assert gaps[0] >= SILENT_FIRST_S and max(gaps) <= SILENT_MAX_S + 2 * TURN
    assert len(asked0) < 25  # 10 s: about 10 asks once backed off to 1 s, not 250
    # the busy mobile held the uplink nearly all the time
    assert s.counters.grants - len(asked0) >= 0.9 * 10.0 / TURN
    s.heard(0)  # it came back (heard outside a grant): asked at its next turn
    t = now + 1
    nxt = [s.due(t), s.due(t + TURN), s.due(t + 2 * TURN)]
    assert 0 in nxt


def test_a_silent_mobile_alone_leaves_the_scheduler_idle_until_its_retry() -> None:
    s = UplinkScheduler(1, grant_long_s=GRANT_S)
    assert s.due(0.0) == 0
    assert s.due(TURN) is None  # silent: backed off
    assert s.wake_at(TURN) - TURN == pytest.approx(SILENT_FIRST_S)
    assert s.due(TURN + SILENT_FIRST_S) == 0


def test_an_idle_mobile_is_asked_less_often_but_next_once_the_base_sends_it_a_packet() -> None:
    s = UplinkScheduler(3, grant_long_s=GRANT_S)
    now, asked = 0.0, {0: 0, 1: 0, 2: 0}
    while now < 1.0:  # mobiles 0 and 1 busy, mobile 2 idle: hands every grant back at once
        i = s.due(now)
        if i is not None:
            asked[i] += 1
            if i != 2:
                s.heard(i)
        if s.holder == 2:
            s.released(2, now)
        now += 0.0005
    assert asked[2] <= asked[0] and abs(asked[0] - asked[1]) <= 1  # once a turn at most
    # the link idle: each mobile asked about every IDLE_MAX_S, not a storm of grants
    idle = UplinkScheduler(3, grant_long_s=GRANT_S)
    t, grants = 0.0, 0
    while t < 1.0:
        i = idle.due(t)
        if i is not None:
            grants += 1
            idle.released(i, t)
        t += 0.0005
    assert grants <= 3 * (1.0 / IDLE_MAX_S + 5)
    # a ping for mobile 2: it is next, ahead of the busy ones' turns
    while s.holder == 2 or s.holder is None:
        now += 0.0005
        s.due(now)
    s.poke(2)
    s.released(s.holder, now + GRANT_S)  # (busy: its time was up)
    assert s.due(now + GRANT_S) == 2
    s.heard(2)
    s.released(2, now + GRANT_S + 0.003)  # its answer went: the busy ones go on in turn
    assert s.due(now + GRANT_S + 0.003) in (0, 1)
    # a busy mobile (it sent till its time was up) is not put ahead by the base's packets
    order = []
    t = now + GRANT_S + 0.003
    for _ in range(8):
        if s.holder is not None and s.holder != 2:
            s.heard(s.holder)
            s.poke(s.holder)
        t += GRANT_S
        if s.holder is not None:
            s.released(s.holder, t)
        i = s.due(t)
        order.append(i)
    busy = [i for i in order if i in (0, 1)]
    assert all(a != b for a, b in itertools.pairwise(busy)), order  # in turn all the same


def test_a_silent_mobile_is_not_asked_sooner_for_the_packets_the_base_sends_it() -> None:
    s = UplinkScheduler(2, grant_long_s=GRANT_S)
    now = 0.0
    while s._state[0].silent < 4:  # mobile 0 never answers; mobile 1 is busy
        if s.due(now) == 1:
            s.heard(1)
        now += 0.0005
    retry = s._state[0].retry_at
    while now < retry - 0.001:
        s.poke(0)  # (the base sends it packets: they do not show that it lives)
        i = s.due(now)
        assert i != 0
        if i == 1:
            s.heard(1)
        now += 0.0005


def test_a_mobile_sends_only_in_its_grant_and_releases_it_before_its_end() -> None:
    p = UplinkPermit()
    assert p.may_load(0.0) and p.may_send(0.0)  # no base grants: free
    assert not p.release(0.0, idle=True)  # no grant: nothing to hand back
    p.grant(GRANT_S, 1.0)
    assert p.may_load(1.0) and not p.release(1.0, idle=False)
    assert p.wake_at(1.0) == pytest.approx(1.0 + GRANT_S - DRAIN_S)
    end = 1.0 + GRANT_S - DRAIN_S
    assert not p.may_load(end) and p.may_send(end)  # the FIFO's frames and the release go
    assert p.release(end, idle=False) and not p.release(end, idle=False)  # once
    assert not p.may_load(end) and not p.may_send(1.0 + GRANT_S)
    # between grants: nothing, until the base has stopped granting for FREE_AFTER_S
    assert not p.may_send(1.5) and not p.may_send(1.0 + FREE_AFTER_S - 0.001)
    assert p.may_send(1.0 + FREE_AFTER_S) and p.may_load(1.0 + FREE_AFTER_S)


def test_a_mobile_with_nothing_to_send_releases_at_once_and_loads_nothing_after() -> None:
    p = UplinkPermit()
    p.grant(GRANT_S, 1.0)
    assert p.release(1.001, idle=True) and not p.release(1.002, idle=True)
    assert not p.may_load(1.002)
    p.grant(GRANT_S, 1.1)
    assert p.may_load(1.1) and p.release(1.1, idle=True)


def test_a_ping_or_a_tcp_segment_asks_for_an_answer_a_udp_datagram_does_not() -> None:
    def v4(proto: int, first: int = 0) -> bytes:
        return bytes([0x45]) + bytes(8) + bytes([proto]) + bytes(10) + bytes([first]) + bytes(7)

    def v6(proto: int, first: int = 0) -> bytes:
        return bytes([0x60]) + bytes(5) + bytes([proto]) + bytes(33) + bytes([first]) + bytes(7)

    assert asks_answer(v4(1, 8)) and asks_answer(v4(6)) and asks_answer(v6(58, 128))
    assert asks_answer(v6(6))
    for quiet in (v4(1, 0), v4(17), v6(58, 129), v6(17), b"", b"\x45", b"junk" * 10):
        assert not asks_answer(quiet), quiet


def test_a_light_mobile_is_asked_more_often_while_the_downlink_is_loaded() -> None:
    """Three mobiles that sent lately (mobile 2 a packet at its first grant, the others one in
    each grant: none holds) hand back every grant after 1 ms: mobile 2 is asked again at
    most ACTIVE_MAX_S later, and at
    most ACTIVE_MAX_BUSY_DOWN_S later while the base's downlink is loaded and has nothing
    queued for it (its packets cannot go on the downlink's channel then, and asking it costs
    the idle uplink nothing)."""

    def longest_gap(downlink_busy: bool, queued: tuple[int, ...] = ()) -> float:
        s = UplinkScheduler(3, grant_long_s=GRANT_S, revoke_busy=False)
        s.downlink_busy = downlink_busy
        t, asked, sent = 0.0, [], set()
        while t < 0.5:
            i = s.due(t, 2, list(queued))  # (the radio addresses mobile 2)
            if i is not None and (i != 2 or i not in sent):
                s.heard(i, True, t)
                sent.add(i)
            asked += [t] if i == 2 else []
            if s.holder is not None and t >= s.granted_at + 0.001:
                s.released(s.holder, t)
            t += 0.0005
        return max(b - a for a, b in itertools.pairwise(asked))

    quiet, loaded = longest_gap(False), longest_gap(True)
    slack = 0.003  # (the others' grants, 1 ms each, and the step)
    assert ACTIVE_MAX_S <= quiet <= ACTIVE_MAX_S + slack
    assert ACTIVE_MAX_BUSY_DOWN_S <= loaded <= ACTIVE_MAX_BUSY_DOWN_S + slack
    # one the downlink has packets queued for is asked as before (every loaded mobile asked
    # twice as often cost five loaded ones 4 % of the downlink)
    assert ACTIVE_MAX_S <= longest_gap(True, queued=(2,)) <= ACTIVE_MAX_S + slack


def test_an_idle_mobile_the_base_addresses_anyway_is_asked_first() -> None:
    s = UplinkScheduler(3, grant_long_s=GRANT_S)
    assert s.due(0.0, prefer=2) == 2  # (no change of address for its grant)
    s.released(2, 0.001)
    assert s.due(0.001, prefer=2) in (0, 1)  # it handed back having sent nothing: backed off
    # a busy mobile is not taken out of turn by being addressed
    s2 = UplinkScheduler(2, grant_long_s=GRANT_S)
    t = 0.0
    for _ in range(2):
        i = s2.due(t)
        assert i is not None
        s2.heard(i)
        t += GRANT_S
        s2.released(i, t)  # both busy: each sent till its time was up
    assert [s2.due(t, prefer=1), s2.due(t + TURN, prefer=1)] == [0, 1]


def test_an_idle_mobile_the_downlink_will_address_waits_for_it_a_bounded_time() -> None:
    """A grant to a mobile other than the one the base's radio addresses drains the TX FIFO
    and changes the address twice: an idle mobile with packets queued on the downlink is
    granted when the radio addresses it, or DEFER_MAX_S after it was due."""
    s = UplinkScheduler(3, grant_long_s=GRANT_S)
    t = 0.0
    for i in range(3):  # each asked once, each hands its grant back having sent nothing
        assert s.due(t) == i
        t += 0.001
        s.released(i, t)
    t += IDLE_MAX_S  # every one due again
    assert s.due(t, prefer=0, soon=[1, 2]) == 0  # the addressed one: no change of address
    s.released(0, t + 0.001)
    t += 0.002
    assert s.due(t, prefer=0, soon=[1, 2]) is None  # 1 and 2 wait for the radio
    assert 0 < s.wake_at(t) - t <= DEFER_MAX_S  # (the loop does not spin meanwhile)
    assert s.due(t, prefer=1, soon=[0, 2]) == 1  # it addresses 1 now
    s.released(1, t + 0.001)
    assert s.due(t + 0.002, prefer=1, soon=[2]) is None
    granted, now = [], t + 0.002
    while 2 not in granted and now < t + 1.0:  # the radio stays on 1: 2 is not kept for ever
        i = s.due(now, prefer=1, soon=[2])
        if i is not None:
            granted.append(i)
            s.released(i, now + 0.001)
        now += 0.001
    assert 2 in granted and now <= t + IDLE_MAX_S + DEFER_MAX_S + 0.01


def test_the_only_mobile_that_sends_holds_its_grant_and_a_ping_for_another_ends_it() -> None:
    """Mobile 2 pings every 50 ms beside two idle mobiles: its echo requests waited for its
    next grant (18 ms in the median). Alone in sending, with none busy, it holds its grants
    (HOLD_S) though idle; a packet the base sends another mobile that asks for an answer ends
    the held grant early (a REVOKE_S grant); two mobiles that send, or a busy one: no hold."""
    s = UplinkScheduler(3, grant_long_s=GRANT_S)
    t = 0.0
    for i in range(3):
        assert s.due(t) == i and not s.hold
        if i == 2:
            s.heard(2)  # mobile 2 sent (a ping)
        t += 0.001
        s.released(i, t)
    t += 0.001
    held = None
    while held is None and t < 1.0:
        if s.due(t) == 2:
            held = s.hold
        elif s.holder is not None:
            s.released(s.holder, t + 0.001)
        t += 0.001
    assert held and s.length == HOLD_S
    assert s.revoke(t) is None  # nobody waits
    s.poke(0)  # the base pings mobile 0
    assert s.revoke(t) == 2 and s.revoke(t) is None  # (once)
    s.released(2, t + 0.002)
    assert s.due(t + 0.002) == 0  # the poked one next
    # a mobile holding a grant sends what comes at once and keeps the grant while idle
    p = UplinkPermit()
    p.grant(HOLD_S, 1.0, hold=True)
    assert not p.release(1.001, idle=True) and p.may_load(1.001)
    assert p.release(1.0 + HOLD_S - DRAIN_S, idle=True)  # till its end
    p.grant(REVOKE_S, 1.1)  # a revoke: a short grant, not held
    assert p.release(1.1, idle=True)
    # two that send: no hold
    s2 = UplinkScheduler(2, grant_long_s=GRANT_S)
    t = 0.0
    for _ in range(4):
        i = s2.due(t)
        assert i is not None and not s2.hold
        s2.heard(i)
        t += 0.001
        s2.released(i, t)
    # but a mobile whose packets are keepalives (or other link control) sends no traffic:
    # the keepalives of two mobiles loaded on the downlink kept the pinging one from holding
    s3 = UplinkScheduler(3, grant_long_s=GRANT_S)
    t, holds = 0.0, []
    while t < 0.5:
        i = s3.due(t)
        if i is not None:
            holds.append(s3.hold)
            s3.heard(i, sent=i == 2)
            s3.released(i, t + 0.001)
        t += 0.001
    assert holds[-1] and holds.count(True) >= 3


def _held_ping_cell(
    period: float, seconds: float
) -> tuple[list[float], list[list[float]], UplinkScheduler]:
    """Mobile 2 pings the base every ``period`` beside two idle mobiles, every message taking
    TRIP to cross (a grant to its mobile's TX process, a packet or a release to the base's):
    how long each ping waited for a grant of mobile 2's, when each mobile was granted."""
    trip, step = 0.001, 0.00025
    s = UplinkScheduler(3, grant_long_s=GRANT_S)
    permit = UplinkPermit()
    events: list[tuple[float, int, str, tuple[float, ...]]] = []  # (at, seq, what, args)
    seq = itertools.count()

    def later(at: float, what: str, *args: float) -> None:
        events.append((at, next(seq), what, args))
        events.sort()

    waits: list[float] = []
    granted: list[list[float]] = [[], [], []]
    pending: list[float] = []  # mobile 2's pings not yet sent
    next_ping, t = 0.013, 0.0
    s.heard(2, True, 0.0)  # (it has sent lately)
    while t < seconds:
        while events and events[0][0] <= t:
            _, _, what, args = events.pop(0)
            if what == "grant":  # (at mobile 2)
                permit.grant(args[0], t, hold=bool(args[1]), number=int(args[2]))
            elif what == "heard":  # (at the base)
                s.heard(2, True, t)
            elif what == "released":
                s.released(int(args[0]), t, int(args[1]))
        if t >= next_ping:
            pending.append(next_ping)
            next_ping += period
        if pending and permit.may_load(t):
            waits.append(t - pending.pop(0))
            later(t + trip, "heard")
        if permit.release(t, idle=not pending):
            later(t + trip, "released", 2, permit.number)
        i = s.due(t)
        if i is not None:
            granted[i].append(t)
            if i == 2:
                later(t + trip, "grant", s.length, s.hold, s.number)
            else:  # (idle: its release comes at once)
                later(t + 2 * trip, "released", i, s.number)
        if s.revoke(t) == 2:
            later(t + trip, "grant", REVOKE_S, 0, s.number)
        if s.renew(t) == 2:
            later(t + trip, "grant", s.length, s.hold, s.number)
        t += step
    return waits, granted, s


@pytest.mark.parametrize("period", [0.047, 0.050, 0.100])
def test_a_held_grant_is_renewed_and_ended_for_the_others_just_after_its_holder_sent(
    period: float,
) -> None:
    """A mobile pinging beside two mobiles loaded on the downlink (idle on the uplink) held
    50-ms grants, and each grant's end cost it 5-7 ms without one (it stops loading DRAIN_S
    before, its release and the next grant cross, an idle mobile's probe between): one ping in
    seven waited. Now a held grant is renewed RENEW_BEFORE_S before its end while no other
    mobile is due, and ended for a due one PROBE_AFTER_S after a packet of its holder's came
    (its next is least likely then). With pings every 50 or 100 ms (in phase with the grants)
    another was due at each renewal and the end came just before a ping: up to 6 ms each.
    Now a holder that sent within HOLD_S is renewed past another's turn once in a row. Pings
    every 47 ms (their phase to the grants drifts), 50 and 100: none waits; the idle mobiles
    are asked at least every IDLE_MAX_S + 2 x HOLD_S - RENEW_BEFORE_S (the renewal past their
    turn postpones it by a hold at most)."""
    waits, granted, s = _held_ping_cell(period, 3.0)
    assert len(waits) >= 3.0 / period - 4
    waits = waits[1:]  # (the first came before the first grant)
    assert max(waits) <= 0.001 + 1e-9, sorted(waits)[-5:]  # (a grant's trip at most)
    assert s.counters.renewed >= 10 and s.counters.stale_releases == 0
    for i in (0, 1):  # (idle: asked at least every IDLE_MAX_S and the grant they wait for)
        gaps = [b - a for a, b in itertools.pairwise(granted[i])]
        bound = IDLE_MAX_S + 2 * HOLD_S - RENEW_BEFORE_S
        assert len(granted[i]) >= 15 and max(gaps) <= bound, max(gaps)


def _holding(mobiles: int, sender: int) -> tuple[UplinkScheduler, float]:
    """A scheduler whose mobile ``sender`` alone sent (the others idle) and now holds its
    grant; the time."""
    s, t = UplinkScheduler(mobiles, grant_long_s=GRANT_S), 0.0
    while not (s.holder == sender and s.hold):
        i = s.due(t)
        if i == sender:
            s.heard(i, True, t)
        if i is not None and s.holder == i and not s.hold:
            s.released(i, t + 0.0005)
        t += 0.001
        assert t < 1.0
    return s, t


def test_a_held_grant_ends_for_a_due_mobile_only_after_its_holders_packet_and_answer() -> None:
    """The end for another's turn waits PROBE_AFTER_S after the holder's packet, and for the
    downlink to have nothing queued for the holder (its answer goes first); a renewal while
    another is due by the grant's end only for a holder that sent within HOLD_S, once in a
    row."""
    s, t = _holding(3, 2)
    assert s.revoke(t) is None  # (it has sent nothing in this grant)
    t = s.granted_at + 0.020  # (the idle ones due again meanwhile)
    s.heard(2, True, t)
    assert s.revoke(t) is None and s.revoke(t + PROBE_AFTER_S / 2) is None
    assert s.due(t + PROBE_AFTER_S, soon=[2]) is None  # (its answer queued)
    assert s.revoke(t + PROBE_AFTER_S) is None
    assert s.due(t + PROBE_AFTER_S) is None
    assert s.revoke(t + PROBE_AFTER_S) == 2
    s, t = _holding(2, 1)
    end = s.granted_at + HOLD_S
    assert s.renew(end - RENEW_BEFORE_S - 0.001) is None  # (not yet)
    # mobile 0 is due by the end: its holder, which sent within HOLD_S, is renewed past its
    # turn, once in a row
    assert s.renew(end - RENEW_BEFORE_S) == 1
    end = s.granted_at + HOLD_S
    assert s.renew(end - RENEW_BEFORE_S) is None
    s, t = _holding(2, 1)
    end = s.granted_at + HOLD_S
    s.heard(1, True, end - RENEW_BEFORE_S - HOLD_S)  # (its last packet: a hold ago)
    assert s.renew(end - RENEW_BEFORE_S) is None


def test_mobiles_that_sent_a_moment_ago_and_hand_back_their_grants_do_not_stop_a_hold() -> None:
    """An iperf3 test's start: its control connection made the loaded mobiles send a few
    packets, and for a second (ACTIVE_S) the pinging mobile held no grant (its pings waited
    10-15 ms for its next). Now others that handed back QUIET_AFTER grants in a row having
    sent nothing, and sent before it, do not keep it from holding; one that sends again
    does."""
    s = UplinkScheduler(3, grant_long_s=GRANT_S)
    t, first_hold, sends = 0.0, None, {0: True, 1: True, 2: True}
    while t < 0.3:
        i = s.due(t)
        if i is not None:
            if sends[i]:
                s.heard(i, True, t)
            if i != 2:
                sends[i] = False  # (a packet at their first grant, none after)
            if s.hold and first_hold is None:
                first_hold = t
            if not s.hold:
                s.released(i, t + 0.001)
        if s.holder == 2 and s.hold and s.renew(t) is not None:
            s.heard(2, True, t)  # (it keeps sending)
        t += 0.0005
    assert first_hold is not None and first_hold < 0.1, first_hold
    assert s.holder == 2 and s.hold
    s.heard(0, True, t)  # mobile 0 sends again, after mobile 2's last packet
    s.released(2, t, s.number)
    while s.due(t) != 2:
        if s.holder is not None:
            s.released(s.holder, t + 0.001)
        t += 0.0005
    assert not s.hold  # (till mobile 2 sends again, or mobile 0 for a second no more)


def test_a_light_mobile_the_radio_addresses_is_not_granted_twice_in_a_row() -> None:
    """The base answered mobile 2's ping (so its radio addressed mobile 2) as mobile 2 released
    its grant: being addressed put it first again, and every ping cost a second, empty grant
    (a handover of 3 ms) before the busy ones went on."""
    s = UplinkScheduler(3, grant_long_s=GRANT_S)
    t = 0.0
    for _ in range(6):  # 0 and 1 busy; 2 sends a ping now and then
        i = s.due(t)
        assert i is not None
        s.heard(i)
        t += GRANT_S if i != 2 else 0.002
        s.released(i, t)
    while s.due(t, prefer=2) != 2:
        s.heard(s.holder)  # type: ignore[arg-type]
        t += GRANT_S
        s.released(s.holder, t)  # type: ignore[arg-type]
    s.heard(2)
    t += 0.002
    s.released(2, t)
    assert s.due(t, prefer=2) in (0, 1)


def test_busy_mobiles_get_longer_grants_while_no_other_has_a_light_flow() -> None:
    """Each handover between busy mobiles leaves the uplink idle 2-4 ms: three busy mobiles
    with 30-ms grants carried 0.89 of what one does. With no light flow (a mobile that sent
    lately without being busy) and none poked, grants are GRANT_LONG_S; with one, GRANT_S
    (its packets wait for one busy grant); not for one that went silent."""
    s = UplinkScheduler(3)
    t = 0.0
    lengths = []
    while len(lengths) < 6:  # 0 and 1 busy, 2 idle
        i = s.due(t)
        if i is None:
            t += 0.001
            continue
        if i == 2:
            t += 0.001
            s.released(2, t)
            continue
        lengths.append(s.length)
        s.heard(i)
        t += s.length
        s.released(i, t)
    assert lengths[-4:] == [GRANT_LONG_S] * 4
    s.poke(2)  # the base pings mobile 2
    i = s.due(t)
    assert i == 2
    s.heard(2)
    t += 0.002
    s.released(2, t)  # it answered: a light flow now
    i = s.due(t)
    assert i in (0, 1) and s.length == GRANT_S
    # mobile 2's daemon dies: a grant it answers nothing to makes it silent, and a silent
    # mobile is no light flow (the two busy ones had 30-ms grants while it was dead)
    while i != 2:
        s.heard(i)
        t += s.length
        s.released(i, t)
        s.poke(2)
        i = s.due(t)
        assert i is not None
    t = s.until  # (no release, nothing heard)
    i = s.due(t)
    assert i in (0, 1) and s.length == GRANT_LONG_S, s.length


def test_a_mobile_that_answered_nothing_is_asked_with_a_short_grant() -> None:
    """A mobile whose daemon was killed: each grant it did not answer held the uplink idle
    its length and RELEASE_WAIT_S; after the first, it is asked with PROBE_S."""
    s = UplinkScheduler(2)
    assert s.due(0.0) == 0 and s.length == GRANT_LONG_S  # (nobody else waits)
    t = s.until
    assert s.due(t) == 1  # 0 answered nothing
    s.heard(1)
    t += GRANT_S
    s.released(1, t)
    while s.due(t) != 0:
        if s.holder is not None:
            s.heard(s.holder)
            s.released(s.holder, t + s.length)
        t += 0.001
    assert s.length == PROBE_S and s.until == pytest.approx(t + PROBE_S + RELEASE_WAIT_S)


def test_a_mobiles_packets_age_only_in_its_grants() -> None:
    """The queue's clock (UplinkPermit.clock) stops from a grant's release to the next grant:
    a packet that waits 190 ms for the mobile's turn is not dropped by the 100-ms age bound
    (three mobiles in stream mode lost one packet in six so); one that waits 150 ms of its own
    grants is. Before the first grant, and once it sends freely, the clock is the wall's."""
    from longge.daemon.fairqueue import FairQueue
    from longge.daemon.peerqueues import PeerQueues

    p = UplinkPermit()
    assert p.clock(5.0) == 5.0
    p.grant(0.030, 10.0)
    assert p.clock(10.010) == pytest.approx(10.010)
    assert p.release(10.010, idle=True)
    assert p.clock(10.050) == pytest.approx(10.010)  # stopped at the release
    queues = PeerQueues([FairQueue(100_000, 0.100)])
    queues.clock = p.clock
    queues.push(0, b"\x45" + bytes(99), 10.050)
    p.grant(0.030, 10.240, number=1)  # its next turn, 190 ms later
    assert p.clock(10.240) == pytest.approx(10.010)
    assert queues.pop(0, 10.241) is not None  # (against the wall clock: expired)
    queues.push(0, b"\x45" + bytes(99), 10.245)
    pushed = p.clock(10.245)
    p.grant(0.030, 10.500, number=2)
    # 23 ms of that grant (it loads until 2 ms before its end) and 20 ms of this one
    assert p.clock(10.520) - pushed == pytest.approx(0.023 + 0.020, abs=1e-6)
    p.grant(0.200, 10.600, number=3)
    assert queues.pop(0, 10.790) is None  # 150+ ms of its own air: dropped
    later = 10.600 + 0.200 + 2.5  # no grant since: it sends freely, the clock runs again
    assert p.clock(later + 1.0) - p.clock(later) == pytest.approx(1.0)


def test_a_mobile_whose_frames_came_is_not_silent_and_frames_are_not_packets() -> None:
    """Stream mode: a mobile's release held up behind a lost frame reaches the base after the
    grant's time. Its frames came (``frames``): it is asked again as one that released (after
    IDLE_FIRST_S), not backed off as silent (SILENT_FIRST_S, doubling); and frames alone (a
    release's) do not count as a packet sent, which would have an idle mobile granted again at
    once, time after time (a loaded downlink lost a tenth to those grants)."""
    s = UplinkScheduler(2)
    assert s.due(0.0) == 0
    s.frames(0)
    t = s.until + 0.001
    assert s.due(t) == 1 and s.counters.silent == 0
    s.released(1, t + 0.001, s.number)
    assert s.due(t + 0.002) is None
    assert s.due(t + IDLE_FIRST_S + 0.001) == 0  # (silent: not before t + SILENT_FIRST_S)
    t += IDLE_FIRST_S + 0.001
    s.frames(0)
    s.released(0, t + 0.001, s.number)  # it sent nothing but its release
    assert s.due(t + 0.002) != 0  # not asked again at once
    assert s._state[0].retry_at >= t + 0.001 + IDLE_FIRST_S


def _light_beside_two_busy(revoke_busy: bool = True) -> tuple[UplinkScheduler, float]:
    """Mobiles 0 and 1 send till their grants' ends; mobile 2 answered a ping once (a light
    flow). Returns the scheduler with mobile 0 just granted, and the time."""
    s = UplinkScheduler(3, revoke_busy=revoke_busy)
    t, granted = 0.0, 0
    while granted < 6 or s.holder != 0:
        i = s.due(t)
        assert i is not None
        granted += 1
        if i == 0 and granted >= 6:
            return s, t
        s.heard(i)
        t += 0.002 if i == 2 else s.length  # (mobile 2: its echo, and nothing more)
        s.released(i, t)
        t += 0.001
    return s, t


def test_a_ping_to_a_light_mobile_ends_a_busy_grant_early_and_its_rest_comes_after() -> None:
    """A ping the base sends to a light mobile beside two busy ones waited for the busy grant's
    end (21 ms in the median, 30-ms grants): its answer could not go. The busy grant is ended
    (a REVOKE_S grant) once it is REVOKE_AFTER_S old, at most once in REVOKE_GAP_S; the
    poked mobile goes next, then the busy one gets what was left of its grant, then the other
    busy one (phased with a ping every 50 ms, the early ends fell on one mobile, which got
    half the other's rate)."""
    s, t = _light_beside_two_busy()
    length = s.length
    s.heard(0)
    s.poke(2)
    assert s.revoke(t + REVOKE_AFTER_S / 2) is None  # (too young: its frames just started)
    assert s.wake_at(t) - t == pytest.approx(REVOKE_AFTER_S)  # (the loop wakes for it)
    t += 0.012
    assert s.revoke(t) == 0 and s.revoke(t) is None and s.counters.revoked == 1
    t += REVOKE_S + 0.001
    s.released(0, t)
    assert s.due(t) == 2  # the poked one
    s.heard(2)
    s.released(2, t + 0.002)
    t += 0.003
    assert s.due(t) == 0 and s.length == pytest.approx(length - 0.012)  # its rest
    s.heard(0)
    s.poke(2)  # another ping, within REVOKE_GAP_S of the last early end
    assert s.revoke(t + 0.005) is None
    t += s.length
    s.released(0, t)
    assert s.due(t) == 2  # (poked: next, as ever)
    s.released(2, t + 0.002)
    assert s.due(t + 0.003) == 1 and s.length == GRANT_S


def test_a_busy_grant_is_not_ended_for_a_busy_mobile_nor_for_a_udp_stream() -> None:
    """Only a light mobile sent a packet that asks for an answer ends a busy grant: a busy
    mobile is poked by the base's TCP segments all the time (each would cost a handover)."""
    s, t = _light_beside_two_busy()
    s.heard(0)
    s.poke(1)  # busy mobile 1: its turn comes anyway
    assert s.revoke(t + 0.015) is None and s.counters.revoked == 0


def test_busy_grants_ended_early_for_pings_every_50_ms_leave_the_busy_mobiles_even() -> None:
    """A virtual clock: two busy mobiles, a light one pinged by the base every 50 ms, handovers
    of 3 ms. Every ping's answer is granted within a handover of the rule's wait, and the two
    busy mobiles hold the uplink for as long as each other."""
    s = UplinkScheduler(3)
    handover, dt = 0.003, 0.0001
    held = [0.0, 0.0]
    waits: list[float] = []
    t, next_ping, poked_at = 0.0, 0.5, None
    ends = -1.0  # when the holder's release reaches the base
    while t < 10.0:
        if t >= next_ping:
            s.poke(2)
            poked_at, next_ping = t, next_ping + 0.050
        if s.revoke(t) is not None:
            ends = min(ends, t + handover)
        if s.holder is not None and t >= ends:
            s.released(s.holder, t)
        if s.holder is None or t >= ends:
            i = s.due(t)
            if i == 2:
                if poked_at is not None:
                    waits.append(t - poked_at)
                    s.heard(2)
                    poked_at = None
                ends = t + handover + 0.001
            elif i is not None:
                s.heard(i)
                ends = t + handover / 2 + s.length
        if s.holder in (0, 1):
            held[s.holder] += dt
        t += dt
    assert len(waits) >= 180 and max(waits) <= REVOKE_AFTER_S + 2 * handover
    assert abs(held[0] - held[1]) <= 0.03 * max(held) and s.counters.revoked >= 150


def test_a_poked_mobile_is_granted_once_its_packet_has_gone() -> None:
    """The base's grant to a poked mobile went in lane 1, before the ping still on its way: the
    mobile, granted with nothing to answer yet, handed it back at once, and its echo waited for
    a busy grant to end (37 to 66 ms, a ping in twelve)."""
    s = UplinkScheduler(3)
    s.poke(2, 0.0)
    assert s.due(0.0, arriving=[2]) is None and s.wake_at(0.0) > 0.0
    assert s.due(0.001) == 2


def test_a_poked_mobiles_packet_that_never_goes_holds_the_others_a_bounded_time() -> None:
    """A ping to a mobile whose daemon was killed never went: nobody was granted till the
    mobile was back (0.8 s of the others' uplink, a run in three)."""
    s = UplinkScheduler(3)
    for i in (0, 1):  # (two busy mobiles)
        assert s.due(0.0) == i
        s.heard(i)
        s.released(i, s.granted_at + s.length)
    s.poke(2, 0.1)
    t = 0.1
    while s.due(t, arriving=[2]) is None and t < 1.0:
        assert 0 < s.wake_at(t) - t <= 0.001 + 1e-9
        t = s.wake_at(t)
    assert s.holder == 2 and t <= 0.1 + ARRIVING_MAX_S + 1e-9
    s.poke(2, t + 0.01)  # (another ping, while it holds the grant)
    t = s.until  # (it answered nothing: silent, the ping forgotten)
    assert s.due(t, arriving=[2]) in (0, 1)
    s.poke(2, t)
    assert not s._state[2].poked  # (a silent mobile's packet is not waited for)


def test_a_mobile_asked_for_an_answer_keeps_an_idle_grant_till_it_is_queued() -> None:
    """A mobile granted with nothing to send, just delivered a ping (``asked``): it keeps the
    grant until a packet was queued after the ping (its echo) or ANSWER_S has passed."""
    p = UplinkPermit()
    p.grant(GRANT_S, 1.0)
    p.asked = 0.999
    assert p.awaits_answer(1.001, queued_at=0.5)
    assert not p.release(1.001, idle=not p.awaits_answer(1.001, 0.5))
    assert p.wake_at(1.001) == pytest.approx(0.999 + ANSWER_S)
    assert not p.awaits_answer(1.002, queued_at=1.0015)  # the echo was queued
    assert not p.awaits_answer(0.999 + ANSWER_S, queued_at=0.5)  # (no answer: not forever)
    assert p.release(1.002, idle=True)


def test_a_mobile_that_sent_till_a_probe_grants_end_is_not_taken_for_busy() -> None:
    """A light mobile asked with a 5-ms probe grant (it had answered nothing once) whose echo
    took that long was judged busy, and the next ping to it did not end a busy grant."""
    s, t = _light_beside_two_busy()
    s.heard(0)
    t += s.length
    s.released(0, t)
    while s.due(t) != 2:  # mobile 2 goes silent once: its next grant is a probe
        assert s.holder is not None
        if s.holder != 2:
            s.heard(s.holder)
            t += s.length
            s.released(s.holder, t)
        t += 0.001
    t += GRANT_LONG_S + RELEASE_WAIT_S  # (no release, nothing heard: silent)
    while s.due(t) != 2:
        assert s.holder is not None
        s.heard(s.holder)
        t += s.length
        s.released(s.holder, t)
    assert s.length == PROBE_S
    s.heard(2)  # its echo, till the probe's end
    s.released(2, t + PROBE_S - 0.0005)
    t += PROBE_S
    i = s.due(t)
    assert i in (0, 1)
    s.heard(i)
    s.poke(2)
    assert s.revoke(t + REVOKE_AFTER_S) == i  # (light, not busy: its answer ends the grant)


def test_a_base_that_listens_ends_no_busy_grant_for_a_ping_and_grants_its_answer_later() -> None:
    """A base whose TX radio listens between its bursts (daemon/listening.py: ``revoke_busy``
    False) ends no busy grant for a light mobile it pinged (the answer comes on the
    downlink's channel, at no handover's cost), and grants that mobile only ANSWER_ASIDE_S
    after the ping: a grant at once met the answer there (the answer went again in it)."""
    s, t = _light_beside_two_busy(revoke_busy=False)
    s.heard(0)
    s.poke(2, t)
    assert s.revoke(t + 0.012) is None and s.counters.revoked == 0
    assert s.wake_at(t) == pytest.approx(s.until)  # (no early end to wake for)
    t += s.length
    s.released(0, t)
    assert s.due(t) == 2  # (poked, its answer not heard: next, as ever)
    s, t = _light_beside_two_busy(revoke_busy=False)
    s.released(0, t + 0.001)  # (mobile 0 had nothing more)
    s.poke(2, t + 0.001)
    assert s.due(t + 0.002) == 1  # mobile 2 waits for its answer's own way first
    s.released(1, t + 0.003)
    assert s.due(t + 0.001 + ANSWER_ASIDE_S) == 2
    # a base with more queued for the downlink keeps sending and hears no answer there: its
    # poke is served as without the listening radio (the busy grant ended, the mobile next)
    s, t = _light_beside_two_busy(revoke_busy=False)
    s.heard(0)
    s.poke(2, t, aside=False)
    assert s.revoke(t + REVOKE_AFTER_S) == 0
    t += REVOKE_AFTER_S + 0.001
    s.released(0, t)
    assert s.due(t) == 2


def test_a_base_that_listens_ends_a_held_grant_only_once_the_poked_mobile_is_due() -> None:
    """With the listening TX radio (``revoke_busy`` False), a poked mobile is granted only
    ANSWER_ASIDE_S after the poke, so a held grant is ended then, not at once: ended at once
    (with the poked mobile not yet due), the base granted the holder a held grant again in
    the same turn and its revoke overtook that grant on the air (the mobile kept a 50-ms
    grant the base had ended, and sent into the next holder's)."""
    s = UplinkScheduler(3, grant_long_s=GRANT_S, revoke_busy=False)
    t = 0.0
    for i in range(3):
        assert s.due(t) == i
        if i == 2:
            s.heard(2)
        t += 0.001
        s.released(i, t)
    t += 0.001
    while not (s.due(t) == 2 and s.hold) and t < 1.0:
        if s.holder is not None:
            s.released(s.holder, t + 0.001)
        t += 0.001
    assert s.holder == 2 and s.hold
    s.poke(0, t)
    assert s.revoke(t) is None and s.revoke(t + ANSWER_ASIDE_S / 2) is None
    assert s.revoke(t + ANSWER_ASIDE_S) == 2
