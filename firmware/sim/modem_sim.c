/* The modem's AVR image on a simulated ATmega328P (simavr), cycle by cycle, with:
 *  - the USART fed at the wire's own pace (one byte per 10 bit times, 8N1), counting data
 *    overruns, late reads and frame errors: simavr's own input path never overruns;
 *  - SPI, CE and CSN wired to the chip model (native/chip.c) on an air in the same virtual
 *    time (vair.c), with a peer that acknowledges (ESB) or just listens (no-ack);
 *  - a host that speaks the modem's protocol (src/proto.c, compiled for this machine).
 * Everything runs in simulated time: the figures are the AVR's, not this machine's.
 *
 *   modem-sim IMAGE.elf [--seconds S] [--baud B] [--direction tx|rx] [--no-ack]
 *                       [--rate 2M|1M|250k] [--fuzz N]
 * prints one JSON object (docs/modem.md says what its fields count). For study, not for
 * figures: MAX_UNREAD=N overrides the host's rule; MODEM_SIM_PROFILE=FILE writes the cycles
 * spent at each program address, from PROFILE_FROM_US to PROFILE_TO_US of simulated time. */
#define _GNU_SOURCE
#include <avr_ioport.h>
#include <avr_spi.h>
#include <avr_uart.h>
#include <sim_avr.h>
#include <sim_elf.h>
#include <sim_time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "chip.h"
#include "proto.h"
#include "vair.h"

/* simavr declares the UART's input FIFO type in avr_uart.h; its functions, static, here */
DEFINE_FIFO(uint16_t, uart_fifo);

#define RAMEND 0x8FF
#define MODEM_NAME "modem"

static avr_t *avr;
static avr_uart_t *uart;
static avr_spi_t *spi;

/* -- options -- */
static double seconds = 2.0;
static unsigned long baud = 2000000;
static int tx_direction = 1, no_ack, fuzz;
static uint8_t rate_code = 1; /* 0 = 1M, 1 = 2M, 2 = 250k (the modem's config record) */

static uint64_t ns_now(void) { return avr->cycle * 1000000000ull / avr->frequency; }
static avr_cycle_count_t cycles_of_ns(uint64_t ns) {
    return (avr_cycle_count_t)((ns * avr->frequency + 999999999ull) / 1000000000ull);
}

/* -- the air's clock: one cycle timer at the air's next event -- */

static avr_cycle_count_t air_timer(avr_t *a, avr_cycle_count_t when, void *param) {
    (void)a, (void)param;
    vair_run(ns_now());
    uint64_t next = vair_next_ns();
    if (next == VAIR_NEVER)
        return 0;
    avr_cycle_count_t c = cycles_of_ns(next);
    return c > when ? c : when + 1;
}

static void air_rearm(void) {
    avr_cycle_timer_cancel(avr, air_timer, NULL);
    uint64_t next = vair_next_ns();
    if (next == VAIR_NEVER)
        return;
    avr_cycle_count_t c = cycles_of_ns(next);
    avr_cycle_timer_register(avr, c > avr->cycle ? c - avr->cycle : 1, air_timer, NULL);
}

static void chip_to_air(const uint8_t *msg, size_t len) {
    vair_from_chip(msg, len, ns_now());
    air_rearm();
}

/* -- SPI: simavr 1.6 takes 100 µs per byte whatever the clock; here a byte takes what the
 *    datasheet gives: 8 SPI clocks of fosc / (4, 16, 64, 128), halved by SPI2X -- */

static uint8_t spi_out;
static uint64_t spi_transactions;

static avr_cycle_count_t spi_done(avr_t *a, avr_cycle_count_t when, void *param) {
    (void)when, (void)param;
    a->data[spi->r_spdr] = chip_spi(spi_out);
    avr_raise_interrupt(a, &spi->spi);
    return 0;
}

static void spi_write(avr_t *a, avr_io_addr_t addr, uint8_t v, void *param) {
    (void)addr, (void)param;
    static const uint8_t div[4] = {4, 16, 64, 128};
    avr_regbit_clear(a, spi->spi.raised);
    spi_out = v;
    uint8_t d = div[a->data[spi->r_spcr] & 3];
    if (a->data[spi->r_spsr] & 1) /* SPI2X */
        d >>= 1;
    avr_cycle_timer_register(a, (avr_cycle_count_t)d * 8, spi_done, NULL);
}

static uint8_t spi_read(avr_t *a, avr_io_addr_t addr, void *param) {
    (void)param;
    avr_regbit_clear(a, spi->spi.raised);
    return a->data[addr];
}

/* -- pins: CE on PB1, CSN on PB2 (main_avr.c) -- */

static void on_ce(avr_irq_t *irq, uint32_t value, void *param) {
    (void)irq, (void)param;
    chip_ce((uint8_t)value);
}

static void on_csn(avr_irq_t *irq, uint32_t value, void *param) {
    (void)irq, (void)param;
    if (!value) /* simavr raises a pin's IRQ when it changes: each is a transaction's start */
        spi_transactions++;
    chip_csn((uint8_t)value);
}

/* -- the wire, host to AVR: a byte completes every byte_cycles -- */

static uint8_t wire_q[1 << 16];
static size_t wire_head, wire_tail; /* wire_q[wire_tail..wire_head) waiting to go */
static avr_cycle_count_t byte_cycles;
static int wire_busy, baud_mismatch;
static uint64_t uart_overruns, uart_late, frame_errors, bytes_lost_disabled, wire_bytes;

static void image_baud(void) {
    /* 8N1 at the image's UBRR / U2X: the word is 10 bits (simavr counts a parity bit too) */
    uint32_t ubrr = avr_regbit_get(avr, uart->ubrrl) | (avr_regbit_get(avr, uart->ubrrh) << 8);
    avr_cycle_count_t bit = (ubrr + 1) * 8 * (avr_regbit_get(avr, uart->u2x) ? 1 : 2);
    uart->cycles_per_byte = bit * 10;
    double image = (double)avr->frequency / (double)bit;
    baud_mismatch = image > baud * 1.02 || image < baud * 0.98;
}

static avr_cycle_count_t wire_rx(avr_t *a, avr_cycle_count_t when, void *param) {
    (void)param;
    uint8_t b = wire_q[wire_tail++ & 0xFFFF];
    wire_bytes++;
    if (!avr_regbit_get(a, uart->rxen)) {
        bytes_lost_disabled++;
    } else {
        image_baud();
        unsigned unread = uart_fifo_get_read_size(&uart->input);
        if (baud_mismatch) {
            frame_errors++;
        } else if (unread >= 2) {
            uart_overruns++; /* two unread in the receive buffer: DOR, this byte is lost */
        } else {
            if (unread)
                uart_late++; /* completed while the previous one was still unread */
            uart_fifo_write(&uart->input, b);
            uart->rx_cnt = 0;
            uart->rxc_raise_time = 0;
            avr_raise_interrupt(a, &uart->rxc);
        }
    }
    if (wire_tail == wire_head) {
        wire_busy = 0;
        return 0;
    }
    return when + byte_cycles;
}

static void host_put(uint8_t b) {
    wire_q[wire_head++ & 0xFFFF] = b;
    if (!wire_busy) {
        wire_busy = 1;
        avr_cycle_timer_register(avr, byte_cycles, wire_rx, NULL);
    }
}

static size_t wire_waiting(void) { return wire_head - wire_tail; }

/* -- the host -- */

enum { H_HELLO, H_FUZZ, H_CONFIG, H_RUN, H_STATS, H_DONE };
static int host_state = H_HELLO;
static proto_parser from_modem;
static uint8_t version[5], config_ok;
static uint32_t modem_counters[9];
static uint32_t sent_t, fifo_rep, accepted_rep, depth = 3, next_seq, rx_expect;
static uint64_t host_rx_frames, host_rx_gaps, host_rx_corrupt, host_errors, uart_tx_bytes;
static uint64_t window_start_ns, window_end_ns;
static uint64_t frames_at_start, frames_at_end;
static uint32_t rng = 12345;

static uint32_t rnd(void) {
    rng = rng * 1103515245u + 12345u;
    return rng >> 8;
}

static void send_msg(uint8_t type, const uint8_t *body, uint8_t len) {
    proto_send(type, body, len, host_put);
}

static void config_record(uint8_t *r) {
    static const uint8_t tx_addr[5] = {'L', 'o', 'n', 'g', 'T'}, peer[5] = {'L', 'o', 'n', 'g', 'R'};
    memset(r, 0, 29);
    r[0] = 76;              /* channel */
    r[1] = rate_code;
    r[2] = 3;               /* PA */
    r[3] = 5;               /* address width */
    r[4] = 2;               /* CRC bytes */
    r[5] = 0;               /* ARD 250 µs */
    r[6] = 15;              /* ARC */
    r[7] = no_ack ? 0 : 0x3F;
    r[8] = 1;               /* dynamic payloads */
    r[9] = 1;               /* dynamic ACK */
    r[10] = 32;
    r[11] = 1;              /* powered */
    memcpy(r + 12, tx_addr, 5);
    r[17] = 0x03;
    memcpy(r + 18, tx_addr, 5); /* pipe 0: the sender's own address, for its ACKs */
    memcpy(r + 23, peer, 5);
}

static void garbage(void) {
    /* one piece of what the fuzz test sends the native build: noise, a truncated frame, an
     * oversized message, a bad CRC, an unknown type; each ends at a delimiter */
    uint8_t buf[300];
    unsigned kind = rnd() % 5, n = 0;
    if (kind == 0) {
        n = 1 + rnd() % 60;
        for (unsigned i = 0; i < n; i++)
            buf[i] = (uint8_t)(1 + rnd() % 255);
    } else if (kind == 1) {
        uint8_t body[33] = {0}, raw[40], enc[48];
        size_t m = 0;
        raw[m++] = 'T';
        memcpy(raw + m, body, 33);
        m += 33;
        uint16_t crc = proto_crc16(raw, m);
        raw[m++] = (uint8_t)(crc >> 8);
        raw[m++] = (uint8_t)crc;
        size_t e = proto_cobs_encode(raw, m, enc);
        n = (unsigned)(1 + rnd() % (e - 1));
        memcpy(buf, enc, n);
    } else if (kind == 2) {
        n = 100 + rnd() % 180;
        for (unsigned i = 0; i < n; i++)
            buf[i] = (uint8_t)(1 + rnd() % 255);
    } else if (kind == 3) {
        uint8_t raw[8] = {'V', 0x12, 0x34}, enc[12];
        size_t e = proto_cobs_encode(raw, 3, enc);
        n = (unsigned)e;
        memcpy(buf, enc, n);
    } else {
        uint8_t raw[8] = {'Q', 1, 2}, enc[12];
        uint16_t crc = proto_crc16(raw, 3);
        raw[3] = (uint8_t)(crc >> 8);
        raw[4] = (uint8_t)crc;
        size_t e = proto_cobs_encode(raw, 5, enc);
        n = (unsigned)e;
        memcpy(buf, enc, n);
    }
    for (unsigned i = 0; i < n; i++)
        host_put(buf[i]);
    host_put(0);
}

static uint64_t fuzz_sent, fuzz_answers;
/* T messages the modem has not reported read: the serial backend's rule (radio/serial_modem.py),
 * 6 for firmware 1.1 and later (a 256-byte ring), 3 before (128) */
static uint32_t max_unread = 3;

static void host_feed_tx(void) {
    /* the serial backend's rule (radio/mirror.py): never more in the modem than its depth */
    while (host_state == H_RUN && tx_direction && fifo_rep + (sent_t - accepted_rep) < depth &&
           sent_t - accepted_rep < max_unread) {
        uint8_t body[33];
        body[0] = (uint8_t)no_ack;
        vair_payload(next_seq++, body + 1, 32);
        send_msg('T', body, 33);
        sent_t++;
    }
}

static void on_modem_message(uint8_t type, const uint8_t *b, uint8_t len, void *ctx) {
    (void)ctx;
    uint64_t now = ns_now();
    switch (type) {
    case 'v':
        if (len < 5)
            return;
        if (host_state == H_HELLO) {
            memcpy(version, b, 5);
            depth = b[4] > 3 ? b[4] : 3;
            if (!getenv("MAX_UNREAD"))
                max_unread = (b[0] > 1 || (b[0] == 1 && b[1] >= 1)) ? 6 : 3;
            host_state = fuzz ? H_FUZZ : H_CONFIG;
            if (fuzz) /* the boot's queued hellos are answered too: start from a clean line */
                fuzz_answers = 0;
        } else if (host_state == H_FUZZ) {
            fuzz_answers++;
            if (fuzz_answers < fuzz_sent)
                return; /* an answer to a hello queued at boot */
        } else {
            return;
        }
        if (host_state == H_FUZZ && fuzz_sent < (uint64_t)fuzz) {
            /* --fuzz: a piece of garbage at full baud, then a V: its answer says the modem
             * has read the garbage too */
            garbage();
            fuzz_sent++;
            send_msg('V', NULL, 0);
            return;
        }
        {
            host_state = H_CONFIG;
            uint8_t rec[29];
            config_record(rec);
            send_msg('C', rec, 29);
        }
        return;
    case 'c':
        if (host_state == H_CONFIG) {
            uint8_t on = tx_direction ? 0 : 1;
            config_ok = len >= 1 && b[0] == 0;
            send_msg('L', &on, 1);
            vair_peer_stream(!tx_direction, 32);
            host_state = H_RUN;
            window_start_ns = now + 20000000ull; /* 20 ms to reach a steady state */
            window_end_ns = window_start_ns + (uint64_t)(seconds * 1e9);
            host_feed_tx();
        }
        return;
    case 't':
        if (len >= 11) {
            fifo_rep = b[2];
            accepted_rep = (uint32_t)b[3] << 24 | (uint32_t)b[4] << 16 | (uint32_t)b[5] << 8 | b[6];
            host_feed_tx();
        }
        return;
    case 'r':
        if (len >= 5) {
            uint32_t seq = (uint32_t)b[1] << 24 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 8 | b[4];
            if (!vair_payload_ok(seq, b + 1, (uint8_t)(len - 1)))
                host_rx_corrupt++;
            else if (seq != rx_expect)
                host_rx_gaps++;
            rx_expect = seq + 1;
            if (now >= window_start_ns && now < window_end_ns)
                host_rx_frames++;
        }
        return;
    case 's':
        if (len >= 36) {
            for (int i = 0; i < 9; i++)
                modem_counters[i] = (uint32_t)b[4 * i] << 24 | (uint32_t)b[4 * i + 1] << 16 |
                                    (uint32_t)b[4 * i + 2] << 8 | b[4 * i + 3];
            host_state = H_DONE;
        }
        return;
    case 'e':
        host_errors++;
        return;
    default:
        return;
    }
}

static void on_uart_out(avr_irq_t *irq, uint32_t value, void *param) {
    (void)irq, (void)param;
    image_baud(); /* the TX pump's byte time: 10 bits, as for RX */
    uart_tx_bytes++;
    if (!baud_mismatch)
        proto_feed(&from_modem, (uint8_t)value, on_modem_message, NULL);
}

/* The host's clock: hello until the modem answers, then the window's edges. */
static avr_cycle_count_t host_timer(avr_t *a, avr_cycle_count_t when, void *param) {
    (void)a, (void)param;
    uint64_t now = ns_now();
    if (host_state == H_HELLO && wire_waiting() == 0)
        send_msg('V', NULL, 0);
    if (host_state == H_RUN && now >= window_start_ns && !frames_at_start)
        frames_at_start = vair_get_stats()->chip_frames + 1; /* +1: "taken" */
    if (host_state == H_RUN && now >= window_end_ns) {
        frames_at_end = vair_get_stats()->chip_frames;
        host_state = H_STATS;
        send_msg('S', NULL, 0);
    }
    return when + cycles_of_ns(host_state == H_HELLO ? 20000000ull : 1000000ull);
}

/* -- where the main loop turns: its look at the UART ring. A turn is idle if it read no byte,
 *    made one SPI transaction (the STATUS poll) and sent nothing to the host -- */

static uint32_t getc_pc, head_addr, tail_addr, drops_addr;

static uint32_t symbol(const char *elf, const char *name) {
    char cmd[600], line[300];
    snprintf(cmd, sizeof cmd, "avr-nm '%s'", elf);
    FILE *f = popen(cmd, "r");
    uint32_t addr = 0;
    while (f && fgets(line, sizeof line, f)) {
        char type, sym[200];
        unsigned a;
        if (sscanf(line, "%x %c %199s", &a, &type, sym) == 3 && strcmp(sym, name) == 0)
            addr = a & 0xFFFF;
    }
    if (f)
        pclose(f);
    return addr;
}

static uint32_t main_loop_pc(const char *elf) {
    /* the first instruction of main() that loads `head`: hal_uart_read, inlined, once a turn */
    char cmd[600], line[400], want[32];
    snprintf(cmd, sizeof cmd, "avr-objdump -d '%s'", elf);
    snprintf(want, sizeof want, "<head>");
    FILE *f = popen(cmd, "r");
    int in_main = 0;
    uint32_t pc = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (strstr(line, "<main>:"))
            in_main = 1;
        else if (in_main && strstr(line, ">:"))
            in_main = 0;
        else if (in_main && !pc && strstr(line, "lds") && strstr(line, want))
            sscanf(line, " %x:", &pc);
    }
    if (f)
        pclose(f);
    return pc;
}

static uint64_t turns, idle_turns, idle_cycles, window_cycles;
static uint64_t turn_start_cycle, turn_spi, turn_tx;
static uint8_t turn_tail;

static void turn_check(void) {
    uint64_t now = ns_now();
    int in_window = host_state == H_RUN && now >= window_start_ns && now < window_end_ns;
    if (turn_start_cycle && in_window) {
        turns++;
        uint64_t c = avr->cycle - turn_start_cycle;
        window_cycles += c;
        if (spi_transactions - turn_spi == 1 && uart_tx_bytes == turn_tx &&
            avr->data[tail_addr] == turn_tail) {
            idle_turns++;
            idle_cycles += c;
        }
    }
    turn_start_cycle = avr->cycle;
    turn_spi = spi_transactions;
    turn_tx = uart_tx_bytes;
    turn_tail = avr->data[tail_addr];
}

static void usage(void) {
    fprintf(stderr, "usage: modem-sim IMAGE.elf [--seconds S] [--baud B] [--direction tx|rx] "
                    "[--no-ack] [--rate 2M|1M|250k] [--fuzz N]\n");
    exit(2);
}

int main(int argc, char **argv) {
    if (argc < 2)
        usage();
    const char *elf = argv[1];
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--seconds") && v)
            seconds = atof(argv[++i]);
        else if (!strcmp(a, "--baud") && v)
            baud = strtoul(argv[++i], NULL, 10);
        else if (!strcmp(a, "--direction") && v)
            tx_direction = strcmp(argv[++i], "rx") != 0;
        else if (!strcmp(a, "--no-ack"))
            no_ack = 1;
        else if (!strcmp(a, "--rate") && v) {
            i++;
            rate_code = !strcmp(v, "1M") ? 0 : !strcmp(v, "250k") ? 2 : 1;
        } else if (!strcmp(a, "--fuzz") && v)
            fuzz = atoi(argv[++i]);
        else
            usage();
    }
    if (seconds <= 0 || seconds > 600 || baud < 1200 || baud > 4000000) {
        fprintf(stderr, "modem-sim: --seconds 0..600, --baud 1200..4000000\n");
        return 2;
    }
    if (getenv("MAX_UNREAD"))
        max_unread = (uint32_t)atoi(getenv("MAX_UNREAD"));
    elf_firmware_t fw;
    memset(&fw, 0, sizeof fw);
    /* simavr's loader talks on stdout, which is for the JSON: send its words to stderr */
    fflush(stdout);
    int saved_stdout = dup(1);
    dup2(2, 1);
    if (elf_read_firmware(elf, &fw) != 0) {
        dup2(saved_stdout, 1);
        fprintf(stderr, "modem-sim: cannot read %s (build it: make -C firmware avr)\n", elf);
        return 1;
    }
    avr = avr_make_mcu_by_name("atmega328p");
    if (!avr) {
        fprintf(stderr, "modem-sim: simavr has no atmega328p\n");
        return 1;
    }
    avr_init(avr);
    avr->frequency = 16000000;
    avr->log = LOG_NONE;
    avr_load_firmware(avr, &fw);
    fflush(stdout);
    dup2(saved_stdout, 1);
    close(saved_stdout);
    avr->frequency = 16000000;
    byte_cycles = (avr_cycle_count_t)((avr->frequency * 10ull + baud / 2) / baud);

    head_addr = symbol(elf, "head");
    tail_addr = symbol(elf, "tail");
    drops_addr = symbol(elf, "ring_drops"); /* main_avr.c: host bytes lost to a full ring */
    getc_pc = main_loop_pc(elf);

    /* find the UART and the SPI among simavr's peripherals */
    for (avr_io_t *io = avr->io_port; io; io = io->next) {
        if (!strcmp(io->kind, "uart") && ((avr_uart_t *)io)->name == '0')
            uart = (avr_uart_t *)io;
        if (!strcmp(io->kind, "spi"))
            spi = (avr_spi_t *)io;
    }
    if (!uart || !spi) {
        fprintf(stderr, "modem-sim: no UART0 or SPI in simavr's atmega328p\n");
        return 1;
    }
    uint32_t flags = 0;
    avr_ioctl(avr, AVR_IOCTL_UART_GET_FLAGS('0'), &flags);
    flags &= ~(uint32_t)(AVR_UART_FLAG_STDIO | AVR_UART_FLAG_POLL_SLEEP);
    avr_ioctl(avr, AVR_IOCTL_UART_SET_FLAGS('0'), &flags);
    avr_irq_register_notify(avr_io_getirq(avr, AVR_IOCTL_UART_GETIRQ('0'), UART_IRQ_OUTPUT),
                            on_uart_out, NULL);
    /* SPI: this file's transfer timing in place of simavr's */
    avr->io[AVR_DATA_TO_IO(spi->r_spdr)].w.c = spi_write;
    avr->io[AVR_DATA_TO_IO(spi->r_spdr)].r.c = spi_read;
    avr_irq_register_notify(avr_io_getirq(avr, AVR_IOCTL_IOPORT_GETIRQ('B'), 1), on_ce, NULL);
    avr_irq_register_notify(avr_io_getirq(avr, AVR_IOCTL_IOPORT_GETIRQ('B'), 2), on_csn, NULL);

    vair_init();
    chip_attach_local(chip_to_air, MODEM_NAME);
    proto_parser_init(&from_modem);
    avr_cycle_timer_register(avr, cycles_of_ns(1000000ull), host_timer, NULL);

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint16_t min_sp = RAMEND;
    static uint64_t prof[16384];
    int profile = getenv("MODEM_SIM_PROFILE") != NULL;
    const char *from_us = getenv("PROFILE_FROM_US"), *to_us = getenv("PROFILE_TO_US");
    uint64_t prof_from = from_us ? cycles_of_ns((uint64_t)atoll(from_us) * 1000ull) : 0;
    uint64_t prof_to = to_us ? cycles_of_ns((uint64_t)atoll(to_us) * 1000ull) : UINT64_MAX;
    int state = cpu_Running;
    uint64_t limit = cycles_of_ns((uint64_t)((seconds + 2.0) * 1e9));
    while (host_state != H_DONE && avr->cycle < limit) {
        uint32_t pc0 = avr->pc;
        avr_cycle_count_t c0 = avr->cycle;
        state = avr_run(avr);
        if (profile && pc0 / 2 < 16384 && avr->cycle > prof_from && avr->cycle < prof_to)
            prof[pc0 / 2] += avr->cycle - c0;
        if (state == cpu_Done || state == cpu_Crashed)
            break;
        uint16_t sp = (uint16_t)(avr->data[R_SPL] | avr->data[R_SPH] << 8);
        if (sp < min_sp && sp > 0x100)
            min_sp = sp;
        if (avr->pc == getc_pc)
            turn_check();
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (profile) {
        FILE *pf = fopen(getenv("MODEM_SIM_PROFILE"), "w");
        for (int i = 0; pf && i < 16384; i++)
            if (prof[i])
                fprintf(pf, "%x %llu\n", i * 2, (unsigned long long)prof[i]);
        if (pf)
            fclose(pf);
    }
    double host_s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;

    const vair_stats *as = vair_get_stats();
    uint32_t ring_drops = 0;
    for (int i = 3; drops_addr && i >= 0; i--)
        ring_drops = ring_drops << 8 | avr->data[drops_addr + i]; /* little endian */
    double window_s = seconds;
    uint64_t frames = tx_direction ? (frames_at_end - (frames_at_start ? frames_at_start - 1 : 0))
                                   : host_rx_frames;
    double fps = host_state == H_DONE ? (double)frames / window_s : 0.0;
    double air = vair_air_frames_per_s(32);
    printf("{\"image\":\"%s\",\"direction\":\"%s\",\"mode\":\"%s\",\"rate\":\"%s\",\"baud\":%lu,"
           "\"seconds\":%.3f,\"completed\":%s,\"cpu_state\":%d,"
           "\"frames\":%llu,\"frames_per_s\":%.1f,\"air_frames_per_s\":%.1f,\"ratio\":%.4f,"
           "\"uart_overruns\":%llu,\"uart_late_reads\":%llu,\"frame_errors\":%llu,\"ring_drops\":%u,"
           "\"bytes_before_uart_on\":%llu,\"wire_bytes_in\":%llu,\"wire_bytes_out\":%llu,"
           "\"stack_max_bytes\":%u,\"static_ram_bytes\":%u,\"ram_bytes\":2048,"
           "\"idle_share\":%.4f,\"main_loop_turns\":%llu,\"spi_transactions\":%llu,"
           "\"version\":[%u,%u],\"chip_ok\":%u,\"plus\":%u,\"depth\":%u,\"config_ok\":%u,"
           "\"modem_counters\":{\"frames_ok\":%u,\"bad_crc\":%u,\"bad_cobs\":%u,\"bad_length\":%u,"
           "\"unknown\":%u,\"bad_args\":%u,\"tx_ok\":%u,\"tx_max_rt\":%u,\"rx_frames\":%u},"
           "\"host\":{\"errors\":%llu,\"rx_gaps\":%llu,\"rx_corrupt\":%llu,\"garbage_sent\":%llu,\"answers_after_garbage\":%llu},"
           "\"air\":{\"chip_frames\":%llu,\"chip_bad_frames\":%llu,\"peer_frames\":%llu,"
           "\"peer_retries\":%llu,\"peer_fifo_drops\":%llu,\"tx_mode_over_4ms\":%llu},"
           "\"simulated_cycles\":%llu,\"host_seconds\":%.2f}\n",
           elf, tx_direction ? "tx" : "rx", no_ack ? "no-ack" : "esb",
           rate_code == 0 ? "1M" : rate_code == 2 ? "250k" : "2M", baud, window_s,
           host_state == H_DONE ? "true" : "false", state, (unsigned long long)frames, fps, air,
           air > 0 ? fps / air : 0.0, (unsigned long long)uart_overruns,
           (unsigned long long)uart_late, (unsigned long long)frame_errors, ring_drops,
           (unsigned long long)bytes_lost_disabled, (unsigned long long)wire_bytes,
           (unsigned long long)uart_tx_bytes, (unsigned)(RAMEND - min_sp),
           (unsigned)(fw.datasize + fw.bsssize), window_cycles ? (double)idle_cycles / (double)window_cycles : 0.0,
           (unsigned long long)turns, (unsigned long long)spi_transactions, version[0], version[1],
           version[2], version[3], depth, config_ok, modem_counters[0], modem_counters[1],
           modem_counters[2], modem_counters[3], modem_counters[4], modem_counters[5],
           modem_counters[6], modem_counters[7], modem_counters[8], (unsigned long long)host_errors,
           (unsigned long long)host_rx_gaps, (unsigned long long)host_rx_corrupt,
           (unsigned long long)fuzz_sent, (unsigned long long)fuzz_answers,
           (unsigned long long)as->chip_frames,
           (unsigned long long)as->chip_bad_frames, (unsigned long long)as->peer_frames,
           (unsigned long long)as->peer_retries, (unsigned long long)as->peer_fifo_drops,
           (unsigned long long)as->tx_mode_over_4ms, (unsigned long long)avr->cycle, host_s);
    return 0;
}
