//! Scheduling of the emulated hardware, as `longge/realtime.py`: SCHED_FIFO when allowed,
//! and the emulated world (air, radio hosts) on one CPU so that a stall of that CPU stalls
//! all of it together, which the air sits out as a freeze (docs/emulator.md).

pub const HARDWARE: i32 = 30;

/// The CPU the emulated world runs on: `LONGGE_WORLD_CPU` (a number, or `off`), else the
/// highest CPU this process may use, if it may use more than one.
pub fn world_cpu() -> Option<usize> {
    match std::env::var("LONGGE_WORLD_CPU") {
        Ok(v) if v == "off" || v.is_empty() => return None,
        Ok(v) => return v.parse().ok(),
        Err(_) => {}
    }
    // SAFETY: sched_getaffinity fills a cpu_set_t we own.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return None;
        }
        let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect();
        if cpus.len() >= 2 {
            cpus.last().copied()
        } else {
            None
        }
    }
}

fn pin(cpu: usize) -> bool {
    // SAFETY: sched_setaffinity reads a cpu_set_t we own.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// Make the calling process real-time if allowed (and pin it to the world's CPU); say what it got.
pub fn prioritise(priority: i32, fallback_nice: i32) -> String {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: plain scheduler calls on this process.
    unsafe {
        if libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) == 0 {
            let mut what = format!("SCHED_FIFO {priority}");
            if let Some(cpu) = world_cpu() {
                if pin(cpu) {
                    what += &format!(", CPU {cpu}");
                }
            }
            return what;
        }
        *libc::__errno_location() = 0;
        let r = libc::nice(fallback_nice);
        if !(r == -1 && *libc::__errno_location() != 0) {
            return format!("nice {fallback_nice}");
        }
    }
    "default".into()
}
