//! The readable summary of `lkcs simulate` (without `--json`): every line says in words what
//! it counts and in which unit, so that a reader who has not read the papers can follow it.
//! The `--json` object is the contract; this text is not parsed by anything.

use crate::SimRun;
use lkcs::{
    cs::{CsState, Variant},
    sim::{Delay, Workload},
    Algorithm, Bounds, ProcessId,
};

/// What the algorithm solves, in words, with the paper's name.
pub(crate) fn describe(a: Algorithm) -> &'static str {
    match a {
        Algorithm::Lmutin => "local l_i-mutual inclusion (l_i-LMUTIN)",
        Algorithm::Lmutex => "local k_i-mutual exclusion (k_i-LMUTEX)",
        Algorithm::Lkcs => "local (l_i, k_i)-critical section (LKCS)",
        Algorithm::Maekawa => "mutual exclusion by quorums (Maekawa)",
        Algorithm::Mutin => "global l-mutual inclusion (MUTIN(l))",
        Algorithm::Kmex => "global k-mutual exclusion (kmex)",
        Algorithm::Gcs => "global (l, k)-critical section ((l,k)-GCS)",
        Algorithm::Cdc => "mutual exclusion by a migrating controller with a central queue (CDC)",
        Algorithm::Ddc => {
            "mutual exclusion by a migrating controller with a distributed queue (DDC)"
        }
    }
}

/// "P0, P3" / "P0" for a short list of process indices.
fn names(ids: &[usize]) -> String {
    let v: Vec<String> = ids.iter().map(|i| format!("P{i}")).collect();
    match v.len() {
        0 => String::new(),
        1 => v[0].clone(),
        _ => format!("{} and {}", v[..v.len() - 1].join(", "), v[v.len() - 1]),
    }
}

/// The initial configuration in words, with the `--initial` spelling that reproduces it.
pub(crate) fn describe_initial(initial: &[CsState]) -> String {
    let n = initial.len();
    let inside: Vec<usize> = (0..n).filter(|&i| initial[i] == CsState::InCs).collect();
    let spelled = lkcs::format_initial(initial);
    let words = match inside.len() {
        0 => "no process in the critical section".to_string(),
        k if k == n => format!("all {n} processes in the critical section"),
        k if k <= 6 => format!(
            "{} in the critical section, the other {} out",
            names(&inside),
            n - k
        ),
        k => format!(
            "{k} of the {n} processes in the critical section, the other {} out",
            n - k
        ),
    };
    format!("{words} (--initial {spelled})")
}

/// "1" or "0 to 2" for the values a bound takes over the processes.
fn range(values: impl Iterator<Item = usize> + Clone) -> String {
    let (lo, hi) = (values.clone().min().unwrap_or(0), values.max().unwrap_or(0));
    if lo == hi {
        lo.to_string()
    } else {
        format!("{lo} to {hi}")
    }
}

/// The bounds in words: local bounds on closed neighbourhoods, or global ones on all n.
fn describe_bounds(run: &SimRun) -> String {
    let t = &run.spec.topology;
    let b: &[Bounds] = &run.bounds;
    let n = t.len();
    if run.spec.algorithm.is_global() {
        let (l, k) = b.first().map_or((0, n), |b| (b.l, b.k));
        let lower = if l == 0 {
            "no lower bound (l = 0)".to_string()
        } else {
            format!("at least l = {l}")
        };
        let upper = if k >= n {
            format!("no upper bound (k = n = {n})")
        } else {
            format!("at most k = {k}")
        };
        return format!(
            "{lower} and {upper} of the {n} processes in the critical section at any time"
        );
    }
    let closed = |i: usize| t.degree(ProcessId::from(i)) + 1;
    let ls = range(b.iter().map(|b| b.l));
    let ks = if (0..n).all(|i| b[i].k == closed(i)) {
        "|N_i|+1 (no upper bound)".to_string()
    } else {
        range(b.iter().map(|b| b.k))
    };
    format!(
        "every process P_i keeps between l_i = {ls} and k_i = {ks} of its closed \
         neighbourhood (itself and its neighbours N_i, |N_i| = {}) in the critical section",
        range((0..n).map(|i| closed(i) - 1))
    )
}

/// What one time unit is under this delay model.
fn describe_time(delay: Delay) -> String {
    match delay {
        Delay::Unit => {
            "one time unit = the delay of one message (here every message takes 1)".to_string()
        }
        Delay::Uniform { min, max } => format!(
            "one time unit = the delay of one message under --delay unit (here each message \
             takes {min} to {max}, drawn uniformly)"
        ),
    }
}

/// Why a run failed, in a few words ("deadlock, only 3 of 6 pairs completed").
pub(crate) fn failure_reasons(r: &lkcs::sim::SimReport) -> String {
    let mut why = Vec::new();
    if r.safety_violations > 0 {
        why.push(format!("{} safety violation(s)", r.safety_violations));
    }
    if let Some(starved) = &r.starved {
        // with stopped members, starving is the measure; only a member no bound holds fails
        let unheld: Vec<String> = starved
            .iter()
            .filter(|s| !s.held())
            .map(|s| s.process.to_string())
            .collect();
        if !unheld.is_empty() {
            why.push(format!(
                "starved with no bound holding them: {}",
                unheld.join(", ")
            ));
        }
        return why.join(", ");
    }
    if r.deadlock {
        why.push("deadlock".to_string());
    }
    if let Some(s) = &r.stalled {
        why.push(format!("stalled ({s})"));
    }
    // the pairs owed: extra ones (helper moves, cycling) do not make up for a missing one
    if r.requested_pairs_completed < r.pairs_requested {
        why.push(format!(
            "only {} of {} pairs completed",
            r.requested_pairs_completed, r.pairs_requested
        ));
    }
    why.join(", ")
}

/// Prints the summary of one simulation on stdout.
pub(crate) fn print(run: &SimRun) {
    let (spec, cfg, r) = (&run.spec, &run.cfg, &run.report);
    let verdict = if r.ok() && r.starved.as_ref().is_some_and(|s| !s.is_empty()) {
        "OK: safe, and every member that starved is held by a bound".to_string()
    } else if r.ok() {
        format!(
            "OK: safe, and every process completed its {} exit/entry pair(s)",
            cfg.pairs
        )
    } else {
        format!("FAILED: {}", failure_reasons(r))
    };
    say!(
        "{} on {} ({} processes), seed {}: {verdict}",
        spec.algorithm,
        spec.topology.name(),
        r.processes,
        r.seed
    );
    say!("  algorithm             {}", describe(spec.algorithm));
    if !run.printed_rules.is_empty() {
        say!(
            "  printed rules         {} (alone, over the corrected rules)",
            run.printed_rules.join(", ")
        );
    }
    if spec.algorithm == Algorithm::Lkcs {
        say!(
            "  rules                 {}",
            match run.variant {
                Variant::Trip => "the round trip (no leader; docs/lkcs-liveness.md)",
                Variant::Printed => "as printed (the paper's leader)",
                Variant::Corrected => "the leader rules (the paper's leader, corrected)",
            }
        );
    }
    say!("  bounds                {}", describe_bounds(run));
    say!("  start                 {}", describe_initial(&run.initial));
    say!(
        "  workload              {}",
        match cfg.workload {
            Workload::Concurrent => format!(
                "concurrent: every process keeps calling Exit and Entry, thinking 0 to {} \
                 time units in between",
                cfg.think_max
            ),
            Workload::Sequential => "sequential: one Exit or Entry at a time in the whole \
                                     system (the no-contention best case)"
                .to_string(),
        }
    );
    let per = cfg.pairs;
    let extra = match cfg.workload {
        Workload::Concurrent => "; processes that are done keep cycling until all are",
        Workload::Sequential => {
            "; any extra ones come from helper moves, made when no process with pairs left \
             can move without breaking a bound"
        }
    };
    let short = if r.requested_pairs_completed < r.pairs_requested {
        format!(
            "; only {} of the requested ones by the processes that owed them",
            r.requested_pairs_completed
        )
    } else {
        String::new()
    };
    say!(
        "  exit/entry pairs      completed {} ({} requested: {per} per process{extra}{short})",
        r.pairs_completed,
        r.pairs_requested
    );
    say!(
        "  safety violations     {} (every process's bounds checked after every event)",
        if r.safety_violations == 0 {
            "none".to_string()
        } else {
            r.safety_violations.to_string()
        }
    );
    say!(
        "  deadlock              {}",
        if r.deadlock {
            let ids: Vec<String> = r.blocked.iter().map(ToString::to_string).collect();
            format!(
                "yes: nothing in flight while {} wait(s) for a sequence to complete",
                if ids.is_empty() {
                    "some process".to_string()
                } else {
                    ids.join(", ")
                }
            )
        } else {
            "no".to_string()
        }
    );
    if let Some(s) = &r.stalled {
        say!("  stalled               {s}");
    }
    if let (Some(locality), Some(starved)) = (r.failure_locality, &r.starved) {
        say!(
            "  failure locality      {locality} ({} member(s) starved)",
            starved.len()
        );
        for s in starved {
            say!("    {s}");
        }
    }
    say!(
        "  messages sent         {} in all, self-addressed ones included",
        r.messages
    );
    let s = r.messages_per_pair;
    say!(
        "  messages per pair     min {} / mean {:.2} / max {} (self-addressed included)",
        s.min,
        s.mean,
        s.max
    );
    let s = r.remote_messages_per_pair;
    say!(
        "  remote messages/pair  min {} / mean {:.2} / max {} (self-addressed left out)",
        s.min,
        s.mean,
        s.max
    );
    let kinds: Vec<String> = r
        .messages_by_kind
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    say!("  messages by kind      {}", kinds.join(", "));
    let w = r.waiting_time;
    say!(
        "  waiting time          Exit: max {} / mean {:.2} time units; Entry: max {} / mean \
         {:.2} time units (from the call to the change of state)",
        w.exit_max,
        w.exit_mean,
        w.entry_max,
        w.entry_mean
    );
    say!(
        "  simulated time        {} time units, {} events handled",
        r.end_time,
        r.events
    );
    if r.helper_steps > 0 {
        say!(
            "  helper search         {} configurations visited (not events; at most {})",
            r.helper_steps,
            lkcs::sim::HELPER_STEP_LIMIT
        );
    }
    say!("  time unit             {}", describe_time(cfg.delay));
}
