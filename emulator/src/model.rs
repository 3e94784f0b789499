//! The air, sans-IO: a line-by-line twin of `longge/air/model.py`, which stays the executable
//! specification. Same events in the same order, same counters, same times to the
//! nanosecond; `tests/test_air_differential.py` replays event scripts through both and
//! requires identical outputs. Read the Python module for the why of each rule.

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::rc::Rc;

use serde_json::{json, Map, Value};

use crate::loss::{Frame, LossModel};

// nRF24L01+ Product Specification v1.0 (page numbers as in longge/chip/datasheet.py).
pub const T_SETTLE_NS: i64 = 130_000; // Tstby2a, p. 22
/// The longest stay in TX mode with Enhanced ShockBurst off (p. 22, 6.1.5).
pub const TX_MODE_MAX_NS: i64 = 4_000_000;
const PREAMBLE_BYTES: i64 = 1; // p. 27
const PCF_BITS: i64 = 9; // p. 28
pub const MAX_PAYLOAD: usize = 32; // p. 28
pub const TX_FIFO_DEPTH: usize = 3; // p. 56
pub const RX_FIFO_DEPTH: i64 = 3; // p. 56
const ARD_STEP_NS: i64 = 250_000; // SETUP_RETR, p. 58
/// The RPD needs the carrier for at least this long (datasheet: 40 µs).
pub const RPD_MIN_NS: i64 = 40_000;

pub fn rate_bps(rate: &str) -> Option<i64> {
    match rate {
        "250k" => Some(250_000),
        "1M" => Some(1_000_000),
        "2M" => Some(2_000_000),
        _ => None,
    }
}

/// Smallest ARD (µs) at which an empty ACK is still received (p. 34).
fn min_ard_us_for_empty_ack(rate: &str) -> i64 {
    if rate == "250k" {
        500
    } else {
        250
    }
}

/// Bits of one Enhanced ShockBurst packet (p. 27, figure 4).
pub fn bits_on_air(payload_len: i64, address_width: i64, crc_len: i64) -> i64 {
    8 * (PREAMBLE_BYTES + address_width + payload_len + crc_len) + PCF_BITS
}

pub fn time_on_air_ns(payload_len: i64, rate: &str, address_width: i64, crc_len: i64) -> i64 {
    bits_on_air(payload_len, address_width, crc_len) * 1_000_000_000
        / rate_bps(rate).expect("validated rate")
}

pub fn ard_ns(step: i64) -> i64 {
    ARD_STEP_NS * (step + 1)
}

/// The chip settings that matter on air (defaults are RF24's `begin()` values).
#[derive(Clone, Debug)]
pub struct Registers {
    pub channel: i64,
    pub rate: String,
    pub address_width: i64,
    pub crc_len: i64,
    pub auto_ack: Vec<bool>,
    pub dynamic_payloads: bool,
    pub dynamic_ack: bool,
    pub payload_size: i64,
    pub ard_step: i64,
    pub arc: i64,
    pub pa_level: i64,
    pub powered: bool,
    pub tx_address: Vec<u8>,
    pub rx_pipes: BTreeMap<i64, Vec<u8>>,
}

impl Default for Registers {
    fn default() -> Self {
        Registers {
            channel: 76,
            rate: "1M".into(),
            address_width: 5,
            crc_len: 2,
            auto_ack: vec![true; 6],
            dynamic_payloads: false,
            dynamic_ack: false,
            payload_size: MAX_PAYLOAD as i64,
            ard_step: 5,
            arc: 15,
            pa_level: 3,
            powered: true,
            tx_address: Vec::new(),
            rx_pipes: BTreeMap::new(),
        }
    }
}

pub const REGISTER_FIELDS: [&str; 14] = [
    "channel",
    "rate",
    "address_width",
    "crc_len",
    "auto_ack",
    "dynamic_payloads",
    "dynamic_ack",
    "payload_size",
    "ard_step",
    "arc",
    "pa_level",
    "powered",
    "tx_address",
    "rx_pipes",
];

impl Registers {
    /// Refuse values the chip cannot hold, with `ConfigError`'s wording.
    pub fn validate(&self) -> Result<(), String> {
        let bad = |key: &str, value: String, allowed: &str| {
            Err(format!("{key} = {value} is not allowed: {allowed}"))
        };
        if !(0..=125).contains(&self.channel) {
            return bad("channel", self.channel.to_string(), "0..125");
        }
        if rate_bps(&self.rate).is_none() {
            return bad("rate", format!("'{}'", self.rate), "one of 250k, 1M, 2M");
        }
        if !(3..=5).contains(&self.address_width) {
            return bad("address_width", self.address_width.to_string(), "3..5");
        }
        if !(1..=2).contains(&self.crc_len) {
            return bad("crc_len", self.crc_len.to_string(), "1 or 2");
        }
        if self.auto_ack.len() != 6 {
            return bad("auto_ack", format!("{:?}", self.auto_ack), "6 pipes");
        }
        if !(1..=MAX_PAYLOAD as i64).contains(&self.payload_size) {
            return bad("payload_size", self.payload_size.to_string(), "1..32");
        }
        if !(0..16).contains(&self.ard_step) {
            return bad("ard_step", self.ard_step.to_string(), "0..15");
        }
        if !(0..=15).contains(&self.arc) {
            return bad("arc", self.arc.to_string(), "0..15");
        }
        if !(0..=3).contains(&self.pa_level) {
            return bad("pa_level", self.pa_level.to_string(), "0..3");
        }
        if self.rx_pipes.keys().any(|p| !(0..=5).contains(p)) {
            return bad(
                "rx_pipes",
                format!("{:?}", self.rx_pipes.keys()),
                "pipes 0..5",
            );
        }
        Ok(())
    }

    /// Channels occupied: 2 MHz at 2 Mbit/s, 1 MHz otherwise (p. 23).
    pub fn bandwidth(&self) -> i64 {
        if self.rate == "2M" {
            2
        } else {
            1
        }
    }

    /// `registers_from_json` of `server.py`: missing fields keep their defaults.
    pub fn from_json(v: &Value) -> Result<Registers, String> {
        let obj = v
            .as_object()
            .ok_or("registers: a JSON object is expected")?;
        let unknown: Vec<&String> = obj
            .keys()
            .filter(|k| !REGISTER_FIELDS.contains(&k.as_str()))
            .collect();
        if !unknown.is_empty() {
            return Err(format!(
                "registers = {unknown:?} is not allowed: known fields: {REGISTER_FIELDS:?}"
            ));
        }
        let mut r = Registers::default();
        let int = |k: &str, d: i64| -> Result<i64, String> {
            match obj.get(k) {
                None => Ok(d),
                Some(Value::Bool(b)) => Ok(*b as i64),
                Some(x) => x
                    .as_i64()
                    .ok_or(format!("{k}: an integer is expected, not {x}")),
            }
        };
        let boolean = |k: &str, d: bool| -> Result<bool, String> {
            match obj.get(k) {
                None => Ok(d),
                Some(Value::Bool(b)) => Ok(*b),
                Some(x) => x
                    .as_i64()
                    .map(|i| i != 0)
                    .ok_or(format!("{k}: a boolean is expected")),
            }
        };
        let hex = |s: &Value, k: &str| -> Result<Vec<u8>, String> {
            let s = s.as_str().ok_or(format!("{k}: a hex string is expected"))?;
            from_hex(s).ok_or(format!("{k}: {s:?} is not hex"))
        };
        r.channel = int("channel", r.channel)?;
        if let Some(x) = obj.get("rate") {
            r.rate = x.as_str().ok_or("rate: a string is expected")?.to_string();
        }
        r.address_width = int("address_width", r.address_width)?;
        r.crc_len = int("crc_len", r.crc_len)?;
        if let Some(x) = obj.get("auto_ack") {
            let list = x.as_array().ok_or("auto_ack: a list is expected")?;
            r.auto_ack = list
                .iter()
                .map(|b| {
                    b.as_bool()
                        .or(b.as_i64().map(|i| i != 0))
                        .ok_or("auto_ack: booleans")
                })
                .collect::<Result<_, _>>()?;
        }
        r.dynamic_payloads = boolean("dynamic_payloads", r.dynamic_payloads)?;
        r.dynamic_ack = boolean("dynamic_ack", r.dynamic_ack)?;
        r.payload_size = int("payload_size", r.payload_size)?;
        r.ard_step = int("ard_step", r.ard_step)?;
        r.arc = int("arc", r.arc)?;
        r.pa_level = int("pa_level", r.pa_level)?;
        r.powered = boolean("powered", r.powered)?;
        if let Some(x) = obj.get("tx_address") {
            r.tx_address = hex(x, "tx_address")?;
        }
        if let Some(x) = obj.get("rx_pipes") {
            let pipes = x.as_object().ok_or("rx_pipes: an object is expected")?;
            for (k, v) in pipes {
                let pipe: i64 = k
                    .trim()
                    .parse()
                    .map_err(|_| format!("rx_pipes: pipe {k:?}"))?;
                r.rx_pipes.insert(pipe, hex(v, "rx_pipes")?);
            }
        }
        Ok(r)
    }
}

pub fn from_hex(s: &str) -> Option<Vec<u8>> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    if s.len() & 1 == 1 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

pub fn to_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    Tx {
        radio: u32,
        ok: bool,
        arc_count: i64,
    },
    Rx {
        radio: u32,
        pipe: i64,
        payload: Vec<u8>,
    },
}

impl Output {
    pub fn radio(&self) -> u32 {
        match self {
            Output::Tx { radio, .. } | Output::Rx { radio, .. } => *radio,
        }
    }
}

#[derive(Debug)]
struct Transmission {
    sender: u32,
    channel: i64,
    bandwidth: i64,
    start: i64,
    end: i64,
    collided: bool,
    /// destroyed at the radios of these nodes (a Wi-Fi interferer near them only)
    jammed_near: Vec<String>,
}

impl Transmission {
    fn jammed_at(&self, radio_name: &str) -> bool {
        self.jammed_near
            .iter()
            .any(|node| radio_name.starts_with(&format!("{node}-")))
    }
}

type TxRef = Rc<RefCell<Transmission>>;

impl Transmission {
    /// A frame of `payload_len` bytes (0: an ACK) sent by radio `sender` from `start`, with
    /// the time on air its registers give it.
    fn from(sender: u32, regs: &Registers, start: i64, payload_len: i64) -> TxRef {
        let toa = time_on_air_ns(payload_len, &regs.rate, regs.address_width, regs.crc_len);
        Rc::new(RefCell::new(Transmission {
            sender,
            channel: regs.channel,
            bandwidth: regs.bandwidth(),
            start,
            end: start + toa,
            collided: false,
            jammed_near: Vec::new(),
        }))
    }
}

struct Attempt {
    id: u64,
    payload: Vec<u8>,
    no_ack: bool,
    pid: i64,
    tries: i64,
    tx: Option<TxRef>,
    acked_by: Vec<u32>,
    ack_tx: Option<TxRef>,
}

/// How a Wi-Fi interferer's traffic is made (air/interferer.py's MODELS).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WifiModel {
    /// busy 1-ms slots, each with probability `duty`
    Slots,
    /// bursts of frames and gaps, the load changing every EPOCH_NS around `duty`
    Traffic,
}

/// air/interferer.py's `traffic` model: its constants, the same numbers.
const EPOCH_NS: i64 = 250_000_000;
const TXOP_MIN_NS: u64 = 100_000;
const TXOP_SPAN_NS: u64 = 3_900_000;
const TXOP_MEAN_NS: u64 = TXOP_MIN_NS + TXOP_SPAN_NS / 2;
const PPM: u64 = 1_000_000;

/// splitmix64's finaliser (air/interferer.py's `_mix`).
fn mix(x: u64) -> u64 {
    let mut x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn key(centre: i64, epoch: i64, i: u64) -> u64 {
    ((centre as u64) << 48) ^ ((epoch as u64) << 16) ^ i
}

/// An epoch's busy share in millionths (air/interferer.py's `epoch_duty_ppm`).
pub fn epoch_duty_ppm(centre: i64, duty: f64, epoch: i64) -> u64 {
    let nominal = ((duty * PPM as f64 + 0.5).floor() as u64).max(1);
    let u = mix(key(centre, epoch, 0xFFFF));
    (nominal * (500 + u % 1001) / 1000).min(PPM)
}

/// An epoch's bursts, [start, end) in ns (air/interferer.py's `epoch_bursts`).
pub fn epoch_bursts(centre: i64, duty: f64, epoch: i64) -> Vec<(i64, i64)> {
    let d = epoch_duty_ppm(centre, duty, epoch);
    let mean_gap = TXOP_MEAN_NS * (PPM - d) / d;
    let (mut t, end) = (epoch * EPOCH_NS, (epoch + 1) * EPOCH_NS);
    let mut out = Vec::new();
    for i in 0u64.. {
        let u = mix(key(centre, epoch, i));
        let start = t + ((u >> 32) % (2 * mean_gap + 1)) as i64;
        if start >= end {
            break;
        }
        t = (start + (TXOP_MIN_NS + (u & 0xFFFF_FFFF) % (TXOP_SPAN_NS + 1)) as i64).min(end);
        out.push((start, t));
    }
    out
}

/// An epoch's number and its bursts (the traffic model's, kept for the next question).
type EpochBursts = (i64, Vec<(i64, i64)>);

/// A Wi-Fi transmitter: the RPD hears it, and it destroys the frames it overlaps, everywhere
/// or (`near`: a node's name) at that node's radios only (see `Interferer` in
/// air/interferer.py).
#[derive(Clone, Debug)]
pub struct Interferer {
    pub centre: i64,
    pub width: i64,
    pub duty: f64,
    pub burst_ns: i64,
    pub model: WifiModel,
    pub near: Option<String>,
    cached: RefCell<Option<EpochBursts>>,
}

impl Interferer {
    pub fn new(centre: i64, duty: f64) -> Self {
        Interferer {
            centre,
            width: 22,
            duty,
            burst_ns: 1_000_000,
            model: WifiModel::Slots,
            near: None,
            cached: RefCell::new(None),
        }
    }

    fn covers(&self, channel: i64) -> bool {
        (channel - self.centre).abs() <= self.width.div_euclid(2)
    }

    fn heard_by(&self, radio_name: &str) -> bool {
        match &self.near {
            None => true,
            Some(node) => radio_name.starts_with(&format!("{node}-")),
        }
    }

    fn active(&self, start: i64, end: i64) -> bool {
        if self.model == WifiModel::Traffic {
            return self.traffic_active(start, end);
        }
        let first = start.div_euclid(self.burst_ns);
        let last = end.div_euclid(self.burst_ns);
        for slot in first..=last.min(first + 64) {
            let h = (slot as u64)
                .wrapping_mul(2_654_435_761)
                .wrapping_add((self.centre as u64).wrapping_mul(40_503))
                & 0xffff_ffff;
            if (h as f64) / 4_294_967_296.0 < self.duty {
                return true;
            }
        }
        false
    }

    fn traffic_active(&self, start: i64, end: i64) -> bool {
        let first = start.div_euclid(EPOCH_NS);
        let last = end.div_euclid(EPOCH_NS);
        for epoch in first..=last.min(first + 4) {
            let mut cached = self.cached.borrow_mut();
            let fresh = matches!(cached.as_ref(), Some((e, _)) if *e == epoch);
            if !fresh {
                *cached = Some((epoch, epoch_bursts(self.centre, self.duty, epoch)));
            }
            let bursts = &cached.as_ref().expect("just made").1;
            // the last burst that starts at or before `end`
            let i = bursts.partition_point(|b| b.0 <= end);
            if i > 0 && bursts[i - 1].1 > start {
                return true;
            }
        }
        false
    }
}

pub struct Radio {
    pub id: u32,
    pub name: String,
    pub regs: Registers,
    listening: bool,
    rx_since: i64,
    busy_until: i64,
    tx_fifo: VecDeque<(Vec<u8>, bool)>,
    attempt: Option<Attempt>,
    blocked: bool,
    chain_at: Option<i64>,
    tx_mode_since: i64,
    over_4ms: bool,
    next_pid: i64,
    pub rx_fifo: i64,
    last_rx: BTreeMap<i64, (i64, Vec<u8>)>,
    counters: BTreeMap<&'static str, i64>,
    rpd: bool,
}

impl Radio {
    fn new(id: u32, name: String) -> Self {
        Radio {
            id,
            name,
            regs: Registers::default(),
            listening: false,
            rx_since: 0,
            busy_until: 0,
            tx_fifo: VecDeque::new(),
            attempt: None,
            blocked: false,
            chain_at: None,
            tx_mode_since: 0,
            over_4ms: false,
            next_pid: 0,
            rx_fifo: 0,
            last_rx: BTreeMap::new(),
            counters: BTreeMap::new(),
            rpd: false,
        }
    }

    fn count(&mut self, key: &'static str, n: i64) {
        *self.counters.entry(key).or_insert(0) += n;
    }

    fn attempt_id(&self) -> Option<u64> {
        self.attempt.as_ref().map(|a| a.id)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum EventKind {
    DataEnd,
    AckEnd,
    Retry,
}

type Event = Reverse<(i64, u64, EventKind, u32, u64)>;

/// Why a radio does not take a frame in (see `Air::reception`).
enum Refusal {
    NotForIt,
    Late,
    Format,
}

pub struct Air {
    pub loss: LossModel,
    pub radios: BTreeMap<u32, Radio>,
    channels: BTreeMap<i64, BTreeMap<&'static str, i64>>,
    events: BinaryHeap<Event>,
    seq: u64,
    now: i64,
    next_id: u32,
    next_attempt: u64,
    on_air: Vec<TxRef>,
    out: Vec<Output>,
    retired: Vec<Radio>,
    pub interferers: Vec<Interferer>,
    /// The host message being applied was sent while the air held its clock for a host
    /// (the server's hold_for_hosts): it is applied at the held instant but comes after every
    /// event of that instant. A payload it loads therefore cannot chain onto a frame that ended
    /// then: the host wrote it after hearing of that end (TX_DS, an empty FIFO), and the chip
    /// had already gone to standby (a settle, and a new stay in TX mode for the 4 ms rule).
    pub applying_held: bool,
    /// Hold for slow hosts (the compiled server sets it): `advance` stops just before a frame
    /// that would land in the full RX FIFO of a listening radio not in `not_held` (`blocking`),
    /// instead of dropping it as the chip would, until that radio's host reads. A full FIFO
    /// that no frame is about to reach stops nothing. Off (the chip's behaviour) by default.
    pub holds: bool,
    /// Receivers whose hosts are taken for ones that do not read: their frames overflow.
    pub not_held: Vec<u32>,
}

impl Air {
    pub fn new(loss: LossModel) -> Self {
        Air {
            loss,
            radios: BTreeMap::new(),
            channels: BTreeMap::new(),
            events: BinaryHeap::new(),
            seq: 0,
            now: 0,
            next_id: 1,
            next_attempt: 1,
            on_air: Vec::new(),
            out: Vec::new(),
            retired: Vec::new(),
            interferers: Vec::new(),
            applying_held: false,
            holds: false,
            not_held: Vec::new(),
        }
    }

    /// The same air with `holds` on (the compiled server's).
    pub fn holding_for_hosts(mut self) -> Self {
        self.holds = true;
        self
    }

    // -- radios ---------------------------------------------------------------------------

    pub fn attach(&mut self, name: &str) -> u32 {
        let rid = self.next_id;
        self.next_id += 1;
        self.radios.insert(rid, Radio::new(rid, name.to_string()));
        rid
    }

    pub fn detach(&mut self, rid: u32) {
        if let Some(mut radio) = self.radios.remove(&rid) {
            radio.attempt = None;
            self.retired.push(radio);
            let excess = self.retired.len().saturating_sub(32);
            self.retired.drain(..excess);
        }
    }

    fn radio(&mut self, rid: u32) -> Result<&mut Radio, String> {
        self.radios.get_mut(&rid).ok_or(format!("no radio {rid}"))
    }

    pub fn configure(&mut self, rid: u32, regs: Registers, now: i64) -> Result<(), String> {
        regs.validate()?;
        self.radio(rid)?;
        self.clock(now);
        let radio = self.radio(rid)?;
        if !regs.powered {
            radio.listening = false;
        }
        radio.regs = regs;
        Ok(())
    }

    pub fn set_listening(&mut self, rid: u32, on: bool, now: i64) -> Result<(), String> {
        self.radio(rid)?;
        self.clock(now);
        let radio = self.radio(rid)?;
        if on && !radio.listening {
            radio.rx_since = now.max(radio.busy_until) + T_SETTLE_NS;
            radio.chain_at = None;
            radio.rpd = false;
        }
        radio.listening = on;
        if !on {
            radio.rpd = false;
            self.kick(rid);
        }
        Ok(())
    }

    /// Load a payload into the TX FIFO. False (and counted) when the FIFO is full.
    pub fn submit(
        &mut self,
        rid: u32,
        payload: &[u8],
        no_ack: bool,
        now: i64,
    ) -> Result<bool, String> {
        self.radio(rid)?;
        self.clock(now);
        let radio = self.radio(rid)?;
        if radio.tx_fifo.len() >= TX_FIFO_DEPTH {
            radio.count("tx_fifo_overflow", 1);
            return Ok(false);
        }
        let len = payload.len().min(MAX_PAYLOAD);
        let no_ack = no_ack && radio.regs.dynamic_ack;
        radio.tx_fifo.push_back((payload[..len].to_vec(), no_ack));
        radio.count("frames_submitted", 1);
        self.kick(rid);
        Ok(true)
    }

    pub fn flush_tx(&mut self, rid: u32, now: i64) -> Result<(), String> {
        self.radio(rid)?;
        self.clock(now);
        let radio = self.radio(rid)?;
        let n = radio.tx_fifo.len() as i64;
        radio.count("frames_flushed", n);
        radio.tx_fifo.clear();
        radio.attempt = None;
        radio.blocked = false;
        Ok(())
    }

    pub fn reuse_tx(&mut self, rid: u32, now: i64) -> Result<(), String> {
        self.radio(rid)?;
        self.clock(now);
        let radio = self.radio(rid)?;
        if radio.blocked {
            radio.blocked = false;
            radio.attempt = None;
            self.kick(rid);
        }
        Ok(())
    }

    /// The host read `count` frames out of the RX FIFO.
    pub fn consumed(&mut self, rid: u32, count: i64) -> Result<(), String> {
        let radio = self.radio(rid)?;
        radio.rx_fifo = (radio.rx_fifo - count).max(0);
        Ok(())
    }

    pub fn flush_rx(&mut self, rid: u32) -> Result<(), String> {
        self.radio(rid)?.rx_fifo = 0;
        Ok(())
    }

    /// Listening radios whose RX FIFO is full (the air's view: frames given, not yet read).
    pub fn full_receivers(&self) -> Vec<u32> {
        self.radios
            .values()
            .filter(|r| r.listening && r.regs.powered && r.rx_fifo >= RX_FIFO_DEPTH)
            .map(|r| r.id)
            .collect()
    }

    pub fn tx_pending(&self, rid: u32) -> usize {
        self.radios.get(&rid).map_or(0, |r| r.tx_fifo.len())
    }

    // -- time ------------------------------------------------------------------------------

    pub fn now(&self) -> i64 {
        self.now
    }

    pub fn next_event(&self) -> Option<i64> {
        self.events.peek().map(|Reverse(e)| e.0)
    }

    /// When the air must next be awake to serve its events on time: the earliest event, except
    /// an ACK's end that leaves at least two frames queued and cannot end in MAX_RT (the ACK
    /// may be lost only with retries left). What it tells the host (a free slot in a TX FIFO
    /// that stays busy for two more frames) may then reach it with the next thing the air must
    /// do anyway: the sending radio's next frame end, whatever the ACK's fate. The model runs
    /// the event at its own time either way; this only saves the air a wake-up per frame.
    pub fn next_wake(&self) -> Option<i64> {
        self.events
            .iter()
            .map(|Reverse((t, _, kind, rid, aid))| match kind {
                EventKind::AckEnd => self.ack_news_until(*t, *rid, *aid).unwrap_or(*t),
                _ => *t,
            })
            .min()
    }

    /// How long the news of an ACK ending at `t` can wait (see next_wake), if it can.
    fn ack_news_until(&self, t: i64, rid: u32, aid: u64) -> Option<i64> {
        let radio = self.radios.get(&rid)?;
        let attempt = radio.attempt.as_ref().filter(|a| a.id == aid)?;
        // the next frame follows only from a powered transmitter that stays one
        let follows = radio.regs.powered && !radio.listening && !radio.blocked;
        if !follows || radio.tx_fifo.len() < 2 || attempt.tries > radio.regs.arc {
            return None;
        }
        let regs = &radio.regs;
        let toa =
            |len: usize| time_on_air_ns(len as i64, &regs.rate, regs.address_width, regs.crc_len);
        // acknowledged: the next frame after settling
        let next = t + T_SETTLE_NS + toa(radio.tx_fifo[1].0.len());
        let acker = self.radios.get(attempt.acked_by.last()?)?;
        let hit = {
            let ack = attempt.ack_tx.as_ref()?.borrow();
            ack.collided || ack.jammed_at(&radio.name)
        };
        if !hit && !self.loss.ack_may_be_lost(&radio.name, &acker.name) {
            return Some(next);
        }
        // lost: this frame again after ARD
        let tx_end = attempt.tx.as_ref()?.borrow().end;
        let again = (tx_end + ard_ns(regs.ard_step)).max(t) + toa(radio.tx_fifo[0].0.len());
        Some(next.min(again))
    }

    /// With `holds`: the time of the next event, if it is a frame's end that would land in
    /// the full RX FIFO of a held receiver (`advance` stops just before it).
    pub fn blocking(&self) -> Option<i64> {
        self.blocked().map(|(t, _)| t)
    }

    /// The held receivers the `blocking` frame would land in.
    pub fn blocked_for(&self) -> Vec<u32> {
        self.blocked().map_or_else(Vec::new, |(_, rids)| rids)
    }

    fn blocked(&self) -> Option<(i64, Vec<u32>)> {
        if !self.holds {
            return None;
        }
        let Reverse((t, _, kind, sid, aid)) = self.events.peek()?;
        if *kind != EventKind::DataEnd {
            return None;
        }
        let sender = self
            .radios
            .get(sid)
            .filter(|r| r.attempt_id() == Some(*aid))?;
        let attempt = sender.attempt.as_ref()?;
        let (start, collided) = {
            let tx = attempt.tx.as_ref()?.borrow();
            (tx.start, tx.collided)
        };
        if collided {
            return None;
        }
        // whether the frame would be lost is drawn only when it lands: hold either way
        let rids: Vec<u32> = self
            .radios
            .values()
            .filter(|r| {
                r.rx_fifo >= RX_FIFO_DEPTH
                    && r.id != *sid
                    && !self.not_held.contains(&r.id)
                    && matches!(
                        self.reception(*sid, r.id, start, attempt.payload.len()),
                        Ok(pipe) if !self.is_duplicate(r.id, pipe, attempt.pid, &attempt.payload)
                    )
            })
            .map(|r| r.id)
            .collect();
        (!rids.is_empty()).then_some((*t, rids))
    }

    /// Run every event due at or before `now` (with `holds`, up to a `blocking` one); return
    /// what the radios see.
    pub fn advance(&mut self, now: i64) -> Vec<Output> {
        while let Some(Reverse(ev)) = self.events.peek() {
            if ev.0 > now {
                break;
            }
            if let Some(t) = self.blocking() {
                self.clock(t - 1);
                return std::mem::take(&mut self.out);
            }
            let Reverse((t, _, kind, rid, attempt)) = self.events.pop().expect("peeked");
            self.now = self.now.max(t);
            match self.radios.get(&rid) {
                Some(r) if r.attempt_id() == Some(attempt) => {}
                _ => continue, // detached, flushed or reused meanwhile
            }
            match kind {
                EventKind::DataEnd => self.data_end(rid, t),
                EventKind::AckEnd => self.ack_end(rid, t),
                EventKind::Retry => self.start_attempt(rid, t),
            }
        }
        self.clock(now);
        std::mem::take(&mut self.out)
    }

    /// Virtual-clock helper: run every event, however far ahead (with `holds`, up to a
    /// `blocking` one: only a host's read moves on from there).
    pub fn run_until_idle(&mut self, limit_ns: i64) -> Vec<Output> {
        let mut out = Vec::new();
        while let Some(t) = self.next_event() {
            if t > limit_ns || self.blocking().is_some() {
                break;
            }
            out.extend(self.advance(t));
        }
        out
    }

    fn clock(&mut self, now: i64) {
        self.now = self.now.max(now);
        // A transmission that ended before now can collide with nothing more.
        if let Some(first) = self.on_air.first() {
            if first.borrow().end < self.now {
                let now = self.now;
                self.on_air.retain(|t| t.borrow().end >= now);
            }
        }
    }

    fn schedule(&mut self, t: i64, kind: EventKind, rid: u32, attempt: u64) {
        self.seq += 1;
        self.events.push(Reverse((t, self.seq, kind, rid, attempt)));
    }

    // -- transmitting ------------------------------------------------------------------------

    /// Start the next attempt if the radio is free to transmit.
    fn kick(&mut self, rid: u32) {
        let now = self.now;
        let held = self.applying_held;
        let attempt_id = self.next_attempt;
        let Some(radio) = self.radios.get_mut(&rid) else {
            return;
        };
        if radio.attempt.is_some()
            || radio.blocked
            || radio.listening
            || !radio.regs.powered
            || radio.tx_fifo.is_empty()
        {
            return;
        }
        let (payload, no_ack) = radio.tx_fifo[0].clone();
        self.next_attempt += 1;
        radio.attempt = Some(Attempt {
            id: attempt_id,
            payload,
            no_ack,
            pid: radio.next_pid,
            tries: 0,
            tx: None,
            acked_by: Vec::new(),
            ack_tx: None,
        });
        radio.next_pid = (radio.next_pid + 1) % 4;
        let start = match radio.chain_at {
            // loaded before the last frame ended (or at that instant, but not in reply to it)
            Some(c) if c > now || (c == now && !held) => c,
            _ => {
                radio.count("settles", 1);
                let start = now.max(radio.busy_until) + T_SETTLE_NS;
                radio.tx_mode_since = start;
                radio.over_4ms = false;
                start
            }
        };
        radio.chain_at = None;
        self.start_attempt(rid, start);
    }

    fn start_attempt(&mut self, rid: u32, start: i64) {
        let radio = self.radios.get_mut(&rid).expect("live radio");
        let regs = &radio.regs;
        let attempt = radio.attempt.as_mut().expect("an attempt");
        let tx = Transmission::from(rid, regs, start, attempt.payload.len() as i64);
        let (toa, end) = {
            let t = tx.borrow();
            (t.end - t.start, t.end)
        };
        attempt.tx = Some(tx.clone());
        attempt.tries += 1;
        attempt.acked_by.clear();
        let tries = attempt.tries;
        let aid = attempt.id;
        radio.busy_until = end;
        radio.count("attempts", 1);
        if tries > 1 {
            radio.count("retransmissions", 1);
        }
        radio.count("airtime_ns", toa);
        self.transmit(&tx);
        self.schedule(end, EventKind::DataEnd, rid, aid);
    }

    /// The radio's received power detector (RPD, datasheet §6.4).
    pub fn rpd(&mut self, rid: u32, now: i64) -> Result<bool, String> {
        self.radio(rid)?;
        self.clock(now);
        let radio = self.radios.get(&rid).expect("checked");
        if !radio.listening || now < radio.rx_since + RPD_MIN_NS {
            return Ok(false);
        }
        let mut rpd = radio.rpd;
        if !rpd {
            for t in &self.on_air {
                let t = t.borrow();
                if heard(radio, t.sender, t.channel, t.bandwidth, t.start, t.end, now) {
                    rpd = true;
                }
            }
            for w in &self.interferers {
                if w.covers(radio.regs.channel)
                    && w.heard_by(&radio.name)
                    && w.active(radio.rx_since, now)
                {
                    rpd = true;
                }
            }
        }
        self.radios.get_mut(&rid).expect("checked").rpd = rpd;
        Ok(rpd)
    }

    fn transmit(&mut self, tx: &TxRef) {
        {
            let t = tx.borrow();
            for r in self.radios.values_mut() {
                if r.listening && !r.rpd {
                    let end = if t.end != 0 {
                        t.end
                    } else {
                        t.start + RPD_MIN_NS
                    };
                    if heard(r, t.sender, t.channel, t.bandwidth, t.start, end, end) {
                        r.rpd = true;
                    }
                }
            }
        }
        for other in &self.on_air {
            let mut o = other.borrow_mut();
            let mut t = tx.borrow_mut();
            if o.start < t.end
                && t.start < o.end
                && (o.channel - t.channel).abs() < o.bandwidth.max(t.bandwidth)
            {
                o.collided = true;
                t.collided = true;
            }
        }
        // a Wi-Fi interferer on the air while it is: destroyed as by a collision (model.py),
        // everywhere or at one node's radios
        let (jammed, near) = {
            let t = tx.borrow();
            let mut jammed = false;
            let mut near = Vec::new();
            if t.end != 0 {
                for w in &self.interferers {
                    if w.covers(t.channel) && w.active(t.start, t.end) {
                        match &w.near {
                            None => jammed = true,
                            Some(node) => near.push(node.clone()),
                        }
                    }
                }
            }
            (jammed, near)
        };
        let channel = tx.borrow().channel;
        if jammed {
            tx.borrow_mut().collided = true;
            *self
                .channels
                .entry(channel)
                .or_default()
                .entry("jammed")
                .or_insert(0) += 1;
        }
        if !near.is_empty() {
            tx.borrow_mut().jammed_near = near;
            *self
                .channels
                .entry(channel)
                .or_default()
                .entry("jammed_near")
                .or_insert(0) += 1;
        }
        self.on_air.push(tx.clone());
        let t = tx.borrow();
        let ch = self.channels.entry(t.channel).or_default();
        *ch.entry("transmissions").or_insert(0) += 1;
        *ch.entry("airtime_ns").or_insert(0) += t.end - t.start;
    }

    fn data_end(&mut self, rid: u32, t: i64) {
        let (tx, channel, collided) = {
            let radio = self.radios.get(&rid).expect("live");
            let tx = radio
                .attempt
                .as_ref()
                .and_then(|a| a.tx.clone())
                .expect("on air");
            let (ch, col) = {
                let b = tx.borrow();
                (b.channel, b.collided)
            };
            (tx, ch, col)
        };
        if collided {
            *self
                .channels
                .entry(channel)
                .or_default()
                .entry("collisions")
                .or_insert(0) += 1;
            self.radios
                .get_mut(&rid)
                .expect("live")
                .count("collisions", 1);
        }
        let mut ack_end: Option<i64> = None;
        let ids: Vec<u32> = self.radios.keys().copied().collect();
        for rx in ids {
            if rx == rid {
                continue;
            }
            if self.receive(rid, &tx, rx) {
                ack_end = Some(self.send_ack(rid, rx, t));
            }
        }
        let radio = self.radios.get_mut(&rid).expect("live");
        let (aid, no_ack) = radio
            .attempt
            .as_ref()
            .map(|a| (a.id, a.no_ack))
            .expect("live attempt");
        let expects_ack = radio.regs.auto_ack[0] && !no_ack;
        if !expects_ack {
            if t - radio.tx_mode_since > TX_MODE_MAX_NS && !radio.over_4ms {
                radio.over_4ms = true; // the host kept the FIFO full past the 4 ms rule
                radio.count("tx_mode_over_4ms", 1);
            }
            self.complete(rid, t, true);
            return;
        }
        let ard_us = ard_ns(radio.regs.ard_step) / 1000;
        if ard_us < min_ard_us_for_empty_ack(&radio.regs.rate) {
            radio.count("ack_timeouts", 1);
            ack_end = None;
        }
        match ack_end {
            None => self.fail_attempt(rid, t),
            Some(end) => self.schedule(end, EventKind::AckEnd, rid, aid),
        }
    }

    /// The pipe on which `rid` would take in a frame of `len` bytes from `sid` that began at
    /// `start`, before collisions, loss, duplicates and its RX FIFO (`receive`'s order).
    fn reception(&self, sid: u32, rid: u32, start: i64, len: usize) -> Result<i64, Refusal> {
        let s = &self.radios.get(&sid).expect("live").regs;
        let rx = self.radios.get(&rid).expect("live");
        let r = &rx.regs;
        let Some(pipe) = matching_pipe(s, r) else {
            return Err(Refusal::NotForIt);
        };
        if !r.powered || !rx.listening || r.channel != s.channel {
            return Err(Refusal::NotForIt);
        }
        if r.rate != s.rate || r.crc_len != s.crc_len {
            return Err(Refusal::NotForIt);
        }
        if rx.rx_since > start || rx.busy_until > start {
            return Err(Refusal::Late);
        }
        if r.dynamic_payloads != s.dynamic_payloads
            || (!r.dynamic_payloads && len as i64 != r.payload_size)
        {
            return Err(Refusal::Format);
        }
        Ok(pipe)
    }

    /// The frame is the one `rid` last took on `pipe` (same PID and payload): its ACK was lost.
    fn is_duplicate(&self, rid: u32, pipe: i64, pid: i64, payload: &[u8]) -> bool {
        self.radios[&rid]
            .last_rx
            .get(&pipe)
            .is_some_and(|(p, b)| *p == pid && b.as_slice() == payload)
    }

    /// Does `rx` take the frame in, and answer it with an ACK?
    fn receive(&mut self, sid: u32, tx: &TxRef, rid: u32) -> bool {
        let (tx_start, tx_collided, jammed_near) = {
            let b = tx.borrow();
            let rx_name = &self.radios[&rid].name;
            (b.start, b.collided, b.jammed_at(rx_name))
        };
        let sender = self.radios.get(&sid).expect("live");
        let sender_name = sender.name.clone();
        let attempt = sender.attempt.as_ref().expect("live attempt");
        let (pid, payload, no_ack) = (attempt.pid, attempt.payload.clone(), attempt.no_ack);
        let reception = self.reception(sid, rid, tx_start, payload.len());
        let rx = self.radios.get_mut(&rid).expect("live");
        let pipe = match reception {
            Ok(pipe) => pipe,
            Err(Refusal::NotForIt) => return false,
            Err(Refusal::Late) => {
                rx.count("missed_not_listening", 1);
                return false;
            }
            Err(Refusal::Format) => {
                rx.count("format_mismatch", 1);
                return false;
            }
        };
        let rx_name = rx.name.clone();
        let ack_wanted = rx.regs.auto_ack[pipe as usize] && !no_ack;
        if tx_collided || jammed_near {
            rx.count("lost_collision", 1);
            return false;
        }
        let s = &self.radios[&sid].regs;
        let frame = Frame {
            bits: bits_on_air(payload.len() as i64, s.address_width, s.crc_len),
            rate: &s.rate,
            pa_level: s.pa_level,
        };
        if self.loss.data_lost(&sender_name, &rx_name, frame) {
            self.radios
                .get_mut(&sid)
                .expect("live")
                .count("lost_data", 1);
            self.radios
                .get_mut(&rid)
                .expect("live")
                .count("lost_data", 1);
            return false;
        }
        let duplicate = self.is_duplicate(rid, pipe, pid, &payload);
        let rx = self.radios.get_mut(&rid).expect("live");
        if duplicate {
            rx.count("duplicates_dropped", 1);
            return ack_wanted;
        }
        if rx.rx_fifo >= RX_FIFO_DEPTH {
            rx.count("rx_fifo_full", 1);
            return false;
        }
        rx.last_rx.insert(pipe, (pid, payload.clone()));
        rx.rx_fifo += 1;
        rx.count("frames_received", 1);
        self.out.push(Output::Rx {
            radio: rid,
            pipe,
            payload,
        });
        ack_wanted
    }

    fn send_ack(&mut self, sid: u32, rid: u32, t: i64) -> i64 {
        let rx = self.radios.get_mut(&rid).expect("live");
        let ack = Transmission::from(rid, &rx.regs, t + T_SETTLE_NS, 0);
        let end = ack.borrow().end;
        // Deaf while it sends the ACK, back in RX right after (see model.py).
        rx.busy_until = end;
        rx.count("acks_sent", 1);
        self.transmit(&ack);
        let attempt = self
            .radios
            .get_mut(&sid)
            .and_then(|s| s.attempt.as_mut())
            .expect("live");
        attempt.acked_by.push(rid);
        attempt.ack_tx = Some(ack);
        end
    }

    fn ack_end(&mut self, rid: u32, t: i64) {
        let (ack_collided, tx_end, acker) = {
            let a = self.radios[&rid].attempt.as_ref().expect("live");
            let ack = {
                let ack = a.ack_tx.as_ref().expect("ack sent").borrow();
                ack.collided || ack.jammed_at(&self.radios[&rid].name)
            };
            let end = a.tx.as_ref().expect("on air").borrow().end;
            (ack, end, *a.acked_by.last().expect("acked"))
        };
        if ack_collided {
            self.radios
                .get_mut(&rid)
                .expect("live")
                .count("ack_collisions", 1);
            self.fail_attempt(rid, tx_end);
            return;
        }
        let lost = match self.radios.get(&acker) {
            None => true,
            Some(a) => {
                // an empty ACK, sent at the acker's power
                let (acker_name, r) = (a.name.clone(), a.regs.clone());
                let frame = Frame {
                    bits: bits_on_air(0, r.address_width, r.crc_len),
                    rate: &r.rate,
                    pa_level: r.pa_level,
                };
                let name = self.radios[&rid].name.clone();
                self.loss.ack_lost(&name, &acker_name, frame)
            }
        };
        if lost {
            self.radios
                .get_mut(&rid)
                .expect("live")
                .count("lost_ack", 1);
            self.fail_attempt(rid, tx_end);
        } else {
            self.complete(rid, t, false);
        }
    }

    fn fail_attempt(&mut self, rid: u32, data_end: i64) {
        let now = self.now;
        let radio = self.radios.get_mut(&rid).expect("live");
        let attempt = radio.attempt.as_ref().expect("live");
        let (tries, aid) = (attempt.tries, attempt.id);
        if tries <= radio.regs.arc {
            let retry_at = data_end + ard_ns(radio.regs.ard_step);
            self.schedule(retry_at.max(now), EventKind::Retry, rid, aid);
            return;
        }
        radio.blocked = true;
        radio.count("max_rt", 1);
        self.out.push(Output::Tx {
            radio: rid,
            ok: false,
            arc_count: tries - 1,
        });
    }

    fn complete(&mut self, rid: u32, t: i64, chain: bool) {
        let radio = self.radios.get_mut(&rid).expect("live");
        let attempt = radio.attempt.take().expect("live");
        radio.tx_fifo.pop_front();
        radio.count("frames_ok", 1);
        self.out.push(Output::Tx {
            radio: rid,
            ok: true,
            arc_count: attempt.tries - 1,
        });
        radio.busy_until = radio.busy_until.max(t);
        radio.chain_at = if chain { Some(t) } else { None };
        self.kick(rid);
    }

    // -- ground truth --------------------------------------------------------------------------

    pub fn stats(&self) -> Value {
        let mut radios = Map::new();
        for r in self.retired.iter().chain(self.radios.values()) {
            let mut m = Map::new();
            m.insert("id".into(), json!(r.id));
            m.insert("attached".into(), json!(self.radios.contains_key(&r.id)));
            m.insert("channel".into(), json!(r.regs.channel));
            m.insert("rate".into(), json!(r.regs.rate));
            m.insert("ard_us".into(), json!(ard_ns(r.regs.ard_step) / 1000));
            m.insert("arc".into(), json!(r.regs.arc));
            for (k, v) in &r.counters {
                m.insert((*k).into(), json!(v));
            }
            radios.insert(r.name.clone(), Value::Object(m));
        }
        let channels: Map<String, Value> = self
            .channels
            .iter()
            .map(|(ch, c)| (ch.to_string(), json!(c)))
            .collect();
        json!({"now_ns": self.now, "radios": radios, "channels": channels})
    }
}

fn heard(
    radio: &Radio,
    sender: u32,
    channel: i64,
    bandwidth: i64,
    start: i64,
    end: i64,
    now: i64,
) -> bool {
    let lo = start.max(radio.rx_since);
    let hi = end.min(now);
    sender != radio.id
        && (channel - radio.regs.channel).abs() < bandwidth.max(radio.regs.bandwidth())
        && hi - lo >= RPD_MIN_NS
}

fn matching_pipe(s: &Registers, r: &Registers) -> Option<i64> {
    if r.address_width != s.address_width {
        return None;
    }
    let aw = s.address_width as usize;
    let target = &s.tx_address[..aw.min(s.tx_address.len())];
    for (pipe, addr) in &r.rx_pipes {
        if &addr[..aw.min(addr.len())] == target && target.len() == aw {
            return Some(*pipe);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loss::{LossModel, LossSpec};

    /// A sender and a listening receiver at 2 Mbit/s on one address, with `regs`' other
    /// settings: the air and the sender.
    fn pair(loss: LossModel, regs: Registers) -> (Air, u32) {
        let mut air = Air::new(loss);
        let (tx, rx) = (air.attach("tx"), air.attach("rx"));
        let addr = b"LGe01".to_vec();
        let regs = Registers {
            rate: "2M".into(),
            tx_address: addr.clone(),
            rx_pipes: BTreeMap::from([(0, addr)]),
            ..regs
        };
        air.configure(tx, regs.clone(), 0).unwrap();
        air.configure(rx, regs, 0).unwrap();
        air.set_listening(rx, true, 0).unwrap();
        (air, tx)
    }

    /// A 2 Mbit/s link (ARD 250 µs) with `queued` 32-byte frames submitted at time 0, run to
    /// the first frame's end: returns the air, the sender, and that time.
    fn link(queued: usize, ack_per: f64, arc: i64) -> (Air, u32, i64) {
        let loss = LossModel::new(LossSpec::new(0.0, ack_per, 1.0).unwrap(), 1);
        let regs = Registers {
            ard_step: 0,
            arc,
            ..Registers::default()
        };
        let (mut air, tx) = pair(loss, regs);
        for i in 0..queued {
            assert!(air.submit(tx, &[i as u8; 32], false, 200_000).unwrap());
        }
        let data_end = air.next_event().unwrap();
        assert_eq!(
            air.advance(data_end).len(),
            1,
            "the receiver gets the first frame"
        );
        (air, tx, data_end)
    }

    /// A no-ack sender whose one frame has just ended (TX_DS given), and the time it ended.
    fn no_ack_frame_sent() -> (Air, u32, i64) {
        let loss = LossModel::new(LossSpec::new(0.0, 0.0, 1.0).unwrap(), 1);
        let regs = Registers {
            auto_ack: vec![false; 6],
            ..Registers::default()
        };
        let (mut air, tx) = pair(loss, regs);
        assert!(air.submit(tx, &[1; 32], false, 0).unwrap());
        let end = air.next_event().unwrap();
        let out = air.advance(end);
        assert!(out.iter().any(|o| matches!(o, Output::Tx { ok: true, .. })));
        (air, tx, end)
    }

    #[test]
    fn a_frame_written_in_reply_to_the_last_ones_end_settles_even_at_that_instant() {
        let settles = |held: bool| {
            let (mut air, tx, end) = no_ack_frame_sent();
            air.applying_held = held;
            assert!(air.submit(tx, &[2; 32], false, end).unwrap());
            air.applying_held = false;
            air.radios[&tx]
                .counters
                .get("settles")
                .copied()
                .unwrap_or(0)
        };
        // read lazily, stamped at the end (or before): it was in the FIFO in time, chained
        assert_eq!(settles(false), 1);
        // written while the air held its clock at that end, after the host heard of it
        assert_eq!(settles(true), 2);
    }

    /// No-ack frames into a receiver whose host reads nothing: the first three fill its RX
    /// FIFO, the fourth is on air. Returns the air, the receiver, the frames it was given and
    /// the time the fourth frame ends.
    fn fourth_frame_at_a_full_fifo(holds: bool) -> (Air, u32, usize, i64) {
        let (mut air, tx, first_end) = no_ack_frame_sent();
        air.holds = holds;
        let rx = *air.radios.keys().find(|&&r| r != tx).unwrap();
        for i in 2..=4 {
            assert!(air.submit(tx, &[i; 32], false, first_end - 1).unwrap());
        }
        let mut given = 1;
        let mut fourth_end = 0;
        // frames 2 and 3 land; the TX FIFO has room again as each ends
        while air.full_receivers().is_empty() {
            let t = air.next_event().unwrap();
            given += air
                .advance(t)
                .iter()
                .filter(|o| matches!(o, Output::Rx { .. }))
                .count();
            fourth_end = air.next_event().unwrap_or(0);
        }
        (air, rx, given, fourth_end)
    }

    #[test]
    fn a_full_rx_fifo_holds_the_air_only_at_the_frame_about_to_land_in_it() {
        let (mut air, rx, given, fourth_end) = fourth_frame_at_a_full_fifo(true);
        assert_eq!(given, 3);
        // the air ran on while the FIFO was full; it stops just before the fourth frame's end
        assert_eq!(air.blocking(), Some(fourth_end));
        let out = air.advance(fourth_end + 1_000_000);
        assert!(out.is_empty());
        assert_eq!(air.now(), fourth_end - 1);
        // the host reads one: the frame lands, nothing overflowed
        air.consumed(rx, 1).unwrap();
        assert_eq!(air.blocking(), None);
        let out = air.advance(fourth_end + 1_000_000);
        assert_eq!(
            out.iter()
                .filter(|o| matches!(o, Output::Rx { .. }))
                .count(),
            1
        );
        assert!(!air.radios[&rx].counters.contains_key("rx_fifo_full"));
        // a receiver taken for one that never reads is not held for
        let (mut air, rx, _, fourth_end) = fourth_frame_at_a_full_fifo(true);
        air.not_held.push(rx);
        assert_eq!(air.blocking(), None);
        air.advance(fourth_end + 1_000_000);
        assert_eq!(air.radios[&rx].counters.get("rx_fifo_full"), Some(&1));
    }

    #[test]
    fn the_air_runs_on_while_a_fifo_is_full_until_a_frame_would_land_in_it() {
        let (mut air, tx, first_end) = no_ack_frame_sent();
        air.holds = true;
        let rx = *air.radios.keys().find(|&&r| r != tx).unwrap();
        // another sender, on a channel of its own, sends two frames to nobody
        let other = air.attach("other");
        let regs = air.radios[&tx].regs.clone();
        let regs = Registers {
            channel: regs.channel + 10,
            ..regs
        };
        air.configure(other, regs, first_end - 1).unwrap();
        for i in 2..=4 {
            assert!(air.submit(tx, &[i; 32], false, first_end - 1).unwrap());
        }
        for _ in 0..2 {
            assert!(air.submit(other, &[9; 32], false, first_end - 1).unwrap());
        }
        // frames 2-4 follow the first back to back; the other's second frame ends a settle
        // after frame 3, which fills the receiver's FIFO, and before frame 4
        let fourth_end = first_end + 3 * toa32();
        let out = air.advance(fourth_end + 1_000_000);
        let landed = out
            .iter()
            .filter(|o| matches!(o, Output::Rx { .. }))
            .count();
        let others = out
            .iter()
            .filter(|o| matches!(o, Output::Tx { radio, .. } if *radio == other))
            .count();
        assert_eq!((landed, others), (2, 2));
        assert_eq!(air.now(), fourth_end - 1);
        assert_eq!(air.blocking(), Some(fourth_end));
        assert_eq!(air.blocked_for(), vec![rx]);
    }

    #[test]
    fn without_holds_a_frame_into_a_full_rx_fifo_is_dropped_as_on_the_chip() {
        let (mut air, rx, given, fourth_end) = fourth_frame_at_a_full_fifo(false);
        assert_eq!(given, 3);
        assert_eq!(air.blocking(), None);
        air.advance(fourth_end + 1_000_000);
        assert_eq!(air.radios[&rx].counters.get("rx_fifo_full"), Some(&1));
    }

    fn toa32() -> i64 {
        time_on_air_ns(32, "2M", 5, 2)
    }

    #[test]
    fn an_ack_with_frames_queued_wakes_the_air_at_the_next_frame_end() {
        let (mut air, _, _) = link(3, 0.0, 2);
        let ack_end = air.next_event().unwrap();
        let wake = air.next_wake().unwrap();
        assert_eq!(wake, ack_end + T_SETTLE_NS + toa32());
        // what happens by then: the ACK's news and the next frame, nothing earlier is missed
        let out = air.advance(wake);
        assert!(matches!(out[0], Output::Tx { ok: true, .. }));
        assert!(matches!(out[1], Output::Rx { .. }));
        assert_eq!(out.len(), 2);
    }

    #[test]
    fn an_ack_that_may_be_lost_wakes_the_air_for_the_retry() {
        let (air, tx, data_end) = link(3, 0.5, 2);
        let wake = air.next_wake().unwrap();
        assert_eq!(wake, data_end + ard_ns(0) + toa32());
        assert!(wake < air.next_event().unwrap() + T_SETTLE_NS + toa32());
        assert_eq!(air.tx_pending(tx), 3);
    }

    #[test]
    fn the_last_frame_or_the_last_try_wakes_the_air_at_the_ack() {
        for (queued, ack_per, arc) in [(1, 0.0, 2), (3, 0.5, 0)] {
            let (air, _, _) = link(queued, ack_per, arc);
            assert_eq!(
                air.next_wake(),
                air.next_event(),
                "{queued} {ack_per} {arc}"
            );
        }
    }
}
