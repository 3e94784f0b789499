//! `longge-air replay`: the model on a virtual clock, driven by a script of JSON lines on
//! stdin, one JSON result per line on stdout. `tests/test_air_differential.py` runs the same
//! script through `longge/air/model.py` and requires the same lines.
//!
//! Operations (`t` in ns): attach{name} detach{rid} configure{rid,regs,t} listen{rid,on,t}
//! submit{rid,payload(hex),no_ack,t} flush_tx{rid,t} reuse_tx{rid,t} consumed{rid,count}
//! flush_rx{rid} rpd{rid,t} advance{t} run_until_idle{limit}
//! loss{per,ack_per,burst[,path_loss][,tx,rx]} interferer{centre,duty,width,burst_ns[,model,near]}
//! stats{}
//! holds{on,not_held} blocking{}; any op with held: true is applied as a host message sent
//! while the air held its clock (`Air::applying_held`).

use std::io::{BufRead, Write};
use std::process::ExitCode;

use serde_json::{json, Value};

use crate::loss::{LossModel, LossSpec};
use crate::model::{from_hex, to_hex, Air, Interferer, Output, Registers, WifiModel};

fn outputs(out: Vec<Output>) -> Value {
    Value::Array(
        out.into_iter()
            .map(|o| match o {
                Output::Tx {
                    radio,
                    ok,
                    arc_count,
                } => json!(["tx", radio, ok, arc_count]),
                Output::Rx {
                    radio,
                    pipe,
                    payload,
                } => json!(["rx", radio, pipe, to_hex(&payload)]),
            })
            .collect(),
    )
}

fn step(air: &mut Air, op: &Value) -> Result<Value, String> {
    let int = |k: &str| {
        op.get(k)
            .and_then(Value::as_i64)
            .ok_or(format!("{k}: an integer"))
    };
    let rid = || int("rid").map(|r| r as u32);
    let name = op.get("op").and_then(Value::as_str).ok_or("op")?;
    Ok(match name {
        "attach" => {
            json!({"id": air.attach(op.get("name").and_then(Value::as_str).ok_or("name")?)})
        }
        "detach" => {
            air.detach(rid()?);
            json!({})
        }
        "configure" => {
            air.configure(
                rid()?,
                Registers::from_json(op.get("regs").ok_or("regs")?)?,
                int("t")?,
            )?;
            json!({})
        }
        "listen" => {
            let on = op.get("on").and_then(Value::as_bool).ok_or("on")?;
            air.set_listening(rid()?, on, int("t")?)?;
            json!({})
        }
        "submit" => {
            let payload = from_hex(op.get("payload").and_then(Value::as_str).ok_or("payload")?)
                .ok_or("payload: hex")?;
            let no_ack = op.get("no_ack").and_then(Value::as_bool).unwrap_or(false);
            json!({"ok": air.submit(rid()?, &payload, no_ack, int("t")?)?})
        }
        "flush_tx" => {
            air.flush_tx(rid()?, int("t")?)?;
            json!({})
        }
        "reuse_tx" => {
            air.reuse_tx(rid()?, int("t")?)?;
            json!({})
        }
        "consumed" => {
            air.consumed(rid()?, int("count")?)?;
            json!({})
        }
        "flush_rx" => {
            air.flush_rx(rid()?)?;
            json!({})
        }
        "rpd" => json!({"rpd": air.rpd(rid()?, int("t")?)?}),
        "advance" => json!({"out": outputs(air.advance(int("t")?)), "now": air.now()}),
        "run_until_idle" => {
            json!({"out": outputs(air.run_until_idle(int("limit")?)), "now": air.now()})
        }
        "loss" => {
            let num = |k: &str, d: f64| op.get(k).and_then(Value::as_f64).unwrap_or(d);
            let per = num("per", 0.0);
            let path_loss = op.get("path_loss").and_then(Value::as_f64);
            let spec = LossSpec::new(per, num("ack_per", per), num("burst", 1.0))?
                .with_path_loss(path_loss)?;
            match (
                op.get("tx").and_then(Value::as_str),
                op.get("rx").and_then(Value::as_str),
            ) {
                (Some(tx), Some(rx)) => air.loss.set_link(tx, rx, spec),
                _ => air.loss.set_default(spec),
            }
            json!({})
        }
        "interferer" => {
            let mut w = Interferer::new(
                int("centre")?,
                op.get("duty").and_then(Value::as_f64).unwrap_or(0.3),
            );
            w.width = op.get("width").and_then(Value::as_i64).unwrap_or(w.width);
            w.burst_ns = op
                .get("burst_ns")
                .and_then(Value::as_i64)
                .unwrap_or(w.burst_ns);
            if op.get("model").and_then(Value::as_str) == Some("traffic") {
                w.model = WifiModel::Traffic;
            }
            w.near = op.get("near").and_then(Value::as_str).map(String::from);
            air.interferers.push(w);
            json!({})
        }
        "holds" => {
            air.holds = op.get("on").and_then(Value::as_bool).ok_or("on")?;
            air.not_held =
                op.get("not_held")
                    .and_then(Value::as_array)
                    .map_or_else(Vec::new, |v| {
                        v.iter()
                            .filter_map(Value::as_i64)
                            .map(|r| r as u32)
                            .collect()
                    });
            json!({})
        }
        "blocking" => json!({"blocking": air.blocking(), "for": air.blocked_for()}),
        "stats" => json!({"stats": air.stats()}),
        other => return Err(format!("unknown op {other:?}")),
    })
}

pub fn run() -> ExitCode {
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut air: Option<Air> = None;
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        let result = match serde_json::from_str::<Value>(&line) {
            Err(e) => json!({"error": format!("bad JSON: {e}")}),
            Ok(op) if op.get("op").and_then(Value::as_str) == Some("new") => {
                let seed = op.get("seed").and_then(Value::as_i64).unwrap_or(1);
                air = Some(Air::new(LossModel::new(LossSpec::default(), seed)));
                json!({})
            }
            Ok(op) => match air.as_mut() {
                None => json!({"error": "new first"}),
                Some(a) => {
                    // a host message sent while the air held its clock (the server's)
                    a.applying_held = op.get("held").and_then(Value::as_bool).unwrap_or(false);
                    let result = step(a, &op).unwrap_or_else(|e| json!({"error": e}));
                    a.applying_held = false;
                    result
                }
            },
        };
        if writeln!(out, "{result}").is_err() {
            break;
        }
    }
    let _ = out.flush();
    ExitCode::SUCCESS
}
