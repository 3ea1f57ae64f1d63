use super::*;
use openraft::testing::{StoreBuilder, Suite};

struct Builder;

impl StoreBuilder<ViewRaft, LogStore, Machine, ()> for Builder {
    async fn build(&self) -> Result<((), LogStore, Machine), StorageError<NodeId>> {
        let view = View::initial(
            [(ProcessId(0), 1)].into(),
            [(ProcessId(0), CsState::OutCs)].into(),
        )
        .map_err(|e| StorageIOError::read_state_machine(&e))?;
        let state = ViewState::new(view).map_err(|e| StorageIOError::read_state_machine(&e))?;
        Ok(((), LogStore::default(), Machine::new(state)))
    }
}

/// openraft's own conformance suite for log stores and state machines.
#[test]
fn the_stores_pass_openraft_suite() {
    if let Err(e) = Suite::test_all(Builder) {
        panic!("openraft's store suite: {e}");
    }
}

/// A scratch folder, removed when dropped.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("lkcs-view-store-{}-{name}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Scratch(dir)
    }

    fn storage(&self) -> Storage {
        Storage::Dir(self.0.clone())
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn initial_state() -> ViewState {
    let view = View::initial(
        [(ProcessId(0), 1)].into(),
        [(ProcessId(0), CsState::OutCs)].into(),
    )
    .expect("a view");
    ViewState::new(view).expect("a state")
}

struct DiskBuilder;

impl StoreBuilder<ViewRaft, LogStore, Machine, Scratch> for DiskBuilder {
    async fn build(&self) -> Result<(Scratch, LogStore, Machine), StorageError<NodeId>> {
        let scratch = Scratch::new("suite");
        let storage = scratch.storage();
        let log = LogStore::open(&storage).map_err(|e| StorageIOError::write_logs(&e))?;
        let machine =
            Machine::open(initial_state(), &storage).map_err(|e| StorageIOError::write_logs(&e))?;
        Ok((scratch, log, machine))
    }
}

/// The stores written through to a folder pass openraft's suite too.
#[test]
fn the_stores_on_disk_pass_openraft_suite() {
    if let Err(e) = Suite::test_all(DiskBuilder) {
        panic!("openraft's store suite, on disk: {e}");
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

fn entry(term: u64, index: u64) -> Entry<ViewRaft> {
    Entry {
        log_id: LogId::new(openraft::CommittedLeaderId::new(term, 0), index),
        payload: EntryPayload::Blank,
    }
}

/// What a store on disk was told is what it holds when a new process opens its folder:
/// the vote, the entries appended (and not truncated or purged), the committed log id and
/// the last snapshot, with the state machine back at the snapshot's state. In memory, a
/// new store holds nothing.
#[test]
fn a_store_on_disk_is_what_a_restarted_process_opens() {
    let scratch = Scratch::new("reopen");
    let storage = scratch.storage();
    let vote = Vote::new_committed(3, 0);
    let snapshot_state = runtime().block_on(async {
        let mut log = LogStore::open(&storage).expect("opens");
        assert!(!log.holds_state().await, "a new folder holds no Raft state");
        log.save_vote(&vote).await.expect("vote");
        log.append_entries((1..=6).map(|i| entry(3, i)))
            .await
            .expect("append");
        log.truncate(LogId::new(openraft::CommittedLeaderId::new(3, 0), 6))
            .await
            .expect("truncate");
        log.purge(LogId::new(openraft::CommittedLeaderId::new(3, 0), 2))
            .await
            .expect("purge");
        log.save_committed(Some(LogId::new(openraft::CommittedLeaderId::new(3, 0), 4)))
            .await
            .expect("committed");
        let mut machine = Machine::open(initial_state(), &storage).expect("opens");
        let applied = machine
            .apply((1..=4).map(|i| entry(3, i)))
            .await
            .expect("apply");
        assert_eq!(applied.len(), 4);
        machine.build_snapshot().await.expect("snapshot");
        machine.inner.lock().await.state.clone()
    });
    runtime().block_on(async {
        let mut log = LogStore::open(&storage).expect("reopens");
        assert!(log.holds_state().await, "the folder holds the node's state");
        assert_eq!(log.read_vote().await.expect("vote"), Some(vote));
        assert_eq!(
            log.read_committed()
                .await
                .expect("committed")
                .map(|c| c.index),
            Some(4)
        );
        let state = log.get_log_state().await.expect("log state");
        assert_eq!(state.last_purged_log_id.map(|l| l.index), Some(2));
        assert_eq!(
            state.last_log_id.map(|l| l.index),
            Some(5),
            "6 was truncated"
        );
        let indices: Vec<u64> = log
            .try_get_log_entries(0..10)
            .await
            .expect("entries")
            .iter()
            .map(|e| e.log_id.index)
            .collect();
        assert_eq!(indices, vec![3, 4, 5], "1 and 2 purged, 6 truncated");
        let mut machine = Machine::open(initial_state(), &storage).expect("reopens");
        let (applied, _) = machine.applied_state().await.expect("applied");
        assert_eq!(
            applied.map(|l| l.index),
            Some(4),
            "the snapshot's last applied entry"
        );
        assert!(machine
            .get_current_snapshot()
            .await
            .expect("snapshot")
            .is_some());
        assert_eq!(machine.inner.lock().await.state, snapshot_state);
    });
    runtime().block_on(async {
        let log = LogStore::open(&Storage::Memory).expect("in memory");
        assert!(!log.holds_state().await, "a store in memory starts empty");
    });
}

/// A folder cleared ([`store::wipe`]) for a new Raft node takes no write from a store opened
/// before (a task of a group shut down, which openraft does not wait for): the write fails
/// naming the folder, and leaves no file; a store opened after the wipe writes as usual.
/// A mark that is not this format's header alone is refused naming the file.
#[test]
fn a_cleared_folder_takes_no_write_from_a_store_opened_before() {
    let scratch = Scratch::new("cleared");
    let storage = scratch.storage();
    runtime().block_on(async {
        let old = LogStore::open(&storage).expect("opens");
        old.append_entries([entry(1, 1)]).await.expect("written");
        store::wipe(&storage).expect("cleared");
        assert!(
            !scratch.0.join(store::LOG_FILE).exists(),
            "the log was cleared"
        );
        let e = old
            .append_entries([entry(1, 2)])
            .await
            .expect_err("a stale write");
        assert!(e.to_string().contains("was cleared since"), "{e}");
        assert!(
            !scratch.0.join(store::LOG_FILE).exists(),
            "a stale write landed in the cleared folder"
        );
        let new = LogStore::open(&storage).expect("opens again");
        assert!(!new.holds_state().await, "the cleared folder held state");
        new.append_entries([entry(1, 1)]).await.expect("written");
        assert!(scratch.0.join(store::LOG_FILE).exists());
    });
    assert!(!store::established(&storage).expect("no mark"));
    std::fs::write(scratch.0.join(store::ESTABLISHED_FILE), b"").expect("written");
    let e = store::established(&storage).expect_err("an empty mark");
    assert!(
        e.to_string().contains(
            &scratch
                .0
                .join(store::ESTABLISHED_FILE)
                .display()
                .to_string()
        ),
        "the error names the file: {e}"
    );
}

/// A log file that does not decode is a typed error naming the file, not a node that
/// starts empty (which could vote twice in a term).
#[test]
fn a_corrupt_log_file_is_refused_naming_it() {
    let scratch = Scratch::new("corrupt");
    std::fs::create_dir_all(&scratch.0).expect("folder");
    std::fs::write(scratch.0.join(store::LOG_FILE), [0xff; 7]).expect("written");
    let e = LogStore::open(&scratch.storage()).expect_err("a corrupt log");
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
    assert!(
        e.to_string()
            .contains(&scratch.0.join(store::LOG_FILE).display().to_string()),
        "the error names the file: {e}"
    );
}

#[test]
fn the_default_timers_make_a_valid_raft_config() {
    let config = ViewConfig::default().raft().expect("valid");
    assert_eq!(config.heartbeat_interval, 100);
    assert_eq!(
        (config.election_timeout_min, config.election_timeout_max),
        (500, 1000)
    );
    let bad = ViewConfig {
        election_min: Duration::from_millis(50),
        ..ViewConfig::default()
    };
    assert!(matches!(bad.raft(), Err(ViewError::Config(_))));
}

#[test]
fn node_ids_out_of_range_are_typed_errors() {
    assert_eq!(member(7), Ok(ProcessId(7)));
    assert_eq!(member(u64::MAX), Err(ViewError::BadNodeId(u64::MAX)));
}

/// Every file on disk starts with the header and this build's format version; a file of
/// another version is refused naming both versions and the file; a file with no header (as
/// builds before the header wrote them) still opens.
#[test]
fn the_files_on_disk_carry_their_format_version() {
    let scratch = Scratch::new("version");
    let storage = scratch.storage();
    let vote = Vote::new_committed(2, 1);
    runtime().block_on(async {
        let mut log = LogStore::open(&storage).expect("opens");
        log.save_vote(&vote).await.expect("vote");
        let mut machine = Machine::open(initial_state(), &storage).expect("opens");
        machine.build_snapshot().await.expect("snapshot");
    });
    let log_path = scratch.0.join(store::LOG_FILE);
    for name in [store::LOG_FILE, store::SNAPSHOT_FILE] {
        let bytes = std::fs::read(scratch.0.join(name)).expect("written");
        assert_eq!(&bytes[..8], store::MAGIC, "{name} starts with the header");
        assert_eq!(bytes[8], store::FORMAT_VERSION, "{name}'s version");
    }
    // the same body with no header: read as version 0
    let bytes = std::fs::read(&log_path).expect("written");
    std::fs::write(&log_path, &bytes[9..]).expect("rewritten");
    runtime().block_on(async {
        let mut log = LogStore::open(&storage).expect("a file with no header opens");
        assert_eq!(log.read_vote().await.expect("vote"), Some(vote));
    });
    // a newer version: refused, naming the file and both versions
    let mut newer = bytes.clone();
    newer[8] = store::FORMAT_VERSION + 1;
    std::fs::write(&log_path, &newer).expect("rewritten");
    let e = LogStore::open(&storage).expect_err("another version");
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
    assert_eq!(
        e.to_string(),
        format!(
            "{} is in format version {}; this build reads version {} and files with no \
             header (was it written by another lkcs?)",
            log_path.display(),
            store::FORMAT_VERSION + 1,
            store::FORMAT_VERSION
        )
    );
    // a header cut before its version byte
    std::fs::write(&log_path, store::MAGIC).expect("rewritten");
    let e = LogStore::open(&storage).expect_err("a cut header");
    assert!(
        e.to_string().contains("the header ends before its version"),
        "{e}"
    );
}

/// The folder's files are private (0600) and written only through temporary files created
/// afresh: a path that exists where the next write's temporary file would go (here a
/// symbolic link to another file) is skipped, not written through, and the temporary files
/// a killed process left are removed when the store opens (another name that merely starts
/// the same way is not the store's, and is kept).
#[cfg(unix)]
#[test]
fn writes_never_reuse_a_path_and_leave_private_files() {
    use std::os::unix::fs::PermissionsExt;
    let scratch = Scratch::new("tmp");
    std::fs::create_dir_all(&scratch.0).expect("folder");
    let at = |name: &str| scratch.0.join(name);
    for leftover in ["raft-log.tmp", "raft-log.7.tmp", "raft-snapshot.3.tmp"] {
        std::fs::write(at(leftover), b"a killed write").expect("written");
    }
    std::fs::write(at("raft-log.notes.tmp"), b"not the store's").expect("written");
    let storage = scratch.storage();
    let vote = Vote::new_committed(5, 0);
    runtime().block_on(async {
        let mut log = LogStore::open(&storage).expect("opens");
        let _machine = Machine::open(initial_state(), &storage).expect("opens");
        for leftover in ["raft-log.tmp", "raft-log.7.tmp", "raft-snapshot.3.tmp"] {
            assert!(!at(leftover).exists(), "{leftover} is removed at open");
        }
        assert!(
            at("raft-log.notes.tmp").exists(),
            "a file not the store's is kept"
        );
        let target = at("elsewhere");
        std::fs::write(&target, b"untouched").expect("written");
        let next = store::TMP_WRITES.load(std::sync::atomic::Ordering::Relaxed);
        for n in next..next + 8 {
            std::os::unix::fs::symlink(&target, at(&format!("{}.{n}.tmp", store::LOG_FILE)))
                .expect("a link");
        }
        log.save_vote(&vote)
            .await
            .expect("the write skips the links");
    });
    assert_eq!(
        std::fs::read(at("elsewhere")).expect("read"),
        b"untouched",
        "nothing is written through a link"
    );
    let meta = std::fs::symlink_metadata(at(store::LOG_FILE)).expect("the log file");
    assert!(
        meta.file_type().is_file(),
        "the log is a file of its own, not a link"
    );
    assert_eq!(
        meta.permissions().mode() & 0o777,
        0o600,
        "the log is private"
    );
    runtime().block_on(async {
        let mut log = LogStore::open(&storage).expect("reopens");
        assert_eq!(log.read_vote().await.expect("vote"), Some(vote));
    });
}
