//! `lkcs status --cluster FILE [--json] [--timeout-ms MS]`: asks every member its status over
//! the authenticated channel, as the operator (the cluster file's `[operator]` key, which
//! `lkcs cluster init` writes and which no member accepts as a member), and prints one line
//! per member and a summary of the active counts against the bounds. Exit 0 when every
//! member answered, 1 otherwise, 2 on bad input.

use clap::Args;
use lkcs::net::{ask_status, Cluster, MemberReport};
use lkcs::ProcessId;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// The options of `lkcs status`.
#[derive(Args, Debug)]
pub struct StatusArgs {
    /// The cluster file (`lkcs cluster init` writes one, with the operator's key).
    #[arg(long)]
    cluster: PathBuf,
    /// Print one JSON object: `members` (one object per member) and `summary`.
    #[arg(long)]
    json: bool,
    /// How long each member may take to answer.
    #[arg(long, value_name = "MS", default_value_t = 3000)]
    timeout_ms: u64,
}

/// The longest `--timeout-ms`.
const MAX_TIMEOUT_MS: u64 = 600_000;

/// Runs `lkcs status`.
pub fn run(args: &StatusArgs) -> ExitCode {
    let cluster = match Cluster::load(&args.cluster) {
        Ok(c) => c,
        Err(e) => {
            return crate::refuse(&e.problems);
        }
    };
    if args.timeout_ms == 0 || args.timeout_ms > MAX_TIMEOUT_MS {
        warn!("error: --timeout-ms must be in 1..={MAX_TIMEOUT_MS}");
        return ExitCode::from(2);
    }
    let identity = match cluster.operator_identity() {
        Ok(i) => i,
        Err(e) => {
            warn!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let rt = match super::current_thread_runtime() {
        Ok(rt) => rt,
        Err(e) => {
            warn!("{e}");
            return ExitCode::from(1);
        }
    };
    let timeout = Duration::from_millis(args.timeout_ms);
    // every member at once: one slow member costs the timeout once
    let answers: Vec<Result<MemberReport, String>> = rt.block_on(async {
        let asks = (0..cluster.len()).map(|i| {
            let (cluster, identity) = (&cluster, &identity);
            async move { ask_status(cluster, identity, ProcessId::from(i), timeout).await }
        });
        futures_util::future::join_all(asks).await
    });
    let all = answers.iter().all(Result::is_ok);
    let summary = summary(&cluster, &answers);
    if args.json {
        let members: Vec<serde_json::Value> = answers
            .iter()
            .enumerate()
            .map(|(i, a)| member_json(&cluster, i, a))
            .collect();
        let out = serde_json::json!({ "members": members, "summary": summary.json });
        println!("{out}");
    } else {
        for (i, a) in answers.iter().enumerate() {
            println!("{}", member_line(&cluster, i, a));
        }
        println!("{}", summary.line);
    }
    if all {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn list(v: &[usize]) -> String {
    if v.is_empty() {
        "-".into()
    } else {
        v.iter()
            .map(|p| format!("P{p}"))
            .collect::<Vec<_>>()
            .join(",")
    }
}

fn address(cluster: &Cluster, i: usize) -> String {
    cluster
        .address(ProcessId::from(i))
        .map_or_else(|| "-".into(), |a| a.to_string())
}

fn member_line(cluster: &Cluster, i: usize, a: &Result<MemberReport, String>) -> String {
    let addr = address(cluster, i);
    match a {
        Ok(r) => format!(
            "P{i} {addr} reachable view={} state={} waits-on={} unreachable={}{}",
            r.view.map_or_else(|| "-".into(), |v| v.to_string()),
            r.state,
            list(&r.awaiting),
            list(&r.unreachable),
            r.fenced
                .as_ref()
                .map_or_else(String::new, |why| format!(" fenced=\"{why}\"")),
        ),
        Err(e) => format!("P{i} {addr} unreachable: {e}"),
    }
}

fn member_json(cluster: &Cluster, i: usize, a: &Result<MemberReport, String>) -> serde_json::Value {
    let addr = address(cluster, i);
    match a {
        Ok(r) => serde_json::json!({
            "id": i,
            "address": addr,
            "reachable": true,
            "view": r.view,
            "view_members": r.members,
            "state": r.state,
            "waits_on": r.awaiting,
            "unreachable_peers": r.unreachable,
            "fenced": r.fenced,
        }),
        Err(e) => serde_json::json!({
            "id": i,
            "address": addr,
            "reachable": false,
            "error": e,
        }),
    }
}

struct Summary {
    line: String,
    json: serde_json::Value,
}

/// The active counts against the bounds: over the whole cluster for a global quota, per
/// closed neighbourhood for a local one (the members that did not answer are counted
/// unknown).
fn summary(cluster: &Cluster, answers: &[Result<MemberReport, String>]) -> Summary {
    let inst = cluster.instance();
    let n = cluster.len();
    let active = |p: &ProcessId| {
        answers[p.index()]
            .as_ref()
            .is_ok_and(|r| r.state == "active" || r.state == "exiting")
    };
    let answered = answers.iter().filter(|a| a.is_ok()).count();
    let global = (0..n)
        .map(ProcessId::from)
        .all(|q| inst.topology().closed(q).len() == n);
    let mut outside = Vec::new();
    let mut counts = Vec::new();
    for q in (0..n).map(ProcessId::from) {
        let closed = inst.topology().closed(q);
        let count = closed.iter().filter(|r| active(r)).count();
        let unknown = closed
            .iter()
            .filter(|r| answers[r.index()].is_err())
            .count();
        let b = inst.bounds(q);
        // a bound is broken only if no unknown member could mend it
        if count > b.k || count + unknown < b.l {
            outside.push(q.index());
        }
        counts.push(serde_json::json!({
            "member": q.index(), "active": count, "unknown": unknown, "l": b.l, "k": b.k,
        }));
        if global {
            break; // one neighbourhood: everyone
        }
    }
    let line = if global {
        let b = inst.bounds(ProcessId(0));
        let count = (0..n).map(ProcessId::from).filter(|p| active(p)).count();
        format!(
            "{answered} of {n} members answered; {count} active (bounds {}..={}){}",
            b.l,
            b.k,
            if outside.is_empty() {
                ""
            } else {
                "; OUTSIDE THE BOUNDS"
            }
        )
    } else {
        format!(
            "{answered} of {n} members answered; neighbourhoods outside their bounds: {}",
            list(&outside)
        )
    };
    Summary {
        line,
        json: serde_json::json!({
            "answered": answered,
            "members": n,
            "global": global,
            "neighbourhoods": counts,
            "outside_bounds": outside,
        }),
    }
}
