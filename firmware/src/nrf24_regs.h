/* nRF24L01+ register map and SPI commands (Nordic nRF24L01+ Product Specification v1.0, §8-9). */
#ifndef NRF24_REGS_H
#define NRF24_REGS_H

/* SPI commands (Table 20) */
#define CMD_R_REGISTER 0x00 /* | register (5 bits) */
#define CMD_W_REGISTER 0x20 /* | register */
#define CMD_R_RX_PAYLOAD 0x61
#define CMD_W_TX_PAYLOAD 0xA0
#define CMD_FLUSH_TX 0xE1
#define CMD_FLUSH_RX 0xE2
#define CMD_REUSE_TX_PL 0xE3
#define CMD_R_RX_PL_WID 0x60
#define CMD_W_TX_PAYLOAD_NOACK 0xB0
#define CMD_NOP 0xFF
#define CMD_ACTIVATE 0x50 /* nRF24L01 without "+": followed by 0x73, toggles FEATURE access */
#define REGISTER_MASK 0x1F

/* Registers (Table 28) */
#define REG_CONFIG 0x00
#define REG_EN_AA 0x01
#define REG_EN_RXADDR 0x02
#define REG_SETUP_AW 0x03
#define REG_SETUP_RETR 0x04
#define REG_RF_CH 0x05
#define REG_RF_SETUP 0x06
#define REG_STATUS 0x07
#define REG_OBSERVE_TX 0x08
#define REG_RPD 0x09
#define REG_RX_ADDR_P0 0x0A
#define REG_RX_ADDR_P1 0x0B
#define REG_TX_ADDR 0x10
#define REG_RX_PW_P0 0x11
#define REG_FIFO_STATUS 0x17
#define REG_DYNPD 0x1C
#define REG_FEATURE 0x1D

/* CONFIG bits */
#define CONFIG_MASK_RX_DR 0x40
#define CONFIG_MASK_TX_DS 0x20
#define CONFIG_MASK_MAX_RT 0x10
#define CONFIG_EN_CRC 0x08
#define CONFIG_CRCO 0x04
#define CONFIG_PWR_UP 0x02
#define CONFIG_PRIM_RX 0x01

/* STATUS bits */
#define STATUS_RX_DR 0x40
#define STATUS_TX_DS 0x20
#define STATUS_MAX_RT 0x10
#define STATUS_RX_P_NO_SHIFT 1
#define STATUS_RX_P_NO_MASK 0x0E
#define STATUS_TX_FULL 0x01

/* RF_SETUP bits */
#define RF_DR_LOW 0x20
#define RF_DR_HIGH 0x08
#define RF_PWR_SHIFT 1

/* FIFO_STATUS bits */
#define FIFO_TX_FULL 0x20
#define FIFO_TX_EMPTY 0x10
#define FIFO_RX_FULL 0x02
#define FIFO_RX_EMPTY 0x01

/* FEATURE bits */
#define FEATURE_EN_DPL 0x04
#define FEATURE_EN_ACK_PAY 0x02
#define FEATURE_EN_DYN_ACK 0x01

#define NRF_MAX_PAYLOAD 32
#define NRF_FIFO_DEPTH 3

#endif
