//! The channel's error model, as `longge/air/loss.py`: one generator per directed link and
//! kind (data, ACK), independent (Bernoulli) or bursty (Gilbert–Elliott) losses.

use std::collections::HashMap;

use crate::pyrandom::{crc32, PyRandom};

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LossSpec {
    pub data_per: f64,
    pub ack_per: f64,
    pub burst: f64,
}

impl Default for LossSpec {
    fn default() -> Self {
        LossSpec {
            data_per: 0.0,
            ack_per: 0.0,
            burst: 1.0,
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
        })
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
}

impl LossModel {
    pub fn new(default: LossSpec, seed: i64) -> Self {
        LossModel {
            default,
            seed,
            links: HashMap::new(),
            procs: HashMap::new(),
        }
    }

    pub fn set_default(&mut self, spec: LossSpec) {
        self.default = spec;
        self.procs.clear();
    }

    pub fn set_link(&mut self, tx: &str, rx: &str, spec: LossSpec) {
        self.links.insert((tx.to_string(), rx.to_string()), spec);
        for kind in [Kind::Data, Kind::Ack] {
            self.procs.remove(&(tx.to_string(), rx.to_string(), kind));
        }
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

    pub fn data_lost(&mut self, tx: &str, rx: &str) -> bool {
        self.proc(tx, rx, Kind::Data).lost()
    }

    /// Can an ACK of the tx -> rx link be lost at all (not: will it)?
    pub fn ack_may_be_lost(&self, tx: &str, rx: &str) -> bool {
        let key = (tx.to_string(), rx.to_string());
        self.links.get(&key).unwrap_or(&self.default).ack_per > 0.0
    }

    /// The ACK travels rx -> tx, but it belongs to the tx -> rx link's exchange.
    pub fn ack_lost(&mut self, tx: &str, rx: &str) -> bool {
        self.proc(tx, rx, Kind::Ack).lost()
    }
}
