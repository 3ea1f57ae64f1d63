//! `lkcs node --metrics ADDR`: the node's numbers ([`NodeHandle::metrics`]) as Prometheus
//! text at `GET /metrics`, encoded by `prometheus-client` on each scrape.
//!
//! The HTTP side is the least a scraper needs: one request per connection, `GET /metrics`
//! answered `200`, any other path `404`, any other method `405`. The whole exchange must end
//! within [`REQUEST_TIMEOUT`], a request fit in [`MAX_REQUEST`] bytes, and at most
//! [`MAX_SCRAPES`] connections are served at once (one past them is closed at once): a flood
//! of sockets cannot grow the node's memory or starve its links. Bind it to loopback or a
//! management network: it is not authenticated.

use lkcs::net::{NodeHandle, NodeMetrics, WAIT_BUCKETS};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long a scrape may take, from the connection to the last byte of the answer.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest request read.
pub const MAX_REQUEST: usize = 8 * 1024;
/// Connections served at once.
pub const MAX_SCRAPES: usize = 8;

/// The node's metrics, read at each scrape.
#[derive(Debug)]
struct Exporter(NodeHandle);

/// One metric: its name (without `_total`), help, type, and its samples, each with its
/// labels.
fn family(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    kind: MetricType,
    samples: &[(Vec<(&str, String)>, f64)],
) -> Result<(), std::fmt::Error> {
    let mut metric = encoder.encode_descriptor(name, help, None, kind)?;
    for (labels, v) in samples {
        let sample = metric.encode_family(labels)?;
        match kind {
            MetricType::Counter => ConstCounter::new(*v as u64).encode(sample)?,
            _ => ConstGauge::new(*v as i64).encode(sample)?,
        }
    }
    Ok(())
}

fn histogram(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    h: &lkcs::net::WaitHistogram,
) -> Result<(), std::fmt::Error> {
    let mut buckets: Vec<(f64, u64)> = WAIT_BUCKETS
        .iter()
        .chain(std::iter::once(&f64::INFINITY))
        .enumerate()
        .map(|(i, &b)| (b, h.counts.get(i).copied().unwrap_or(0)))
        .collect();
    if buckets.is_empty() {
        buckets.push((f64::INFINITY, 0));
    }
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Histogram)?;
    metric.encode_histogram::<NoLabelSet>(h.sum, h.count, &buckets, None)
}

impl Collector for Exporter {
    fn encode(&self, mut e: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        encode_metrics(&self.0.metrics(), &mut e)
    }
}

fn peer_label(p: &lkcs::ProcessId) -> Vec<(&'static str, String)> {
    vec![("peer", p.index().to_string())]
}

/// Every metric of `m` (docs/operations.md, "Metrics").
fn encode_metrics(m: &NodeMetrics, e: &mut DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
    use MetricType::{Counter, Gauge};
    let calls: Vec<_> = m
        .calls
        .iter()
        .map(|((kind, outcome), n)| {
            (
                vec![
                    ("call", kind.to_string()),
                    ("outcome", outcome.as_str().into()),
                ],
                *n as f64,
            )
        })
        .collect();
    family(
        e,
        "lkcs_calls",
        "enter and exit calls, by outcome",
        Counter,
        &calls,
    )?;
    let one = |v: u64| [(Vec::new(), v as f64)];
    family(
        e,
        "lkcs_entries",
        "entries completed (the member went active)",
        Counter,
        &one(m.entries),
    )?;
    family(
        e,
        "lkcs_pairs",
        "exits completed (entry/exit pairs)",
        Counter,
        &one(m.pairs),
    )?;
    histogram(
        e,
        "lkcs_enter_wait_seconds",
        "how long completed enter calls waited",
        &m.enter_wait,
    )?;
    histogram(
        e,
        "lkcs_exit_wait_seconds",
        "how long completed exit calls waited",
        &m.exit_wait,
    )?;
    let per_peer = |f: &dyn Fn(&lkcs::net::PeerMetrics) -> u64| -> Vec<_> {
        m.peers
            .iter()
            .map(|(p, pm)| (peer_label(p), f(pm) as f64))
            .collect()
    };
    family(
        e,
        "lkcs_messages_sent",
        "the object's messages sent to each peer",
        Counter,
        &per_peer(&|p| p.sent),
    )?;
    family(
        e,
        "lkcs_messages_received",
        "the object's messages received from each peer",
        Counter,
        &per_peer(&|p| p.received),
    )?;
    family(
        e,
        "lkcs_link_connects",
        "connections made on each peer's link",
        Counter,
        &per_peer(&|p| p.connects),
    )?;
    family(
        e,
        "lkcs_link_resets",
        "connections ended on each peer's link (each is resumed)",
        Counter,
        &per_peer(&|p| p.resets),
    )?;
    family(
        e,
        "lkcs_link_resent_messages",
        "messages resent on a new connection",
        Counter,
        &per_peer(&|p| p.resent),
    )?;
    family(
        e,
        "lkcs_link_tampered_frames",
        "frames that failed to open (tampered, forged)",
        Counter,
        &per_peer(&|p| p.tampered),
    )?;
    family(
        e,
        "lkcs_peer_unreachable_events",
        "times each peer became unreachable",
        Counter,
        &per_peer(&|p| p.unreachable_times),
    )?;
    family(
        e,
        "lkcs_peer_unreachable",
        "1 while the peer is unreachable",
        Gauge,
        &per_peer(&|p| u64::from(p.unreachable)),
    )?;
    let unreachable = m.peers.values().filter(|p| p.unreachable).count() as u64;
    family(
        e,
        "lkcs_peers_unreachable",
        "peers unreachable now",
        Gauge,
        &one(unreachable),
    )?;
    family(
        e,
        "lkcs_handshakes_refused",
        "connections refused in their handshake",
        Counter,
        &one(m.refused),
    )?;
    let view = m.view.map_or(-1.0, |v| v as f64);
    family(
        e,
        "lkcs_view",
        "the view the member is in (-1: no views)",
        Gauge,
        &[(Vec::new(), view)],
    )?;
    family(
        e,
        "lkcs_view_changes",
        "views this node installed",
        Counter,
        &one(m.view_changes),
    )?;
    family(
        e,
        "lkcs_evictions",
        "members the installed views removed",
        Counter,
        &one(m.evictions),
    )?;
    family(
        e,
        "lkcs_fences",
        "times this member fenced",
        Counter,
        &one(m.fences),
    )?;
    let states: Vec<_> = ["active", "inactive", "entering", "exiting", "evicted"]
        .iter()
        .map(|s| {
            (
                vec![("state", s.to_string())],
                f64::from(u8::from(*s == m.state)),
            )
        })
        .collect();
    family(
        e,
        "lkcs_member_state",
        "1 for the member's current state",
        Gauge,
        &states,
    )?;
    Ok(())
}

/// The registry of one node's exporter.
pub fn registry(h: NodeHandle) -> Registry {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Exporter(h)));
    registry
}

/// Binds `addr` for the metrics (an error names it).
pub async fn bind(addr: SocketAddr) -> Result<tokio::net::TcpListener, String> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("--metrics {addr}: cannot listen: {e}"))
}

/// Serves the node's metrics on `listener` until the process ends.
pub fn serve(listener: tokio::net::TcpListener, h: NodeHandle) {
    let registry = Arc::new(registry(h));
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_SCRAPES));
    tokio::spawn(async move {
        loop {
            let conn = match listener.accept().await {
                Ok((conn, _)) => conn,
                Err(_) => {
                    // out of file descriptors, say: let the node run meanwhile
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            // every slot taken: closed at once, the scraper tries again
            let Ok(permit) = slots.clone().try_acquire_owned() else {
                continue;
            };
            let registry = registry.clone();
            tokio::spawn(async move {
                // one deadline for the whole exchange: a client that does not read cannot
                // hold its slot
                let _ = tokio::time::timeout(REQUEST_TIMEOUT, answer(conn, &registry)).await;
                drop(permit);
            });
        }
    });
}

/// Reads one request and answers it.
async fn answer(mut conn: tokio::net::TcpStream, registry: &Registry) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(1024);
    let read = async {
        let mut chunk = [0u8; 1024];
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < MAX_REQUEST {
            let n = conn.read(&mut chunk).await?;
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        Ok::<(), std::io::Error>(())
    };
    read.await?;
    let head = String::from_utf8_lossy(&buf);
    let mut words = head.lines().next().unwrap_or("").split_whitespace();
    let (status, kind, body) = match (words.next(), words.next()) {
        (Some("GET"), Some("/metrics")) => {
            let mut body = String::new();
            match prometheus_client::encoding::prometheus_text::encode(&mut body, registry) {
                Ok(()) => (
                    "200 OK",
                    prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
                    body,
                ),
                Err(_) => (
                    "500 Internal Server Error",
                    "text/plain",
                    "encoding failed\n".into(),
                ),
            }
        }
        (Some("GET"), _) => (
            "404 Not Found",
            "text/plain",
            "only /metrics is served\n".into(),
        ),
        _ => (
            "405 Method Not Allowed",
            "text/plain",
            "only GET /metrics\n".into(),
        ),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(response.as_bytes()).await?;
    conn.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_encodes_as_prometheus_text() {
        let mut m = NodeMetrics {
            member: 1,
            state: "active",
            view: Some(3),
            pairs: 4,
            ..NodeMetrics::default()
        };
        m.calls.insert(("enter", lkcs::net::CallOutcome::Ok), 5);
        m.peers.insert(
            lkcs::ProcessId(2),
            lkcs::net::PeerMetrics {
                sent: 9,
                resets: 2,
                unreachable: true,
                ..Default::default()
            },
        );
        struct One(NodeMetrics);
        impl std::fmt::Debug for One {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("One")
            }
        }
        impl Collector for One {
            fn encode(&self, mut e: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
                encode_metrics(&self.0, &mut e)
            }
        }
        let mut registry = Registry::default();
        registry.register_collector(Box::new(One(m)));
        let mut text = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut text, &registry).unwrap();
        for line in [
            "lkcs_calls_total{call=\"enter\",outcome=\"ok\"} 5",
            "lkcs_pairs_total 4",
            "lkcs_messages_sent_total{peer=\"2\"} 9",
            "lkcs_link_resets_total{peer=\"2\"} 2",
            "lkcs_peer_unreachable{peer=\"2\"} 1",
            "lkcs_peers_unreachable 1",
            "lkcs_view 3",
            "lkcs_member_state{state=\"active\"} 1",
            "lkcs_member_state{state=\"evicted\"} 0",
            "lkcs_enter_wait_seconds_bucket{le=\"+Inf\"} 0",
        ] {
            assert!(text.lines().any(|l| l == line), "no `{line}` in:\n{text}");
        }
    }
}
