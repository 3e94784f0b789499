/* ATmega328P (Arduino Nano/Uno, 16 MHz): the hardware layer and main().
 * Wiring: radio CE -> D9 (PB1), CSN -> D10 (PB2), SCK -> D13, MOSI -> D11, MISO -> D12,
 * VCC -> 3.3 V with a 10 µF capacitor, GND. UART: 2 Mbaud 8N1 over the board's USB chip. */
#include <avr/interrupt.h>
#include <avr/io.h>
#include <util/delay.h>

#include "hal.h"
#include "modem.h"

#define BAUD_UBRR 0 /* U2X: 16 MHz / (8 · (0 + 1)) = 2 Mbaud (CH340 and FTDI both do it) */
#define RX_RING 128 /* power of two */

static volatile uint8_t ring[RX_RING];
static volatile uint8_t head, tail;

ISR(USART_RX_vect) {
    uint8_t b = UDR0;
    uint8_t next = (uint8_t)((head + 1) & (RX_RING - 1));
    if (next != tail) { /* full: the byte is lost and the frame's CRC will say so */
        ring[head] = b;
        head = next;
    }
}

void hal_init(void) {
    DDRB |= _BV(PB1) | _BV(PB2) | _BV(PB3) | _BV(PB5); /* CE, CSN (SS), MOSI, SCK out */
    PORTB |= _BV(PB2);
    SPCR = _BV(SPE) | _BV(MSTR); /* mode 0, f/4 = 4 MHz */
    SPSR = _BV(SPI2X);           /* f/2 = 8 MHz (the chip takes 10) */
    UBRR0H = 0;
    UBRR0L = BAUD_UBRR;
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

void hal_delay_us(uint16_t us) {
    while (us >= 100) {
        _delay_us(100);
        us -= 100;
    }
    while (us--)
        _delay_us(1);
}

int hal_uart_getc(void) {
    if (head == tail)
        return -1;
    uint8_t b = ring[tail];
    tail = (uint8_t)((tail + 1) & (RX_RING - 1));
    return b;
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
