/* A model of the nRF24L01+ as the firmware sees it over SPI (registers, FIFOs, STATUS), attached
 * to LongGe's air emulator with the emulated radios' own messages (longge/air/wire.py). Host-side
 * builds only: it lets the real firmware logic run against the emulated air. */
#ifndef CHIP_H
#define CHIP_H

#include <stddef.h>
#include <stdint.h>

int chip_attach(const char *air_path, const char *name);
/* Or attach to an air in the same process: air() takes each message the chip sends, and the
 * air hands the chip its messages with chip_from_air() (it may do so from within air()). */
typedef void (*chip_air_fn)(const uint8_t *msg, size_t len);
void chip_attach_local(chip_air_fn air, const char *name);
void chip_from_air(const uint8_t *msg, size_t len);
void chip_csn(uint8_t level);
uint8_t chip_spi(uint8_t out);
void chip_ce(uint8_t level);
/* Read LONGGE_CHIP again (which chip is on the bus: see chip.c). */
void chip_variant(void);
/* The IRQ pin: 0 (active) while an unmasked RX_DR, TX_DS or MAX_RT is set. */
uint8_t chip_irq(void);
/* Take in what the air sent (non-blocking); returns the socket for select(), or -1. */
int chip_poll(void);

#endif
