/* The hardware layer of the host-side build: SPI goes to the chip model (chip.c), which is
 * attached to LongGe's air emulator; the UART is a pseudo-terminal, paced at the real modem's
 * baud rate (10 bits per byte). Usage:
 *   modem-native AIR_SOCKET RADIO_NAME [PTY_LINK] [BAUD]
 * prints "pty /dev/pts/N" and, with PTY_LINK, makes that path a symlink to it. */
#define _GNU_SOURCE /* CPU_SET, sched_setaffinity; includes what _XOPEN_SOURCE 600 gave */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "chip.h"
#include "hal.h"
#include "modem.h"

static int master = -1, keep_slave = -1;
static uint8_t out[4096];
static size_t out_n;
static double byte_s = 10.0 / 2000000.0; /* seconds per byte on the wire (2 Mbaud) */
static double rx_free_at, tx_free_at;
static volatile sig_atomic_t stop;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

void hal_init(void) {}
void hal_csn(uint8_t level) { chip_csn(level); }
uint8_t hal_spi_xfer(uint8_t o) { return chip_spi(o); }
void hal_ce(uint8_t level) { chip_ce(level); }
void hal_spi_write(const uint8_t *buf, uint8_t len) {
    while (len--)
        chip_spi(*buf++);
}
void hal_delay_us(uint16_t us) { (void)us; } /* the air keeps its own time */

/* Bytes may run ahead of the wire by this much (the AVR's 128-byte receive ring). */
#define RX_SLACK_S 0.001

/* Bytes taken from the pty in one read (not one system call per byte), handed out at the
 * wire's pace. */
static uint8_t ring[128];
static size_t ring_at, ring_n;

static int uart_getc(void) {
    double t = now_s();
    if (rx_free_at > t + RX_SLACK_S)
        return -1; /* the next byte is still on the wire */
    if (ring_at == ring_n) {
        ssize_t n = read(master, ring, sizeof ring);
        if (n <= 0)
            return -1; /* nothing, or the host side is closed (EIO): it may come back */
        ring_at = 0;
        ring_n = (size_t)n;
    }
    rx_free_at = (rx_free_at > t ? rx_free_at : t) + byte_s;
    return ring[ring_at++];
}

void hal_uart_receive(uint8_t max, hal_bytes_fn take) {
    uint8_t buf[255], n = 0;
    int c;
    while (n < max && (c = uart_getc()) >= 0)
        buf[n++] = (uint8_t)c;
    if (n)
        take(buf, n);
}

void hal_uart_putc(uint8_t b) {
    if (out_n < sizeof out)
        out[out_n++] = b; /* a host that does not read loses bytes, as with a real UART */
}

void hal_uart_flush(void) {
    if (!out_n)
        return;
    double t = now_s();
    if (tx_free_at < t)
        tx_free_at = t;
    tx_free_at += (double)out_n * byte_s;
    ssize_t n = write(master, out, out_n);
    (void)n; /* EAGAIN / EIO: nobody listening; dropped like bytes into an unplugged cable */
    out_n = 0;
    double wait = tx_free_at - now_s();
    if (wait > 0.0005) {
        struct timespec ts = {0, (long)(wait * 1e9)};
        nanosleep(&ts, NULL);
    }
}

void hal_poll(void) {
    int air = chip_poll();
    double early = rx_free_at - RX_SLACK_S - now_s();
    if (early > 0) { /* the next host byte is still on the wire: wait for it, not for news */
        struct timespec ts = {0, (long)(early * 1e9)};
        nanosleep(&ts, NULL);
        return;
    }
    fd_set r;
    FD_ZERO(&r);
    FD_SET(master, &r);
    if (air >= 0)
        FD_SET(air, &r);
    struct timeval tv = {0, 10000}; /* woken by the host or the air; nothing else to wait for */
    select((master > air ? master : air) + 1, &r, NULL, NULL, &tv);
}

static void on_signal(int s) {
    (void)s;
    stop = 1;
}

/* LONGGE_WORLD_CPU (a number, or "off"), else the highest CPU we may use if there are two. */
static void pin_to_world_cpu(void)
{
    const char *chosen = getenv("LONGGE_WORLD_CPU");
    cpu_set_t set;
    int cpu = -1;
    if (chosen && strcmp(chosen, "off") == 0)
        return;
    if (chosen && *chosen) {
        cpu = atoi(chosen);
    } else if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) >= 2) {
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &set))
                cpu = c;
    }
    if (cpu < 0)
        return;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        perror("sched_setaffinity");
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s AIR_SOCKET RADIO_NAME [PTY_LINK] [BAUD]\n", argv[0]);
        return 2;
    }
    if (argc > 4)
        byte_s = 10.0 / atof(argv[4]);
    master = posix_openpt(O_RDWR | O_NOCTTY);
    if (master < 0 || grantpt(master) || unlockpt(master)) {
        perror("pty");
        return 1;
    }
    const char *slave = ptsname(master);
    /* raw mode on the terminal, kept open so that a host closing it does not hang us up */
    keep_slave = open(slave, O_RDWR | O_NOCTTY);
    struct termios tio;
    tcgetattr(keep_slave, &tio);
    cfmakeraw(&tio);
    tcsetattr(keep_slave, TCSANOW, &tio);
    fcntl(master, F_SETFL, fcntl(master, F_GETFL) | O_NONBLOCK);
    if (chip_attach(argv[1], argv[2]) < 0)
        return 1;
    if (argc > 3 && argv[3][0]) {
        unlink(argv[3]);
        if (symlink(slave, argv[3])) {
            perror("symlink");
            return 1;
        }
    }
    printf("pty %s\n", slave);
    fflush(stdout);
    /* As the air (longge/realtime.py): a microcontroller is never descheduled, and it runs on
     * the emulated world's CPU (docs/emulator.md). */
    struct sched_param sp = {.sched_priority = 30};
    if (sched_setscheduler(0, SCHED_FIFO, &sp) == 0)
        pin_to_world_cpu();
    else if (geteuid() == 0 && nice(-10) == -1)
        perror("nice");
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    hal_init();
    modem_init();
    while (!stop)
        modem_step();
    if (argc > 3 && argv[3][0])
        unlink(argv[3]);
    return 0;
}
