//! `longge-air`: LongGe's emulated nRF24L01+ air.
//!
//!     longge-air serve --socket PATH [--per P] [--ack-per P] [--burst B] [--seed S]
//!                      [--path-loss DB] [--wifi CHANNEL --wifi-duty D [--wifi-model M]]
//!     longge-air replay     < script.jsonl   (virtual clock: one JSON result per line)
//!
//! `serve` is what `./run.sh air`, the testbed and radio-bench run; `replay` drives the same
//! model on a virtual clock for the differential test against `longge/air/model.py`.

mod loss;
mod model;
mod pyrandom;
mod realtime;
mod replay;
mod server;

use std::process::ExitCode;

fn usage() -> ExitCode {
    eprintln!(
        "usage: longge-air serve --socket PATH [--per P] [--ack-per P] [--burst B] [--seed S] \
         [--path-loss DB] [--wifi CHANNEL --wifi-duty D [--wifi-model M]]\n\
         \x20      longge-air replay < script.jsonl"
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("serve") => serve(&args[1..]),
        Some("replay") => replay::run(),
        _ => usage(),
    }
}

fn serve(args: &[String]) -> ExitCode {
    let (mut socket, mut per, mut ack_per, mut burst, mut seed) = (None, 0.0, None, 1.0, 1i64);
    let (mut wifi, mut duty): (Option<i64>, f64) = (None, 0.3);
    let mut model = String::from("slots");
    let mut path_loss = None;
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let Some(value) = it.next() else {
            return usage();
        };
        let num = |v: &str| {
            v.parse::<f64>()
                .map_err(|_| format!("error: {flag} = {v:?} is not a number"))
        };
        let r = match flag.as_str() {
            "--socket" => {
                socket = Some(value.clone());
                Ok(())
            }
            "--per" => num(value).map(|v| per = v),
            "--ack-per" => num(value).map(|v| ack_per = Some(v)),
            "--burst" => num(value).map(|v| burst = v),
            "--path-loss" => num(value).map(|v| path_loss = Some(v)),
            "--seed" => value
                .parse()
                .map(|v| seed = v)
                .map_err(|_| format!("error: seed = {value:?}")),
            "--wifi" => value
                .parse()
                .map(|v| wifi = Some(v))
                .map_err(|_| format!("error: wifi = {value:?}")),
            "--wifi-duty" => num(value).map(|v| duty = v),
            "--wifi-model" => {
                model = value.clone();
                Ok(())
            }
            _ => return usage(),
        };
        if let Err(e) = r {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    }
    let Some(socket) = socket else { return usage() };
    let spec = match loss::LossSpec::new(per, ack_per.unwrap_or(per), burst)
        .and_then(|s| s.with_path_loss(path_loss))
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let mut server = match server::Server::bind(&socket, loss::LossModel::new(spec, seed)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: cannot listen on {socket}: {e}");
            return ExitCode::from(1);
        }
    };
    if let Some(channel) = wifi {
        let spec = serde_json::json!({"wifi": channel, "duty": duty, "model": model});
        if let Err(e) = server.interfere(&spec) {
            eprintln!("error: --wifi {channel} --wifi-duty {duty}: {e}");
            return ExitCode::from(2);
        }
    }
    println!("air emulator listening on {socket} (compiled)");
    server.serve_forever();
    ExitCode::SUCCESS
}
