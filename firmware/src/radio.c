#include "radio.h"

#include "hal.h"
#include "nrf24_regs.h"

static uint8_t listening;

static uint8_t command(uint8_t cmd) {
    hal_csn(0);
    uint8_t status = hal_spi_xfer(cmd);
    hal_csn(1);
    return status;
}

static uint8_t read_reg(uint8_t reg) {
    hal_csn(0);
    hal_spi_xfer((uint8_t)(CMD_R_REGISTER | (reg & REGISTER_MASK)));
    uint8_t v = hal_spi_xfer(CMD_NOP);
    hal_csn(1);
    return v;
}

static void write_reg(uint8_t reg, uint8_t value) {
    hal_csn(0);
    hal_spi_xfer((uint8_t)(CMD_W_REGISTER | (reg & REGISTER_MASK)));
    hal_spi_xfer(value);
    hal_csn(1);
}

static void write_buf(uint8_t cmd, const uint8_t *buf, uint8_t len) {
    hal_csn(0);
    hal_spi_xfer(cmd);
    hal_spi_write(buf, len);
    hal_csn(1);
}

uint8_t radio_begin(void) {
    hal_ce(0);
    hal_csn(1);
    hal_delay_us(5000); /* power on reset: 100 ms worst case; the modem waits before this */
    /* A chip answers if a register holds what was written (SETUP_AW: 2 bits). */
    write_reg(REG_SETUP_AW, 0x01);
    if (read_reg(REG_SETUP_AW) != 0x01)
        return 0;
    write_reg(REG_SETUP_AW, 0x03);
    if (read_reg(REG_SETUP_AW) != 0x03)
        return 0;
    command(CMD_FLUSH_TX);
    command(CMD_FLUSH_RX);
    write_reg(REG_STATUS, STATUS_RX_DR | STATUS_TX_DS | STATUS_MAX_RT);
    return 1;
}

uint8_t radio_is_plus(void) {
    /* The "+" accepts RF_DR_LOW (250 kbit/s); the old chip keeps it clear. */
    uint8_t old = read_reg(REG_RF_SETUP);
    write_reg(REG_RF_SETUP, (uint8_t)(old | RF_DR_LOW));
    uint8_t plus = (read_reg(REG_RF_SETUP) & RF_DR_LOW) != 0;
    write_reg(REG_RF_SETUP, old);
    return plus;
}

uint8_t radio_config_from_wire(const uint8_t *b, uint8_t len, radio_config *c) {
    uint8_t six = len == RADIO_CONFIG_WIRE_LEN_PIPES;
    if (len != RADIO_CONFIG_WIRE_LEN && !six)
        return 1;
    c->channel = b[0];
    c->rate = b[1];
    c->pa_level = b[2];
    c->address_width = b[3];
    c->crc_len = b[4];
    c->ard_step = b[5];
    c->arc = b[6];
    c->auto_ack = b[7];
    c->dynamic_payloads = b[8];
    c->dynamic_ack = b[9];
    c->payload_size = b[10];
    c->powered = b[11];
    for (uint8_t i = 0; i < 5; i++) {
        c->tx_address[i] = b[12 + i];
        c->rx_address[0][i] = b[18 + i];
        c->rx_address[1][i] = b[23 + i];
    }
    c->rx_pipes = b[17];
    for (uint8_t p = 0; p < 4; p++) /* (the power-on values when the record has none) */
        c->rx_first[p] = six ? b[29 + p] : (uint8_t)(0xC3 + p);
    if (c->channel > 125)
        return 2;
    if (c->rate > 2)
        return 3;
    if (c->pa_level > 3)
        return 4;
    if (c->address_width < 3 || c->address_width > 5)
        return 5;
    if (c->crc_len < 1 || c->crc_len > 2)
        return 6;
    if (c->ard_step > 15 || c->arc > 15)
        return 7;
    if (c->auto_ack > 0x3F || (c->rx_pipes & (six ? ~0x3F : ~0x03)))
        return 8;
    if (c->payload_size < 1 || c->payload_size > NRF_MAX_PAYLOAD)
        return 9;
    if (c->dynamic_payloads > 1 || c->dynamic_ack > 1 || c->powered > 1 || b[28] != 0)
        return 10;
    return 0;
}

void radio_apply(const radio_config *c) {
    uint8_t rf = (uint8_t)(c->pa_level << RF_PWR_SHIFT);
    if (c->rate == 1)
        rf |= RF_DR_HIGH;
    else if (c->rate == 2)
        rf |= RF_DR_LOW;
    write_reg(REG_RF_SETUP, rf);
    write_reg(REG_RF_CH, c->channel);
    write_reg(REG_SETUP_AW, (uint8_t)(c->address_width - 2));
    write_reg(REG_SETUP_RETR, (uint8_t)((c->ard_step << 4) | c->arc));
    write_reg(REG_EN_AA, c->auto_ack);
    write_reg(REG_FEATURE, (uint8_t)((c->dynamic_payloads ? FEATURE_EN_DPL : 0) |
                                     (c->dynamic_ack ? FEATURE_EN_DYN_ACK : 0)));
    write_reg(REG_DYNPD, c->dynamic_payloads ? 0x3F : 0x00);
    for (uint8_t p = 0; p < 6; p++)
        write_reg((uint8_t)(REG_RX_PW_P0 + p), c->payload_size);
    write_buf((uint8_t)(CMD_W_REGISTER | REG_TX_ADDR), c->tx_address, c->address_width);
    write_buf((uint8_t)(CMD_W_REGISTER | REG_RX_ADDR_P0), c->rx_address[0], c->address_width);
    write_buf((uint8_t)(CMD_W_REGISTER | REG_RX_ADDR_P1), c->rx_address[1], c->address_width);
    for (uint8_t p = 0; p < 4; p++) /* RX_ADDR_P2..P5: one byte each (datasheet §7.6) */
        write_reg((uint8_t)(REG_RX_ADDR_P1 + 1 + p), c->rx_first[p]);
    write_reg(REG_EN_RXADDR, c->rx_pipes);
    uint8_t config = CONFIG_EN_CRC | (c->crc_len == 2 ? CONFIG_CRCO : 0);
    if (c->powered)
        config |= CONFIG_PWR_UP;
    if (listening)
        config |= CONFIG_PRIM_RX;
    write_reg(REG_CONFIG, config);
}

void radio_listen(uint8_t on) {
    uint8_t config = read_reg(REG_CONFIG);
    listening = on;
    hal_ce(0);
    if (on)
        write_reg(REG_CONFIG, (uint8_t)(config | CONFIG_PRIM_RX));
    else
        write_reg(REG_CONFIG, (uint8_t)(config & ~CONFIG_PRIM_RX));
    hal_delay_us(130); /* settling, datasheet T_stby2a */
    hal_ce(1);         /* RX: listen; TX: send whatever the FIFO holds */
}

void radio_load(const uint8_t *payload, uint8_t len, uint8_t no_ack) {
    write_buf(no_ack ? CMD_W_TX_PAYLOAD_NOACK : CMD_W_TX_PAYLOAD, payload, len);
    hal_ce(1);
}

void radio_flush_tx(void) {
    command(CMD_FLUSH_TX);
    write_reg(REG_STATUS, STATUS_MAX_RT | STATUS_TX_DS);
}

void radio_flush_rx(void) {
    command(CMD_FLUSH_RX);
    write_reg(REG_STATUS, STATUS_RX_DR);
}

void radio_reuse_tx(void) {
    write_reg(REG_STATUS, STATUS_MAX_RT);
    command(CMD_REUSE_TX_PL);
    hal_ce(0);
    hal_ce(1); /* a CE pulse restarts the payload at the head */
}

uint8_t radio_status(void) { return command(CMD_NOP); }

void radio_clear(uint8_t bits) { write_reg(REG_STATUS, bits); }

uint8_t radio_arc_count(void) { return read_reg(REG_OBSERVE_TX) & 0x0F; }

uint8_t radio_fifo_status(void) { return read_reg(REG_FIFO_STATUS); }

uint8_t radio_read(uint8_t *buf, uint8_t *pipe) {
    uint8_t status = radio_status();
    uint8_t p = (status & STATUS_RX_P_NO_MASK) >> STATUS_RX_P_NO_SHIFT;
    if (p > 5)
        return 0; /* RX FIFO empty */
    hal_csn(0);
    hal_spi_xfer(CMD_R_RX_PL_WID);
    uint8_t len = hal_spi_xfer(CMD_NOP);
    hal_csn(1);
    if (len == 0 || len > NRF_MAX_PAYLOAD) {
        radio_flush_rx(); /* the datasheet's rule for a corrupt width */
        return 0;
    }
    hal_csn(0);
    hal_spi_xfer(CMD_R_RX_PAYLOAD);
    for (uint8_t i = 0; i < len; i++)
        buf[i] = hal_spi_xfer(CMD_NOP);
    hal_csn(1);
    *pipe = p;
    return len;
}

uint8_t radio_rpd(void) { return read_reg(REG_RPD) & 0x01; }
