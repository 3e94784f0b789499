#include "chip.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "nrf24_regs.h"

static int sock = -1;
/* Or, in a simulation that keeps its own time (sim/), the air is a function call away. */
static chip_air_fn local_air;
/* LONGGE_CHIP picks the chip (chip_variant): "plus", an nRF24L01+ (the default); "old", an
 * nRF24L01 without the "+" (RF_DR_LOW does not stick: no 250 kbit/s; FEATURE and DYNPD read 0
 * and ignore writes until the ACTIVATE command, 0x50 0x73, turns them on; a second one turns
 * them off); "absent", no chip at all (MISO pulled high: every byte reads 0xFF); "brownout", a
 * chip on a supply that sags as soon as it draws current: it answers and keeps its settings in
 * standby, but restarts with its power-on registers whenever CE goes high (listening or sending
 * draws ~12 mA, standby 26 µA).
 * "@FILE" reads the word from FILE whenever the spidev is opened (a fault that comes and goes). */
enum { CHIP_PLUS, CHIP_OLD, CHIP_ABSENT, CHIP_BROWNOUT };
static int variant = CHIP_PLUS;
static uint8_t features_active; /* an "old" chip's ACTIVATE state */
/* An old chip before ACTIVATE: FEATURE, DYNPD and R_RX_PL_WID read 0 and ignore writes. */
static int features_off(void) { return variant == CHIP_OLD && !features_active; }
static uint8_t reg[0x20];
static uint8_t addr_p0[5], addr_p1[5], addr_tx[5];
static uint8_t ce, listening_sent = 0xFF, config_dirty = 1;
/* SPI transaction in progress */
static uint8_t in_tx, have_cmd, cmd, nbytes;
static uint8_t data[33];
/* FIFOs: TX only counted (the air holds the payloads), RX kept here */
static uint8_t tx_count;
static uint8_t rx_len[3], rx_pipe[3], rx_buf[3][32], rx_n;
static uint32_t sent_t, flushes_f;

static void power_on(const char *name);

static void send_msg(const uint8_t *msg, size_t len) {
    if (local_air)
        local_air(msg, len);
    else if (sock >= 0 && send(sock, msg, len, 0) < 0)
        fprintf(stderr, "chip: air send failed: %s\n", strerror(errno));
}

static void hex(char *out, const uint8_t *b, int n) {
    for (int i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", b[i]);
}

static void push_config(void) {
    char json[800], tx[11], p0[11], p1[11];
    int aw = (reg[REG_SETUP_AW] & 3) + 2;
    const char *rate = (reg[REG_RF_SETUP] & RF_DR_LOW) ? "250k" : (reg[REG_RF_SETUP] & RF_DR_HIGH) ? "2M" : "1M";
    hex(tx, addr_tx, aw);
    hex(p0, addr_p0, aw);
    hex(p1, addr_p1, aw);
    /* the open pipes and their addresses: pipes 2..5 have a byte of their own (their
       RX_ADDR_Pn, the address's first byte on the air) and pipe 1's others (datasheet §7.6) */
    char pipes[200] = "";
    for (int pipe = 0; pipe < 6; pipe++) {
        char own[11];
        if (!(reg[REG_EN_RXADDR] & (1 << pipe)))
            continue;
        if (pipe < 2) {
            memcpy(own, pipe ? p1 : p0, sizeof own);
        } else {
            uint8_t a[5];
            memcpy(a, addr_p1, 5);
            a[0] = reg[REG_RX_ADDR_P1 + pipe - 1];
            hex(own, a, aw);
        }
        snprintf(pipes + strlen(pipes), sizeof pipes - strlen(pipes), "%s\"%d\":\"%s\"",
                 pipes[0] ? "," : "", pipe, own);
    }
    char aa[64];
    snprintf(aa, sizeof aa, "[%s,%s,%s,%s,%s,%s]", reg[REG_EN_AA] & 1 ? "true" : "false",
             reg[REG_EN_AA] & 2 ? "true" : "false", reg[REG_EN_AA] & 4 ? "true" : "false",
             reg[REG_EN_AA] & 8 ? "true" : "false", reg[REG_EN_AA] & 16 ? "true" : "false",
             reg[REG_EN_AA] & 32 ? "true" : "false");
    int n = snprintf(json, sizeof json,
                     "C{\"channel\":%d,\"rate\":\"%s\",\"address_width\":%d,\"crc_len\":%d,"
                     "\"auto_ack\":%s,\"dynamic_payloads\":%s,\"dynamic_ack\":%s,\"payload_size\":%d,"
                     "\"ard_step\":%d,\"arc\":%d,\"pa_level\":%d,\"powered\":%s,"
                     "\"tx_address\":\"%s\",\"rx_pipes\":{%s}}",
                     reg[REG_RF_CH] & 0x7F, rate, aw, (reg[REG_CONFIG] & CONFIG_CRCO) ? 2 : 1, aa,
                     (reg[REG_FEATURE] & FEATURE_EN_DPL) ? "true" : "false",
                     (reg[REG_FEATURE] & FEATURE_EN_DYN_ACK) ? "true" : "false",
                     reg[REG_RX_PW_P0 + 1] ? reg[REG_RX_PW_P0 + 1] : 32, reg[REG_SETUP_RETR] >> 4,
                     reg[REG_SETUP_RETR] & 15, (reg[REG_RF_SETUP] >> RF_PWR_SHIFT) & 3,
                     (reg[REG_CONFIG] & CONFIG_PWR_UP) ? "true" : "false", tx, pipes);
    send_msg((const uint8_t *)json, (size_t)n);
    config_dirty = 0;
}

static void update_listening(void) {
    uint8_t on = ce && (reg[REG_CONFIG] & CONFIG_PRIM_RX) && (reg[REG_CONFIG] & CONFIG_PWR_UP);
    if (config_dirty)
        push_config();
    if (on != listening_sent) {
        uint8_t msg[2] = {'L', on};
        send_msg(msg, 2);
        listening_sent = on;
    }
}

static uint8_t status_reg(void) {
    uint8_t s = reg[REG_STATUS] & (STATUS_RX_DR | STATUS_TX_DS | STATUS_MAX_RT);
    s |= (uint8_t)((rx_n ? rx_pipe[0] : 7) << STATUS_RX_P_NO_SHIFT);
    if (tx_count >= 3)
        s |= STATUS_TX_FULL;
    return s;
}

static uint8_t fifo_status(void) {
    uint8_t f = 0;
    if (tx_count == 0)
        f |= FIFO_TX_EMPTY;
    if (tx_count >= 3)
        f |= FIFO_TX_FULL;
    if (rx_n == 0)
        f |= FIFO_RX_EMPTY;
    if (rx_n >= 3)
        f |= FIFO_RX_FULL;
    return f;
}

void chip_from_air(const uint8_t *m, size_t len) {
    ssize_t n = (ssize_t)len;
    if (n < 1)
        return;
    if (m[0] == 't' && n >= 12) {
        uint32_t flushes = (uint32_t)m[8] << 24 | (uint32_t)m[9] << 16 | (uint32_t)m[10] << 8 | m[11];
        if (flushes != flushes_f)
            return; /* about payloads flushed since */
        uint32_t accepted = (uint32_t)m[4] << 24 | (uint32_t)m[5] << 16 | (uint32_t)m[6] << 8 | m[7];
        tx_count = (uint8_t)(m[3] + (sent_t - accepted));
        reg[REG_OBSERVE_TX] = (uint8_t)((reg[REG_OBSERVE_TX] & 0xF0) | (m[2] & 0x0F));
        reg[REG_STATUS] |= m[1] ? STATUS_TX_DS : STATUS_MAX_RT;
    } else if (m[0] == 'r' && n >= 2) {
        if (rx_n < 3) {
            rx_pipe[rx_n] = m[1];
            rx_len[rx_n] = (uint8_t)(n - 2 > 32 ? 32 : n - 2);
            memcpy(rx_buf[rx_n], m + 2, rx_len[rx_n]);
            rx_n++;
        }
        reg[REG_STATUS] |= STATUS_RX_DR;
    } else if (m[0] == 'd' && n >= 2) {
        reg[REG_RPD] = m[1] & 1;
    } else if (m[0] == 'e') {
        fprintf(stderr, "chip: the air refused a request: %.*s\n", (int)(n - 1), m + 1);
    }
}

int chip_poll(void) {
    uint8_t buf[64];
    if (config_dirty && sock >= 0)
        push_config();
    for (;;) {
        ssize_t n = recv(sock, buf, sizeof buf, MSG_DONTWAIT);
        if (n <= 0)
            break;
        chip_from_air(buf, (size_t)n);
    }
    return sock;
}

int chip_attach(const char *path, const char *name) {
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    strncpy(a.sun_path, path, sizeof a.sun_path - 1);
    sock = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    if (sock < 0 || connect(sock, (struct sockaddr *)&a, sizeof a) < 0) {
        fprintf(stderr, "chip: cannot reach the air at %s: %s\n", path, strerror(errno));
        return -1;
    }
    struct timeval tv = {0, 200000}; /* an RPD question waits at most 0.2 s for its answer */
    setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    power_on(name);
    return 0;
}

void chip_attach_local(chip_air_fn air, const char *name) {
    local_air = air;
    power_on(name);
}

void chip_variant(void) {
    const char *v = getenv("LONGGE_CHIP");
    char word[16] = "";
    if (v && v[0] == '@') {
        FILE *f = fopen(v + 1, "r");
        if (f) {
            if (!fgets(word, sizeof word, f))
                word[0] = 0;
            fclose(f);
        }
        word[strcspn(word, " \n")] = 0;
        v = word;
    }
    variant = !v                            ? CHIP_PLUS
              : strcmp(v, "old") == 0       ? CHIP_OLD
              : strcmp(v, "absent") == 0    ? CHIP_ABSENT
              : strcmp(v, "brownout") == 0  ? CHIP_BROWNOUT
                                            : CHIP_PLUS;
}

uint8_t chip_irq(void) {
    /* active low: STATUS's RX_DR, TX_DS, MAX_RT sit on the same bits as CONFIG's masks */
    uint8_t flags = reg[REG_STATUS] & (STATUS_RX_DR | STATUS_TX_DS | STATUS_MAX_RT);
    return (variant == CHIP_ABSENT || (flags & (uint8_t)~reg[REG_CONFIG])) ? 0 : 1;
}

static void reset_registers(void) {
    /* the power-on values of the registers the model reads */
    memset(reg, 0, sizeof reg);
    reg[REG_CONFIG] = CONFIG_EN_CRC;
    reg[REG_EN_AA] = 0x3F;
    reg[REG_EN_RXADDR] = 0x03;
    reg[REG_SETUP_AW] = 0x03;
    reg[REG_SETUP_RETR] = 0x03;
    reg[REG_RF_CH] = 2;
    reg[REG_RF_SETUP] = 0x0E;
    memset(addr_p0, 0xE7, 5);
    memset(addr_p1, 0xC2, 5);
    memset(addr_tx, 0xE7, 5);
    for (int pipe = 2; pipe < 6; pipe++) /* RX_ADDR_P2..P5: 0xC3..0xC6 */
        reg[REG_RX_ADDR_P1 + pipe - 1] = (uint8_t)(0xC1 + pipe);
}

static void power_on(const char *name) {
    chip_variant();
    features_active = 0;
    uint8_t msg[64] = {'H'};
    size_t len = strlen(name) > 60 ? 60 : strlen(name);
    memcpy(msg + 1, name, len);
    send_msg(msg, len + 1);
    reset_registers();
}

static void end_transaction(void) {
    uint8_t r = cmd & REGISTER_MASK;
    if (variant == CHIP_ABSENT)
        return;
    if (cmd == CMD_ACTIVATE && nbytes > 0 && data[0] == 0x73 && variant == CHIP_OLD) {
        features_active = !features_active;
        return;
    }
    if ((cmd & 0xE0) == CMD_W_REGISTER && r == REG_RF_SETUP && nbytes > 0 && variant == CHIP_OLD)
        data[0] &= (uint8_t)~RF_DR_LOW;
    if ((cmd & 0xE0) == CMD_W_REGISTER && (r == REG_FEATURE || r == REG_DYNPD) && features_off())
        return;
    if ((cmd & 0xE0) == CMD_W_REGISTER && nbytes > 0) {
        if (r == REG_RX_ADDR_P0)
            memcpy(addr_p0, data, nbytes > 5 ? 5 : nbytes);
        else if (r == REG_RX_ADDR_P1)
            memcpy(addr_p1, data, nbytes > 5 ? 5 : nbytes);
        else if (r == REG_TX_ADDR)
            memcpy(addr_tx, data, nbytes > 5 ? 5 : nbytes);
        else if (r == REG_STATUS)
            reg[REG_STATUS] &= (uint8_t)~(data[0] & (STATUS_RX_DR | STATUS_TX_DS | STATUS_MAX_RT));
        else if (r != REG_OBSERVE_TX && r != REG_RPD && r != REG_FIFO_STATUS)
            reg[r] = data[0];
        if (r != REG_STATUS)
            config_dirty = 1; /* pushed to the air once per loop turn (chip_poll) */
        if (r == REG_CONFIG)
            update_listening();
        return;
    }
    switch (cmd) {
    case CMD_W_TX_PAYLOAD:
    case CMD_W_TX_PAYLOAD_NOACK: {
        if (nbytes == 0 || tx_count >= 3)
            return;
        uint8_t msg[34] = {'T', cmd == CMD_W_TX_PAYLOAD_NOACK};
        memcpy(msg + 2, data, nbytes);
        if (config_dirty)
            push_config();
        send_msg(msg, (size_t)nbytes + 2);
        sent_t++;
        tx_count++;
        return;
    }
    case CMD_FLUSH_TX: {
        uint8_t msg[1] = {'F'};
        send_msg(msg, 1);
        flushes_f++;
        tx_count = 0;
        return;
    }
    case CMD_REUSE_TX_PL: {
        uint8_t msg[1] = {'U'};
        send_msg(msg, 1);
        return;
    }
    case CMD_FLUSH_RX: {
        uint8_t msg[1] = {'X'};
        send_msg(msg, 1);
        rx_n = 0;
        return;
    }
    case CMD_R_RX_PAYLOAD:
        if (rx_n) {
            rx_n--;
            memmove(rx_len, rx_len + 1, rx_n);
            memmove(rx_pipe, rx_pipe + 1, rx_n);
            memmove(rx_buf, rx_buf + 1, (size_t)rx_n * 32);
            uint8_t msg[2] = {'R', 1};
            send_msg(msg, 2);
        }
        return;
    default:
        return;
    }
}

void chip_csn(uint8_t level) {
    if (!level) {
        in_tx = 1;
        have_cmd = 0;
        nbytes = 0;
    } else if (in_tx) {
        in_tx = 0;
        end_transaction();
    }
}

static uint8_t read_register(uint8_t r, uint8_t i) {
    if (r == REG_RX_ADDR_P0)
        return addr_p0[i % 5];
    if (r == REG_RX_ADDR_P1)
        return addr_p1[i % 5];
    if (r == REG_TX_ADDR)
        return addr_tx[i % 5];
    if (r == REG_STATUS)
        return status_reg();
    if (r == REG_FIFO_STATUS)
        return fifo_status();
    if (r == REG_RPD) {
        /* ask the air, wait for its answer (it comes before anything later) */
        uint8_t msg[1] = {'D'}, buf[64];
        reg[REG_RPD] = 0xFF;
        send_msg(msg, 1);
        for (int tries = 0; tries < 2000 && reg[REG_RPD] == 0xFF; tries++) {
            ssize_t n = recv(sock, buf, sizeof buf, 0);
            if (n <= 0)
                break;
            chip_from_air(buf, (size_t)n);
        }
        if (reg[REG_RPD] == 0xFF)
            reg[REG_RPD] = 0;
        return reg[REG_RPD];
    }
    if ((r == REG_FEATURE || r == REG_DYNPD) && features_off())
        return 0;
    return reg[r];
}

uint8_t chip_spi(uint8_t out) {
    if (!in_tx || variant == CHIP_ABSENT)
        return 0xFF;
    if (!have_cmd) {
        have_cmd = 1;
        cmd = out;
        return status_reg();
    }
    uint8_t i = nbytes;
    if (nbytes < sizeof data)
        data[nbytes++] = out;
    if ((cmd & 0xE0) == CMD_R_REGISTER && cmd < 0x20)
        return read_register(cmd & REGISTER_MASK, i);
    if (cmd == CMD_R_RX_PL_WID)
        return (rx_n && !features_off()) ? rx_len[0] : 0;
    if (cmd == CMD_R_RX_PAYLOAD)
        return (rx_n && i < rx_len[0]) ? rx_buf[0][i] : 0;
    return 0;
}

void chip_ce(uint8_t level) {
    if (variant == CHIP_BROWNOUT && level && !ce && (reg[REG_CONFIG] & CONFIG_PWR_UP)) {
        reset_registers(); /* the supply sagged: the chip restarted */
        tx_count = rx_n = 0;
        config_dirty = 1;
    }
    ce = level;
    update_listening();
}
