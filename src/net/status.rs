//! The operator's status request (`lkcs status`): a connection authenticated with the cluster
//! file's operator key ([`OPERATOR`]) asks one member its [`MemberReport`], and the member
//! answers on the same connection, which then closes. The operator's key is pinned for no
//! member, so it cannot act as one: a connection that presents it is served this request
//! only.

use super::frame::Frame;
use super::handshake::{self, HandshakeError};
use super::{Cluster, MemberAddress, OPERATOR};
use crate::id::ProcessId;
use serde::{Deserialize, Serialize};
use std::time::Duration;
use tokio_util::codec::Framed;

/// What a member tells the operator about itself.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberReport {
    /// The member's id.
    pub member: usize,
    /// The view it is in (`None` without views).
    pub view: Option<u64>,
    /// The view's members.
    pub members: Vec<usize>,
    /// `active`, `inactive`, `entering`, `exiting` or `evicted`.
    pub state: String,
    /// The members its move in progress waits on (what the algorithm says it awaits).
    pub awaiting: Vec<usize>,
    /// The peers it cannot reach.
    pub unreachable: Vec<usize>,
    /// Why it fenced, while it is evicted.
    pub fenced: Option<String>,
}

/// Asks member `id` of `cluster` its report, as the operator (`identity` holds the operator
/// key), within `timeout`. The error says what failed: the address, the connection, the
/// handshake (a key the member does not pin, another spec or epoch), the answer.
pub async fn ask_status(
    cluster: &Cluster,
    identity: &super::Identity,
    id: ProcessId,
    timeout: Duration,
) -> Result<MemberReport, String> {
    let ask = async {
        let address: MemberAddress = cluster
            .address(id)
            .ok_or_else(|| format!("no member {}", id.index()))?;
        let addrs = address.lookup().await.map_err(|e| e.to_string())?;
        let mut last = format!("{address}: no address");
        for addr in addrs {
            let stream = match tokio::net::TcpStream::connect(addr).await {
                Ok(s) => s,
                Err(e) => {
                    last = format!("{addr}: {e}");
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let stream: super::io::BoxStream = Box::new(stream);
            let mut conn = Framed::new(stream, super::frame::codec());
            let trust = cluster.trust();
            let exchange = async {
                handshake::handshake::<()>(&mut conn, identity, &trust, Some(id), |_| false)
                    .await?;
                handshake::send(&mut conn, &Frame::<()>::StatusRequest).await?;
                match handshake::recv::<()>(&mut conn).await? {
                    Frame::Status(bytes) => Ok(bytes),
                    Frame::Refuse(r) => Err(HandshakeError::Refused(r)),
                    _ => Err(HandshakeError::Protocol("expected a status")),
                }
            };
            return match exchange.await {
                Ok(bytes) => postcard::from_bytes(&bytes)
                    .map_err(|e| format!("{addr}: an answer that does not decode: {e}")),
                Err(e) => Err(format!("{addr}: {e}")),
            };
        }
        Err(last)
    };
    match tokio::time::timeout(timeout, ask).await {
        Ok(r) => r,
        Err(_) => Err(format!("no answer within {} ms", timeout.as_millis())),
    }
}

/// The operator's identity for `cluster`: its key, the cluster's spec and epoch.
pub(crate) fn operator_identity(cluster: &Cluster, key: super::SecretKey) -> super::Identity {
    super::Identity::new(OPERATOR, key, cluster.spec_hash(), cluster.epoch())
}
