#include "proto.h"

/* CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF, unreflected), one byte per step. On the AVR
 * a 512-byte table in flash: the bit-by-bit loop took a third of the modem's cycles at full
 * rate (docs/modem.md). Elsewhere, the byte-wise form of the same step. */
#ifdef __AVR__
#include <avr/pgmspace.h>
#define CRC_ROW(i) CRC_T(i), CRC_T(i + 1), CRC_T(i + 2), CRC_T(i + 3), CRC_T(i + 4), CRC_T(i + 5), \
                   CRC_T(i + 6), CRC_T(i + 7)
#define CRC_B(c) (((c) & 0x8000) ? (((c) << 1) ^ 0x1021) : ((c) << 1))
#define CRC_T(i) ((uint16_t)CRC_B(CRC_B(CRC_B(CRC_B(CRC_B(CRC_B(CRC_B(CRC_B((uint32_t)(i) << 8)))))))))
static const uint16_t crc_table[256] PROGMEM = {
    CRC_ROW(0),   CRC_ROW(8),   CRC_ROW(16),  CRC_ROW(24),  CRC_ROW(32),  CRC_ROW(40),  CRC_ROW(48),
    CRC_ROW(56),  CRC_ROW(64),  CRC_ROW(72),  CRC_ROW(80),  CRC_ROW(88),  CRC_ROW(96),  CRC_ROW(104),
    CRC_ROW(112), CRC_ROW(120), CRC_ROW(128), CRC_ROW(136), CRC_ROW(144), CRC_ROW(152), CRC_ROW(160),
    CRC_ROW(168), CRC_ROW(176), CRC_ROW(184), CRC_ROW(192), CRC_ROW(200), CRC_ROW(208), CRC_ROW(216),
    CRC_ROW(224), CRC_ROW(232), CRC_ROW(240), CRC_ROW(248)};

static inline uint16_t crc_step(uint16_t crc, uint8_t b) {
    return (uint16_t)((crc << 8) ^ pgm_read_word(&crc_table[(uint8_t)(crc >> 8) ^ b]));
}
#else
static inline uint16_t crc_step(uint16_t crc, uint8_t b) {
    uint16_t x = (uint16_t)((crc >> 8) ^ b);
    x ^= x >> 4;
    return (uint16_t)((crc << 8) ^ (x << 12) ^ (x << 5) ^ x);
}
#endif

uint16_t proto_crc16(const uint8_t *data, size_t len) {
    uint16_t crc = 0xFFFF;
    for (size_t i = 0; i < len; i++)
        crc = crc_step(crc, data[i]);
    return crc;
}

size_t proto_cobs_encode(const uint8_t *in, size_t len, uint8_t *out) {
    size_t code_at = 0, o = 1;
    uint8_t code = 1;
    for (size_t i = 0; i < len; i++) {
        if (in[i] == 0) {
            out[code_at] = code;
            code_at = o++;
            code = 1;
        } else {
            out[o++] = in[i];
            if (++code == 0xFF) {
                out[code_at] = code;
                code_at = o++;
                code = 1;
            }
        }
    }
    out[code_at] = code;
    return o;
}

/* The state of a frame not begun yet. */
static void frame_reset(proto_parser *p) {
    p->len = 0;
    p->enc_len = 0;
    p->block_left = 0;
    p->block_code = 0xFF;
    p->overflow = 0;
    p->bad = 0;
    p->crc = 0xFFFF;
}

void proto_parser_init(proto_parser *p) {
    frame_reset(p);
    p->frames_ok = p->bad_crc = p->bad_cobs = p->too_long = p->too_short = 0;
}

static void end_frame(proto_parser *p, proto_handler handler, void *ctx) {
    uint8_t n = p->len, enc = p->enc_len, overflow = p->overflow, bad = p->bad | (p->block_left != 0);
    uint16_t crc = p->crc;
    frame_reset(p);
    if (enc == 0)
        return; /* empty frame: a resync delimiter, harmless */
    if (overflow) {
        p->too_long++;
        return;
    }
    if (bad) {
        p->bad_cobs++;
        return;
    }
    if (n < 3) {
        p->too_short++;
        return;
    }
    if (crc != (uint16_t)((p->buf[n - 2] << 8) | p->buf[n - 1])) {
        p->bad_crc++;
        return;
    }
    p->frames_ok++;
    handler(p->buf[0], p->buf + 1, (uint8_t)(n - 3), ctx);
}

void proto_feed_buf(proto_parser *p, const uint8_t *in, uint8_t n, proto_handler handler,
                    void *ctx) {
    /* COBS is decoded as the bytes come (no second pass at the delimiter), the state kept in
     * locals across the batch: the modem runs this for every byte from the host, 80 CPU
     * cycles apart at 2 Mbaud (docs/modem.md). */
    uint8_t enc = p->enc_len, len = p->len, left = p->block_left, code = p->block_code;
    uint8_t skip = p->overflow | p->bad;
    uint16_t crc = p->crc;
    for (uint8_t i = 0; i < n; i++) {
        uint8_t byte = in[i];
        if (byte == 0) {
            p->enc_len = enc;
            p->len = len;
            p->block_left = left;
            p->crc = crc;
            end_frame(p, handler, ctx);
            /* what frame_reset left in p, in the locals */
            enc = len = left = skip = 0;
            code = 0xFF;
            crc = 0xFFFF;
            continue;
        }
        if (enc >= PROTO_MAX_FRAME) {
            p->overflow = 1; /* dropped at its delimiter */
            skip = 1;
            continue;
        }
        enc++;
        if (skip)
            continue;
        if (left) {
            left--;
        } else {
            /* a code byte: the block before it (if any, unless a full 254) ended in a 0 */
            uint8_t before = code;
            code = byte;
            left = (uint8_t)(byte - 1);
            if (enc == 1 || before == 0xFF)
                continue;
            byte = 0;
        }
        if (len >= PROTO_MAX_MESSAGE) {
            p->bad = 1; /* decodes to more than a message holds */
            skip = 1;
            continue;
        }
        /* the CRC runs two bytes behind: at the delimiter it covers all but the CRC itself */
        if (len >= 2)
            crc = crc_step(crc, p->buf[len - 2]);
        p->buf[len++] = byte;
    }
    p->enc_len = enc;
    p->len = len;
    p->block_left = left;
    p->block_code = code;
    p->crc = crc;
}

void proto_feed(proto_parser *p, uint8_t byte, proto_handler handler, void *ctx) {
    proto_feed_buf(p, &byte, 1, handler, ctx);
}

void proto_send(uint8_t type, const uint8_t *body, uint8_t len, void (*put)(uint8_t)) {
    uint8_t msg[PROTO_MAX_MESSAGE];
    uint8_t frame[PROTO_MAX_FRAME];
    if (len > PROTO_MAX_MESSAGE - 3)
        len = PROTO_MAX_MESSAGE - 3;
    msg[0] = type;
    for (uint8_t i = 0; i < len; i++)
        msg[1 + i] = body[i];
    uint16_t crc = proto_crc16(msg, (size_t)len + 1);
    msg[len + 1] = (uint8_t)(crc >> 8);
    msg[len + 2] = (uint8_t)crc;
    size_t n = proto_cobs_encode(msg, (size_t)len + 3, frame);
    for (size_t i = 0; i < n; i++)
        put(frame[i]);
    put(0);
}
