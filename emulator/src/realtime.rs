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

/// Keeping the CPUs awake while the link carries something. On a VM an idle vCPU halts, and
/// waking it (the host must schedule its thread again) costs 0.05-0.4 ms, once for every hop
/// of a packet from one process to the next: an idle ping paid ~0.3 ms of it on top of its air
/// time. While frames have been on the air in the last `HOLD_NS`, the air holds a CPU latency
/// request of 0 through the kernel's PM QoS interface (`/dev/cpu_dma_latency`): the idle
/// governor then polls instead of halting, and a wake-up costs what it costs on a real
/// machine. The request dies with the descriptor, so a crashed air leaves nothing behind.
/// Root only (elsewhere `available` is false); `LONGGE_KEEP_AWAKE=off` turns it off.
pub struct KeepAwake {
    fd: Option<i32>,
    holding: bool,
    since: i64,
    pub until: i64,
    pub holds: u64,
    pub held_ns: i64,
}

impl KeepAwake {
    pub const HOLD_NS: i64 = 100_000_000;
    /// The kernel's default (no constraint): writing it withdraws the request.
    const RELEASE: i32 = 2_000_000_000;

    pub fn open() -> KeepAwake {
        let off = matches!(std::env::var("LONGGE_KEEP_AWAKE").as_deref(), Ok("off"));
        let fd = if off {
            None
        } else {
            // SAFETY: open on a NUL-terminated path; the descriptor is ours.
            let fd = unsafe {
                libc::open(
                    c"/dev/cpu_dma_latency".as_ptr(),
                    libc::O_WRONLY | libc::O_CLOEXEC,
                )
            };
            (fd >= 0).then_some(fd)
        };
        let mut keep = KeepAwake {
            fd,
            holding: false,
            since: 0,
            until: 0,
            holds: 0,
            held_ns: 0,
        };
        keep.write(Self::RELEASE);
        keep
    }

    fn write(&mut self, value: i32) -> bool {
        let Some(fd) = self.fd else { return false };
        let bytes = value.to_ne_bytes();
        // SAFETY: writing 4 bytes we own to our descriptor.
        unsafe { libc::write(fd, bytes.as_ptr().cast(), 4) == 4 }
    }

    /// Frames are on the air at `now`: hold (or keep holding) until `now + HOLD_NS`.
    pub fn touch(&mut self, now: i64) {
        if self.fd.is_none() {
            return;
        }
        self.until = now + Self::HOLD_NS;
        if !self.holding && self.write(0) {
            self.holding = true;
            self.since = now;
            self.holds += 1;
        }
    }

    /// Release the request once nothing has been on the air for `HOLD_NS`. The time of the
    /// next release, if holding (the air must wake up for it).
    pub fn tick(&mut self, now: i64) -> Option<i64> {
        if !self.holding {
            return None;
        }
        if now < self.until {
            return Some(self.until);
        }
        self.write(Self::RELEASE);
        self.holding = false;
        self.held_ns += now - self.since;
        None
    }

    pub fn summary(&self, now: i64) -> serde_json::Value {
        let held = self.held_ns + if self.holding { now - self.since } else { 0 };
        serde_json::json!({
            "available": self.fd.is_some(),
            "holding": self.holding,
            "holds": self.holds,
            "held_ms": ((held as f64) / 1e3).round() / 1e3,
        })
    }
}

impl Drop for KeepAwake {
    fn drop(&mut self) {
        if let Some(fd) = self.fd.take() {
            // SAFETY: closing our own descriptor withdraws the request.
            unsafe { libc::close(fd) };
        }
    }
}
