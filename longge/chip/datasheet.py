"""nRF24L01+ facts and the formulas built on them.

Every constant here comes from the nRF24L01+ Product Specification v1.0 (page numbers in
the comments). Times are integers in nanoseconds so that sums over millions of frames stay
exact; the helpers that return µs or bit/s are for people.
"""

from __future__ import annotations

from dataclasses import dataclass

# -- Datasheet constants -------------------------------------------------------------------

#: Tstby2a: standby -> TX/RX settling, and every TX<->RX turnaround (p. 22, table 16).
T_SETTLE_NS = 130_000
#: The received power detector is right this long after entering RX (§6.4: Tstby2a + Tdelay_AGC,
#: 130 + 40 µs).
T_RPD_NS = T_SETTLE_NS + 40_000
#: The longest the chip may stay in TX mode: with Enhanced ShockBurst off the PLL runs open
#: loop while it transmits, so a no-ack sender must return to standby at least this often
#: (p. 22, 6.1.5).
TX_MODE_MAX_NS = 4_000_000
#: Preamble length in bytes (p. 27, 7.3.1).
PREAMBLE_BYTES = 1
#: Packet control field: 6-bit length, 2-bit PID, 1 NO_ACK bit (p. 28, 7.3.3).
PCF_BITS = 9
#: Largest payload (p. 28, 7.3.4).
MAX_PAYLOAD = 32
#: FIFO depths (p. 56, 7.7).
TX_FIFO_DEPTH = 3
RX_FIFO_DEPTH = 3
#: Channels: f = 2400 + RF_CH MHz, RF_CH 0..125 (p. 23, 6.3 and register RF_CH p. 59).
CHANNEL_MIN, CHANNEL_MAX = 0, 125
#: The highest channel inside the 2.4 GHz ISM band (2400 + 83 MHz; the band ends at 2483.5).
ISM_MAX_CHANNEL = 83
#: Address width 3..5 bytes (SETUP_AW, p. 58); CRC 1 or 2 bytes (CONFIG.CRCO, p. 57).
ADDRESS_WIDTHS = (3, 4, 5)
CRC_LENGTHS = (1, 2)
#: ARD = 250 µs * (n + 1), n = 0..15; ARC = 0..15 (SETUP_RETR, p. 58).
ARD_STEP_NS = 250_000
ARD_STEPS = 16
ARC_MAX = 15

#: Air data rates in bit/s (RF_SETUP, p. 59). 250 kbit/s exists only on the "+" variant.
RATE_BPS = {"250k": 250_000, "1M": 1_000_000, "2M": 2_000_000}

#: Smallest ARD (µs) at which an ACK without payload is still received (p. 34, 7.4.2 table):
#: 250 µs is enough at 2 and 1 Mbit/s, 250 kbit/s needs 500 µs.
MIN_ARD_US_FOR_EMPTY_ACK = {"250k": 500, "1M": 250, "2M": 250}

#: Output power of RF_SETUP.RF_PWR 0..3 (RF24's PA_MIN, LOW, HIGH, MAX), dBm (p. 24, 6.5,
#: table 14).
PA_DBM = (-18.0, -12.0, -6.0, 0.0)
#: Receiver sensitivity at 0.1 % bit error rate, dBm (p. 15, 5.3, RXSENS: 2 Mbit/s −82,
#: 1 Mbit/s −85, 250 kbit/s −94).
SENSITIVITY_DBM = {"250k": -94.0, "1M": -85.0, "2M": -82.0}
#: The bit error rate the sensitivities are quoted at (p. 15, 5.3).
SENSITIVITY_BER = 0.001


# -- Formulas --------------------------------------------------------------------------------


def bits_on_air(payload_len: int, address_width: int = 5, crc_len: int = 2) -> int:
    """Bits of one Enhanced ShockBurst packet: 8·(1 + AW + L + CRC) + 9 (p. 27, figure 4)."""
    return 8 * (PREAMBLE_BYTES + address_width + payload_len + crc_len) + PCF_BITS


def time_on_air_ns(payload_len: int, rate: str, address_width: int = 5, crc_len: int = 2) -> int:
    """Time on air of one packet, in ns (exact: bit times are whole ns at every rate)."""
    return bits_on_air(payload_len, address_width, crc_len) * 1_000_000_000 // RATE_BPS[rate]


def ard_ns(delay_step: int) -> int:
    """ARD for SETUP_RETR.ARD = delay_step (0..15)."""
    return ARD_STEP_NS * (delay_step + 1)


@dataclass(frozen=True)
class LinkTiming:
    """The air-time budget of one configuration, derived from the datasheet.

    ``ack_cycle_ns`` is one acknowledged frame: settle, data, turnaround, ACK (T_s).
    ``retry_ns`` is what one failed attempt costs, start of data to start of data: TOA + ARD (T_r).
    """

    rate: str
    payload_len: int = MAX_PAYLOAD
    address_width: int = 5
    crc_len: int = 2
    ard_us: int = 250
    arc: int = 2

    @property
    def toa_data_ns(self) -> int:
        return time_on_air_ns(self.payload_len, self.rate, self.address_width, self.crc_len)

    @property
    def toa_ack_ns(self) -> int:
        return time_on_air_ns(0, self.rate, self.address_width, self.crc_len)

    @property
    def ack_cycle_ns(self) -> int:
        return T_SETTLE_NS + self.toa_data_ns + T_SETTLE_NS + self.toa_ack_ns

    @property
    def retry_ns(self) -> int:
        return self.toa_data_ns + self.ard_us * 1000

    def bound_bps(self, auto_ack: bool) -> float:
        """Payload bit rate with no loss and no host overhead (docs/design.md §2 table)."""
        per_frame = self.ack_cycle_ns if auto_ack else self.toa_data_ns
        return self.payload_len * 8 * 1e9 / per_frame

    @property
    def stream_burst_frames(self) -> int:
        """No-ack frames one stay in TX mode can hold (the 4 ms rule, 6.1.5): back to back
        from the first frame's start to the last frame's end."""
        return max(1, TX_MODE_MAX_NS // self.toa_data_ns)

    def stream_bound_bps(self) -> float:
        """Payload bit rate of a no-ack stream that keeps the 4 ms rule: bursts of
        stream_burst_frames frames, each burst after a 130 µs settle (docs/design.md §2)."""
        k = self.stream_burst_frames
        return k * self.payload_len * 8 * 1e9 / (T_SETTLE_NS + k * self.toa_data_ns)

    def expected_attempts(self, q: float) -> float:
        """Mean attempts per frame with per-attempt failure q, at most ARC+1: (1-q^N)/(1-q)."""
        n = self.arc + 1
        if q >= 1.0:
            return float(n)
        return (1 - q**n) / (1 - q)

    def residual_loss(self, q: float) -> float:
        """Probability that all ARC+1 attempts fail (MAX_RT): q^N."""
        return q ** (self.arc + 1)

    def expected_service_ns(self, q: float) -> float:
        """Mean time per frame handed to the radio, successful or not.

        Each failed attempt costs T_r; the last attempt costs T_s when it succeeds and T_r
        when it fails too. For small q^N this is docs/design.md §2's T_s + q/(1-q)·T_r.
        """
        n = self.arc + 1
        attempts = self.expected_attempts(q)
        p_fail = q**n
        # attempts - 1 failures precede the last attempt on average; the last one succeeds
        # with probability 1 - q^N.
        return (
            (attempts - 1) * self.retry_ns
            + (1 - p_fail) * self.ack_cycle_ns
            + p_fail * (self.retry_ns)
        )

    def expected_goodput_bps(self, q: float) -> float:
        """Delivered payload bit rate under per-attempt failure q, with auto-ack."""
        return (
            self.payload_len * 8 * (1 - self.residual_loss(q)) * 1e9 / self.expected_service_ns(q)
        )


def per_attempt_failure(data_per: float, ack_per: float) -> float:
    """q for an acknowledged attempt: the data frame or its ACK is lost."""
    return 1 - (1 - data_per) * (1 - ack_per)
