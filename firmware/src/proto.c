#include "proto.h"

uint16_t proto_crc16(const uint8_t *data, size_t len) {
    uint16_t crc = 0xFFFF;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)data[i] << 8;
        for (uint8_t b = 0; b < 8; b++)
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
    }
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

int proto_cobs_decode(const uint8_t *in, size_t len, uint8_t *out, size_t cap) {
    size_t i = 0, o = 0;
    while (i < len) {
        uint8_t code = in[i++];
        if (code == 0)
            return -1;
        for (uint8_t k = 1; k < code; k++) {
            if (i >= len || in[i] == 0 || o >= cap)
                return -1;
            out[o++] = in[i++];
        }
        if (code != 0xFF && i < len) {
            if (o >= cap)
                return -1;
            out[o++] = 0;
        }
    }
    return (int)o;
}

void proto_parser_init(proto_parser *p) {
    p->len = 0;
    p->overflow = 0;
    p->frames_ok = p->bad_crc = p->bad_cobs = p->too_long = p->too_short = 0;
}

void proto_feed(proto_parser *p, uint8_t byte, proto_handler handler, void *ctx) {
    if (byte != 0) {
        if (p->len < sizeof p->buf)
            p->buf[p->len++] = byte;
        else
            p->overflow = 1;
        return;
    }
    /* a delimiter: judge the frame collected so far */
    uint8_t msg[PROTO_MAX_MESSAGE];
    uint8_t n = p->len, overflow = p->overflow;
    p->len = 0;
    p->overflow = 0;
    if (n == 0)
        return; /* empty frame: a resync delimiter, harmless */
    if (overflow) {
        p->too_long++;
        return;
    }
    int d = proto_cobs_decode(p->buf, n, msg, sizeof msg);
    if (d < 0) {
        p->bad_cobs++;
        return;
    }
    if (d < 3) {
        p->too_short++;
        return;
    }
    uint16_t crc = (uint16_t)((msg[d - 2] << 8) | msg[d - 1]);
    if (proto_crc16(msg, (size_t)d - 2) != crc) {
        p->bad_crc++;
        return;
    }
    p->frames_ok++;
    handler(msg[0], msg + 1, (uint8_t)(d - 3), ctx);
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
