//! Free loopback ports for the tests that start nodes: a port is found by binding port 0 and
//! releasing it, and the OS may hand a released port out again (to a monitor, a proxy or a
//! test running at once). So every port handed out is recorded for the life of the test
//! binary, and neither [`free_ports`] nor [`listener`] ever returns one twice.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::sync::Mutex;

static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// A loopback listener on a port never handed out before in this binary.
pub fn listener() -> TcpListener {
    let mut handed = HANDED_OUT.lock().unwrap();
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
