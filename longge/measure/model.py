"""What the emulated air allows for IP traffic over the LongGe protocol (for comparison)."""

from __future__ import annotations

import math
from typing import Any

from longge.air.loss import LossSpec
from longge.chip.datasheet import T_SETTLE_NS, bits_on_air, per_attempt_failure, time_on_air_ns
from longge.config import PA_LEVELS
from longge.protocol.arq_frames import HEADER_LEN as ARQ_HEADER
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


_States = list[tuple[int, int]]
#: the two chains' last outcomes (data lost, ACK lost): 0 good, 1 lost
_CHAIN_STATES: _States = [(d, a) for d in (0, 1) for a in (0, 1)]


def _frame_transfer(
    opts: RadioOptions, data_per: float, ack_per: float, burst: float
) -> tuple[list[list[float]], list[list[float]], list[list[float]]]:
    """One ESB frame from each chain state: (P(sent, ends in state j), P(MAX_RT, ends in j),
    [failed attempts, successful ones] expected), as 4×4, 4×4 and 4×2 tables. Each attempt
    steps the data chain; the ACK chain steps only when the data frame arrived (the air
    draws an ACK's fate only for a frame it delivered)."""
    n = opts.arc + 1 if opts.acked else 1
    ack = ack_per if opts.acked else 0.0
    d_step, a_step = _ge_step(data_per, burst), _ge_step(ack, burst)
    idx = {s: i for i, s in enumerate(_CHAIN_STATES)}
    ok = [[0.0] * 4 for _ in range(4)]
    fail = [[0.0] * 4 for _ in range(4)]
    counts = [[0.0, 0.0] for _ in range(4)]
    for i0, _ in enumerate(_CHAIN_STATES):
        vec = [0.0] * 4
        vec[i0] = 1.0
        for _k in range(n):
            nxt = [0.0] * 4
            for i, (d, a) in enumerate(_CHAIN_STATES):
                w = vec[i]
                if not w:
                    continue
                p_d, p_a = d_step[d], a_step[a]
                nxt[idx[(1, a)]] += w * p_d  # data lost: the ACK chain stays
                nxt[idx[(0, 1)]] += w * (1 - p_d) * p_a  # data through, ACK lost
                good = w * (1 - p_d) * (1 - p_a)
                ok[i0][idx[(0, 0)]] += good
                counts[i0][0] += w - good
                counts[i0][1] += good
            vec = nxt
        for j in range(4):
            fail[i0][j] += vec[j]
    return ok, fail, counts


def _mul(v: list[float], m: list[list[float]]) -> list[float]:
    return [sum(v[i] * m[i][j] for i in range(len(v))) for j in range(len(m[0]))]


def _stationary(m: list[list[float]]) -> list[float]:
    """The stationary distribution of a 4×4 stochastic matrix (power iteration)."""
    v = [0.25] * 4
    for _ in range(100_000):
        nxt = _mul(v, m)
        if sum(abs(x - y) for x, y in zip(nxt, v, strict=True)) < 1e-15:
            return nxt
        v = nxt
    return v


def esb_frame_stats(
    opts: RadioOptions, data_per: float, ack_per: float, burst: float = 1.0
) -> tuple[float, float]:
    """(r, failed attempts per frame) of an ESB frame: r the share of frames lost for good
    (MAX_RT). Independent losses: closed form (attempt failure q = 1 − (1 − data)(1 − ack),
    r = q^N); bursty ones: the frames' chain (_frame_transfer) in its stationary state."""
    if not opts.acked:  # one attempt, lost with the data frame
        return data_per, data_per
    if burst <= 1.0:  # the datasheet's timing (chip/datasheet.py), attempts independent
        t, q = opts.timing(), per_attempt_failure(data_per, ack_per)
        r = t.residual_loss(q)
        return r, t.expected_attempts(q) - (1 - r)
    ok, fail, counts = _frame_transfer(opts, data_per, ack_per, burst)
    step = [[ok[i][j] + fail[i][j] for j in range(4)] for i in range(4)]
    pi = _stationary(step)
    r = sum(pi[i] * sum(fail[i]) for i in range(4))
    return r, sum(pi[i] * counts[i][0] for i in range(4))


def _bursty_packets(
    opts: RadioOptions, data_per: float, ack_per: float, burst: float, frames: int
) -> tuple[float, float]:
    """(share of datagrams delivered, expected failed and successful attempts per datagram
    in units of ack cycles) on bursty losses: the datagram's frames one after the other from
    the chains' state, stopped at the first MAX_RT, in the datagrams' stationary state (the
    chains go on from one datagram to the next: losses cluster, and a datagram begun in a
    burst is lost after few frames)."""
    ok, fail, counts = _frame_transfer(opts, data_per, ack_per, burst)
    t = opts.timing()
    retry = t.retry_ns / t.ack_cycle_ns
    cost = [counts[i][0] * retry + counts[i][1] for i in range(4)]

    def run(v: list[float]) -> tuple[list[float], float, float]:
        """End state (whatever the outcome), P(delivered), expected cost, from ``v``."""
        end = [0.0] * 4
        spent = 0.0
        for _ in range(frames):
            spent += sum(v[i] * cost[i] for i in range(4))
            lost = _mul(v, fail)
            end = [e + x for e, x in zip(end, lost, strict=True)]
            v = _mul(v, ok)
        return [e + x for e, x in zip(end, v, strict=True)], sum(v), spent

    transfer = [run([1.0 if j == i else 0.0 for j in range(4)])[0] for i in range(4)]
    _, delivered, spent = run(_stationary(transfer))
    return delivered, spent


def datagram_frames(opts: RadioOptions, length: int, overhead: int = 0) -> int:
    """Radio frames of one ``length``-byte UDP datagram (IP and UDP headers, LongGe's packet
    number and CRC, ``overhead`` security bytes; stream mode's frames carry an ARQ byte more)."""
    stream = length + IP_UDP_HEADERS + PACKET_OVERHEAD + overhead
    step = opts.payload - HEADER_LEN - (ARQ_HEADER if opts.mode == "stream" else 0)
    return -(-stream // step)


def link_error_rates(
    opts: RadioOptions, loss: dict[str, Any] | None, pa_level: str | int = "low"
) -> tuple[float, float, float]:
    """(per, ack_per, burst) of the emulated air's ``loss`` (its stats' or a testbed's
    ``loss``: per, ack_per, burst, path_loss) for full frames on this link, the path's noise
    included at the link's rate and ``pa_level`` (both ends'; a name or 0..3)."""
    loss = loss or {}
    per = float(loss.get("per") or 0.0)
    ack = loss.get("ack_per")
    spec = LossSpec(
        data_per=per,
        ack_per=per if ack is None else float(ack),
        burst=float(loss.get("burst") or 1.0),
        path_loss=loss.get("path_loss"),
    )
    level = PA_LEVELS[pa_level] if isinstance(pa_level, str) else pa_level
    data_bits = bits_on_air(opts.payload, opts.address_width, opts.crc)
    ack_bits = bits_on_air(0, opts.address_width, opts.crc)
    data, ack_per = spec.frame_errors(opts.rate, level, data_bits, ack_bits)
    return data, ack_per, spec.burst


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
    if burst > 1.0 and opts.acked and (data_per or ack_per):
        delivered, spent = _bursty_packets(opts, data_per, ack_per, burst, frames)
        # (the loss-free datagram costs ``frames`` ack cycles)
        return no_loss * delivered * frames / spent, 1 - delivered
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
