//! Free loopback ports for the tests that start nodes. A port a test releases and binds again
//! later (a member's process started again on its address) must not be taken meanwhile: the
//! OS hands ports of its ephemeral range to every outgoing connection (the members' dials,
//! the proxies'), so such a port is picked below that range on Linux (from
//! `ip_local_port_range`), where only an explicit bind takes one, starting at an offset of
//! the test process's own. Elsewhere a port is found by binding port 0. Every port handed out
//! is recorded for the life of the test binary, and neither [`free_ports`] nor [`listener`]
//! ever returns one twice.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::sync::Mutex;

static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// The ports no connection takes on its own: from 10000 up to the start of Linux's
/// ephemeral range, when that range is known and leaves room below it.
fn quiet_range() -> Option<std::ops::Range<u16>> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let low: u16 = text.split_whitespace().next()?.parse().ok()?;
    (low >= 12_000).then_some(10_000..low)
}

/// A loopback listener on a port never handed out before in this binary.
pub fn listener() -> TcpListener {
    let mut handed = HANDED_OUT.lock().unwrap();
    if let Some(range) = quiet_range() {
        let span = u32::from(range.end - range.start);
        // test binaries running at once start at different places
        let offset = std::process::id().wrapping_mul(7_919) % span;
        for k in 0..span {
            let port = range.start + ((offset + k) % span) as u16;
            if handed.contains(&port) {
                continue;
            }
            if let Ok(l) = TcpListener::bind(("127.0.0.1", port)) {
                handed.insert(port);
                return l;
            }
        }
    }
    // the rejected listeners stay bound until the loop ends, so the OS cannot offer them again
    let mut rejected = Vec::new();
    loop {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        if handed.insert(port) {
            return l;
        }
        rejected.push(l);
    }
}

/// `n` distinct ports, free now, never handed out before in this binary (bound and released).
pub fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<TcpListener> = (0..n).map(|_| listener()).collect();
    listeners
        .iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}
