/* The real pyrf24 on emulated silicon (LD_PRELOAD). pyrf24's Linux build (RF24 with its SPIDEV
 * driver) reaches the hardware only through libc's open, ioctl and close on /dev/spidevB.C and
 * /dev/gpiochipN. This library answers those calls as the kernel's spidev and GPIO character
 * device would, and hands every SPI byte and the CE line to the register-level chip model the
 * modem's native build uses (chip.c), which attaches to LongGe's air like any emulated radio.
 * Everything else goes to libc. One chip per process (the daemon runs one radio per process).
 *
 *   LD_PRELOAD=firmware/build/longge-spidev.so LONGGE_AIR=/run/longge/air.sock \
 *       LONGGE_CHIP_NAME=mobile-tx python -c 'from pyrf24 import RF24; RF24(22, 0).begin()'
 *
 * LONGGE_AIR defaults to /run/longge/air.sock, LONGGE_CHIP_NAME to LONGGE_CHIP_PREFIX followed by
 * the spidev's name ("mobile-spidev0.0"), as the testbed's daemons use it. SPI modes,
 * word size and clock are stored and read back as spidev does; the GPIO requests of both uAPI
 * versions are served: an output line is CE. An input line asked for with falling-edge events
 * (uAPI v2, GPIO_V2_GET_LINE_IOCTL, as RF24's own interrupt code and LongGe's daemon ask) is the
 * chip's IRQ pin: its descriptor is a pipe that gets one struct gpio_v2_line_event each time the
 * pin falls (an unmasked RX_DR, TX_DS or MAX_RT becomes set while none was), as the kernel's
 * line descriptor does. A thread watches the air while the program sleeps on that descriptor;
 * a lock keeps it and the program's SPI calls from touching the chip at once. LONGGE_CHIP picks
 * the chip (chip.c: plus, old, absent, brownout, @FILE), read again at every spidev open and,
 * from a file, every 0.2 s of SPI use ("absent" then is a MISO wire come loose: the chip keeps
 * its registers, the host reads 0xFF). LONGGE_IRQ=unwired: the IRQ wire is missing (the line,
 * pulled up, never falls).
 *
 * SPI timing like a Pi's (LONGGE_SPI_TIMING: "pi", the default, or "off"): each
 * SPI_IOC_MESSAGE returns no sooner than a Raspberry Pi's spidev would: a fixed cost per call
 * plus 9 clocks per byte at the transfer's speed (the Pi 3/4 controller's 8 bits and a gap).
 * The fixed cost, 8 µs, is what a Pi 3B+ (kernel 4.19) measured: 63 522 ioctl calls of 3 bytes
 * at 3.6 MHz in a second, 15.7 µs each, of which 7.5 µs on the wire (docs/emulator.md cites
 * it). LONGGE_SPI_CALL_NS sets another fixed cost. The wait spins: a Pi's spidev polls too. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/gpio.h>
#include <linux/spi/spidev.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "chip.h"

static int (*real_open)(const char *, int, ...);
static int (*real_ioctl)(int, unsigned long, ...);
static int (*real_close)(int);

static int spi_fd = -1, gpio_fd = -1, line_fd = -1, attached;
static uint8_t spi_mode, spi_bits = 8, ce_level;
static uint32_t spi_speed = 500000;

/* The IRQ line: the program reads irq_fd (a pipe's end), the watcher and SPI calls write
 * irq_wr. chip_lock guards the chip model and everything below it. */
static pthread_mutex_t chip_lock = PTHREAD_MUTEX_INITIALIZER;
static int irq_fd = -1, irq_wr = -1, watching;
static uint32_t irq_offset, irq_seqno;
static uint8_t irq_level = 1;

static void resolve(void) {
    if (!real_open) {
        real_open = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open");
        real_ioctl = (int (*)(int, unsigned long, ...))dlsym(RTLD_NEXT, "ioctl");
        real_close = (int (*)(int))dlsym(RTLD_NEXT, "close");
    }
}

/* A descriptor of our own for each emulated device: a real one, so no other file gets it. */
static int placeholder(void) { return real_open("/dev/null", O_RDWR | O_CLOEXEC); }

static int attach(const char *path) {
    if (attached) {
        chip_variant(); /* a fault may have come or gone since (LONGGE_CHIP=@FILE) */
        return 0;
    }
    const char *air = getenv("LONGGE_AIR");
    const char *name = getenv("LONGGE_CHIP_NAME");
    const char *prefix = getenv("LONGGE_CHIP_PREFIX");
    char chosen[64];
    if (name && *name)
        snprintf(chosen, sizeof chosen, "%s", name);
    else
        snprintf(chosen, sizeof chosen, "%s%s", prefix ? prefix : "", path + 5);
    if (chip_attach(air && *air ? air : "/run/longge/air.sock", chosen) < 0)
        return -1;
    attached = 1;
    return 0;
}

int open(const char *path, int flags, ...) {
    resolve();
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    if (strncmp(path, "/dev/spidev", 11) == 0) {
        if (attach(path) < 0) {
            errno = ENODEV;
            return -1;
        }
        spi_fd = placeholder();
        return spi_fd;
    }
    if (strncmp(path, "/dev/gpiochip", 13) == 0) {
        gpio_fd = placeholder();
        return gpio_fd;
    }
    return real_open(path, flags, mode);
}

int open64(const char *path, int flags, ...) {
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    return open(path, flags, mode);
}

static int timing = -1; /* 1: like a Pi (LONGGE_SPI_TIMING), read on first use */
static uint64_t call_ns = 8000;
static uint64_t transactions, timed_ns; /* for the tests: LONGGE_SPI_STATS prints them at exit */

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void print_stats(void) {
    fprintf(stderr, "longge-spidev: %llu transactions, %llu ns modelled\n",
            (unsigned long long)transactions, (unsigned long long)timed_ns);
}

static int fault_file; /* LONGGE_CHIP=@FILE: looked at again every 0.2 s */
static uint64_t fault_checked;

static void read_timing(void) {
    const char *v = getenv("LONGGE_CHIP");
    fault_file = v && v[0] == '@';
    const char *t = getenv("LONGGE_SPI_TIMING");
    timing = !(t && strcmp(t, "off") == 0);
    const char *c = getenv("LONGGE_SPI_CALL_NS");
    if (c && *c)
        call_ns = strtoull(c, NULL, 10);
    if (getenv("LONGGE_SPI_STATS"))
        atexit(print_stats);
}

/* With chip_lock held: after anything that may have changed STATUS, a falling IRQ pin
 * becomes an edge event on the line's descriptor. */
static int irq_unwired = -1; /* LONGGE_IRQ=unwired: the pin is not connected (never falls) */

static void irq_check(void) {
    if (irq_unwired < 0) {
        const char *w = getenv("LONGGE_IRQ");
        irq_unwired = w && strcmp(w, "unwired") == 0;
    }
    uint8_t level = irq_unwired ? 1 : chip_irq();
    if (irq_wr >= 0 && irq_level && !level) {
        struct gpio_v2_line_event ev;
        memset(&ev, 0, sizeof ev);
        ev.timestamp_ns = now_ns();
        ev.id = GPIO_V2_LINE_EVENT_FALLING_EDGE;
        ev.offset = irq_offset;
        ev.seqno = ev.line_seqno = ++irq_seqno;
        if (write(irq_wr, &ev, sizeof ev) < 0) {
            /* the pipe is full: the program has 1000+ edges unread; the kernel drops them too */
        }
    }
    irq_level = level;
}

/* While the program sleeps on the IRQ descriptor, the air's messages still arrive: take them
 * in as they come, so the pin falls when the chip's would. */
static void *watch_air(void *unused) {
    (void)unused;
    for (;;) {
        pthread_mutex_lock(&chip_lock);
        int sock = attached ? chip_poll() : -1;
        irq_check();
        pthread_mutex_unlock(&chip_lock);
        if (sock < 0) {
            usleep(10000); /* not attached yet */
            continue;
        }
        struct pollfd p = {sock, POLLIN, 0};
        if (poll(&p, 1, -1) < 0 && errno != EINTR)
            return NULL;
        if (p.revents & (POLLHUP | POLLERR | POLLNVAL))
            return NULL; /* the air is gone: the pin stays as it is */
    }
}

static int request_irq(struct gpio_v2_line_request *r) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -1;
    fcntl(p[1], F_SETFL, O_NONBLOCK);
    pthread_mutex_lock(&chip_lock);
    if (irq_fd >= 0) {
        real_close(irq_fd);
        real_close(irq_wr);
    }
    irq_fd = p[0];
    irq_wr = p[1];
    irq_offset = r->offsets[0];
    irq_level = 1; /* as if high until the chip says otherwise: an active pin is an edge */
    if (attached)
        irq_check();
    pthread_mutex_unlock(&chip_lock);
    if (!watching) {
        pthread_t t;
        watching = pthread_create(&t, NULL, watch_air, NULL) == 0;
        if (watching)
            pthread_detach(t);
    }
    r->fd = irq_fd;
    return 0;
}

static void set_ce(uint8_t level) {
    pthread_mutex_lock(&chip_lock);
    ce_level = level ? 1 : 0;
    chip_poll();
    chip_ce(ce_level);
    irq_check();
    pthread_mutex_unlock(&chip_lock);
}

static int spi_message(const struct spi_ioc_transfer *xfer, unsigned n) {
    int total = 0;
    uint64_t start = now_ns(), model = 0;
    if (timing < 0)
        read_timing();
    pthread_mutex_lock(&chip_lock);
    if (fault_file && start - fault_checked > 200000000ull) {
        chip_variant(); /* LONGGE_CHIP=@FILE: a fault that comes and goes while in use */
        fault_checked = start;
    }
    chip_poll(); /* take in what the air sent since the last transaction */
    for (unsigned i = 0; i < n; i++) {
        const uint8_t *tx = (const uint8_t *)(uintptr_t)xfer[i].tx_buf;
        uint8_t *rx = (uint8_t *)(uintptr_t)xfer[i].rx_buf;
        chip_csn(0);
        for (uint32_t k = 0; k < xfer[i].len; k++) {
            uint8_t in = chip_spi(tx ? tx[k] : 0xFF);
            if (rx)
                rx[k] = in;
        }
        /* CSN rises after the last transfer, and after one that asks for it */
        if (i + 1 == n || xfer[i].cs_change)
            chip_csn(1);
        total += (int)xfer[i].len;
        uint32_t hz = xfer[i].speed_hz ? xfer[i].speed_hz : spi_speed;
        model += (uint64_t)xfer[i].len * 9u * 1000000000ull / (hz ? hz : 1);
    }
    irq_check();
    pthread_mutex_unlock(&chip_lock);
    transactions++;
    if (timing) {
        model += call_ns;
        timed_ns += model;
        while (now_ns() - start < model)
            ; /* as long as the Pi's ioctl would take, and no shorter */
    }
    return total;
}

static int spi_ioctl(unsigned long req, void *arg) {
    if (_IOC_TYPE(req) == SPI_IOC_MAGIC && _IOC_NR(req) == 0) {
        unsigned n = _IOC_SIZE(req) / sizeof(struct spi_ioc_transfer);
        return spi_message((const struct spi_ioc_transfer *)arg, n);
    }
    switch (req) {
    case SPI_IOC_WR_MODE:
        spi_mode = *(uint8_t *)arg;
        return 0;
    case SPI_IOC_RD_MODE:
        *(uint8_t *)arg = spi_mode;
        return 0;
    case SPI_IOC_WR_MODE32:
        spi_mode = (uint8_t) * (uint32_t *)arg;
        return 0;
    case SPI_IOC_RD_MODE32:
        *(uint32_t *)arg = spi_mode;
        return 0;
    case SPI_IOC_WR_BITS_PER_WORD:
        spi_bits = *(uint8_t *)arg;
        return 0;
    case SPI_IOC_RD_BITS_PER_WORD:
        *(uint8_t *)arg = spi_bits;
        return 0;
    case SPI_IOC_WR_MAX_SPEED_HZ:
        spi_speed = *(uint32_t *)arg;
        return 0;
    case SPI_IOC_RD_MAX_SPEED_HZ:
        *(uint32_t *)arg = spi_speed;
        return 0;
    case SPI_IOC_WR_LSB_FIRST:
    case SPI_IOC_RD_LSB_FIRST:
        if (req == SPI_IOC_RD_LSB_FIRST)
            *(uint8_t *)arg = 0;
        return 0;
    }
    errno = EINVAL;
    return -1;
}

static int gpio_ioctl(int fd, unsigned long req, void *arg) {
    switch (req) {
    case GPIO_GET_CHIPINFO_IOCTL: {
        struct gpiochip_info *info = arg;
        memset(info, 0, sizeof *info);
        strcpy(info->name, "gpiochip0");
        strcpy(info->label, "longge-emulated");
        info->lines = 58;
        return 0;
    }
    case GPIO_GET_LINEHANDLE_IOCTL: { /* uAPI v1 */
        struct gpiohandle_request *r = arg;
        r->fd = line_fd = placeholder();
        if (r->flags & GPIOHANDLE_REQUEST_OUTPUT)
            set_ce(r->default_values[0]);
        return 0;
    }
    case GPIO_V2_GET_LINE_IOCTL: { /* uAPI v2 */
        struct gpio_v2_line_request *r = arg;
        if ((r->config.flags & GPIO_V2_LINE_FLAG_INPUT) && (r->config.flags & GPIO_V2_LINE_FLAG_EDGE_FALLING))
            return request_irq(r);
        r->fd = line_fd = placeholder();
        return 0;
    }
    }
    if (fd == line_fd) {
        switch (req) {
        case GPIOHANDLE_SET_LINE_VALUES_IOCTL:
            set_ce(((struct gpiohandle_data *)arg)->values[0]);
            return 0;
        case GPIOHANDLE_GET_LINE_VALUES_IOCTL:
            ((struct gpiohandle_data *)arg)->values[0] = ce_level;
            return 0;
        case GPIOHANDLE_SET_CONFIG_IOCTL:
        case GPIO_V2_LINE_SET_CONFIG_IOCTL:
            return 0;
        case GPIO_V2_LINE_SET_VALUES_IOCTL: {
            struct gpio_v2_line_values *v = arg;
            if (v->mask & 1)
                set_ce((uint8_t)(v->bits & 1));
            return 0;
        }
        case GPIO_V2_LINE_GET_VALUES_IOCTL:
            ((struct gpio_v2_line_values *)arg)->bits = ce_level;
            return 0;
        }
    }
    if (fd == irq_fd && req == GPIO_V2_LINE_GET_VALUES_IOCTL) {
        pthread_mutex_lock(&chip_lock);
        ((struct gpio_v2_line_values *)arg)->bits = chip_irq();
        pthread_mutex_unlock(&chip_lock);
        return 0;
    }
    errno = EINVAL;
    return -1;
}

int ioctl(int fd, unsigned long req, ...) {
    resolve();
    va_list ap;
    va_start(ap, req);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    if (fd >= 0 && fd == spi_fd)
        return spi_ioctl(req, arg);
    /* the IRQ line is a real pipe: what is not a GPIO request (FIONBIO...) is the pipe's */
    if (fd >= 0 && (fd == gpio_fd || fd == line_fd || (fd == irq_fd && _IOC_TYPE(req) == 0xB4)))
        return gpio_ioctl(fd, req, arg);
    return real_ioctl(fd, req, arg);
}

int close(int fd) {
    resolve();
    if (fd >= 0 && fd == spi_fd)
        spi_fd = -1;
    else if (fd >= 0 && fd == gpio_fd)
        gpio_fd = -1;
    else if (fd >= 0 && fd == line_fd)
        line_fd = -1;
    else if (fd >= 0 && fd == irq_fd) {
        pthread_mutex_lock(&chip_lock);
        real_close(irq_wr);
        irq_fd = irq_wr = -1;
        pthread_mutex_unlock(&chip_lock);
    }
    return real_close(fd);
}
