/* ATmega328P (Arduino Nano/Uno, 16 MHz): the hardware layer and main().
 * Wiring: radio CE -> D9 (PB1), CSN -> D10 (PB2), SCK -> D13, MOSI -> D11, MISO -> D12,
 * VCC -> 3.3 V with a 10 µF capacitor, GND. UART: 2 Mbaud 8N1 over the board's USB chip. */
#include <avr/interrupt.h>
#include <avr/io.h>
#include <util/delay.h>

#include "hal.h"
#include "modem.h"

#ifndef MODEM_BAUD
#define MODEM_BAUD 2000000UL /* CH340 and FTDI both do it */
#endif
/* U2X: baud = F_CPU / (8 · (UBRR + 1)), rounded to the nearest UBRR */
#define BAUD_UBRR ((F_CPU + 4UL * MODEM_BAUD) / (8UL * MODEM_BAUD) - 1UL)
/* Bytes from the host: a 256-byte ring, whose 8-bit index wraps by itself. The interrupt that
 * fills it runs for every byte, 80 CPU cycles apart at 2 Mbaud: written by hand, it takes
 * about 50 of them (the compiler's took 70). */
static volatile uint8_t ring[256]; /* written by the interrupt (asm: the compiler cannot see it) */
static volatile uint8_t head, tail;
static volatile uint32_t ring_drops; /* bytes lost to a full ring (the simulator reads it) */

ISR(USART_RX_vect, ISR_NAKED) {
    __asm__ volatile(
        "push r24\n\t"
        "in r24, __SREG__\n\t"
        "push r24\n\t"
        "push r30\n\t"
        "push r31\n\t"
        "lds r24, %[udr]\n\t"
        "push r25\n\t"
        "lds r25, %[head]\n\t"
        "ldi r30, lo8(%[ring])\n\t"
        "ldi r31, hi8(%[ring])\n\t"
        "add r30, r25\n\t"
        "brcc 3f\n\t"
        "inc r31\n"
        "3:\n\t"
        "st Z, r24\n\t"            /* the slot at head is always free */
        "inc r25\n\t"              /* head + 1, wrapping at 256 */
        "lds r24, %[tail]\n\t"
        "cp r25, r24\n\t"
        "breq 1f\n\t"
        "sts %[head], r25\n\t"
        "rjmp 2f\n"
        "1:\n\t"                   /* full: the byte is lost, and counted */
        "lds r24, %[drops]\n\t"
        "subi r24, 0xFF\n\t"
        "sts %[drops], r24\n\t"
        "lds r24, %[drops]+1\n\t"
        "sbci r24, 0xFF\n\t"
        "sts %[drops]+1, r24\n\t"
        "lds r24, %[drops]+2\n\t"
        "sbci r24, 0xFF\n\t"
        "sts %[drops]+2, r24\n\t"
        "lds r24, %[drops]+3\n\t"
        "sbci r24, 0xFF\n\t"
        "sts %[drops]+3, r24\n"
        "2:\n\t"
        "pop r25\n\t"
        "pop r31\n\t"
        "pop r30\n\t"
        "pop r24\n\t"
        "out __SREG__, r24\n\t"
        "pop r24\n\t"
        "reti\n\t" ::[udr] "n"(_SFR_MEM_ADDR(UDR0)),
        [head] "i"(&head), [tail] "i"(&tail), [ring] "i"((const uint8_t *)ring), [drops] "i"(&ring_drops));
}

void hal_init(void) {
    DDRB |= _BV(PB1) | _BV(PB2) | _BV(PB3) | _BV(PB5); /* CE, CSN (SS), MOSI, SCK out */
    PORTB |= _BV(PB2);
    SPCR = _BV(SPE) | _BV(MSTR); /* mode 0, f/4 = 4 MHz */
    SPSR = _BV(SPI2X);           /* f/2 = 8 MHz (the chip takes 10) */
    UBRR0H = (uint8_t)(BAUD_UBRR >> 8);
    UBRR0L = (uint8_t)BAUD_UBRR;
    UCSR0A = _BV(U2X0);
    UCSR0B = _BV(RXEN0) | _BV(TXEN0) | _BV(RXCIE0);
    UCSR0C = _BV(UCSZ01) | _BV(UCSZ00);
    sei();
}

void hal_csn(uint8_t level) {
    if (level)
        PORTB |= _BV(PB2);
    else
        PORTB &= (uint8_t)~_BV(PB2);
}

void hal_ce(uint8_t level) {
    if (level)
        PORTB |= _BV(PB1);
    else
        PORTB &= (uint8_t)~_BV(PB1);
}

uint8_t hal_spi_xfer(uint8_t out) {
    SPDR = out;
    while (!(SPSR & _BV(SPIF)))
        ;
    return SPDR;
}

void hal_spi_write(const uint8_t *buf, uint8_t len) {
    /* the next byte is fetched while the previous one shifts out (16 cycles at fosc/2) */
    if (!len)
        return;
    SPDR = *buf++;
    while (--len) {
        uint8_t b = *buf++;
        while (!(SPSR & _BV(SPIF)))
            ;
        SPDR = b;
    }
    while (!(SPSR & _BV(SPIF)))
        ;
    (void)SPDR;
}

void hal_delay_us(uint16_t us) {
    while (us >= 100) {
        _delay_us(100);
        us -= 100;
    }
    while (us--)
        _delay_us(1);
}

void hal_uart_receive(uint8_t max, hal_bytes_fn take) {
#ifdef LONGGE_TEST_SLOW
    /* A deliberately slowed image, for the test that the simulator's overrun count can fail:
     * 30 µs with interrupts off, six byte times at 2 Mbaud against a 2-byte receive buffer. */
    cli();
    _delay_us(30);
    sei();
#endif
    /* ring[tail..head) is the interrupt's to leave alone: parsed where it lies, in at most two
     * pieces (to the ring's end, then from its start), no copy */
    uint8_t t = tail, n = (uint8_t)(head - t);
    if (n > max)
        n = max;
    if (!n)
        return;
    uint8_t first = (uint16_t)t + n > 256 ? (uint8_t)(256 - t) : n;
    take((const uint8_t *)ring + t, first);
    if (n > first)
        take((const uint8_t *)ring, (uint8_t)(n - first));
    tail = (uint8_t)(t + n);
}

void hal_uart_putc(uint8_t b) {
    while (!(UCSR0A & _BV(UDRE0)))
        ;
    UDR0 = b;
}

void hal_uart_flush(void) {}
void hal_poll(void) {}

int main(void) {
    hal_init();
    _delay_ms(100); /* the radio's power-on reset */
    modem_init();
    for (;;)
        modem_step();
}
