/* An air in virtual time for the modem simulation (modem_sim.c): the modem's chip model
 * (native/chip.c, attached with chip_attach_local) on one side, a peer radio on the other.
 * The peer acknowledges per the datasheet (Enhanced ShockBurst) or simply listens (no-ack),
 * and can stream frames to the modem's chip. Times are nanoseconds of simulated time; the
 * formulas are longge/chip/datasheet.py's (the tests hold this file to them). */
#ifndef VAIR_H
#define VAIR_H

#include <stddef.h>
#include <stdint.h>

#define VAIR_NEVER UINT64_MAX

typedef struct {
    uint64_t chip_frames;       /* frames the modem's chip sent that the peer received */
    uint64_t chip_bad_frames;   /* ... whose payload was not the next in sequence, intact */
    uint64_t peer_frames;       /* frames the peer put into the chip's RX FIFO */
    uint64_t peer_retries;      /* ESB: the chip's RX FIFO was full, no ACK, the peer retried */
    uint64_t peer_fifo_drops;   /* no-ack: a frame reached a full RX FIFO and was lost */
    uint64_t tx_mode_over_4ms;  /* stays in TX mode longer than 4 ms (no-ack) */
} vair_stats;

/* Payloads carry a sequence number and a pattern derived from it. */
void vair_payload(uint32_t seq, uint8_t *out, uint8_t len);
/* 1 if payload is seq's, byte for byte. */
int vair_payload_ok(uint32_t seq, const uint8_t *p, uint8_t len);

void vair_init(void);
/* Each message the chip sends (chip_attach_local's callback); now is the simulated time. */
void vair_from_chip(const uint8_t *msg, size_t len, uint64_t now_ns);
/* The peer streams frames to the chip whenever the chip listens (1) or not (0). */
void vair_peer_stream(int on, uint8_t payload_len);
/* The next time something happens on the air, or VAIR_NEVER. */
uint64_t vair_next_ns(void);
/* Carry out everything due at or before now. */
void vair_run(uint64_t now_ns);
const vair_stats *vair_get_stats(void);

/* Frames per second the air allows one way with the current settings, 32-byte payloads:
 * 1/ack cycle (ESB), bursts of back-to-back frames after a settle (no-ack). */
double vair_air_frames_per_s(uint8_t payload_len);

#endif
