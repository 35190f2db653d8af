use super::*;
use openraft::testing::{StoreBuilder, Suite};

/// A fresh log and state machine in a directory of their own.
struct Fresh;

impl StoreBuilder<Types, LogStore, StateMachine, tempfile::TempDir> for Fresh {
    async fn build(&self) -> SResult<(tempfile::TempDir, LogStore, StateMachine)> {
        let d = tempfile::tempdir().map_err(werr)?;
        let log = LogStore::open(d.path()).map_err(werr)?;
        let sm = StateMachine::open(d.path()).map_err(werr)?;
        Ok((d, log, sm))
    }
}

#[test]
fn the_stores_pass_openrafts_suite() {
    Suite::test_all(Fresh).unwrap();
}

fn entry(term: u64, index: u64, jobs: &[u32]) -> LogEntry {
    let es = jobs
        .iter()
        .map(|&j| Entry::NextJobId(j))
        .collect::<Vec<_>>();
    openraft::Entry {
        log_id: LogId::new(openraft::CommittedLeaderId::new(term, 0), index),
        payload: EntryPayload::Normal(Batch {
            entries: es,
            part: None,
        }),
    }
}

async fn snapshot_of(sm: &mut StateMachine) -> Snapshot<Types> {
    sm.get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .unwrap()
}

fn block<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}

/// What a crash leaves is read back: synced entries, the vote, truncations
/// and purges; a record cut short at the end is dropped (it was never
/// acknowledged), one damaged in the middle stops the start.
#[test]
fn the_log_is_read_back_after_a_crash() {
    let d = tempfile::tempdir().unwrap();
    block(async {
        let mut log = LogStore::open(d.path()).unwrap();
        {
            let mut g = log.lock();
            let recs: Vec<Rec> = (1..=5).map(|i| Rec::E(entry(1, i, &[i as u32]))).collect();
            g.write(&recs, true).unwrap();
            for i in 1..=5 {
                g.log.insert(i, entry(1, i, &[i as u32]));
            }
        }
        log.save_vote(&Vote::new(2, 1)).await.unwrap();
        log.truncate(LogId::new(openraft::CommittedLeaderId::new(1, 0), 4))
            .await
            .unwrap();
        log.purge(LogId::new(openraft::CommittedLeaderId::new(1, 0), 1))
            .await
            .unwrap();
    });
    // A torn record at the end.
    let path = d.path().join("log");
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    f.write_all(b"{\"E\":{\"log_id\"").unwrap();
    drop(f);
    let mut log = LogStore::open(d.path()).unwrap();
    let st = block(log.get_log_state()).unwrap();
    assert_eq!(st.last_purged_log_id.map(|l| l.index), Some(1));
    assert_eq!(st.last_log_id.map(|l| l.index), Some(3));
    assert_eq!(block(log.read_vote()).unwrap(), Some(Vote::new(2, 1)));
    let got = block(log.try_get_log_entries(0..10)).unwrap();
    assert_eq!(
        got.iter().map(|e| e.log_id.index).collect::<Vec<_>>(),
        [2, 3]
    );
    // The torn tail is gone from the file, so what follows is whole.
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.ends_with('\n'), "{text}");
    // Damage in the middle is an error naming the file.
    let mut bytes = std::fs::read(&path).unwrap();
    let mid = bytes.iter().position(|&b| b == b'\n').unwrap() + 3;
    bytes[mid] = b'#';
    std::fs::write(&path, bytes).unwrap();
    let e = LogStore::open(d.path()).err().expect("damaged");
    assert!(e.to_string().contains("damaged record"), "{e}");
}

/// A snapshot stands for everything applied up to it, across a restart.
#[test]
fn a_snapshot_is_read_back() {
    let d = tempfile::tempdir().unwrap();
    block(async {
        let mut sm = StateMachine::open(d.path()).unwrap();
        sm.apply([entry(1, 1, &[7]), entry(1, 2, &[9])])
            .await
            .unwrap();
        let snap = snapshot_of(&mut sm).await;
        assert_eq!(snap.meta.last_log_id.map(|l| l.index), Some(2));
    });
    let mut sm = StateMachine::open(d.path()).unwrap();
    assert_eq!(sm.saved().next_job_id, 9);
    let (applied, _) = block(sm.applied_state()).unwrap();
    assert_eq!(applied.map(|l| l.index), Some(2));
    let cur = block(sm.get_current_snapshot()).unwrap().expect("kept");
    assert_eq!(cur.meta.last_log_id.map(|l| l.index), Some(2));
}

#[test]
fn timing_follows_slurmctld_timeout() {
    let c = raft_config(Duration::from_secs(3), 0, 16 << 20).unwrap();
    assert_eq!(
        (
            c.heartbeat_interval,
            c.election_timeout_min,
            c.election_timeout_max
        ),
        (300, 750, 1500)
    );
    // Controllers further down wait longer before standing.
    let c2 = raft_config(Duration::from_secs(3), 2, 16 << 20).unwrap();
    assert!(c2.election_timeout_min > c.election_timeout_min);
}

/// A batch too large for one message goes as parts, applied only whole;
/// one left unfinished (its controller lost control) is never applied,
/// and a snapshot taken between parts carries those already in.
#[test]
fn a_split_batch_is_applied_whole_or_not_at_all() {
    let ids: Vec<Entry> = (1..=50).map(Entry::NextJobId).collect();
    let parts = split(ids.clone(), 64, 7);
    assert!(parts.len() > 2, "{}", parts.len());
    assert!(parts.iter().all(|b| b.part.is_some_and(|p| p.id == 7)));
    let small = split(ids[..2].to_vec(), 1 << 20, 8);
    assert_eq!(small.len(), 1);
    assert!(small[0].part.is_none());
    let at = |i: u64, b: Batch| openraft::Entry {
        log_id: LogId::new(openraft::CommittedLeaderId::new(1, 0), i),
        payload: EntryPayload::Normal(b),
    };
    let d = tempfile::tempdir().unwrap();
    block(async {
        let mut sm = StateMachine::open(d.path()).unwrap();
        let n = parts.len();
        let mut i = 0;
        for b in parts.iter().take(n - 1).cloned() {
            i += 1;
            sm.apply([at(i, b)]).await.unwrap();
            assert_eq!(sm.saved().next_job_id, 0, "applied in part");
        }
        // A snapshot between parts, restored elsewhere, then the last part.
        let snap = snapshot_of(&mut sm).await;
        let d2 = tempfile::tempdir().unwrap();
        let mut other = StateMachine::open(d2.path()).unwrap();
        other
            .install_snapshot(&snap.meta, snap.snapshot)
            .await
            .unwrap();
        let last = parts[n - 1].clone();
        other.apply([at(i + 1, last.clone())]).await.unwrap();
        assert_eq!(other.saved().next_job_id, 50);
        sm.apply([at(i + 1, last)]).await.unwrap();
        assert_eq!(sm.saved().next_job_id, 50);
        // Parts never finished: a whole batch comes next, the parts are dropped.
        let again = split((100..=150).map(Entry::NextJobId).collect(), 64, 9);
        sm.apply([at(i + 2, again[0].clone()), at(i + 3, again[1].clone())])
            .await
            .unwrap();
        sm.apply([at(
            i + 4,
            Batch {
                entries: vec![Entry::NextJobId(60)],
                part: None,
            },
        )])
        .await
        .unwrap();
        assert_eq!(sm.saved().next_job_id, 60);
        // The rest of the dropped batch, arriving late, is not applied.
        sm.apply([at(i + 5, again[2].clone())]).await.unwrap();
        assert_eq!(sm.saved().next_job_id, 60);
    });
}
