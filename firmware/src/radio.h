/* A small register-level nRF24L01+ driver (no library): what the modem needs, nothing else. */
#ifndef RADIO_H
#define RADIO_H

#include <stdint.h>

typedef struct {
    uint8_t channel;      /* 0..125 */
    uint8_t rate;         /* 0 = 1 Mbit/s, 1 = 2 Mbit/s, 2 = 250 kbit/s */
    uint8_t pa_level;     /* 0..3 */
    uint8_t address_width;/* 3..5 */
    uint8_t crc_len;      /* 1 or 2 */
    uint8_t ard_step;     /* 0..15: ARD = 250 µs · (step + 1) */
    uint8_t arc;          /* 0..15 */
    uint8_t auto_ack;     /* bit per pipe 0..5 */
    uint8_t dynamic_payloads;
    uint8_t dynamic_ack;
    uint8_t payload_size; /* 1..32 (static payloads) */
    uint8_t powered;
    uint8_t tx_address[5];
    uint8_t rx_pipes;     /* bit per pipe 0..5 that is open */
    uint8_t rx_address[2][5]; /* pipes 0 and 1 */
    uint8_t rx_first[4];  /* pipes 2..5: their own first byte (the others are pipe 1's) */
} radio_config;

/* The record without pipes 2..5 (firmware 1.0 and 1.1 know only it), and with them (1.2). */
#define RADIO_CONFIG_WIRE_LEN 29
#define RADIO_CONFIG_WIRE_LEN_PIPES 33

/* 1 if a chip answers on SPI (a register written reads back), 0 otherwise. */
uint8_t radio_begin(void);
uint8_t radio_is_plus(void);
void radio_apply(const radio_config *c);
void radio_listen(uint8_t on);
/* Load one payload into the TX FIFO (the caller keeps count: at most 3 outstanding). */
void radio_load(const uint8_t *payload, uint8_t len, uint8_t no_ack);
void radio_flush_tx(void);
void radio_flush_rx(void);
void radio_reuse_tx(void);
uint8_t radio_status(void);
void radio_clear(uint8_t status_bits);
uint8_t radio_arc_count(void);
uint8_t radio_fifo_status(void);
/* One payload from the RX FIFO: returns its length (0 if none or corrupt) and its pipe. */
uint8_t radio_read(uint8_t *buf, uint8_t *pipe);
uint8_t radio_rpd(void);
/* Decode / check a wire-format config; returns 0 if valid. */
uint8_t radio_config_from_wire(const uint8_t *body, uint8_t len, radio_config *c);

#endif
