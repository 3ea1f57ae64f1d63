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
