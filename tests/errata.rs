//! `docs/errata.md` is executable: every command it marks is run with the `lkcs` binary and
//! must exit as the errata says (and print what it says it prints), every entry has a command
//! or says why it has none, and the numbered entries of each module match the numbered list
//! of that module's "Deviations" section in its source file, so a deviation added to the code
//! without an erratum (or the reverse) fails here.
//!
//! The marker syntax is documented at the top of `docs/errata.md`:
//!
//! - an entry is a heading `### <id>: <title>`;
//! - a command is a `sh` fenced block whose first line is
//!   `# errata: <id> expect-exit <code> [prints '<text>']...`, followed by optional
//!   `echo '<content>' > <file>` lines (files the command reads) and one `lkcs ...` command
//!   (lines ending in `\` continue it); other `#` lines are comments;
//! - an entry without a command has a line containing `errata: <id> no-command`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The module whose "Deviations" list an id prefix counts, relative to the crate root.
const MODULES: [(&str, &str); 7] = [
    ("lmutin", "src/algo/lmutin.rs"),
    ("lkcs", "src/algo/lkcs/leader.rs"),
    ("mutin", "src/algo/mutin.rs"),
    ("maekawa", "src/algo/maekawa.rs"),
    ("migrating", "src/algo/migrating.rs"),
    ("complement", "src/cs/complement.rs"),
    ("gcs", "src/cs/gcs.rs"),
];

/// Threads running the commands (the reference machine has two cores).
const THREADS: usize = 2;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    let path = root().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// One entry of the errata: its id, the line of its heading and the text up to the next
/// heading.
#[derive(Debug)]
struct Entry {
    id: String,
    line: usize,
    body: Vec<(usize, String)>,
}

/// One marked command.
#[derive(Debug, Clone)]
struct Job {
    id: String,
    line: usize,
    expect_exit: i32,
    prints: Vec<String>,
    files: Vec<(String, String)>,
    args: Vec<String>,
}

/// Splits a line into words as a POSIX shell would for the simple cases the errata use:
/// blanks separate words, single quotes keep their content as it is.
fn words(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    cur.push(q);
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        out.push(cur);
    }
    out
}

/// The entries of the errata, in order. Headings of other levels (and text before the first
/// entry) belong to no entry.
fn entries(doc: &str) -> Vec<Entry> {
    let mut entries: Vec<Entry> = Vec::new();
    let mut in_entry = false;
    let mut fence = false;
    for (i, line) in doc.lines().enumerate() {
        let n = i + 1;
        if line.starts_with("```") {
            fence = !fence;
        }
        if !fence && line.starts_with('#') {
            in_entry = false;
            if let Some(rest) = line.strip_prefix("### ") {
                let id = rest.split(':').next().unwrap_or("").trim();
                assert!(
                    !id.is_empty()
                        && id
                            .chars()
                            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                        && rest.contains(':'),
                    "docs/errata.md:{n}: an entry heading is `### <id>: <title>`, id in [a-z0-9-]: {line}"
                );
                entries.push(Entry {
                    id: id.to_string(),
                    line: n,
                    body: Vec::new(),
                });
                in_entry = true;
                continue;
            }
        }
        if in_entry && let Some(e) = entries.last_mut() {
            e.body.push((n, line.to_string()));
        }
    }
    entries
}

/// The marked command blocks of one entry.
fn jobs(entry: &Entry) -> Vec<Job> {
    let mut jobs = Vec::new();
    let mut lines = entry.body.iter();
    while let Some((n, line)) = lines.next() {
        if line.trim() != "```sh" {
            continue;
        }
        let mut block = Vec::new();
        for (m, l) in lines.by_ref() {
            if l.trim() == "```" {
                break;
            }
            block.push((*m, l.clone()));
        }
        let Some((_, first)) = block.first() else {
            continue;
        };
        let Some(marker) = first.trim().strip_prefix("# errata:") else {
            continue;
        };
        let w = words(marker);
        assert!(
            w.len() >= 3 && w[1] == "expect-exit",
            "docs/errata.md:{n}: expected `# errata: <id> expect-exit <code> [prints '<text>']...`"
        );
        assert_eq!(
            w[0], entry.id,
            "docs/errata.md:{n}: a command marked for {} inside entry {}",
            w[0], entry.id
        );
        let expect_exit: i32 = w[2]
            .parse()
            .unwrap_or_else(|_| panic!("docs/errata.md:{n}: exit code `{}`", w[2]));
        let mut prints = Vec::new();
        let mut rest = w[3..].iter();
        while let Some(k) = rest.next() {
            assert_eq!(k, "prints", "docs/errata.md:{n}: unknown marker word `{k}`");
            let text = rest
                .next()
                .unwrap_or_else(|| panic!("docs/errata.md:{n}: `prints` without a text"));
            prints.push(text.clone());
        }
        let mut files = Vec::new();
        let mut command = String::new();
        let mut continued = false;
        for (m, l) in &block[1..] {
            let t = l.trim();
            if continued {
                command.push(' ');
                command.push_str(t.trim_end_matches('\\'));
                continued = t.ends_with('\\');
            } else if t.is_empty() || t.starts_with('#') {
                continue;
            } else if t.starts_with("echo ") {
                let w = words(t);
                assert!(
                    w.len() == 4 && w[2] == ">",
                    "docs/errata.md:{m}: a file is written as `echo '<content>' > <file>`"
                );
                files.push((w[3].clone(), w[1].clone()));
            } else if t.starts_with("lkcs ") {
                assert!(
                    command.is_empty(),
                    "docs/errata.md:{m}: one command per block"
                );
                command.push_str(t.trim_end_matches('\\'));
                continued = t.ends_with('\\');
            } else {
                panic!("docs/errata.md:{m}: a block holds `echo ... > FILE` lines and one `lkcs ...` command: {t}");
            }
        }
        let args = words(&command);
        assert!(
            args.first().map(String::as_str) == Some("lkcs") && args.len() > 1,
            "docs/errata.md:{n}: the block has no `lkcs ...` command"
        );
        jobs.push(Job {
            id: entry.id.clone(),
            line: *n,
            expect_exit,
            prints,
            files,
            args: args[1..].to_vec(),
        });
    }
    jobs
}

/// The numbers of the items of the "Deviations" section of a module's `//!` doc: the
/// top-level numbered list between a `# Deviations...` heading and the next heading.
fn module_deviations(source: &str) -> Vec<u32> {
    let mut numbers = Vec::new();
    let mut inside = false;
    for line in source.lines() {
        let Some(doc) = line.strip_prefix("//!") else {
            if inside || !numbers.is_empty() {
                break;
            }
            continue;
        };
        let doc = doc.strip_prefix(' ').unwrap_or(doc);
        if let Some(heading) = doc.strip_prefix("# ") {
            inside = heading.starts_with("Deviations");
            continue;
        }
        if !inside {
            continue;
        }
        let digits: String = doc.chars().take_while(char::is_ascii_digit).collect();
        if !digits.is_empty() && doc[digits.len()..].starts_with(". ") {
            numbers.push(digits.parse().expect("a number"));
        }
    }
    numbers
}

#[test]
fn the_errata_marker_syntax_parses() {
    assert_eq!(
        words(r#"echo '{"l":[1, 2]}' > b.json"#),
        ["echo", r#"{"l":[1, 2]}"#, ">", "b.json"]
    );
    assert_eq!(
        words("errata: x-1 expect-exit 1 prints 'deadlock at t='"),
        [
            "errata:",
            "x-1",
            "expect-exit",
            "1",
            "prints",
            "deadlock at t="
        ]
    );
    let doc = "intro\n### a-1: one\ntext `errata: a-1 no-command`\n### a-2: two\n```sh\n\
               # errata: a-2 expect-exit 1 prints 'x y'\necho '{}' > f.json\n\
               lkcs simulate --a \\\n    --b f.json\n```\n## other\nnot in an entry\n";
    let e = entries(doc);
    assert_eq!(
        e.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(),
        ["a-1", "a-2"]
    );
    let j = jobs(&e[1]);
    assert_eq!(j.len(), 1);
    assert_eq!(j[0].args, ["simulate", "--a", "--b", "f.json"]);
    assert_eq!(j[0].files, [("f.json".to_string(), "{}".to_string())]);
    assert_eq!(j[0].prints, ["x y"]);
    assert_eq!(e[1].body.last().map(|(_, l)| l.as_str()), Some("```"));
    let src =
        "//! intro\n//!\n//! # Deviations from the paper\n//!\n//! 1. **a**\n//!    2. not top\n\
               //! 10. **b**\n//! # Other\n//! 3. no\nuse x;\n";
    assert_eq!(module_deviations(src), [1, 10]);
}

#[test]
fn every_entry_has_a_command_or_says_why_not_and_every_deviation_has_an_entry() {
    let doc = read("docs/errata.md");
    let entries = entries(&doc);
    assert!(!entries.is_empty(), "docs/errata.md has no entry");
    let mut seen = BTreeSet::new();
    for e in &entries {
        assert!(
            seen.insert(e.id.clone()),
            "docs/errata.md:{}: entry {} appears twice",
            e.line,
            e.id
        );
        let marker = format!("errata: {} no-command", e.id);
        let no_command = e.body.iter().any(|(_, l)| l.contains(&marker));
        assert!(
            !jobs(e).is_empty() || no_command,
            "docs/errata.md:{}: entry {} has neither a command nor `{marker}`",
            e.line,
            e.id
        );
    }
    // a no-command marker names its own entry
    for e in &entries {
        for (n, l) in &e.body {
            if let Some(pos) = l.find("errata: ") {
                let w = words(&l[pos + "errata: ".len()..]);
                if w.get(1).map(String::as_str) == Some("no-command") {
                    assert_eq!(
                        w[0].trim_end_matches('`'),
                        e.id,
                        "docs/errata.md:{n}: a no-command marker for another entry"
                    );
                }
            }
        }
    }
    // numbered entries = the module's numbered deviations, one for one
    let mut numbered: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    for e in &entries {
        if let Some((module, n)) = e.id.rsplit_once('-')
            && let Ok(n) = n.parse::<u32>()
        {
            if module.contains('-') {
                continue; // e.g. lkcs-open-1: not a deviation of the module's list
            }
            let known = MODULES.iter().find(|(m, _)| *m == module);
            let (m, _) = known.unwrap_or_else(|| {
                panic!(
                    "docs/errata.md:{}: no module `{module}` for {}",
                    e.line, e.id
                )
            });
            numbered.entry(m).or_default().push(n);
        }
    }
    for (module, path) in MODULES {
        let mut expected = module_deviations(&read(path));
        let listed = expected.clone();
        expected.sort_unstable();
        assert_eq!(
            listed,
            (1..=listed.len() as u32).collect::<Vec<_>>(),
            "{path}: the Deviations list is not numbered 1..n"
        );
        let mut got = numbered.remove(module).unwrap_or_default();
        got.sort_unstable();
        assert_eq!(
            got, expected,
            "docs/errata.md has entries {module}-{got:?}, {path} lists deviations {expected:?}"
        );
    }
}

#[test]
fn every_marked_command_exits_as_the_errata_says() {
    let doc = read("docs/errata.md");
    let jobs: Vec<Job> = entries(&doc).iter().flat_map(jobs).collect();
    assert!(!jobs.is_empty(), "docs/errata.md marks no command");
    let base = std::env::temp_dir().join(format!("lkcs-errata-{}", std::process::id()));
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    let times = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(job) = jobs.get(i) else { break };
                let dir = base.join(i.to_string());
                let (took, problem) = run(job, &dir);
                times.lock().unwrap().push((took, job.line, job.id.clone()));
                if let Some(p) = problem {
                    failures.lock().unwrap().push(p);
                }
            });
        }
    });
    let _ = std::fs::remove_dir_all(&base);
    let mut times = times.into_inner().unwrap();
    times.sort();
    let total: Duration = times.iter().map(|t| t.0).sum();
    eprintln!(
        "{} commands, {:.1} s of command time; slowest:",
        jobs.len(),
        total.as_secs_f64()
    );
    for (took, line, id) in times.iter().rev().take(5) {
        eprintln!(
            "  {:.2} s  {id} (docs/errata.md:{line})",
            took.as_secs_f64()
        );
    }
    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "\n{}", failures.join("\n\n"));
}

/// Runs one command in its own directory (holding the files it reads); a description of
/// what went wrong, if anything.
fn run(job: &Job, dir: &Path) -> (Duration, Option<String>) {
    std::fs::create_dir_all(dir).expect("a temporary directory");
    for (name, content) in &job.files {
        std::fs::write(dir.join(name), content).expect("write a file of the errata");
    }
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_lkcs"))
        .args(&job.args)
        .current_dir(dir)
        .output()
        .expect("the lkcs binary runs");
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let mut wrong = Vec::new();
    if out.status.code() != Some(job.expect_exit) {
        wrong.push(format!(
            "exit {:?}, the errata says {}",
            out.status.code(),
            job.expect_exit
        ));
    }
    for text in &job.prints {
        if !stdout.contains(text.as_str()) && !stderr.contains(text.as_str()) {
            wrong.push(format!("the output lacks `{text}`"));
        }
    }
    let problem = (!wrong.is_empty()).then(|| {
        let head = |s: &str| s.lines().take(12).collect::<Vec<_>>().join("\n");
        format!(
            "docs/errata.md:{} ({}): lkcs {}\n  {}\n--- stdout\n{}\n--- stderr\n{}",
            job.line,
            job.id,
            job.args.join(" "),
            wrong.join("; "),
            head(&stdout),
            head(&stderr)
        )
    });
    (took, problem)
}
