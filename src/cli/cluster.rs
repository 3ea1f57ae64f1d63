//! `lkcs cluster init`: writes a cluster file and one key pair per member.

use clap::{Args, Subcommand};
use lkcs::net::{write_key, write_operator_key};
use lkcs::net::{Cluster, SecretKey};
use lkcs::BoundsFile;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The most members `cluster init` writes.
const MAX_MEMBERS: usize = 10_000;

/// The largest bounds file read.
const MAX_BOUNDS_FILE: u64 = 1 << 20;

/// `lkcs cluster ...`.
#[derive(Args)]
pub struct ClusterArgs {
    #[command(subcommand)]
    command: ClusterCommand,
}

#[derive(Subcommand)]
enum ClusterCommand {
    /// Write DIR/cluster.toml (members at HOST:PORT..PORT+N-1, the quota) and one private
    /// key per member in DIR/keys/ (mode 600).
    Init(InitArgs),
}

/// Options of `lkcs cluster init`: the members, where they listen, and the quota (the
/// system options of `lkcs simulate`).
#[derive(Args)]
pub struct InitArgs {
    /// How many members (ids 0..N-1).
    #[arg(long, value_name = "N")]
    members: usize,
    /// The folder to write: DIR/cluster.toml and DIR/keys/I.key (created; an existing
    /// cluster file is not overwritten).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// The host every member listens on (edit the file for members on several hosts).
    #[arg(long, value_name = "H", default_value = "127.0.0.1")]
    host: String,
    /// Member I listens on port P+I.
    #[arg(long, value_name = "P", default_value_t = 7411)]
    base_port: u16,
    /// The cluster epoch (bump it to restart a cluster as a whole).
    #[arg(long, default_value_t = 1)]
    epoch: u64,
    /// lmutin, lmutex, lkcs, maekawa, mutin, kmex, gcs, cdc or ddc.
    #[arg(long)]
    algorithm: String,
    /// complete:N (default, over the N members), ring:N, path:N, star:N, grid:RxC, torus:RxC
    /// or random:N:P:SEED.
    #[arg(long)]
    topology: Option<String>,
    /// Uniform lower bound l_i.
    #[arg(long, allow_negative_numbers = true, value_parser = super::bound_arg)]
    l: Option<usize>,
    /// Uniform upper bound k_i.
    #[arg(long, allow_negative_numbers = true, value_parser = super::bound_arg)]
    k: Option<usize>,
    /// Per-process bounds: a JSON file {"l": [...], "k": [...]}, one entry per process.
    #[arg(long, value_name = "FILE")]
    bounds: Option<PathBuf>,
    /// Initial configuration in:I,J,... (default: a safe one found automatically).
    #[arg(long)]
    initial: Option<String>,
    /// corrected (default), printed, or trip (lkcs only).
    #[arg(long)]
    variant: Option<String>,
    /// lkcs's leader rules: a leader's index, `all` or `auto`.
    #[arg(long)]
    leader: Option<String>,
    /// majority (default) or grid: the coterie of maekawa (and the global algorithms).
    #[arg(long)]
    coterie: Option<String>,
    /// The mutual-exclusion object inside mutin/kmex/gcs: maekawa, lmutex, cdc or ddc.
    #[arg(long)]
    mx: Option<String>,
    /// Migrating controller: migrate at every M-th exit.
    #[arg(long, value_name = "M")]
    maxreq: Option<usize>,
    /// Migrating controller: migrate at the first exit T time units after becoming
    /// controller.
    #[arg(long, value_name = "T")]
    migrate_after: Option<u64>,
    /// Where each member keeps its view log (`[storage] dir`, relative to the cluster
    /// file; member I in DIR/member-I/epoch-E), so that a restarted member resumes it;
    /// `memory` keeps it in memory (a restarted member joins with an empty log, and a
    /// majority crashing at once leaves the log without one).
    #[arg(long, value_name = "DIR", default_value = "state")]
    storage: String,
}

/// Runs `lkcs cluster ...`.
pub fn run(args: &ClusterArgs) -> ExitCode {
    match &args.command {
        ClusterCommand::Init(a) => init(a),
    }
}

fn quoted(name: &str, v: &str, problems: &mut Vec<String>) -> String {
    if v.chars().any(|c| c == '"' || c == '\\' || c.is_control()) {
        problems.push(format!(
            "--{name}: quotes, backslashes and control characters are not accepted"
        ));
    }
    format!("\"{v}\"")
}

fn read_bounds(path: &Path) -> Result<BoundsFile, String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_BOUNDS_FILE).read_to_string(&mut text))
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_json::from_str::<BoundsFile>(&text).map_err(|e| {
        format!(
            "{} is not a bounds file ({{\"l\": [...], \"k\": [...]}}): {e}",
            path.display()
        )
    })
}

/// The cluster file's text, or every problem with the options.
fn text(a: &InitArgs, keys: &[SecretKey], operator: &SecretKey) -> Result<String, Vec<String>> {
    let mut problems = Vec::new();
    if a.members == 0 || a.members > MAX_MEMBERS {
        problems.push(format!("--members must be in 1..={MAX_MEMBERS}"));
    }
    if usize::from(a.base_port) + a.members.saturating_sub(1) > usize::from(u16::MAX)
        || a.base_port == 0
    {
        problems.push(format!(
            "--base-port {}: the ports {}..{} must be in 1..=65535",
            a.base_port,
            a.base_port,
            usize::from(a.base_port) + a.members.saturating_sub(1)
        ));
    }
    let mut q = String::new();
    let _ = writeln!(
        q,
        "algorithm = {}",
        quoted("algorithm", &a.algorithm, &mut problems)
    );
    let topology = a
        .topology
        .clone()
        .unwrap_or_else(|| format!("complete:{}", a.members));
    let _ = writeln!(
        q,
        "topology = {}",
        quoted("topology", &topology, &mut problems)
    );
    if let Some(l) = a.l {
        let _ = writeln!(q, "l = {l}");
    }
    if let Some(k) = a.k {
        let _ = writeln!(q, "k = {k}");
    }
    if let Some(path) = &a.bounds {
        match read_bounds(path) {
            Ok(b) => {
                let list = |v: &Vec<usize>| {
                    v.iter()
                        .map(usize::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                let mut parts = Vec::new();
                if let Some(l) = &b.l {
                    parts.push(format!("l = [{}]", list(l)));
                }
                if let Some(k) = &b.k {
                    parts.push(format!("k = [{}]", list(k)));
                }
                let _ = writeln!(q, "bounds = {{ {} }}", parts.join(", "));
            }
            Err(e) => problems.push(e),
        }
    }
    for (name, v) in [
        ("initial", &a.initial),
        ("variant", &a.variant),
        ("leader", &a.leader),
        ("coterie", &a.coterie),
        ("mx", &a.mx),
    ] {
        if let Some(v) = v {
            let _ = writeln!(q, "{name} = {}", quoted(name, v, &mut problems));
        }
    }
    if let Some(m) = a.maxreq {
        let _ = writeln!(q, "maxreq = {m}");
    }
    if let Some(t) = a.migrate_after {
        let _ = writeln!(q, "migrate_after = {t}");
    }
    let host = quoted("host", a.host.trim(), &mut problems);
    let storage = match a.storage.as_str() {
        "memory" => None,
        "" => {
            problems.push("--storage: name a folder, or `memory`".into());
            None
        }
        dir => Some(quoted("storage", dir, &mut problems)),
    };
    if !problems.is_empty() {
        return Err(problems);
    }
    let host = host.trim_matches('"');
    // an IPv6 literal takes brackets in host:port
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_string()
    };
    // the host is checked once, here, with the base port: a bad one is one problem about
    // --host, not one per member section the user never wrote
    if lkcs::net::MemberAddress::parse(&format!("{host}:{}", a.base_port.max(1))).is_none() {
        return Err(vec![format!(
            "--host `{}` is not a host: an IP address or a host name (letters, digits, `-`, \
             `_` and `.`)",
            a.host
        )]);
    }
    let mut t = String::new();
    let _ = writeln!(
        t,
        "# Written by `lkcs cluster init`. Every member reads this file; each member's host\n\
         # needs its own private key only (keys/I.key, mode 600). Keep this file mode 600 too."
    );
    let _ = writeln!(t, "epoch = {}\n\n[quota]\n{q}", a.epoch);
    for (i, key) in keys.iter().enumerate() {
        let port = usize::from(a.base_port) + i;
        let _ = writeln!(
            t,
            "[members.{i}]\naddress = \"{host}:{port}\"\npublic_key = \"{}\"\nprivate_key = \"keys/{i}.key\"\n",
            key.public()
        );
    }
    let _ = writeln!(
        t,
        "# the operator (`lkcs status`): pinned for no member, it may only ask their status
[operator]
public_key = \"{}\"
private_key = \"keys/operator.key\"",
        operator.public()
    );
    if let Some(dir) = storage {
        let _ = writeln!(
            t,
            "\n# each member keeps its view log on disk, in DIR/member-I/epoch-E (relative to this
# file): a restarted member resumes it. Never delete a member's folder while the cluster
# runs under this epoch (docs/operations.md).
[storage]
dir = {dir}"
        );
    }
    Ok(t)
}

/// Writes the keys (`key_files`: the members' in order, then the operator's) and the
/// cluster file, recording in `created` each file made; an error names the path it failed on.
fn write_cluster(
    keys_dir: &std::path::Path,
    key_files: &[std::path::PathBuf],
    keys: &[SecretKey],
    operator: &SecretKey,
    file: &std::path::Path,
    text: &str,
    created: &mut Vec<std::path::PathBuf>,
) -> Result<(), (std::path::PathBuf, std::io::Error)> {
    let at = |p: &std::path::Path| {
        let p = p.to_path_buf();
        move |e| (p, e)
    };
    std::fs::create_dir_all(keys_dir).map_err(at(keys_dir))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(keys_dir, std::fs::Permissions::from_mode(0o700))
            .map_err(at(keys_dir))?;
    }
    for (i, (key, path)) in keys.iter().zip(key_files).enumerate() {
        write_key(path, i, key).map_err(at(path))?;
        created.push(path.clone());
    }
    let path = &key_files[keys.len()];
    write_operator_key(path, operator).map_err(at(path))?;
    created.push(path.clone());
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    use std::io::Write;
    let mut f = options.open(file).map_err(at(file))?;
    created.push(file.to_path_buf());
    f.write_all(text.as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(at(file))
}

fn init(a: &InitArgs) -> ExitCode {
    let keys: Vec<SecretKey> = (0..a.members.min(MAX_MEMBERS))
        .map(|_| SecretKey::generate())
        .collect();
    let operator = SecretKey::generate();
    let text = match text(a, &keys, &operator) {
        Ok(t) => t,
        Err(problems) => {
            return crate::refuse(&problems);
        }
    };
    // the same checks as every member makes when it reads the file
    if let Err(e) = Cluster::parse_in(&text, &a.out) {
        return crate::refuse(&e.problems);
    }
    let file = a.out.join("cluster.toml");
    let keys_dir = a.out.join("keys");
    let key_files: Vec<std::path::PathBuf> = (0..keys.len())
        .map(|i| keys_dir.join(format!("{i}.key")))
        .chain([keys_dir.join("operator.key")])
        .collect();
    // nothing is written over, and nothing at all is written when one of them is there
    if let Some(there) = std::iter::once(&file)
        .chain(&key_files)
        .find(|f| f.symlink_metadata().is_ok())
    {
        warn!(
            "error: {} exists: not overwritten (choose another --out)",
            there.display()
        );
        return ExitCode::from(2);
    }
    // the files this run created, removed again when a later write fails
    let mut created: Vec<std::path::PathBuf> = Vec::new();
    let written = write_cluster(
        &keys_dir,
        &key_files,
        &keys,
        &operator,
        &file,
        &text,
        &mut created,
    );
    if let Err((path, e)) = written {
        for f in &created {
            let _ = std::fs::remove_file(f);
        }
        warn!("error: cannot write {}: {e}", path.display());
        return ExitCode::from(1);
    }
    say!(
        "wrote {} ({} members), {}/0..{}.key and the operator's {}/operator.key",
        file.display(),
        a.members,
        keys_dir.display(),
        a.members - 1,
        keys_dir.display()
    );
    say!(
        "start member I with: lkcs node --cluster {} --id I",
        file.display()
    );
    ExitCode::SUCCESS
}
