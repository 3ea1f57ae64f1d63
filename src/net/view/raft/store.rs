//! The group's storage: an in-memory Raft log and the state machine over [`ViewState`]
//! (openraft's memstore pattern; the snapshot is the state encoded with postcard).

use super::*;

#[derive(Debug, Default)]
struct LogInner {
    last_purged: Option<LogId<NodeId>>,
    log: BTreeMap<u64, Entry<ViewRaft>>,
    committed: Option<LogId<NodeId>>,
    vote: Option<Vote<NodeId>>,
}

/// The in-memory Raft log of a view group. A member that restarts has lost it, with the rest
/// of its state, and joins again as a new incarnation.
#[derive(Clone, Debug, Default)]
pub(crate) struct LogStore {
    inner: Arc<Mutex<LogInner>>,
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
        self.inner.lock().await.committed = committed;
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<NodeId>>, StorageError<NodeId>> {
        Ok(self.inner.lock().await.committed)
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError<NodeId>> {
        self.inner.lock().await.vote = Some(*vote);
        Ok(())
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
        let mut inner = self.inner.lock().await;
        for entry in entries {
            inner.log.insert(entry.get_log_id().index, entry);
        }
        callback.log_io_completed(Ok(()));
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        let mut inner = self.inner.lock().await;
        let _ = inner.log.split_off(&log_id.index);
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        let mut inner = self.inner.lock().await;
        if inner.last_purged.as_ref() < Some(&log_id) {
            inner.last_purged = Some(log_id);
        }
        let kept = inner.log.split_off(&(log_id.index + 1));
        inner.log = kept;
        Ok(())
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
struct MachineInner {
    last_applied: Option<LogId<NodeId>>,
    membership: StoredMembership<NodeId, EmptyNode>,
    state: ViewState,
    snapshot: Option<(SnapshotMeta<NodeId, EmptyNode>, Vec<u8>)>,
    snapshots: u64,
}

/// The view state machine under Raft: applies committed [`Command`]s to a [`ViewState`] and
/// publishes the state ([`watch`]) and each outcome ([`broadcast`]).
#[derive(Clone, Debug)]
pub(crate) struct Machine {
    inner: Arc<Mutex<MachineInner>>,
    pub(super) state: Arc<watch::Sender<ViewState>>,
    pub(super) events: broadcast::Sender<Event>,
}

/// How many applied events a slow [`ViewGroup::subscribe`] receiver may lag behind.
pub(crate) const EVENT_CAPACITY: usize = 1024;

impl Machine {
    /// A state machine at `state`, with nothing applied.
    pub(crate) fn new(state: ViewState) -> Machine {
        let (events, _) = broadcast::channel(EVENT_CAPACITY);
        Machine {
            inner: Arc::new(Mutex::new(MachineInner {
                last_applied: None,
                membership: StoredMembership::default(),
                state: state.clone(),
                snapshot: None,
                snapshots: 0,
            })),
            state: Arc::new(watch::channel(state).0),
            events,
        }
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
        let mut inner = self.inner.lock().await;
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
