//! The air in real time (the twin of `longge/air/server.py`, same wire protocol: see
//! `longge/air/wire.py`). Pacing by accumulated deadlines; a stall of the server longer than
//! `FREEZE_AFTER_NS` stops the air's clock instead of running the missed stretch at once
//! (see docs/emulator.md).

use std::collections::HashMap;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{json, Value};

use crate::loss::{LossModel, LossSpec};
use crate::model::{Air, Interferer, Output, Registers, WifiModel};
use crate::realtime;

pub const FREEZE_AFTER_NS: i64 = 1_000_000;
const MAX_WAIT_NS: i64 = 200_000_000;
const MAX_MESSAGE: usize = 4096;
/// With the next wake-up this near, the air sleeps until it without watching its sockets (see
/// take_messages). A message read late this way is still applied at its kernel timestamp, so
/// the model's times stay exact; only what it starts can reach a radio late, and only a frame
/// of a radio that was idle (a busy radio queues it behind what the air already serves): it
/// is on air no earlier than 130 µs of settling after the message, so it is late by at most
/// LAZY_NS - 150 µs, and counted (lazy_late). 0.6 ms covers a whole frame exchange at 2 Mbit/s
/// (one wake-up per frame at saturation, see Air::next_wake).
const LAZY_NS: i64 = 600_000;
/// The longest the air waits for a host whose RX FIFO is full (see hold_for_hosts).
const MAX_HOLD_NS: i64 = 100_000_000;

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

fn realtime_ns() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// Sleep until `deadline` on the monotonic clock (signals end the sleep early).
fn sleep_until(deadline: i64) {
    let ts = libc::timespec {
        tv_sec: deadline / 1_000_000_000,
        tv_nsec: deadline % 1_000_000_000,
    };
    // SAFETY: an absolute clock_nanosleep on a timespec we own.
    unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    };
}

pub fn monotonic_ns() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// Lateness of event processing, in 10 µs buckets up to 100 ms.
pub struct LagHistogram {
    counts: Vec<u64>,
    n: u64,
    max_ns: i64,
}

/// Waking from a timer on a VM takes tens of µs (the vCPU halts and the host must wake it), and
/// every frame a radio receives waits for it. So the air sets its timer early by `early_ns` and
/// spins whatever is left: `early_ns` tracks the first quartile of how late the timer fires (a
/// stochastic quantile estimate), so one wake-up in four lands early and spins a few µs to be
/// on time, and the other three are late by their lateness less that quartile (the air's lag
/// p50 fell from ~40 to ~10 µs here).
struct WakeUp {
    early_ns: i64,
}

impl WakeUp {
    const QUANTILE: f64 = 0.25;
    const STEP_NS: f64 = 1_000.0;
    const MAX_EARLY_NS: i64 = 100_000;

    fn sleep_until(&mut self, deadline: i64) {
        let alarm = deadline - self.early_ns;
        let mut now = monotonic_ns();
        if alarm > now {
            // a timer that was set (not one already past) says how late timers fire
            sleep_until(alarm);
            now = monotonic_ns();
            let step = if now - alarm < self.early_ns {
                -Self::STEP_NS * (1.0 - Self::QUANTILE)
            } else {
                Self::STEP_NS * Self::QUANTILE
            };
            self.early_ns = (self.early_ns + step as i64).clamp(0, Self::MAX_EARLY_NS);
        }
        while now < deadline && !STOP.load(Ordering::Relaxed) {
            std::hint::spin_loop();
            now = monotonic_ns();
        }
    }
}

impl LagHistogram {
    const BUCKET_NS: i64 = 10_000;
    const BUCKETS: usize = 10_000;

    pub fn new() -> Self {
        LagHistogram {
            counts: vec![0; Self::BUCKETS + 1],
            n: 0,
            max_ns: 0,
        }
    }

    pub fn add(&mut self, lag_ns: i64) {
        let lag = lag_ns.max(0);
        self.counts[((lag / Self::BUCKET_NS) as usize).min(Self::BUCKETS)] += 1;
        self.n += 1;
        self.max_ns = self.max_ns.max(lag);
    }

    fn quantile_us(&self, q: f64) -> f64 {
        if self.n == 0 {
            return 0.0;
        }
        let target = q * self.n as f64;
        let mut seen = 0u64;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen as f64 >= target {
                return ((i as i64 + 1) * Self::BUCKET_NS) as f64 / 1000.0;
            }
        }
        self.max_ns as f64 / 1000.0
    }

    pub fn summary(&self) -> Value {
        json!({"samples": self.n, "p50_us": self.quantile_us(0.5),
               "p99_us": self.quantile_us(0.99), "max_us": self.max_ns as f64 / 1000.0})
    }
}

const BATCH: usize = 16;

/// Buffers for recvmmsg: BATCH messages of up to MAX_MESSAGE bytes.
struct RecvBatch {
    bufs: Vec<[u8; MAX_MESSAGE]>,
    ctls: Vec<[u64; 8]>,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
}

impl RecvBatch {
    fn new() -> Box<RecvBatch> {
        let mut b = Box::new(RecvBatch {
            bufs: vec![[0u8; MAX_MESSAGE]; BATCH],
            ctls: vec![[0u64; 8]; BATCH],
            iovs: Vec::with_capacity(BATCH),
            hdrs: Vec::with_capacity(BATCH),
        });
        for i in 0..BATCH {
            let base = b.bufs[i].as_mut_ptr() as *mut libc::c_void;
            b.iovs.push(libc::iovec {
                iov_base: base,
                iov_len: MAX_MESSAGE,
            });
        }
        for i in 0..BATCH {
            // SAFETY: an all-zero msghdr is valid; we point it at our iovec.
            let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
            h.msg_hdr.msg_iov = &mut b.iovs[i] as *mut libc::iovec;
            h.msg_hdr.msg_iovlen = 1;
            b.hdrs.push(h);
        }
        b
    }

    /// recvmmsg without waiting: how many messages arrived, or -1 (errno set).
    fn receive(&mut self, fd: i32) -> isize {
        for i in 0..BATCH {
            self.hdrs[i].msg_hdr.msg_control = self.ctls[i].as_mut_ptr() as *mut libc::c_void;
            self.hdrs[i].msg_hdr.msg_controllen = std::mem::size_of::<[u64; 8]>();
        }
        // SAFETY: hdrs point at iovecs and buffers owned by self, which outlive the call.
        unsafe {
            libc::recvmmsg(
                fd,
                self.hdrs.as_mut_ptr(),
                BATCH as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            ) as isize
        }
    }

    fn len(&self, i: usize) -> usize {
        self.hdrs[i].msg_len as usize
    }

    fn message(&self, i: usize) -> &[u8] {
        &self.bufs[i][..self.len(i)]
    }

    /// The SCM_TIMESTAMPNS of message `i` (CLOCK_REALTIME ns), if the kernel gave one.
    fn stamp(&self, i: usize) -> Option<i64> {
        let hdr = &self.hdrs[i].msg_hdr;
        // SAFETY: walking the control buffer the kernel filled, with the libc CMSG macros.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(hdr);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                    let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                    return Some(ts.tv_sec * 1_000_000_000 + ts.tv_nsec);
                }
                c = libc::CMSG_NXTHDR(hdr, c);
            }
        }
        None
    }
}

/// A SOL_SOCKET option with an int value on a descriptor we own (a failure leaves the
/// kernel's default).
fn set_int_option(fd: i32, name: libc::c_int, value: libc::c_int) {
    // SAFETY: setsockopt reads a c_int we own for the duration of the call.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            name,
            &value as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

struct Client {
    fd: i32,
    radio: Option<u32>,
    accepted: u32,
    flushes: u32,
}

pub struct Server {
    path: String,
    air: Air,
    lag: LagHistogram,
    bad_messages: u64,
    send_overflows: u64,
    started: i64,
    frozen_ns: i64,
    freezes: u64,
    scheduling: String,
    listener: i32,
    clients: HashMap<i32, Client>,
    by_radio: HashMap<u32, i32>,
    rx: Box<RecvBatch>,
    fds: Vec<libc::pollfd>,
    gave_up: Vec<u32>,
    holding: bool,
    host_stalls: u64,
    host_stalled_ns: i64,
    host_gave_up: u64,
    lazy_late: u64,
    lazy_late_max_ns: i64,
    wake: WakeUp,
    awake: realtime::KeepAwake,
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

impl Server {
    pub fn bind(path: &str, loss: LossModel) -> io::Result<Server> {
        if let Some(dir) = Path::new(path).parent() {
            if !dir.as_os_str().is_empty() {
                std::fs::create_dir_all(dir)?;
            }
        }
        let _ = std::fs::remove_file(path);
        let bytes = Path::new(path).as_os_str().as_bytes();
        // SAFETY: plain socket calls on a sockaddr_un we fill within its bounds.
        let fd = unsafe {
            let fd = cvt(libc::socket(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            ))?;
            let mut addr: libc::sockaddr_un = std::mem::zeroed();
            addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
            if bytes.len() >= addr.sun_path.len() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "socket path too long",
                ));
            }
            for (i, b) in bytes.iter().enumerate() {
                addr.sun_path[i] = *b as libc::c_char;
            }
            let len = std::mem::size_of::<libc::sa_family_t>() + bytes.len() + 1;
            // root's and its group's only: made 0660 by the umask while it binds (a chmod
            // after it would follow a symlink put in its place)
            let old = libc::umask(0o117);
            let bound = cvt(libc::bind(
                fd,
                &addr as *const _ as *const libc::sockaddr,
                len as libc::socklen_t,
            ));
            libc::umask(old);
            if let Err(e) = bound {
                libc::close(fd);
                return Err(e);
            }
            cvt(libc::listen(fd, 64))?;
            fd
        };
        Ok(Server {
            path: path.to_string(),
            air: Air::new(loss).holding_for_hosts(),
            lag: LagHistogram::new(),
            bad_messages: 0,
            send_overflows: 0,
            started: monotonic_ns(),
            frozen_ns: 0,
            freezes: 0,
            scheduling: "default".into(),
            listener: fd,
            clients: HashMap::new(),
            by_radio: HashMap::new(),
            rx: RecvBatch::new(),
            fds: Vec::new(),
            gave_up: Vec::new(),
            holding: false,
            host_stalls: 0,
            host_stalled_ns: 0,
            host_gave_up: 0,
            lazy_late: 0,
            lazy_late_max_ns: 0,
            wake: WakeUp { early_ns: 0 },
            awake: realtime::KeepAwake::open(),
        })
    }

    /// The air's clock: the wall clock minus the stalls it sat out.
    fn air_time(&mut self, due: Option<i64>) -> i64 {
        let mut now = monotonic_ns() - self.frozen_ns;
        if let Some(due) = due {
            if due <= now {
                let late = now - due;
                self.lag.add(late);
                if late > FREEZE_AFTER_NS {
                    self.frozen_ns += late;
                    self.freezes += 1;
                    now = due;
                }
            }
        }
        now
    }

    pub fn serve_forever(&mut self) {
        // SAFETY: installing an async-signal-safe handler that only stores an atomic.
        unsafe {
            libc::signal(
                libc::SIGTERM,
                on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
            );
            libc::signal(
                libc::SIGINT,
                on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
            );
            libc::signal(libc::SIGPIPE, libc::SIG_IGN);
            libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong, 0, 0, 0);
        }
        self.scheduling = realtime::prioritise(realtime::HARDWARE, -10);
        while !STOP.load(Ordering::SeqCst) {
            let due = self.air.next_wake();
            let now = self.air_time(due);
            if let Some(d) = due {
                if d <= now {
                    self.take_messages(now, 0);
                    // a message read late started something due before this wake-up
                    if let Some(w) = self.air.next_wake().filter(|&w| w < d) {
                        self.lazy_late += 1;
                        self.lazy_late_max_ns = self.lazy_late_max_ns.max(now - w);
                    }
                    self.sync_gave_up();
                    let out = self.air.advance(now);
                    self.dispatch(out);
                    self.hold_for_hosts(now);
                    continue;
                }
                if d - now <= LAZY_NS {
                    // The next event is near: sleep until it without watching the sockets.
                    // What arrives meanwhile is applied at its kernel timestamp when we wake,
                    // in time order with the events (see take_messages).
                    self.wake.sleep_until(d + self.frozen_ns);
                    continue;
                }
            }
            let mut wait = due.map_or(MAX_WAIT_NS, |d| (d - now - LAZY_NS).min(MAX_WAIT_NS));
            if let Some(release) = self.awake.tick(monotonic_ns()) {
                wait = wait.min((release - monotonic_ns()).max(0));
            }
            self.take_messages(now, wait);
        }
        self.close();
    }

    /// A host that reads again is held for again (see hold_for_hosts).
    fn sync_gave_up(&mut self) {
        if self.gave_up.is_empty() {
            return;
        }
        let full = self.air.full_receivers();
        self.gave_up.retain(|r| full.contains(r));
        self.air.not_held.clone_from(&self.gave_up);
    }

    /// A stalled host is not the link: when a frame is about to land in a listening radio's
    /// full RX FIFO (its host has not read the three frames the air gave it), the model stops
    /// just before it (`Air::blocking`) and the air holds its clock there instead of running
    /// on into an overflow, a missing ACK and MAX_RT that only the host's scheduling caused.
    /// A full FIFO that no frame is about to reach holds nothing: the air runs on, as the
    /// chip does. The hold ends when the host reads, or after MAX_HOLD_NS: then that radio is
    /// taken for a host that does not read (its frames overflow as on the chip) until it reads
    /// again. Counted as host_stalls / host_stalled_ms / host_gave_up.
    fn hold_for_hosts(&mut self, now: i64) {
        // (blocking() names the next frame's end however far ahead: hold once it is due)
        let due = |air: &Air| air.blocking().is_some_and(|b| b <= now);
        if !due(&self.air) {
            return;
        }
        let start = monotonic_ns();
        let base = self.frozen_ns;
        while due(&self.air) {
            let held = monotonic_ns() - start;
            if held > MAX_HOLD_NS || STOP.load(Ordering::SeqCst) {
                let waiting = self.air.blocked_for();
                self.host_gave_up += waiting.len() as u64;
                self.gave_up.extend(waiting);
                self.air.not_held.clone_from(&self.gave_up);
                break;
            }
            // the air's clock stands still meanwhile: messages apply at its time, no event runs
            self.frozen_ns = base + held;
            self.holding = true;
            self.take_messages(now, (MAX_HOLD_NS - held).clamp(0, 1_000_000));
            self.holding = false;
        }
        let held = monotonic_ns() - start;
        self.frozen_ns = base + held;
        self.host_stalls += 1;
        self.host_stalled_ns += held;
    }

    /// Wait up to `wait_ns` for messages, then apply every message that has arrived, each at
    /// the air time the kernel stamped it with, interleaved with the events due before it.
    /// Reading lazily this way costs the air one wake-up per event instead of one per message
    /// too; the model's timing stays exact (a message is never applied later than it arrived),
    /// and what a message causes is delivered at most LAZY_NS late (a frame it starts takes
    /// 130 µs of settling before it is even on air).
    fn take_messages(&mut self, now: i64, wait_ns: i64) {
        self.fds.clear();
        self.fds.push(libc::pollfd {
            fd: self.listener,
            events: libc::POLLIN,
            revents: 0,
        });
        for &fd in self.clients.keys() {
            self.fds.push(libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            });
        }
        let ts = libc::timespec {
            tv_sec: wait_ns / 1_000_000_000,
            tv_nsec: wait_ns % 1_000_000_000,
        };
        // SAFETY: fds is a live Vec of pollfd; ts outlives the call.
        let n = unsafe {
            libc::ppoll(
                self.fds.as_mut_ptr(),
                self.fds.len() as libc::nfds_t,
                &ts,
                std::ptr::null(),
            )
        };
        if n <= 0 {
            return;
        }
        let ready: Vec<i32> = self
            .fds
            .iter()
            .filter(|p| p.revents != 0)
            .map(|p| p.fd)
            .collect();
        let mut msgs: Vec<(i64, i32, Vec<u8>)> = Vec::new();
        // kernel stamps are CLOCK_REALTIME: convert to the air's clock
        let offset = realtime_ns() - monotonic_ns() + self.frozen_ns;
        let holding = self.holding;
        let now = if holding {
            self.air.now()
        } else {
            now.max(monotonic_ns() - self.frozen_ns)
        };
        for fd in ready {
            if fd == self.listener {
                self.accept();
            } else {
                self.read(fd, offset, &mut msgs);
            }
        }
        msgs.sort_by_key(|m| m.0);
        for (stamp, fd, msg) in msgs {
            let mut t = stamp.clamp(self.air.now(), now);
            let mut held = holding;
            if !holding {
                let out = self.air.advance(t);
                self.dispatch(out);
                if let Some(b) = self.air.blocking().filter(|&b| b <= t) {
                    // Sent after a frame that waits for a host's read: had the air woken at
                    // that frame it would have been holding there (hold_for_hosts) when this
                    // came, so it applies at the held instant. The host's read itself, stamped
                    // after the frame's due time because the air woke a little late, counts
                    // just before the frame, which then lands.
                    t = self.air.now().min(b - 1);
                    held = true;
                }
            }
            if !self.clients.contains_key(&fd) {
                continue;
            }
            if msg.is_empty() {
                self.drop_client(fd); // the peer hung up
                continue;
            }
            // held: applied at the held instant, sent after it (see Air::applying_held)
            self.air.applying_held = held && stamp > t;
            let handled = self.handle(fd, &msg, t);
            self.air.applying_held = false;
            if let Err(text) = handled {
                self.bad_messages += 1;
                let mut reply = b"e".to_vec();
                reply.extend(text.as_bytes().iter().take(200));
                self.send(fd, &reply);
            }
        }
    }

    fn close(&mut self) {
        for &fd in self.clients.keys() {
            // SAFETY: closing descriptors we own.
            unsafe { libc::close(fd) };
        }
        self.clients.clear();
        // SAFETY: as above.
        unsafe { libc::close(self.listener) };
        let _ = std::fs::remove_file(&self.path);
    }

    fn accept(&mut self) {
        loop {
            // SAFETY: accept4 with null address arguments.
            let fd = unsafe {
                libc::accept4(
                    self.listener,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                )
            };
            if fd < 0 {
                return;
            }
            set_int_option(fd, libc::SO_SNDBUF, 1 << 20);
            // Lazy reading applies each message at the time it was sent. The kernel stamps a
            // message as it queues it here (when the host sends it), but only if this socket
            // asked for stamps: without this every message counted from the air's next
            // wake-up, up to LAZY_NS after the host sent it.
            set_int_option(fd, libc::SO_TIMESTAMPNS, 1);
            self.clients.insert(
                fd,
                Client {
                    fd,
                    radio: None,
                    accepted: 0,
                    flushes: 0,
                },
            );
        }
    }

    /// Take in every message waiting on `fd` with its kernel timestamp (air time): one
    /// recvmmsg for up to `BATCH` of them. An empty message stands for a hang-up.
    fn read(&mut self, fd: i32, offset: i64, msgs: &mut Vec<(i64, i32, Vec<u8>)>) {
        let first = msgs.len();
        self.read_stamped(fd, offset, msgs);
        // One host's messages keep their order. A message that has no kernel stamp (sent
        // before `accept` asked for stamps: a host that attaches and sends its settings at
        // once) took the read's time, later than the stamped ones sent after it, and the sort
        // put it behind them: an attach (H) after the requests that need it, which were
        // refused ("attach first"), and a modem plugged in again stayed deaf. Each stamp is
        // at most the next one's.
        let mine = &mut msgs[first..];
        for i in (1..mine.len()).rev() {
            if mine[i - 1].0 > mine[i].0 {
                mine[i - 1].0 = mine[i].0;
            }
        }
    }

    fn read_stamped(&mut self, fd: i32, offset: i64, msgs: &mut Vec<(i64, i32, Vec<u8>)>) {
        let fallback = realtime_ns() - offset;
        loop {
            let n = self.rx.receive(fd);
            if n <= 0 {
                let gone = n == 0 || io::Error::last_os_error().kind() != io::ErrorKind::WouldBlock;
                if gone {
                    msgs.push((fallback, fd, Vec::new()));
                }
                return;
            }
            let n = n as usize;
            for i in 0..n {
                let stamp = self.rx.stamp(i).map_or(fallback, |s| s - offset);
                msgs.push((stamp, fd, self.rx.message(i).to_vec()));
                if self.rx.len(i) == 0 {
                    return;
                }
            }
            if n < BATCH {
                return; // the socket is empty now: no further recvmmsg just to hear EAGAIN
            }
        }
    }

    fn drop_client(&mut self, fd: i32) {
        if let Some(c) = self.clients.remove(&fd) {
            if let Some(rid) = c.radio {
                self.by_radio.remove(&rid);
                self.air.detach(rid);
            }
            // SAFETY: closing a descriptor we own.
            unsafe { libc::close(c.fd) };
        }
    }

    fn send(&mut self, fd: i32, msg: &[u8]) {
        // SAFETY: send from a slice we own.
        let n = unsafe {
            libc::send(
                fd,
                msg.as_ptr() as *const libc::c_void,
                msg.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::WouldBlock {
            // A radio process stopped reading: its socket buffer is full. Count, never block.
            self.bad_messages += 1;
            self.send_overflows += 1;
        }
    }

    fn stats_reply(&mut self, fd: i32) {
        let mut msg = b"s".to_vec();
        msg.extend(self.stats().to_string().as_bytes());
        self.send(fd, &msg);
    }

    fn handle(&mut self, fd: i32, msg: &[u8], now: i64) -> Result<(), String> {
        let (kind, body) = (msg[0], &msg[1..]);
        let parse = |b: &[u8]| -> Result<Value, String> {
            serde_json::from_slice(b).map_err(|e| format!("bad JSON: {e}"))
        };
        match kind {
            b'S' => {
                self.stats_reply(fd);
                return Ok(());
            }
            b'P' => {
                self.set_loss(&parse(body)?)?;
                self.stats_reply(fd);
                return Ok(());
            }
            b'W' => {
                self.set_interferer(&parse(body)?)?;
                self.stats_reply(fd);
                return Ok(());
            }
            b'H' => {
                let client = self.clients.get(&fd).ok_or("no client")?;
                let rid = match client.radio {
                    Some(rid) => rid,
                    None => {
                        let name = std::str::from_utf8(body).map_err(|e| e.to_string())?;
                        let name = if name.is_empty() {
                            format!("radio{}", self.by_radio.len() + 1)
                        } else {
                            name.to_string()
                        };
                        let rid = self.air.attach(&name);
                        self.by_radio.insert(rid, fd);
                        self.clients.get_mut(&fd).expect("present").radio = Some(rid);
                        rid
                    }
                };
                let mut reply = b"h".to_vec();
                reply.extend((rid as u16).to_be_bytes());
                self.send(fd, &reply);
                return Ok(());
            }
            _ => {}
        }
        let client = self.clients.get_mut(&fd).ok_or("no client")?;
        let rid = client.radio.ok_or("attach first (H)")?;
        let byte0 = || {
            body.first()
                .copied()
                .ok_or(format!("message {:?} needs a byte", kind as char))
        };
        match kind {
            b'T' => {
                if body.len() < 2 || body.len() > 33 {
                    return Err(format!("payload of {} bytes", body.len() as i64 - 1));
                }
                client.accepted = client.accepted.wrapping_add(1);
                self.air.submit(rid, &body[1..], body[0] != 0, now)?;
            }
            b'R' => self.air.consumed(rid, byte0()? as i64)?,
            b'C' => self
                .air
                .configure(rid, Registers::from_json(&parse(body)?)?, now)?,
            b'L' => self.air.set_listening(rid, byte0()? != 0, now)?,
            b'F' => {
                client.flushes = client.flushes.wrapping_add(1);
                self.air.flush_tx(rid, now)?;
            }
            b'U' => self.air.reuse_tx(rid, now)?,
            b'X' => self.air.flush_rx(rid)?,
            b'D' => {
                let on = self.air.rpd(rid, now)?;
                self.send(fd, &[b'd', on as u8]);
            }
            _ => return Err(format!("unknown message {:?}", kind as char)),
        }
        Ok(())
    }

    /// Add a Wi-Fi interferer (`{"wifi": 1..13, "duty": 0..1}`), as the `W` message does.
    pub fn interfere(&mut self, spec: &Value) -> Result<(), String> {
        self.set_interferer(spec)
    }

    fn set_interferer(&mut self, spec: &Value) -> Result<(), String> {
        if spec.get("clear").and_then(Value::as_bool).unwrap_or(false) {
            self.air.interferers.clear();
            return Ok(());
        }
        let duty = spec
            .get("duty")
            .map_or(Some(0.3), Value::as_f64)
            .ok_or("duty: a number")?;
        if !(duty > 0.0 && duty <= 1.0) {
            return Err(format!("duty {duty}: 0..1"));
        }
        let wifi = spec
            .get("wifi")
            .and_then(Value::as_i64)
            .ok_or("wifi: a channel 1..13")?;
        if !(1..=13).contains(&wifi) {
            return Err(format!("Wi-Fi channel {wifi}: 1..13"));
        }
        let model = match spec.get("model").map_or(Some("slots"), Value::as_str) {
            Some("slots") => WifiModel::Slots,
            Some("traffic") => WifiModel::Traffic,
            other => return Err(format!("model {other:?}: slots, traffic")),
        };
        let near = match spec.get("near") {
            None | Some(Value::Null) => None,
            Some(Value::String(node)) if !node.is_empty() => Some(node.clone()),
            Some(other) => return Err(format!("near {other}: a node's name")),
        };
        let mut w = Interferer::new(12 + 5 * (wifi - 1), duty);
        w.model = model;
        w.near = near;
        self.air.interferers.push(w);
        Ok(())
    }

    fn set_loss(&mut self, spec: &Value) -> Result<(), String> {
        let num = |k: &str, d: f64| {
            spec.get(k)
                .map_or(Some(d), Value::as_f64)
                .ok_or(format!("{k}: a number"))
        };
        let per = num("per", 0.0)?;
        let path_loss = match spec.get("path_loss") {
            None | Some(Value::Null) => None,
            Some(v) => Some(v.as_f64().ok_or("path_loss: a number (dB) or null")?),
        };
        let loss = LossSpec::new(per, num("ack_per", per)?, num("burst", 1.0)?)?
            .with_path_loss(path_loss)?;
        if spec.get("tx").is_some() || spec.get("rx").is_some() {
            let name = |k: &str| match spec.get(k) {
                Some(Value::String(s)) => Ok(s.clone()),
                Some(v) => Ok(v.to_string()),
                None => Err(format!("{k}: a radio name")),
            };
            self.air.loss.set_link(&name("tx")?, &name("rx")?, loss);
        } else {
            self.air.loss.set_default(loss);
        }
        Ok(())
    }

    fn dispatch(&mut self, outputs: Vec<Output>) {
        if !outputs.is_empty() {
            self.awake.touch(monotonic_ns());
        }
        for out in outputs {
            let Some(&fd) = self.by_radio.get(&out.radio()) else {
                continue;
            };
            match out {
                Output::Rx { pipe, payload, .. } => {
                    let mut msg = Vec::with_capacity(payload.len() + 2);
                    msg.push(b'r');
                    msg.push(pipe as u8);
                    msg.extend(payload);
                    self.send(fd, &msg);
                }
                Output::Tx {
                    radio,
                    ok,
                    arc_count,
                } => {
                    let fifo = self.air.tx_pending(radio) as u8;
                    let c = &self.clients[&fd];
                    let mut msg = vec![b't', ok as u8, arc_count as u8, fifo];
                    msg.extend(c.accepted.to_be_bytes());
                    msg.extend(c.flushes.to_be_bytes());
                    self.send(fd, &msg);
                }
            }
        }
    }

    fn stats(&self) -> Value {
        let links: Vec<Value> = self
            .air
            .loss
            .links()
            .into_iter()
            .map(|((tx, rx), spec)| {
                let mut v = spec_json(spec);
                v["tx"] = json!(tx);
                v["rx"] = json!(rx);
                v
            })
            .collect();
        let interferers: Vec<Value> = self
            .air
            .interferers
            .iter()
            .map(|w| {
                json!({
                    "centre_channel": w.centre,
                    "width_mhz": w.width,
                    "duty": w.duty,
                    "model": match w.model {
                        WifiModel::Slots => "slots",
                        WifiModel::Traffic => "traffic",
                    },
                    "near": w.near,
                })
            })
            .collect();
        json!({
            "air": self.air.stats(),
            "server": "rust",
            "lag": self.lag.summary(),
            "scheduling": self.scheduling,
            "freezes": self.freezes,
            "frozen_ms": (((self.frozen_ns - self.host_stalled_ns) as f64) / 1e3).round() / 1e3,
            "host_stalls": self.host_stalls,
            "host_stalled_ms": ((self.host_stalled_ns as f64) / 1e3).round() / 1e3,
            "host_gave_up": self.host_gave_up,
            "lazy_late": self.lazy_late,
            "lazy_late_max_ms": ((self.lazy_late_max_ns as f64) / 1e3).round() / 1e3,
            "wake_early_us": self.wake.early_ns / 1000,
            "keep_awake": self.awake.summary(monotonic_ns()),
            "uptime_s": (monotonic_ns() - self.started) as f64 / 1e9,
            "bad_messages": self.bad_messages,
            "send_overflows": self.send_overflows,
            "loss": spec_json(&self.air.loss.default),
            "links": links,
            "seed": self.air.loss.seed,
            "interferers": interferers,
        })
    }
}

/// A loss spec as the stats give it (as `AirServer.stats`).
fn spec_json(spec: &LossSpec) -> Value {
    json!({
        "per": spec.data_per,
        "ack_per": spec.ack_per,
        "burst": spec.burst,
        "path_loss": spec.path_loss,
    })
}
