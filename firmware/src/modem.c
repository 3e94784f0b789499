/* The modem: host messages (proto.c) in, radio operations (radio.c) out, radio events back.
 *
 * Host -> modem            Modem -> host
 *  V                        v major minor chip_ok plus depth "LongGe modem"
 *  C config(29)             c 0                    | e code text
 *  L on                     (none)
 *  T no_ack payload(1..32)  t ok arc fifo accepted(4) flushes(4)   when a payload finishes
 *  F  (flush TX)            r pipe payload                         for each received frame
 *  U  (reuse TX)            d rpd                                   after D
 *  X  (flush RX)            s counters(9 x 4)                       after S
 *  R count (ignored)        e code text                             a refused request
 *  D, S
 * The t message is the air emulator's (longge/air/wire.py), so the host side is shared. */
#include "modem.h"

#include <string.h>

#include "hal.h"
#include "nrf24_regs.h"
#include "proto.h"
#include "radio.h"

enum { E_UNKNOWN = 1, E_ARGS = 2, E_FIFO = 3, E_CONFIG = 4, E_NO_CHIP = 5 };

static proto_parser parser;
static radio_config config;
static uint8_t chip_ok, plus, blocked, outstanding;
/* Payloads waiting in front of the chip's 3-deep FIFO: USB serial has millisecond latencies,
 * and the host would otherwise leave the air idle while a TX result travels back. */
#define QUEUE 16
static uint8_t q_len[QUEUE], q_noack[QUEUE], q_buf[QUEUE][NRF_MAX_PAYLOAD], q_head, q_n;

/* The 4 ms rule (nRF24L01+ Product Specification §6.1.5): without acknowledgements the chip's
 * PLL runs open loop in TX mode, and a stay there must not last over 4 ms. A fed FIFO sends
 * back to back, so after burst_limit unacknowledged frames the refill waits until the FIFO
 * has drained (the chip back in standby); the next frame pays a 130 µs settle. The host keeps
 * the rule too (longge/daemon/stream.py); this holds it whatever the host does. */
static uint8_t burst_loaded, burst_limit = 1;

static uint8_t frames_per_4ms(const radio_config *c) {
    static const uint16_t bit_ns[3] = {1000, 500, 4000}; /* 1M, 2M, 250k */
    /* the longest frame: preamble, address, 9-bit control field, 32 bytes, CRC */
    uint32_t bits = 8u * (1u + c->address_width + NRF_MAX_PAYLOAD + c->crc_len) + 9u;
    uint32_t k = 4000000u / (bits * bit_ns[c->rate]);
    return k ? (uint8_t)k : 1;
}

static void refill(void) {
    /* The chip's own TX_FULL decides (a count could miss a coalesced TX_DS). */
    while (q_n && !blocked) {
        uint8_t fifo = radio_fifo_status();
        if (fifo & FIFO_TX_FULL)
            break;
        if (fifo & FIFO_TX_EMPTY)
            burst_loaded = 0; /* the chip has left TX mode */
        if (q_noack[q_head] || !(config.auto_ack & 1)) {
            if (burst_loaded >= burst_limit)
                break; /* this stay is full: the next TX_DS that empties the FIFO goes on */
            burst_loaded++;
        }
        radio_load(q_buf[q_head], q_len[q_head], q_noack[q_head]);
        q_head = (uint8_t)((q_head + 1) % QUEUE);
        q_n--;
        if (++outstanding >= NRF_FIFO_DEPTH) {
            outstanding = NRF_FIFO_DEPTH;
            break; /* full by the count (which a coalesced TX_DS only makes too high): no
                      second look at the chip; tx_result looks next */
        }
    }
}
static uint32_t accepted, flushes, unknown, bad_args, tx_ok, tx_max_rt, rx_frames;

static void put32(uint8_t *b, uint32_t v) {
    b[0] = (uint8_t)(v >> 24);
    b[1] = (uint8_t)(v >> 16);
    b[2] = (uint8_t)(v >> 8);
    b[3] = (uint8_t)v;
}

static void send(uint8_t type, const uint8_t *body, uint8_t len) {
    proto_send(type, body, len, hal_uart_putc);
}

static void error(uint8_t code, const char *text) {
    uint8_t body[24];
    uint8_t n = 1;
    body[0] = code;
    while (*text && n < sizeof body)
        body[n++] = (uint8_t)*text++;
    send('e', body, n);
    if (code == E_UNKNOWN)
        unknown++;
    else
        bad_args++;
}

static void tx_result(uint8_t ok) {
    uint8_t fifo = radio_fifo_status();
    /* Never report fewer than the chip holds: the host would send more than fits. */
    if (fifo & FIFO_TX_EMPTY)
        outstanding = 0;
    else if (fifo & FIFO_TX_FULL)
        outstanding = NRF_FIFO_DEPTH;
    else if (outstanding == 0)
        outstanding = 1;
    else if (outstanding >= NRF_FIFO_DEPTH)
        outstanding = NRF_FIFO_DEPTH - 1;
    /* Free chip slots the 4 ms rule lets this stay use; the others count as taken, so that
     * the host never sends more than the queue and those slots hold. */
    uint8_t free_slots = (uint8_t)(NRF_FIFO_DEPTH - outstanding);
    if (!(config.auto_ack & 1) || burst_loaded) {
        uint8_t loaded = (fifo & FIFO_TX_EMPTY) ? 0 : burst_loaded;
        uint8_t left = loaded >= burst_limit ? 0 : (uint8_t)(burst_limit - loaded);
        if (left < free_slots)
            free_slots = left;
    }
    uint8_t body[11];
    body[0] = ok;
    body[1] = radio_arc_count();
    body[2] = (uint8_t)(NRF_FIFO_DEPTH - free_slots + q_n);
    put32(body + 3, accepted);
    put32(body + 7, flushes);
    send('t', body, sizeof body);
}

static void on_message(uint8_t type, const uint8_t *b, uint8_t len, void *ctx) {
    (void)ctx;
    uint8_t reply[37];
    if (!chip_ok && type != 'V' && type != 'S') {
        error(E_NO_CHIP, "no radio on SPI");
        return;
    }
    switch (type) {
    case 'V': {
        const char *name = "LongGe modem";
        uint8_t n = 4;
        reply[0] = MODEM_VERSION_MAJOR;
        reply[1] = MODEM_VERSION_MINOR;
        reply[2] = chip_ok;
        reply[3] = plus;
        reply[4] = NRF_FIFO_DEPTH + QUEUE;
        n = 5;
        while (*name)
            reply[n++] = (uint8_t)*name++;
        send('v', reply, n);
        return;
    }
    case 'C': {
        radio_config c;
        uint8_t code = radio_config_from_wire(b, len, &c);
        if (code) {
            error(E_CONFIG, "bad config");
            return;
        }
        if (c.rate == 2 && !plus) {
            error(E_CONFIG, "no 250k: not nRF24L01+");
            return;
        }
        config = c;
        burst_limit = frames_per_4ms(&config);
        burst_loaded = 0;
        radio_apply(&config);
        reply[0] = 0;
        send('c', reply, 1);
        return;
    }
    case 'L':
        if (len != 1 || b[0] > 1) {
            error(E_ARGS, "L on(0|1)");
            return;
        }
        radio_listen(b[0]);
        return;
    case 'T':
        if (len < 2 || len > NRF_MAX_PAYLOAD + 1 || b[0] > 1) {
            error(E_ARGS, "T no_ack payload(1..32)");
            return;
        }
        if (q_n >= QUEUE) {
            error(E_FIFO, "TX queue full");
            return;
        }
        {
            uint8_t slot = (uint8_t)((q_head + q_n) % QUEUE);
            q_len[slot] = (uint8_t)(len - 1);
            q_noack[slot] = b[0];
            memcpy(q_buf[slot], b + 1, (size_t)(len - 1));
            q_n++;
        }
        accepted++;
        refill();
        return;
    case 'F':
        radio_flush_tx();
        outstanding = 0;
        q_n = 0;
        blocked = 0;
        burst_loaded = 0;
        flushes++;
        return;
    case 'U':
        radio_reuse_tx();
        blocked = 0;
        refill();
        return;
    case 'X':
        radio_flush_rx();
        return;
    case 'R':
        return; /* the host read frames: nothing to do, they left the chip already */
    case 'D':
        reply[0] = radio_rpd();
        send('d', reply, 1);
        return;
    case 'S': {
        uint32_t c[9] = {parser.frames_ok, parser.bad_crc,  parser.bad_cobs,
                         parser.too_long + parser.too_short, unknown, bad_args,
                         tx_ok, tx_max_rt, rx_frames};
        for (uint8_t i = 0; i < 9; i++)
            put32(reply + 4 * i, c[i]);
        send('s', reply, 36);
        return;
    }
    default:
        error(E_UNKNOWN, "unknown message");
    }
}

void modem_init(void) {
    proto_parser_init(&parser);
    chip_ok = radio_begin();
    plus = chip_ok ? radio_is_plus() : 0;
}

static void from_host(const uint8_t *bytes, uint8_t n) {
    proto_feed_buf(&parser, bytes, n, on_message, 0);
}

void modem_step(void) {
    hal_uart_receive(64, from_host);
    if (chip_ok) {
        uint8_t status = radio_status();
        if (status & STATUS_TX_DS) {
            radio_clear(STATUS_TX_DS);
            tx_ok++;
            if (outstanding)
                outstanding--;
            refill();
            tx_result(1);
        }
        if ((status & STATUS_MAX_RT) && !blocked) {
            blocked = 1; /* stays raised, payload kept, until the host flushes or reuses */
            tx_max_rt++;
            tx_result(0);
        }
        if (status & STATUS_RX_DR) {
            uint8_t buf[NRF_MAX_PAYLOAD + 1], pipe, len;
            radio_clear(STATUS_RX_DR);
            /* At most a FIFO's worth per turn: a peer that keeps the FIFO full would otherwise
             * keep this loop going and the host's messages unread (and the UART ring full). */
            for (uint8_t k = 0; k < NRF_FIFO_DEPTH && (len = radio_read(buf + 1, &pipe)) > 0; k++) {
                buf[0] = pipe;
                rx_frames++;
                send('r', buf, (uint8_t)(len + 1));
            }
        }
    }
    hal_uart_flush();
    hal_poll();
}
