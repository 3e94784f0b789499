/* The hardware layer: everything the modem needs from its board. main_avr.c implements it on an
 * ATmega328P; native/hal_native.c implements it over a model of the chip attached to LongGe's air
 * emulator, with the UART on a pseudo-terminal (host-side tests). */
#ifndef HAL_H
#define HAL_H

#include <stdint.h>

void hal_init(void);
/* SPI: chip select (active low) and one full-duplex byte. */
void hal_csn(uint8_t level);
uint8_t hal_spi_xfer(uint8_t out);
/* Send len bytes (what comes back is not needed): a payload into the TX FIFO. */
void hal_spi_write(const uint8_t *buf, uint8_t len);
/* The radio's CE pin. */
void hal_ce(uint8_t level);
void hal_delay_us(uint16_t us);
/* UART to the host: hand up to max received bytes to take(), in place, in one or more
 * pieces; they count as read when it returns. Send one byte (may block). */
typedef void (*hal_bytes_fn)(const uint8_t *bytes, uint8_t n);
void hal_uart_receive(uint8_t max, hal_bytes_fn take);
void hal_uart_putc(uint8_t byte);
void hal_uart_flush(void);
/* Called once per main-loop turn: native builds service their sockets here. */
void hal_poll(void);

#endif
