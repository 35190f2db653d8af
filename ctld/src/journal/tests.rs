use super::*;
use slurm_proto::acct::{AcctJob, AcctRecord, SeqRecord};
use std::os::unix::fs::MetadataExt;

fn payload(id: JobId, script: &str) -> Entry {
    Entry::Payload(
        id,
        Arc::new(Payload {
            script: script.to_string(),
            environment: vec![format!("SECRET={id}")],
        }),
    )
}

fn acct(seq: u64, job_id: u32) -> Entry {
    Entry::Acct(Box::new(SeqRecord {
        cluster: "c".into(),
        epoch: 1,
        seq,
        record: AcctRecord::JobStart(AcctJob {
            job_id,
            ..Default::default()
        }),
    }))
}

fn open(d: &Path) -> (Journal, Saved) {
    Journal::open(d, false, false).unwrap()
}

fn append_raw(d: &Path, file: &str, bytes: &[u8]) {
    let mut f = OpenOptions::new()
        .append(true)
        .create(true)
        .open(d.join(file))
        .unwrap();
    f.write_all(bytes).unwrap();
}

#[test]
fn entries_survive_reopen_and_a_torn_batch_is_dropped_whole() {
    let d = tempfile::tempdir().unwrap();
    let (mut j, s) = open(d.path());
    assert_eq!(s, Saved::default());
    j.append(&Entry::NextJobId(5));
    j.append(&Entry::Node(
        "n1".into(),
        NodeAdmin {
            drain: true,
            ..Default::default()
        },
    ));
    j.commit().unwrap();
    // The next batch: a job's payload and its accounting record, of which
    // a crash leaves the first line only.
    let mut buf = Vec::new();
    push_line(
        &mut buf,
        j.seq() + 1,
        &serde_json::to_vec(&payload(5, "x")).unwrap(),
    );
    push_line(
        &mut buf,
        j.seq() + 1,
        &serde_json::to_vec(&acct(1, 5)).unwrap(),
    );
    drop(j);
    let first = buf.iter().position(|b| *b == b'\n').unwrap() + 1;
    append_raw(d.path(), LOG, &buf[..first]);
    let (_, s) = open(d.path());
    assert_eq!(s.next_job_id, 5);
    assert!(s.nodes["n1"].drain);
    assert!(s.payloads.is_empty(), "half a batch was applied");
    assert!(s.acct.pending.is_empty());
}

#[test]
fn a_write_torn_inside_a_multibyte_character_is_a_torn_tail() {
    let d = tempfile::tempdir().unwrap();
    let (mut j, _) = open(d.path());
    j.append(&payload(1, "# première"));
    j.commit().unwrap();
    let mut buf = Vec::new();
    push_line(
        &mut buf,
        j.seq() + 1,
        &serde_json::to_vec(&payload(2, "échec ✓")).unwrap(),
    );
    drop(j);
    // Cut inside the two bytes of "é".
    let cut = buf.windows(2).position(|w| w == "é".as_bytes()).unwrap() + 1;
    append_raw(d.path(), LOG, &buf[..cut]);
    let (_, s) = open(d.path());
    assert_eq!(s.payloads[&1].script, "# première");
    assert!(!s.payloads.contains_key(&2));
}

#[test]
fn damage_before_valid_batches_stops_start_up_unless_ignored() {
    let d = tempfile::tempdir().unwrap();
    let (mut j, _) = open(d.path());
    j.append(&payload(1, "one"));
    j.commit().unwrap();
    j.append(&payload(2, "two"));
    j.append(&acct(1, 2));
    j.commit().unwrap();
    j.append(&payload(3, "three"));
    j.commit().unwrap();
    drop(j);
    // Flip one byte of batch 2 (a bad disk), and put invalid UTF-8 in it.
    let p = d.path().join(LOG);
    let mut b = std::fs::read(&p).unwrap();
    let at = b.windows(3).position(|w| w == b"two").unwrap();
    b[at] = 0xff;
    std::fs::write(&p, &b).unwrap();
    let e = Journal::open(d.path(), false, false).err().unwrap();
    assert!(e.to_string().contains("journal.log:"), "{e}");
    assert!(e.to_string().contains("-i"), "{e}");
    // Refusing changed nothing: the same error again.
    assert!(Journal::open(d.path(), false, false).is_err());
    let (_, s, rec) = Journal::open_as(d.path(), true, false, Owner::default()).unwrap();
    assert_eq!(s.payloads.keys().copied().collect::<Vec<_>>(), vec![1, 3]);
    assert!(
        s.acct.pending.is_empty(),
        "the damaged batch is skipped whole"
    );
    assert_eq!(rec.skipped.len(), 2, "{rec:?}"); // the batch, and the gap it leaves
}

#[test]
fn journal_keeps_working_after_compaction_and_restart() {
    // Today's bug: compaction cut the file without moving the write
    // position, so the next entries followed a run of NUL bytes.
    let d = tempfile::tempdir().unwrap();
    let (mut j, mut saved) = open(d.path());
    for round in 0..20u32 {
        for k in 0..5 {
            let id = round * 5 + k + 1;
            let e = payload(id, &"s".repeat(1000));
            saved.apply(e.clone());
            j.append(&e);
            j.commit().unwrap();
        }
        j.compact(&saved).unwrap();
        let e = Entry::NextJobId(round + 100);
        saved.apply(e.clone());
        j.append(&e);
        j.commit().unwrap();
        assert!(
            !std::fs::read(d.path().join(LOG)).unwrap().contains(&0),
            "NUL bytes in the journal"
        );
    }
    drop(j);
    let (_, s) = open(d.path());
    assert_eq!(s, saved);
    assert_eq!(s.payloads.len(), 100);
}

#[test]
fn a_crash_at_any_step_of_compaction_loses_and_doubles_nothing() {
    for steps in 0..=4 {
        let d = tempfile::tempdir().unwrap();
        let (mut j, mut saved) = open(d.path());
        for id in 1..=6u32 {
            for e in [payload(id, "x"), acct(u64::from(id), id)] {
                saved.apply(e.clone());
                j.append(&e);
            }
            j.commit().unwrap();
            if id == 3 {
                j.compact(&saved).unwrap();
            }
        }
        j.compact_steps(&saved, steps).unwrap();
        drop(j);
        let (mut j, s) = open(d.path());
        assert_eq!(s, saved, "crash after step {steps}");
        assert_eq!(s.acct.pending.len(), 6, "crash after step {steps}");
        // And it goes on from there.
        j.append(&payload(7, "y"));
        j.commit().unwrap();
        drop(j);
        let (_, s) = open(d.path());
        assert_eq!(s.payloads.len(), 7, "after step {steps}");
    }
}

#[test]
fn a_damaged_snapshot_is_never_an_empty_cluster() {
    let d = tempfile::tempdir().unwrap();
    let (mut j, mut saved) = open(d.path());
    for id in 1..=4u32 {
        let e = payload(id, "x");
        saved.apply(e.clone());
        j.append(&e);
        j.commit().unwrap();
        if id == 2 {
            j.compact(&saved).unwrap();
        }
    }
    j.compact(&saved).unwrap();
    let e = payload(5, "after");
    saved.apply(e.clone());
    j.append(&e);
    j.commit().unwrap();
    drop(j);
    let snap = d.path().join(SNAP);
    let mut b = std::fs::read(&snap).unwrap();
    let n = b.len();
    b[n - 10] ^= 0x55;
    std::fs::write(&snap, &b).unwrap();
    let e = Journal::open(d.path(), false, false).err().unwrap();
    assert!(e.to_string().contains("state.json"), "{e}");
    assert!(e.to_string().contains("-i"), "{e}");
    let (_, s, rec) = Journal::open_as(d.path(), true, false, Owner::default()).unwrap();
    assert!(rec.from_previous);
    assert_eq!(
        s, saved,
        "previous snapshot + both journals give it all back"
    );
    // The damaged file was set aside, not rotated over the good one.
    let names: Vec<String> = std::fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().any(|n| n.starts_with("state.json.damaged.")),
        "{names:?}"
    );
    let (_, again) = open(d.path());
    assert_eq!(again, saved);

    // Without a previous snapshot, -i refuses rather than start empty.
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join(SNAP), b"{\"next_job_id\": 7, \"jobs\": {").unwrap();
    let e = Journal::open(d.path(), true, false).err().unwrap();
    assert!(e.to_string().contains("refusing to start"), "{e}");
    assert!(d.path().join(SNAP).exists(), "the damaged file is kept");
}

#[test]
fn state_files_are_private() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("state");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    // Files an older version left world-readable.
    std::fs::write(
        dir.join(SNAP),
        b"{\"next_job_id\": 3, \"jobs\": {}, \"payloads\": {}, \"nodes\": {}}",
    )
    .unwrap();
    std::fs::set_permissions(dir.join(SNAP), std::fs::Permissions::from_mode(0o644)).unwrap();
    let (mut j, s) = open(&dir);
    assert_eq!(s.next_job_id, 3, "the old format still loads");
    j.append(&payload(1, "secret"));
    j.commit().unwrap();
    j.compact(&s).unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    for f in [SNAP, SNAP_PREV, LOG, LOG_PREV] {
        assert_eq!(mode(&dir.join(f)), 0o600, "{f}");
    }
}

#[test]
fn legacy_journal_lines_still_replay() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join(LOG),
        "{\"NextJobId\":9}\n{\"RemoveJob\":3}\n{\"NextJ",
    )
    .unwrap();
    let (_, s) = open(d.path());
    assert_eq!(s.next_job_id, 9);
    std::fs::write(d.path().join(LOG), "garbage\n{\"NextJobId\":11}\n").unwrap();
    std::fs::remove_file(d.path().join(SNAP)).unwrap();
    std::fs::remove_file(d.path().join(SNAP_PREV)).ok();
    let e = Journal::open(d.path(), false, false).err().unwrap();
    assert!(e.to_string().contains("journal.log:1"), "{e}");
}

#[test]
fn links_planted_in_the_state_directory_are_never_followed() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("state");
    std::fs::create_dir(&dir).unwrap();
    let victim = d.path().join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    std::os::unix::fs::symlink(&victim, dir.join(SNAP)).unwrap();
    let e = Journal::open(&dir, true, false).err().unwrap();
    assert!(e.to_string().contains("symbolic link"), "{e}");
    std::fs::remove_file(dir.join(SNAP)).unwrap();
    // A link at the name of the snapshot being written is replaced.
    let (mut j, s) = open(&dir);
    std::os::unix::fs::symlink(&victim, dir.join(SNAP_NEW)).unwrap();
    j.compact(&s).unwrap();
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    let mode = std::fs::metadata(&victim).unwrap().mode() & 0o777;
    assert_ne!(mode, 0o600, "the link's target was touched");
}

/// A compaction that wrote its new snapshot and stopped, then a damaged
/// state.json: with -i the new snapshot gives everything back, even with
/// no previous snapshot or journal left.
#[test]
fn with_i_a_complete_new_snapshot_stands_in_for_a_damaged_one() {
    let d = tempfile::tempdir().unwrap();
    let (mut j, mut saved) = open(d.path());
    for id in 1..=3u32 {
        let e = payload(id, "x");
        saved.apply(e.clone());
        j.append(&e);
        j.commit().unwrap();
    }
    j.compact_steps(&saved, 0).unwrap();
    drop(j);
    assert!(d.path().join(SNAP_NEW).exists());
    let snap = d.path().join(SNAP);
    let mut b = std::fs::read(&snap).unwrap();
    let n = b.len();
    b[n - 5] ^= 0x55;
    std::fs::write(&snap, &b).unwrap();
    let _ = std::fs::remove_file(d.path().join(SNAP_PREV));
    let _ = std::fs::remove_file(d.path().join(LOG_PREV));
    // Without -i the damage still stops start-up.
    assert!(Journal::open(d.path(), false, false).is_err());
    let (_, s, rec) = Journal::open_as(d.path(), true, false, Owner::default()).unwrap();
    assert!(rec.from_previous);
    assert_eq!(s, saved);
    let (_, again) = open(d.path());
    assert_eq!(again, saved);
}

/// A small tmpfs for the reserve's tests, unmounted when dropped.
struct SmallFs(tempfile::TempDir);

impl SmallFs {
    fn new(size: &str) -> SmallFs {
        let d = tempfile::tempdir().unwrap();
        let st = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(d.path())
            .status()
            .unwrap();
        assert!(st.success(), "mount a tmpfs");
        SmallFs(d)
    }

    fn free(&self) -> u64 {
        let c = std::ffi::CString::new(self.0.path().as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: plain data out; the path is a valid C string.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut st) }, 0);
        st.f_bavail as u64 * st.f_frsize as u64
    }

    /// Fill the file system but `leave` bytes.
    fn fill(&self, leave: u64) {
        let n = self.free().saturating_sub(leave);
        let mut f = File::create(self.0.path().join("ballast")).unwrap();
        let chunk = vec![0u8; 64 << 10];
        let mut done = 0;
        while done < n {
            let k = (n - done).min(chunk.len() as u64) as usize;
            if f.write_all(&chunk[..k]).is_err() {
                break;
            }
            done += k as u64;
        }
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(self.0.path())
            .status();
    }
}

fn allocated(p: &Path) -> u64 {
    std::fs::metadata(p).unwrap().blocks() * 512
}

const MIB: u64 = 1 << 20;

#[test]
fn a_failed_commit_on_a_full_disk_keeps_the_reserve() {
    let fs = SmallFs::new("4m");
    let d = fs.0.path().join("state");
    let (mut j, _) = open(&d);
    j.set_reserve(MIB);
    j.check_space().unwrap();
    assert!(allocated(&d.join(LOG)) >= MIB, "the reserve is allocated");
    fs.fill(0);
    // A batch larger than the reserve does not fit: it fails whole ...
    j.append(&payload(1, &"x".repeat(3 << 20)));
    assert!(j.commit().is_err());
    assert_eq!(std::fs::metadata(d.join(LOG)).unwrap().len(), j.size);
    // ... and the reserve is kept for the next try.
    assert!(
        allocated(&d.join(LOG)) >= MIB,
        "the reserve was given up with the failed batch: {} bytes allocated",
        allocated(&d.join(LOG))
    );
}

#[test]
fn compaction_hands_the_reserve_to_the_next_journal() {
    let fs = SmallFs::new("4m");
    let d = fs.0.path().join("state");
    let (mut j, saved) = open(&d);
    j.set_reserve(MIB);
    j.check_space().unwrap();
    j.append(&payload(1, "#!/bin/sh\ntrue\n"));
    j.commit().unwrap();
    // Room for the snapshot and one reserve beyond the journal's own: the
    // new journal's reserve fits only if the retired one's is given back.
    fs.fill(MIB + (256 << 10));
    j.compact(&saved).unwrap();
    assert!(
        allocated(&d.join(LOG_PREV)) < 64 << 10,
        "the retired journal keeps its reserve: {} bytes",
        allocated(&d.join(LOG_PREV))
    );
    j.check_space().unwrap();
    assert!(allocated(&d.join(LOG)) >= MIB);
}

fn count(hay: &[u8], needle: &str) -> usize {
    hay.windows(needle.len())
        .filter(|w| *w == needle.as_bytes())
        .count()
}

#[test]
fn an_arrays_script_is_saved_once_in_the_journal_and_the_snapshot() {
    let d = tempfile::tempdir().unwrap();
    let (mut j, mut saved) = open(d.path());
    let script = "#!/bin/sh\necho the-one-script\n";
    let shared = Arc::new(Payload {
        script: script.into(),
        environment: vec!["A=1".into()],
    });
    let ids: Vec<JobId> = (1..=1000).collect();
    for e in [
        Entry::Payloads(ids.clone(), shared),
        payload(1001, "#!/bin/sh\necho its-own\n"),
    ] {
        saved.apply(e.clone());
        j.append(&e);
    }
    j.commit().unwrap();
    assert_eq!(saved.payloads.len(), 1001);
    assert!(Arc::ptr_eq(&saved.payloads[&1], &saved.payloads[&1000]));
    let log = std::fs::read(d.path().join(LOG)).unwrap();
    assert_eq!(count(&log, "the-one-script"), 1);
    // Replayed, and compacted into state.json: still once, still shared.
    drop(j);
    let (mut j, again) = open(d.path());
    assert_eq!(again, saved);
    assert!(Arc::ptr_eq(&again.payloads[&2], &again.payloads[&999]));
    j.compact(&again).unwrap();
    let snap = std::fs::read(d.path().join(SNAP)).unwrap();
    assert_eq!(count(&snap, "the-one-script"), 1);
    assert_eq!(count(&snap, "its-own"), 1);
    drop(j);
    let (_, back) = open(d.path());
    assert_eq!(back, saved);
    assert!(Arc::ptr_eq(&back.payloads[&1], &back.payloads[&1000]));
    assert!(!Arc::ptr_eq(&back.payloads[&1000], &back.payloads[&1001]));
}

#[test]
fn payloads_saved_as_a_map_still_load() {
    // state.json as written before payloads were grouped.
    let text = r#"{"next_job_id":3,"jobs":{},"payloads":{"1":{"script":"a","environment":[]},"2":{"script":"b","environment":["X=1"]}},"nodes":{}}"#;
    let s: Saved = serde_json::from_str(text).unwrap();
    assert_eq!(s.payloads.len(), 2);
    assert_eq!(s.payloads[&2].environment, vec!["X=1".to_string()]);
    let round: Saved = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
    assert_eq!(round, s);
}
