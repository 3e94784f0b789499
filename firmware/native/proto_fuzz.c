/* The host-protocol parser (src/proto.c) alone, for the fuzz test, built with AddressSanitizer
 * and UBSan. Reads records from stdin: a 2-byte big-endian length, then that many bytes of a
 * stream; feeds each stream to a fresh parser and prints, per record, one line per message
 * ("m" and the message in hex), one line of counters ("c ok bad_crc bad_cobs too_long
 * too_short") and a line ".". Exits 0 at end of input; a sanitizer report exits non-zero. */
#include <stdio.h>
#include <stdlib.h>

#include "proto.h"

static void on_message(uint8_t type, const uint8_t *body, uint8_t len, void *ctx) {
    (void)ctx;
    printf("m %02x", type);
    for (uint8_t i = 0; i < len; i++)
        printf("%02x", body[i]);
    printf("\n");
}

int main(void) {
    int hi, lo;
    while ((hi = getchar()) != EOF && (lo = getchar()) != EOF) {
        size_t n = ((size_t)hi << 8) | (size_t)lo;
        uint8_t *stream = malloc(n ? n : 1);
        if (stream == NULL || fread(stream, 1, n, stdin) != n) {
            free(stream);
            return 2;
        }
        proto_parser p;
        proto_parser_init(&p);
        for (size_t i = 0; i < n; i++)
            proto_feed(&p, stream[i], on_message, NULL);
        free(stream);
        printf("c %lu %lu %lu %lu %lu\n.\n", (unsigned long)p.frames_ok, (unsigned long)p.bad_crc,
               (unsigned long)p.bad_cobs, (unsigned long)p.too_long, (unsigned long)p.too_short);
        fflush(stdout);
    }
    return 0;
}
