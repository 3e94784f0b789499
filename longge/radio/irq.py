"""A radio's IRQ pin as a descriptor to sleep on (the ``rf24`` backend, ``[rf24] tx_irq_pin``,
``rx_irq_pin``).

The nRF24L01+ pulls IRQ low when an unmasked RX_DR, TX_DS or MAX_RT becomes set; the kernel's
GPIO character device (uAPI v2) turns each falling edge into an event on the line's descriptor.
A radio process that selects on that descriptor sleeps until the chip has news, instead of
asking it over SPI every 0.2 ms (docs/design.md, "Waiting on the radio").

Two ioctls and a read, from <linux/gpio.h>: GPIO_V2_GET_LINE_IOCTL on /dev/gpiochip0 asks for
the line as an input with falling-edge events (with the pull-up on, so an unwired pin reads
high instead of floating), and each event is a 48-byte struct gpio_v2_line_event.
libgpiod's Python bindings (gpiod) do the same, but first check in sysfs that the chip file is
a real GPIO device, so they cannot run on emulated silicon (firmware/native/spidev_preload.c
answers these ioctls): the daemon's IRQ path would then go untested here.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import struct

from longge.errors import HardwareError

GPIO_CHIP = "/dev/gpiochip0"

# struct gpio_v2_line_request (592 bytes): offsets[64] u32, consumer[32], config (flags u64,
# num_attrs u32, padding[5], attrs[10] of 24 bytes), num_lines u32, event_buffer_size u32,
# padding[5] u32, fd s32.
_REQUEST_SIZE = 592
_CONSUMER_AT, _FLAGS_AT, _NUM_LINES_AT, _FD_AT = 256, 288, 560, 588
_GET_LINE_IOCTL = 0xC250B407  # _IOWR(0xB4, 0x07, struct gpio_v2_line_request)
_FLAG_INPUT, _FLAG_EDGE_FALLING, _FLAG_BIAS_PULL_UP = 1 << 2, 1 << 5, 1 << 8
_EVENT_SIZE = 48  # struct gpio_v2_line_event
_READ_SIZE = _EVENT_SIZE * 16


class IrqLine:
    """One radio's IRQ pin: ``fileno()`` is readable after the pin fell; ``clear()`` takes the
    events that woke the reader."""

    def __init__(self, pin: int, consumer: str = "longge", chip: str = GPIO_CHIP) -> None:
        self.pin = pin
        self.edges = 0
        request = bytearray(_REQUEST_SIZE)
        struct.pack_into("<I", request, 0, pin)
        request[_CONSUMER_AT : _CONSUMER_AT + 31] = consumer.encode()[:31].ljust(31, b"\0")
        flags = _FLAG_INPUT | _FLAG_EDGE_FALLING | _FLAG_BIAS_PULL_UP
        struct.pack_into("<Q", request, _FLAGS_AT, flags)
        struct.pack_into("<I", request, _NUM_LINES_AT, 1)
        try:
            chip_fd = os.open(chip, os.O_RDWR | os.O_CLOEXEC)
        except OSError as exc:
            raise HardwareError(
                f"IRQ GPIO{pin}: cannot open {chip} ({exc.strerror}): run as root, or leave "
                "tx_irq_pin/rx_irq_pin out of [rf24] to poll the radio instead"
            ) from exc
        try:
            fcntl.ioctl(chip_fd, _GET_LINE_IOCTL, request)
        except OSError as exc:
            raise HardwareError(
                f"IRQ GPIO{pin}: the line cannot be requested ({exc.strerror}): is another "
                "program using it? Check the pin in [rf24]"
            ) from exc
        finally:
            os.close(chip_fd)
        self._fd: int = struct.unpack_from("<i", request, _FD_AT)[0]
        os.set_blocking(self._fd, False)

    def fileno(self) -> int:
        return self._fd

    def clear(self) -> int:
        """Read the edges waiting on the descriptor (none: 0); their count is added up. Read
        again only after a full buffer (a radio process calls this once a frame: an empty
        descriptor's BlockingIOError cost it more than the read)."""
        n = 0
        while True:
            try:
                got = os.read(self._fd, _READ_SIZE)
            except BlockingIOError:
                break
            n += len(got) // _EVENT_SIZE
            if len(got) < _READ_SIZE:
                break
        self.edges += n
        return n

    def close(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = -1
