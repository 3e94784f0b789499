"""What the emulated air allows for IP traffic over the LongGe protocol (for comparison)."""

from __future__ import annotations

import math

from longge.chip.datasheet import T_SETTLE_NS, time_on_air_ns
from longge.protocol.arq import HEADER_LEN as ARQ_HEADER
from longge.protocol.arq_receiver import ArqReceiver
from longge.protocol.frame import HEADER_LEN, PACKET_OVERHEAD
from longge.radio.options import RadioOptions

IP_UDP_HEADERS = 28
#: An ARQ ACK with nothing missing: kind, epoch, cumulative sequence, CRC-8.
ACK_LEN = 4


#: An ICMP echo with ping's default 56-byte payload: 20 (IP) + 8 (ICMP) + 56 bytes.
PING_PACKET = 84


def packet_air_ns(
    opts: RadioOptions, ip_len: int, security_overhead: int = 0, alone: bool = False
) -> int:
    """Air time of one IP packet with no loss: each frame costs its own ack cycle (or its
    time on air without auto-ack), the last frame being shorter. A secured link adds
    ``security_overhead`` bytes per packet (``secure.OVERHEAD``). In stream mode a packet in
    a stream shares its bursts' settles; one ``alone`` (an idle link's ping) pays a whole
    settle."""
    stream = ip_len + PACKET_OVERHEAD + security_overhead
    # stream mode: one ARQ byte more per frame, and a settle per burst of k frames (the 4 ms
    # rule); its ACKs travel on the other channel (docs/design.md §4)
    arq = ARQ_HEADER if opts.mode == "stream" else 0
    settle_per_frame = T_SETTLE_NS / opts.timing().stream_burst_frames if arq and not alone else 0.0
    step = opts.payload - HEADER_LEN - arq
    total_ns = float(T_SETTLE_NS) if arq and alone else 0.0
    while stream > 0:
        data = min(step, stream)
        toa = time_on_air_ns(data + HEADER_LEN + arq, opts.rate, opts.address_width, opts.crc)
        if opts.acked:
            ack = time_on_air_ns(0, opts.rate, opts.address_width, opts.crc)
            total_ns += T_SETTLE_NS + toa + T_SETTLE_NS + ack
        else:
            total_ns += toa + settle_per_frame
        stream -= data
    return round(total_ns)


def udp_goodput_bps(opts: RadioOptions, udp_payload: int, security_overhead: int = 0) -> float:
    """UDP payload bit rate with no loss, back-to-back datagrams (see packet_air_ns)."""
    air_ns = packet_air_ns(opts, udp_payload + IP_UDP_HEADERS, security_overhead)
    return udp_payload * 8 * 1e9 / air_ns


def udp_goodput_both_ways_bps(
    opts: RadioOptions, udp_payload: int, security_overhead: int = 0
) -> float:
    """Each direction's UDP payload rate when both are saturated. In ESB mode the same as one
    way (each direction has its own channel, the chips' ACKs included). In stream mode each
    channel also carries the other direction's ARQ ACKs: one per ``ack_every`` frames, 4 bytes
    when nothing is missing (docs/design.md §2)."""
    air_ns = float(packet_air_ns(opts, udp_payload + IP_UDP_HEADERS, security_overhead))
    if opts.mode == "stream":
        stream = udp_payload + IP_UDP_HEADERS + PACKET_OVERHEAD + security_overhead
        frames = -(-stream // (opts.payload - HEADER_LEN - ARQ_HEADER))
        ack_ns = time_on_air_ns(ACK_LEN, opts.rate, opts.address_width, opts.crc)
        air_ns += frames * ack_ns / ArqReceiver.ack_every
    return udp_payload * 8 * 1e9 / air_ns


def ping_air_ms(opts: RadioOptions, security_overhead: int = 0) -> float:
    """The air's own time for a ping exchange on an idle link: the echo request's frames one
    way, the reply's the other (no host time at all)."""
    return 2 * packet_air_ns(opts, PING_PACKET, security_overhead, alone=True) / 1e6


# -- a lossy channel ---------------------------------------------------------------------------
#
# What the link carries when the air destroys frames (the emulator's --per, --ack-per, --burst;
# docs/design.md, "Capacity on a lossy link"). ESB: each acknowledged attempt fails when the
# data frame or its ACK is lost; a frame whose ARC+1 attempts all fail (MAX_RT) is lost for good
# and the daemon drops the rest of its packet, so a datagram of F frames is lost with
# 1 − (1 − r)^F and costs the air only the frames up to its first lost one. Stream mode: the ARQ
# sends each lost frame again, nothing is lost for good, and the air carries 1 − per of it.


def _ge_step(per: float, burst: float) -> tuple[float, float]:
    """The emulator's Gilbert–Elliott chain (air/loss.py): P(lost | last good), P(lost | last
    lost). Independent losses (burst 1): both ``per``."""
    if burst <= 1.0 or not 0.0 < per < 1.0:
        return per, per
    p_bg = 1.0 / burst
    return per * p_bg / (1.0 - per), 1.0 - p_bg


def esb_frame_stats(
    opts: RadioOptions, data_per: float, ack_per: float, burst: float = 1.0
) -> tuple[float, float]:
    """(r, attempts that fail per frame, attempts that succeed per frame) for one ESB frame.

    Independent losses: closed form (attempt failure q = 1 − (1 − data)(1 − ack), r = q^N).
    Bursty ones: the stationary distribution of the chain (data state, ACK state, attempt
    number): each attempt steps the data chain; the ACK chain steps only when the data frame
    arrived (the air draws an ACK's fate only for a frame it delivered)."""
    n = opts.arc + 1 if opts.acked else 1
    ack = ack_per if opts.acked else 0.0
    if burst <= 1.0:
        q = 1 - (1 - data_per) * (1 - ack)
        r = q**n
        attempts = float(n) if q >= 1 else (1 - q**n) / (1 - q)
        return r, attempts - (1 - r)
    d_step, a_step = _ge_step(data_per, burst), _ge_step(ack, burst)
    # state: (data lost last, ack lost last, attempt k in 0..n-1) -> probability
    states = [(d, a, k) for d in (0, 1) for a in (0, 1) for k in range(n)]
    pi = {s: 1.0 / len(states) for s in states}
    fails = 0.0
    for _ in range(5000):
        nxt = dict.fromkeys(states, 0.0)
        fails = maxrt = starts = 0.0
        for (d, a, k), w in pi.items():
            if not w:
                continue
            if k == 0:
                starts += w
            p_d = d_step[d]
            p_a = a_step[a]
            # data lost: the ACK chain stays
            lost, later = w * p_d, (k + 1) % n
            nxt[(1, a, later)] += lost
            # data through, ACK lost
            nxt[(0, 1, later)] += w * (1 - p_d) * p_a
            # both through: the next frame starts
            nxt[(0, 0, 0)] += w * (1 - p_d) * (1 - p_a)
            failed = lost + w * (1 - p_d) * p_a
            fails += failed
            if k == n - 1:
                maxrt += failed
        delta = sum(abs(nxt[s] - pi[s]) for s in states)
        pi = nxt
        if delta < 1e-13:
            break
    frames = sum(w for (_, _, k), w in pi.items() if k == 0)
    r = maxrt / frames
    return r, fails / frames


def datagram_frames(opts: RadioOptions, length: int, overhead: int = 0) -> int:
    """Radio frames of one ``length``-byte UDP datagram (IP and UDP headers, LongGe's packet
    number and CRC, ``overhead`` security bytes; stream mode's frames carry an ARQ byte more)."""
    stream = length + IP_UDP_HEADERS + PACKET_OVERHEAD + overhead
    step = opts.payload - HEADER_LEN - (ARQ_HEADER if opts.mode == "stream" else 0)
    return -(-stream // step)


def lossy_model(
    opts: RadioOptions,
    data_per: float,
    ack_per: float,
    burst: float = 1.0,
    length: int = 1400,
    overhead: int = 0,
) -> tuple[float, float]:
    """(UDP payload rate at saturation, loss floor) of ``length``-byte datagrams on a lossy
    link. ESB: the loss-free rate, slowed by the failed attempts (each costs a retry, T_r,
    instead of an ack cycle), times the share of datagrams delivered, over the frames a
    datagram costs on average ((1 − (1 − r)^F) / r instead of F: the rest of a lost one is
    dropped); without auto-ack every frame goes once, lost or not. Stream mode: the ARQ sends
    the lost frames again, 1 − per of the air carries new data, and nothing is lost for good."""
    no_loss = udp_goodput_bps(opts, length, overhead)
    if opts.mode == "stream":
        return no_loss * (1 - data_per), 0.0
    frames = datagram_frames(opts, length, overhead)
    r, failed = esb_frame_stats(opts, data_per, ack_per, burst)
    if r >= 1:
        return 0.0, 1.0
    log_ok = frames * math.log1p(-r)
    delivered = math.exp(log_ok)
    if not opts.acked:
        return no_loss * delivered, 1 - delivered
    t = opts.timing()
    slow = (failed * t.retry_ns + (1 - r) * t.ack_cycle_ns) / t.ack_cycle_ns
    sent = frames if r <= 0 else -math.expm1(log_ok) / r
    return no_loss / slow * delivered * frames / sent, 1 - delivered
