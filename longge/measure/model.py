"""What the emulated air allows for IP traffic over the LongGe protocol (for comparison)."""

from __future__ import annotations

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
