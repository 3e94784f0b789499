/* Host protocol: messages framed with COBS (0x00 ends a frame), each ending in a CRC-16/CCITT
 * (poly 0x1021, init 0xFFFF, big endian) over type and body. See README "USB radio modem". */
#ifndef PROTO_H
#define PROTO_H

#include <stddef.h>
#include <stdint.h>

#define PROTO_MAX_MESSAGE 40 /* type + body + CRC, decoded */
#define PROTO_MAX_FRAME (PROTO_MAX_MESSAGE + PROTO_MAX_MESSAGE / 254 + 2)

uint16_t proto_crc16(const uint8_t *data, size_t len);
/* COBS: encode len bytes into out (room for len + len/254 + 1); returns the encoded length
 * (without the 0x00 delimiter). Decoding is the parser's (proto_feed), as the bytes come. */
size_t proto_cobs_encode(const uint8_t *in, size_t len, uint8_t *out);

typedef void (*proto_handler)(uint8_t type, const uint8_t *body, uint8_t len, void *ctx);

typedef struct {
    uint8_t buf[PROTO_MAX_MESSAGE]; /* the message, decoded as its bytes arrive */
    uint8_t len;                    /* decoded bytes so far */
    uint8_t enc_len;                /* encoded bytes so far */
    uint8_t block_left, block_code; /* COBS: data bytes left in this block, its code */
    uint8_t overflow; /* the frame being received is too long: dropped at its delimiter */
    uint8_t bad;      /* it is not valid COBS (or decodes too long): counted at its delimiter */
    uint16_t crc;     /* over the decoded bytes but the last two */
    uint32_t frames_ok;
    uint32_t bad_crc;
    uint32_t bad_cobs;
    uint32_t too_long;
    uint32_t too_short;
} proto_parser;

void proto_parser_init(proto_parser *p);
/* Feed one received byte; calls handler for each complete, checked message. Never blocks,
 * never reads or writes outside its buffers, whatever the input. */
void proto_feed(proto_parser *p, uint8_t byte, proto_handler handler, void *ctx);
/* The same for n bytes at once (what the modem's main loop does). */
void proto_feed_buf(proto_parser *p, const uint8_t *in, uint8_t n, proto_handler handler,
                    void *ctx);
/* Frame and send one message through put (type, body, CRC, COBS, delimiter). */
void proto_send(uint8_t type, const uint8_t *body, uint8_t len, void (*put)(uint8_t));

#endif
