#include "vair.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chip.h"

#define SETTLE_NS 130000ull        /* Tstby2a, and each TX<->RX turnaround (p. 22) */
#define TX_MODE_MAX_NS 4000000ull  /* the 4 ms rule (6.1.5) */
#define ARD_STEP_NS 250000ull
#define FIFO_DEPTH 3

static struct {
    uint64_t bit_ns;
    uint8_t aw, crc, aa_tx, aa_rx, dyn_ack, powered, ard_step, arc;
} cfg = {500, 5, 2, 1, 1, 1, 0, 0, 3};
static uint8_t listening;

/* The chip's TX FIFO (the air holds the payloads; the chip model only counts them). */
static uint8_t q_buf[FIFO_DEPTH + 1][32], q_len[FIFO_DEPTH + 1], q_noack[FIFO_DEPTH + 1], q_n;
static uint32_t accepted, flushes;
static int tx_busy, tx_ack, in_stay, stay_flagged;
static uint64_t tx_end, last_end, stay_start;
static uint32_t expect_seq;

/* The peer's stream to the chip. */
static int peer_on, peer_busy;
static uint8_t peer_len = 32, rx_fifo;
static uint32_t peer_seq;
static uint64_t peer_land, peer_data_start;
static unsigned peer_burst;

static vair_stats stats;

static uint32_t get32(const uint8_t *b) {
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

static void put32(uint8_t *b, uint32_t v) {
    b[0] = (uint8_t)(v >> 24);
    b[1] = (uint8_t)(v >> 16);
    b[2] = (uint8_t)(v >> 8);
    b[3] = (uint8_t)v;
}

void vair_payload(uint32_t seq, uint8_t *out, uint8_t len) {
    uint8_t head[4];
    put32(head, seq);
    for (uint8_t i = 0; i < len; i++)
        out[i] = i < 4 ? head[i] : (uint8_t)(seq * 31u + i * 7u);
}

int vair_payload_ok(uint32_t seq, const uint8_t *p, uint8_t len) {
    uint8_t want[32];
    if (len < 4 || len > 32)
        return 0;
    vair_payload(seq, want, len);
    return memcmp(want, p, len) == 0;
}

/* Datasheet timing (ns) of the chip's current settings. */
static uint64_t vair_toa_ns(uint8_t payload_len) {
    /* 8 * (preamble + address + payload + CRC) + 9-bit packet control field (p. 27) */
    return (8ull * (1u + cfg.aw + payload_len + cfg.crc) + 9u) * cfg.bit_ns;
}

static uint64_t vair_ack_cycle_ns(uint8_t payload_len) {
    return SETTLE_NS + vair_toa_ns(payload_len) + SETTLE_NS + vair_toa_ns(0);
}

static unsigned burst_frames(uint8_t payload_len) {
    uint64_t k = TX_MODE_MAX_NS / vair_toa_ns(payload_len);
    return k ? (unsigned)k : 1;
}

double vair_air_frames_per_s(uint8_t payload_len) {
    if (cfg.aa_tx)
        return 1e9 / (double)vair_ack_cycle_ns(payload_len);
    unsigned k = burst_frames(payload_len);
    return k * 1e9 / (double)(SETTLE_NS + k * vair_toa_ns(payload_len));
}

const vair_stats *vair_get_stats(void) { return &stats; }

void vair_init(void) {
    memset(&stats, 0, sizeof stats);
    q_n = 0;
    accepted = flushes = 0;
    tx_busy = in_stay = 0;
    peer_on = peer_busy = 0;
    rx_fifo = 0;
    listening = 0;
}

void vair_peer_stream(int on, uint8_t payload_len) {
    peer_on = on;
    peer_len = payload_len < 4 ? 4 : payload_len > 32 ? 32 : payload_len;
}

/* -- the chip's settings, from its C message (JSON, chip.c's push_config) -- */

static long json_int(const char *js, const char *key, long dflt) {
    const char *p = strstr(js, key);
    return p ? strtol(p + strlen(key), NULL, 10) : dflt;
}

static int json_true(const char *js, const char *key) {
    const char *p = strstr(js, key);
    return p && strncmp(p + strlen(key), "true", 4) == 0;
}

static void configure(const char *js) {
    const char *r = strstr(js, "\"rate\":\"");
    if (r) {
        r += 8;
        cfg.bit_ns = strncmp(r, "250k", 4) == 0 ? 4000 : strncmp(r, "1M", 2) == 0 ? 1000 : 500;
    }
    cfg.aw = (uint8_t)json_int(js, "\"address_width\":", 5);
    cfg.crc = (uint8_t)json_int(js, "\"crc_len\":", 2);
    cfg.ard_step = (uint8_t)json_int(js, "\"ard_step\":", 0);
    cfg.arc = (uint8_t)json_int(js, "\"arc\":", 3);
    cfg.powered = (uint8_t)json_true(js, "\"powered\":");
    cfg.dyn_ack = (uint8_t)json_true(js, "\"dynamic_ack\":");
    /* "auto_ack":[p0,p1,...]: the sender needs pipe 0 (its ACKs arrive there), the receiver
     * acknowledges on pipe 1 (the peer's address) */
    const char *a = strstr(js, "\"auto_ack\":[");
    if (a) {
        a += 12;
        cfg.aa_tx = strncmp(a, "true", 4) == 0;
        const char *comma = strchr(a, ',');
        cfg.aa_rx = comma && strncmp(comma + 1, "true", 4) == 0;
    }
}

/* -- the chip transmitting -- */

static void tx_try_start(uint64_t t) {
    if (tx_busy || !cfg.powered || listening || q_n == 0)
        return;
    tx_busy = 1;
    tx_ack = cfg.aa_tx && !(q_noack[0] && cfg.dyn_ack);
    uint64_t toa = vair_toa_ns(q_len[0]);
    if (tx_ack) {
        in_stay = 0;
        tx_end = t + SETTLE_NS + toa + SETTLE_NS + vair_toa_ns(0);
        return;
    }
    uint64_t data_start = t;
    if (!(in_stay && t == last_end)) {
        data_start = t + SETTLE_NS; /* a new stay in TX mode: the PLL settles first */
        stay_start = data_start;
        stay_flagged = 0;
    }
    tx_end = data_start + toa;
    if (tx_end - stay_start > TX_MODE_MAX_NS && !stay_flagged) {
        stats.tx_mode_over_4ms++;
        stay_flagged = 1;
    }
}

static void tx_finish(void) {
    uint64_t e = tx_end;
    tx_busy = 0;
    uint32_t seq = get32(q_buf[0]);
    if (seq == expect_seq && vair_payload_ok(seq, q_buf[0], q_len[0]))
        stats.chip_frames++;
    else
        stats.chip_bad_frames++;
    expect_seq = seq + 1;
    q_n--;
    memmove(q_buf, q_buf + 1, sizeof q_buf[0] * q_n);
    memmove(q_len, q_len + 1, q_n);
    memmove(q_noack, q_noack + 1, q_n);
    uint8_t msg[12] = {'t', 1, 0, q_n};
    put32(msg + 4, accepted);
    put32(msg + 8, flushes);
    chip_from_air(msg, sizeof msg);
    last_end = e;
    in_stay = !tx_ack;
    tx_try_start(e);
}

/* -- the peer transmitting to the chip -- */

static void peer_try_start(uint64_t t) {
    if (peer_busy || !peer_on || !listening || !cfg.powered)
        return;
    peer_busy = 1;
    peer_burst = 0;
    peer_data_start = t + SETTLE_NS;
    peer_land = peer_data_start + vair_toa_ns(peer_len);
}

static void peer_land_frame(void) {
    uint64_t t = peer_land;
    int room = rx_fifo < FIFO_DEPTH;
    if (room) {
        uint8_t msg[2 + 32] = {'r', 1};
        vair_payload(peer_seq, msg + 2, peer_len);
        rx_fifo++;
        stats.peer_frames++;
        chip_from_air(msg, (size_t)peer_len + 2);
    }
    if (cfg.aa_rx) {
        if (room) { /* the chip's ACK, then the peer's next frame from standby */
            peer_seq++;
            peer_data_start = t + SETTLE_NS + vair_toa_ns(0) + SETTLE_NS;
        } else { /* no ACK: the peer retries after ARD (its own host re-sends after MAX_RT) */
            stats.peer_retries++;
            peer_data_start += vair_toa_ns(peer_len) + ARD_STEP_NS * (cfg.ard_step + 1u);
        }
    } else {
        if (!room)
            stats.peer_fifo_drops++;
        peer_seq++;
        peer_data_start = t;
        if (++peer_burst >= burst_frames(peer_len)) { /* back to standby, settle again */
            peer_burst = 0;
            peer_data_start = t + SETTLE_NS;
        }
    }
    peer_land = peer_data_start + vair_toa_ns(peer_len);
}

/* -- time -- */

uint64_t vair_next_ns(void) {
    uint64_t n = VAIR_NEVER;
    if (tx_busy)
        n = tx_end;
    if (peer_busy && peer_land < n)
        n = peer_land;
    return n;
}

void vair_run(uint64_t now) {
    for (;;) {
        uint64_t n = vair_next_ns();
        if (n > now)
            return;
        if (tx_busy && tx_end == n)
            tx_finish();
        else
            peer_land_frame();
    }
}

void vair_from_chip(const uint8_t *m, size_t n, uint64_t now) {
    if (n < 1)
        return;
    vair_run(now);
    switch (m[0]) {
    case 'C': {
        char js[700];
        size_t k = n - 1 < sizeof js - 1 ? n - 1 : sizeof js - 1;
        memcpy(js, m + 1, k);
        js[k] = 0;
        configure(js);
        break;
    }
    case 'L':
        listening = n >= 2 && m[1];
        if (!listening)
            peer_busy = 0; /* the frame on its way finds no receiver */
        break;
    case 'T':
        if (n >= 3 && q_n < FIFO_DEPTH + 1) {
            uint8_t len = (uint8_t)(n - 2 > 32 ? 32 : n - 2);
            memcpy(q_buf[q_n], m + 2, len);
            q_len[q_n] = len;
            q_noack[q_n] = m[1];
            q_n++;
        }
        accepted++;
        break;
    case 'F':
        q_n = 0;
        flushes++;
        tx_busy = 0;
        break;
    case 'R':
        rx_fifo = (uint8_t)(n >= 2 && m[1] < rx_fifo ? rx_fifo - m[1] : 0);
        break;
    case 'X':
        rx_fifo = 0;
        break;
    case 'D': {
        uint8_t msg[2] = {'d', 0};
        chip_from_air(msg, 2);
        break;
    }
    default:
        break; /* H (attach), U (reuse: no MAX_RT here) */
    }
    tx_try_start(now);
    peer_try_start(now);
}
