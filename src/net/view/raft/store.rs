//! The group's storage: the Raft log and the state machine over [`ViewState`] (openraft's
//! memstore pattern; the snapshot is the state encoded with postcard), in memory or written
//! through to a folder ([`Storage::Dir`]).
//!
//! # On disk
//! A folder holds three files, each replaced whole and atomically (written to a new
//! `NAME.N.tmp` of mode 0600, synced, renamed over `NAME`, the folder synced), so a crash
//! leaves the old file or the new one, never a torn one; the temporary files a crash leaves
//! are removed when the store opens. Each starts with `lkcsview` and its format's version byte
//! ([`FORMAT_VERSION`]), then its postcard body; a file of another version is refused with
//! both versions named:
//! - `raft-log`: the vote, the committed log id, the last purged log id and the log's entries
//!   (postcard), rewritten on every change, and on disk before the change returns (an append
//!   is acknowledged to Raft only then). The view log changes only at view changes and
//!   elections, a few entries at a time, and a snapshot keeps it short
//!   ([`ViewConfig::raft`](super::ViewConfig::raft)), so a rewrite is a few kilobytes.
//! - `raft-snapshot`: the last snapshot built or installed (its metadata and the state), read
//!   back as the state machine's state when the group opens; openraft then applies the
//!   committed entries after it again.
//! - `raft-node`: present once the others have counted this folder's Raft node as their
//!   member's ([`establish`]: a majority answered its process's lease beats), written
//!   atomically as the others are. It holds the header alone.
//!
//! So a member's process that restarts on its folder is the same Raft node as before: its
//! vote and everything it acknowledged are there (Raft's persistence rule), and its
//! state machine is back at its last committed view. A process opening a folder without
//! `raft-node` (emptied, or written by a process that the others never counted, which may
//! have been a new process that initialized an empty folder) does not claim to be the
//! member's Raft node: if the others met an earlier process of its member, it clears the
//! folder ([`wipe`]) and joins as a new Raft node, a learner, on it.

use super::*;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Where a view group keeps its Raft state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Storage {
    /// In memory: a process that restarts has lost its log and its votes, so it joins again
    /// as a learner with an empty log ([`ViewGroup::join`]) and takes no part in Raft before.
    #[default]
    Memory,
    /// Written through to this folder (created, mode 0700, if missing): a process that
    /// restarts on it resumes its Raft node, vote and log included, once the others have
    /// counted that node as the member's (see the module doc).
    Dir(PathBuf),
}

/// The log store's file in a [`Storage::Dir`] folder.
pub(crate) const LOG_FILE: &str = "raft-log";
/// The snapshot's file in a [`Storage::Dir`] folder.
pub(crate) const SNAPSHOT_FILE: &str = "raft-snapshot";
/// The file that says the folder's Raft node is the member's ([`establish`]).
pub(crate) const ESTABLISHED_FILE: &str = "raft-node";

/// The first bytes of each file this store writes, before its format's version byte: a file
/// from another program, or in a format this build does not read, is refused naming its
/// cause instead of decoding as garbage.
pub(crate) const MAGIC: &[u8; 8] = b"lkcsview";
/// The format of the files this build writes (the byte after [`MAGIC`]). Version 0 is the
/// body alone, with no header, as builds before the header wrote it: the same postcard
/// body, read as is (its first byte, an `Option`'s tag, is never `l`).
pub(crate) const FORMAT_VERSION: u8 = 1;

/// `body` behind the header.
fn framed(body: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(MAGIC.len() + 1 + body.len());
    bytes.extend_from_slice(MAGIC);
    bytes.push(FORMAT_VERSION);
    bytes.extend_from_slice(body);
    bytes
}

/// The body of `bytes`, read from `path`: behind a header of this format, or with no header
/// (version 0). A header of another version is refused, naming both versions.
fn unframed<'a>(path: &Path, bytes: &'a [u8]) -> std::io::Result<&'a [u8]> {
    let Some(rest) = bytes.strip_prefix(MAGIC.as_slice()) else {
        return Ok(bytes);
    };
    match rest.split_first() {
        Some((&FORMAT_VERSION, body)) => Ok(body),
        Some((&v, _)) => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "{} is in format version {v}; this build reads version {FORMAT_VERSION} \
                 and files with no header (was it written by another lkcs?)",
                path.display()
            ),
        )),
        None => Err(corrupt(path, "the header ends before its version")),
    }
}

/// A folder the store writes to, as of the generation it was opened in.
#[derive(Debug)]
pub(crate) struct Folder {
    path: PathBuf,
    generation: u64,
}

impl Folder {
    /// `dir` (created if missing, mode 0700), in its current generation.
    fn open(dir: &Path) -> std::io::Result<Arc<Folder>> {
        make_dir(dir)?;
        Ok(Arc::new(Folder {
            path: dir.to_path_buf(),
            generation: generation(dir),
        }))
    }
}

/// Each folder's generation: [`wipe`] moves it on, and a write begun by a store opened in
/// an earlier generation (a task of a group shut down before the wipe, which openraft does
/// not wait for) is dropped instead of landing in the cleared folder.
static GENERATIONS: std::sync::Mutex<BTreeMap<PathBuf, u64>> =
    std::sync::Mutex::new(BTreeMap::new());

fn generations() -> std::sync::MutexGuard<'static, BTreeMap<PathBuf, u64>> {
    GENERATIONS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn generation(dir: &Path) -> u64 {
    generations().get(dir).copied().unwrap_or(0)
}

/// This process's writes so far: the N of the next temporary file.
pub(super) static TMP_WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Replaces `dir/name` with `bytes`, atomically and durably. The bytes go to a temporary
/// file of their own, `NAME.N.tmp` (N counts this process's writes), created afresh with
/// mode 0600: no two writes share a temporary file, even one whose caller gave up waiting
/// while its blocking write went on, and a path that already exists, a symbolic link
/// included, is never written through (it is skipped for the next N). The file replaced
/// keeps that mode: the folder's files are private to the member's user. A write of an
/// earlier generation of the folder than its current one is refused, and leaves nothing.
fn write_atomic(folder: &Folder, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let dir = folder.path.as_path();
    let mut attempts = 0;
    let (tmp, mut file) = loop {
        let n = TMP_WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = dir.join(format!("{name}.{n}.tmp"));
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        match options.open(&tmp) {
            Ok(file) => break (tmp, file),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempts < 16 => {
                attempts += 1;
            }
            Err(e) => return Err(e),
        }
    };
    let written = file.write_all(bytes).and_then(|()| file.sync_all());
    drop(file);
    let renamed = written.and_then(|()| {
        // the generation checked and the file renamed under one lock, which `wipe` takes
        let generations = generations();
        match generations.get(dir).copied().unwrap_or(0) == folder.generation {
            true => std::fs::rename(&tmp, dir.join(name)),
            false => Err(std::io::Error::other(format!(
                "{} was cleared since this store opened it: {name} not written",
                dir.display()
            ))),
        }
    });
    if let Err(e) = renamed {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::File::open(dir)?.sync_all()
}

/// Removes the temporary files of `dir/name` that a process killed mid-write left
/// (`NAME.N.tmp`, and `NAME.tmp` from builds that used one name for every write). Called
/// when the store opens, before this process writes: the folder's lock keeps any other
/// process out.
fn remove_stale_tmp(dir: &Path, name: &str) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let file_name = entry.file_name();
        let Some(rest) = file_name.to_str().and_then(|f| f.strip_prefix(name)) else {
            continue;
        };
        let stale = rest == ".tmp"
            || rest
                .strip_prefix('.')
                .and_then(|r| r.strip_suffix(".tmp"))
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if stale {
            std::fs::remove_file(entry.path())?;
        }
    }
    Ok(())
}

/// [`write_atomic`] on tokio's blocking pool: the two fsyncs take milliseconds, and the
/// node's runtime has one thread, which also serves the member's links and heartbeats.
async fn write_off_thread(
    folder: &Arc<Folder>,
    name: &'static str,
    bytes: Vec<u8>,
) -> std::io::Result<()> {
    let folder = folder.clone();
    tokio::task::spawn_blocking(move || write_atomic(&folder, name, &bytes))
        .await
        .map_err(|e| std::io::Error::other(format!("the write of {name} did not finish: {e}")))?
}

/// Reads `dir/name`, `None` if it does not exist.
fn read_file(dir: &Path, name: &str) -> std::io::Result<Option<Vec<u8>>> {
    match std::fs::read(dir.join(name)) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Creates `dir` (and its parents) if missing; a folder created here is private (0700).
fn make_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

/// Whether `storage` holds a Raft node that the others counted as its member's: a folder
/// whose [`ESTABLISHED_FILE`] is this format's header, exactly. In memory, never.
pub(crate) fn established(storage: &Storage) -> std::io::Result<bool> {
    let Storage::Dir(dir) = storage else {
        return Ok(false);
    };
    match read_file(dir, ESTABLISHED_FILE)? {
        None => Ok(false),
        Some(bytes) if bytes == framed(&[]) => Ok(true),
        Some(_) => Err(corrupt(
            &dir.join(ESTABLISHED_FILE),
            "it is not this format's mark (the header alone)",
        )),
    }
}

/// Marks the Raft node of `folder` (a group's, [`LogStore::folder`]) as its member's
/// ([`ESTABLISHED_FILE`], written atomically and synced): a process that restarts on the
/// folder resumes it. Nothing in memory (`None`).
pub(crate) async fn establish(folder: Option<&Arc<Folder>>) -> std::io::Result<()> {
    let Some(folder) = folder else {
        return Ok(());
    };
    write_off_thread(folder, ESTABLISHED_FILE, framed(&[])).await
}

/// Clears `storage` of any Raft node: its mark, its log and its snapshot (the mark first,
/// so a crash midway leaves a folder that is not resumed), then syncs the folder. The
/// folder's generation moves on first, so a write still under way from a store opened
/// before is dropped. Other files (the node's lock) stay. Nothing in memory.
pub(crate) fn wipe(storage: &Storage) -> std::io::Result<()> {
    let Storage::Dir(dir) = storage else {
        return Ok(());
    };
    let mut generations = generations();
    *generations.entry(dir.clone()).or_insert(0) += 1;
    for name in [ESTABLISHED_FILE, LOG_FILE, SNAPSHOT_FILE] {
        match std::fs::remove_file(dir.join(name)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    drop(generations);
    std::fs::File::open(dir.as_path())?.sync_all()
}

fn corrupt(path: &Path, e: impl fmt::Display) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("{} does not decode: {e}", path.display()),
    )
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct LogInner {
    last_purged: Option<LogId<NodeId>>,
    log: BTreeMap<u64, Entry<ViewRaft>>,
    committed: Option<LogId<NodeId>>,
    vote: Option<Vote<NodeId>>,
}

impl LogInner {
    /// Whether this node ever took part in Raft (voted, or holds or held entries).
    fn is_empty(&self) -> bool {
        self.vote.is_none() && self.log.is_empty() && self.last_purged.is_none()
    }
}

/// The Raft log of a view group, in memory and, with [`Storage::Dir`], on disk.
#[derive(Clone, Debug, Default)]
pub(crate) struct LogStore {
    inner: Arc<Mutex<LogInner>>,
    dir: Option<Arc<Folder>>,
}

impl LogStore {
    /// The log of `storage`: empty in memory, or what the folder holds (empty if nothing).
    pub(crate) fn open(storage: &Storage) -> std::io::Result<LogStore> {
        let Storage::Dir(dir) = storage else {
            return Ok(LogStore::default());
        };
        let folder = Folder::open(dir)?;
        remove_stale_tmp(dir, LOG_FILE)?;
        let inner = match read_file(dir, LOG_FILE)? {
            Some(bytes) => {
                let path = dir.join(LOG_FILE);
                postcard::from_bytes(unframed(&path, &bytes)?).map_err(|e| corrupt(&path, e))?
            }
            None => LogInner::default(),
        };
        Ok(LogStore {
            inner: Arc::new(Mutex::new(inner)),
            dir: Some(folder),
        })
    }

    /// The folder it writes to, as of the generation it opened (`None` in memory).
    pub(crate) fn folder(&self) -> Option<Arc<Folder>> {
        self.dir.clone()
    }

    /// Whether the store holds a Raft node's state (a vote or entries): a process opening
    /// a folder that does is a restart of the member's node.
    pub(crate) async fn holds_state(&self) -> bool {
        !self.inner.lock().await.is_empty()
    }

    /// Adds `entries` to the log, and writes it through.
    pub(crate) async fn append_entries(
        &self,
        entries: impl IntoIterator<Item = Entry<ViewRaft>>,
    ) -> std::io::Result<()> {
        let mut inner = self.inner.lock().await;
        for entry in entries {
            inner.log.insert(entry.get_log_id().index, entry);
        }
        self.persist(&inner).await
    }

    /// Writes the log through to the folder, if it has one. The caller holds the log's
    /// lock across the write, so writes land in the order the log changed.
    async fn persist(&self, inner: &LogInner) -> std::io::Result<()> {
        let Some(dir) = &self.dir else {
            return Ok(());
        };
        let bytes = postcard::to_allocvec(inner)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()))?;
        write_off_thread(dir, LOG_FILE, framed(&bytes)).await
    }
}

impl RaftLogReader<ViewRaft> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + fmt::Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<ViewRaft>>, StorageError<NodeId>> {
        let inner = self.inner.lock().await;
        Ok(inner.log.range(range).map(|(_, e)| e.clone()).collect())
    }
}

impl RaftLogStorage<ViewRaft> for LogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<ViewRaft>, StorageError<NodeId>> {
        let inner = self.inner.lock().await;
        let last = inner
            .log
            .values()
            .next_back()
            .map(|e| *e.get_log_id())
            .or(inner.last_purged);
        Ok(LogState {
            last_purged_log_id: inner.last_purged,
            last_log_id: last,
        })
    }

    async fn save_committed(
        &mut self,
        committed: Option<LogId<NodeId>>,
    ) -> Result<(), StorageError<NodeId>> {
        let mut inner = self.inner.lock().await;
        inner.committed = committed;
        self.persist(&inner)
            .await
            .map_err(|e| StorageIOError::write_logs(&e).into())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<NodeId>>, StorageError<NodeId>> {
        Ok(self.inner.lock().await.committed)
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError<NodeId>> {
        let mut inner = self.inner.lock().await;
        inner.vote = Some(*vote);
        self.persist(&inner)
            .await
            .map_err(|e| StorageIOError::write_vote(&e).into())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError<NodeId>> {
        Ok(self.inner.lock().await.vote)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<ViewRaft>,
    ) -> Result<(), StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<ViewRaft>> + Send,
        I::IntoIter: Send,
    {
        // acknowledged to Raft only once on disk
        match self.append_entries(entries).await {
            Ok(()) => {
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                let error = StorageIOError::write_logs(&e).into();
                callback.log_io_completed(Err(e));
                Err(error)
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        let mut inner = self.inner.lock().await;
        let _ = inner.log.split_off(&log_id.index);
        self.persist(&inner)
            .await
            .map_err(|e| StorageIOError::write_logs(&e).into())
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        let mut inner = self.inner.lock().await;
        if inner.last_purged.as_ref() < Some(&log_id) {
            inner.last_purged = Some(log_id);
        }
        let kept = inner.log.split_off(&(log_id.index + 1));
        inner.log = kept;
        self.persist(&inner)
            .await
            .map_err(|e| StorageIOError::write_logs(&e).into())
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }
}

// ---- the state machine ----

/// A snapshot's bytes could not be made or read.
#[derive(Debug)]
struct SnapshotError(String);

impl fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "view state snapshot: {}", self.0)
    }
}

impl std::error::Error for SnapshotError {}

#[derive(Debug)]
pub(super) struct MachineInner {
    last_applied: Option<LogId<NodeId>>,
    membership: StoredMembership<NodeId, EmptyNode>,
    pub(super) state: ViewState,
    snapshot: Option<(SnapshotMeta<NodeId, EmptyNode>, Vec<u8>)>,
    snapshots: u64,
}

/// The view state machine under Raft: applies committed [`Command`]s to a [`ViewState`] and
/// publishes the state ([`watch`]) and each outcome ([`broadcast`]).
#[derive(Clone, Debug)]
pub(crate) struct Machine {
    pub(super) inner: Arc<Mutex<MachineInner>>,
    pub(super) state: Arc<watch::Sender<ViewState>>,
    pub(super) events: broadcast::Sender<Event>,
    /// The folder its snapshots are written to ([`Storage::Dir`]).
    dir: Option<Arc<Folder>>,
}

/// A snapshot as its file holds it.
#[derive(Serialize, Deserialize)]
struct SnapshotFile {
    meta: SnapshotMeta<NodeId, EmptyNode>,
    data: Vec<u8>,
}

/// How many applied events a slow [`ViewGroup::subscribe`] receiver may lag behind.
pub(crate) const EVENT_CAPACITY: usize = 1024;

impl Machine {
    /// A state machine at `state`, with nothing applied.
    pub(crate) fn new(state: ViewState) -> Machine {
        Machine::at(
            MachineInner {
                last_applied: None,
                membership: StoredMembership::default(),
                state,
                snapshot: None,
                snapshots: 0,
            },
            None,
        )
    }

    fn at(inner: MachineInner, dir: Option<Arc<Folder>>) -> Machine {
        let (events, _) = broadcast::channel(EVENT_CAPACITY);
        Machine {
            state: Arc::new(watch::channel(inner.state.clone()).0),
            inner: Arc::new(Mutex::new(inner)),
            events,
            dir,
        }
    }

    /// The state machine of `storage`: at `initial` with nothing applied, or at the
    /// snapshot its folder holds (openraft applies the committed entries after it again).
    pub(crate) fn open(initial: ViewState, storage: &Storage) -> std::io::Result<Machine> {
        let Storage::Dir(dir) = storage else {
            return Ok(Machine::new(initial));
        };
        let folder = Folder::open(dir)?;
        remove_stale_tmp(dir, SNAPSHOT_FILE)?;
        let path = dir.join(SNAPSHOT_FILE);
        let inner = match read_file(dir, SNAPSHOT_FILE)? {
            None => MachineInner {
                last_applied: None,
                membership: StoredMembership::default(),
                state: initial,
                snapshot: None,
                snapshots: 0,
            },
            Some(bytes) => {
                let file: SnapshotFile = postcard::from_bytes(unframed(&path, &bytes)?)
                    .map_err(|e| corrupt(&path, e))?;
                let state: ViewState =
                    postcard::from_bytes(&file.data).map_err(|e| corrupt(&path, e))?;
                MachineInner {
                    last_applied: file.meta.last_log_id,
                    membership: file.meta.last_membership.clone(),
                    state,
                    snapshot: Some((file.meta, file.data)),
                    snapshots: 0,
                }
            }
        };
        Ok(Machine::at(inner, Some(folder)))
    }

    /// Writes a snapshot through to the folder, if it has one.
    async fn persist(
        &self,
        meta: &SnapshotMeta<NodeId, EmptyNode>,
        data: &[u8],
    ) -> std::io::Result<()> {
        let Some(dir) = &self.dir else {
            return Ok(());
        };
        let file = SnapshotFile {
            meta: meta.clone(),
            data: data.to_vec(),
        };
        let bytes = postcard::to_allocvec(&file)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()))?;
        write_off_thread(dir, SNAPSHOT_FILE, framed(&bytes)).await
    }
}

impl RaftSnapshotBuilder<ViewRaft> for Machine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<ViewRaft>, StorageError<NodeId>> {
        let mut inner = self.inner.lock().await;
        let data = postcard::to_allocvec(&inner.state)
            .map_err(|e| StorageIOError::read_state_machine(&SnapshotError(e.to_string())))?;
        inner.snapshots += 1;
        let snapshot_id = match inner.last_applied {
            Some(last) => format!("{}-{}-{}", last.leader_id, last.index, inner.snapshots),
            None => format!("--{}", inner.snapshots),
        };
        let meta = SnapshotMeta {
            last_log_id: inner.last_applied,
            last_membership: inner.membership.clone(),
            snapshot_id,
        };
        self.persist(&meta, &data)
            .await
            .map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), &e))?;
        inner.snapshot = Some((meta.clone(), data.clone()));
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl RaftStateMachine<ViewRaft> for Machine {
    type SnapshotBuilder = Self;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<NodeId>>, StoredMembership<NodeId, EmptyNode>), StorageError<NodeId>>
    {
        let inner = self.inner.lock().await;
        Ok((inner.last_applied, inner.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Option<Applied>>, StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<ViewRaft>> + Send,
        I::IntoIter: Send,
    {
        let mut inner = self.inner.lock().await;
        let mut out = Vec::new();
        let mut changed = false;
        for entry in entries {
            inner.last_applied = Some(entry.log_id);
            match entry.payload {
                EntryPayload::Blank => out.push(None),
                EntryPayload::Normal(command) => {
                    let applied = inner.state.apply(&command);
                    tracing::debug!(index = entry.log_id.index, ?command, ?applied, "view log");
                    if let Applied::Installed(view) = &applied {
                        tracing::info!(
                            view = view.number,
                            members = ?view.members.keys().collect::<Vec<_>>(),
                            "view installed"
                        );
                    }
                    // no receiver is not an error: nobody subscribed
                    let _ = self.events.send(Event {
                        index: entry.log_id.index,
                        command,
                        applied: applied.clone(),
                    });
                    changed = true;
                    out.push(Some(applied));
                }
                EntryPayload::Membership(m) => {
                    inner.membership = StoredMembership::new(Some(entry.log_id), m);
                    out.push(None);
                }
            }
        }
        if changed {
            self.state.send_replace(inner.state.clone());
        }
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<Cursor<Vec<u8>>>, StorageError<NodeId>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, EmptyNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<NodeId>> {
        let data = snapshot.into_inner();
        let state: ViewState = postcard::from_bytes(&data).map_err(|e| {
            StorageIOError::read_snapshot(Some(meta.signature()), &SnapshotError(e.to_string()))
        })?;
        // written under the lock: a snapshot built meanwhile cannot overwrite it with an
        // older one (openraft builds snapshots on a task of its own)
        let mut inner = self.inner.lock().await;
        self.persist(meta, &data)
            .await
            .map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), &e))?;
        inner.state = state.clone();
        inner.last_applied = meta.last_log_id;
        inner.membership = meta.last_membership.clone();
        inner.snapshot = Some((meta.clone(), data));
        self.state.send_replace(state);
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<ViewRaft>>, StorageError<NodeId>> {
        let inner = self.inner.lock().await;
        Ok(inner.snapshot.as_ref().map(|(meta, data)| Snapshot {
            meta: meta.clone(),
            snapshot: Box::new(Cursor::new(data.clone())),
        }))
    }
}
