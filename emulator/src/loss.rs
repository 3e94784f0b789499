//! The channel's error model, as `longge/air/loss.py`: one generator per directed link and
//! kind (data, ACK), independent (Bernoulli) or bursty (Gilbert–Elliott) losses; and a
//! link's path loss, whose noise destroys frames as the receiver's sensitivity at the frame's
//! rate, the sender's power and the frame's length say (its own generator per link and kind).

use std::collections::HashMap;

use crate::pyrandom::{crc32, PyRandom};

/// Output power of RF_PWR 0..3, dBm (datasheet p. 24, table 14).
const PA_DBM: [f64; 4] = [-18.0, -12.0, -6.0, 0.0];
/// The bit error rate the sensitivities are quoted at (p. 15).
const SENSITIVITY_BER: f64 = 0.001;
/// Path losses the air accepts, dB.
const PATH_LOSS_RANGE: (f64, f64) = (0.0, 200.0);

/// Receiver sensitivity at 0.1 % BER, dBm (p. 15, RXSENS).
fn sensitivity_dbm(rate: &str) -> f64 {
    match rate {
        "250k" => -94.0,
        "1M" => -85.0,
        _ => -82.0,
    }
}

/// How far above the receiver's sensitivity a frame arrives (as `margin_db`).
pub fn margin_db(path_loss: f64, pa_level: i64, rate: &str) -> f64 {
    PA_DBM[pa_level.clamp(0, 3) as usize] - path_loss - sensitivity_dbm(rate)
}

/// The chance that a frame of `bits` bits arriving `margin` dB above the sensitivity has a
/// bit wrong: non-coherent FSK's ½·exp(−γ/2) through the datasheet's point (as `frame_error`).
pub fn frame_error(margin: f64, bits: i64) -> f64 {
    let gamma_at_sensitivity = -2.0 * (2.0 * SENSITIVITY_BER).ln();
    let gamma = gamma_at_sensitivity * 10f64.powf(margin / 10.0);
    let ber = 0.5 * (-gamma / 2.0).exp();
    1.0 - (1.0 - ber).powf(bits as f64)
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LossSpec {
    pub data_per: f64,
    pub ack_per: f64,
    pub burst: f64,
    /// dB between the antennas (None: close, no noise errors)
    pub path_loss: Option<f64>,
}

impl Default for LossSpec {
    fn default() -> Self {
        LossSpec {
            data_per: 0.0,
            ack_per: 0.0,
            burst: 1.0,
            path_loss: None,
        }
    }
}

impl LossSpec {
    /// The same checks (and messages) as `LossSpec.__post_init__`.
    pub fn new(data_per: f64, ack_per: f64, burst: f64) -> Result<Self, String> {
        for (key, v) in [("per", data_per), ("ack_per", ack_per)] {
            if !(0.0..=1.0).contains(&v) {
                return Err(format!("{key} = {v} is not allowed: a probability in 0..1"));
            }
        }
        if burst.is_nan() || burst < 1.0 {
            return Err(format!(
                "burst = {burst} is not allowed: a mean burst length >= 1 frame"
            ));
        }
        if burst > 1.0 && data_per.max(ack_per) >= 1.0 {
            return Err(format!(
                "burst = {burst} is not allowed: bursts need an error rate below 1"
            ));
        }
        Ok(LossSpec {
            data_per,
            ack_per,
            burst,
            path_loss: None,
        })
    }

    /// The same spec with a path loss (checked as `check_path_loss`).
    pub fn with_path_loss(mut self, path_loss: Option<f64>) -> Result<Self, String> {
        if let Some(v) = path_loss {
            let (lo, hi) = PATH_LOSS_RANGE;
            if v.is_nan() || v < lo || v > hi {
                return Err(format!(
                    "path_loss = {v} is not allowed: dB in {lo}..{hi}, or none"
                ));
            }
        }
        self.path_loss = path_loss;
        Ok(self)
    }
}

struct Process {
    rng: PyRandom,
    per: f64,
    bursty: bool,
    p_bg: f64,
    p_gb: f64,
    bad: bool,
}

impl Process {
    fn new(per: f64, burst: f64, rng: PyRandom) -> Self {
        let p_bg = 1.0 / burst;
        let p_gb = if per < 1.0 {
            per * p_bg / (1.0 - per)
        } else {
            1.0
        };
        Process {
            rng,
            per,
            bursty: burst > 1.0 && per > 0.0 && per < 1.0,
            p_bg,
            p_gb,
            bad: false,
        }
    }

    fn lost(&mut self) -> bool {
        if !self.bursty {
            return self.per > 0.0 && self.rng.random() < self.per;
        }
        self.bad = if self.bad {
            self.rng.random() >= self.p_bg
        } else {
            self.rng.random() < self.p_gb
        };
        self.bad
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Data,
    Ack,
}

pub struct LossModel {
    pub default: LossSpec,
    pub seed: i64,
    links: HashMap<(String, String), LossSpec>,
    procs: HashMap<(String, String, Kind), Process>,
    paths: HashMap<(String, String, Kind), PyRandom>,
}

/// What the path's noise needs to know of a frame: its length and how it was sent.
#[derive(Clone, Copy)]
pub struct Frame<'a> {
    pub bits: i64,
    pub rate: &'a str,
    pub pa_level: i64,
}

impl LossModel {
    pub fn new(default: LossSpec, seed: i64) -> Self {
        LossModel {
            default,
            seed,
            links: HashMap::new(),
            procs: HashMap::new(),
            paths: HashMap::new(),
        }
    }

    pub fn set_default(&mut self, spec: LossSpec) {
        self.default = spec;
        self.procs.clear();
        self.paths.clear();
    }

    pub fn set_link(&mut self, tx: &str, rx: &str, spec: LossSpec) {
        self.links.insert((tx.to_string(), rx.to_string()), spec);
        for kind in [Kind::Data, Kind::Ack] {
            self.procs.remove(&(tx.to_string(), rx.to_string(), kind));
            self.paths.remove(&(tx.to_string(), rx.to_string(), kind));
        }
    }

    /// The links with a spec of their own, by (tx, rx) name, sorted.
    pub fn links(&self) -> Vec<(&(String, String), &LossSpec)> {
        let mut out: Vec<_> = self.links.iter().collect();
        out.sort_by(|a, b| a.0.cmp(b.0));
        out
    }

    fn spec(&self, tx: &str, rx: &str) -> LossSpec {
        *self
            .links
            .get(&(tx.to_string(), rx.to_string()))
            .unwrap_or(&self.default)
    }

    /// Did the path's noise destroy this frame (as `_weak`)?
    fn weak(&mut self, tx: &str, rx: &str, kind: Kind, frame: Frame) -> bool {
        let Some(path_loss) = self.spec(tx, rx).path_loss else {
            return false;
        };
        let fer = frame_error(margin_db(path_loss, frame.pa_level, frame.rate), frame.bits);
        if fer <= 0.0 {
            return false;
        }
        let key = (tx.to_string(), rx.to_string(), kind);
        let seed = self.seed;
        let rng = self.paths.entry(key).or_insert_with(|| {
            let word = match kind {
                Kind::Data => "data",
                Kind::Ack => "ack",
            };
            PyRandom::new(crc32(format!("{seed}/{tx}/{rx}/{word}/path").as_bytes()))
        });
        rng.random() < fer
    }

    fn proc(&mut self, tx: &str, rx: &str, kind: Kind) -> &mut Process {
        let key = (tx.to_string(), rx.to_string(), kind);
        if !self.procs.contains_key(&key) {
            let spec = *self
                .links
                .get(&(key.0.clone(), key.1.clone()))
                .unwrap_or(&self.default);
            let (per, word) = match kind {
                Kind::Data => (spec.data_per, "data"),
                Kind::Ack => (spec.ack_per, "ack"),
            };
            let label = format!("{}/{}/{}/{}", self.seed, tx, rx, word);
            let rng = PyRandom::new(crc32(label.as_bytes()));
            self.procs
                .insert(key.clone(), Process::new(per, spec.burst, rng));
        }
        self.procs.get_mut(&key).expect("inserted above")
    }

    /// Its own process first, then the path: both drawn (as `data_lost`).
    pub fn data_lost(&mut self, tx: &str, rx: &str, frame: Frame) -> bool {
        let lost = self.proc(tx, rx, Kind::Data).lost();
        let weak = self.weak(tx, rx, Kind::Data, frame);
        lost || weak
    }

    /// Can an ACK of the tx -> rx link be lost at all (not: will it)?
    pub fn ack_may_be_lost(&self, tx: &str, rx: &str) -> bool {
        let spec = self.spec(tx, rx);
        spec.ack_per > 0.0 || spec.path_loss.is_some()
    }

    /// The ACK travels rx -> tx, but it belongs to the tx -> rx link's exchange.
    pub fn ack_lost(&mut self, tx: &str, rx: &str, frame: Frame) -> bool {
        let lost = self.proc(tx, rx, Kind::Ack).lost();
        let weak = self.weak(tx, rx, Kind::Ack, frame);
        lost || weak
    }
}
