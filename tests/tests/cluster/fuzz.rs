//! Fuzzing every parser that reads outside input: configuration files,
//! hostlists, times, `#SBATCH` scripts, array and dependency specs, REST
//! bodies, wire messages and the controller's own state files. Each target
//! must return (an error is fine) and never panic; where a parser has a
//! property (a parsed array stays within MaxArraySize) it is checked too.
//! Seeds: `tests/fuzz/seeds/`; a long run: `scripts/fuzz`.

use proptest::prelude::*;
use slurm_tests::fuzz::{cases, edits, input, seeds};
use std::path::Path;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn config(n: u32) -> ProptestConfig {
    ProptestConfig {
        cases: cases(n),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config(300))]

    #[test]
    fn slurm_conf(pick in any::<usize>(), e in edits()) {
        let s = text(&input(&seeds("slurm_conf"), pick, &e));
        if let Ok(c) = slurm_common::conf::SlurmConf::parse_str(&s, Path::new("/nonexistent/slurm.conf")) {
            let _ = c.private_data();
            let _ = slurmctld::state::SubmitLimits::from_conf(&c);
            let _ = slurmctld::ratelimit::RateParams::from_conf(&c);
        }
    }

    #[test]
    fn sibling_confs(pick in any::<usize>(), e in edits(), which in 0..6u8) {
        let p = Path::new("/nonexistent/x.conf");
        match which {
            0 => { let _ = slurmd::gres::GresConf::parse(&text(&input(&seeds("gres_conf"), pick, &e)), p, "gpu01"); }
            1 => { let _ = slurmd::cgroup::conf::CgroupConf::parse(&text(&input(&seeds("cgroup_conf"), pick, &e)), p); }
            2 => { let _ = slurm_common::topology::TopologyConf::parse_conf(&text(&input(&seeds("topology_conf"), pick, &e)), "tree", "topology.conf"); }
            3 => { let _ = slurm_common::topology::TopologyConf::parse_conf(&text(&input(&seeds("topology_conf"), pick, &e)), "block", "topology.conf"); }
            4 => { let _ = slurm_common::topology::TopologyConf::parse_yaml(&text(&input(&seeds("topology_yaml"), pick, &e)), "topology.yaml"); }
            _ => { let _ = slurmdbd::conf::DbdConf::parse_str(&text(&input(&seeds("dbd_conf"), pick, &e)), p); }
        }
    }

    #[test]
    fn hostlists_and_times(pick in any::<usize>(), e in edits()) {
        use slurm_common::{hostlist, timefmt};
        let h = text(&input(&seeds("hostlist"), pick, &e));
        if let Ok(names) = hostlist::expand(&h) {
            prop_assert!(names.len() <= hostlist::MAX_HOSTS);
            prop_assert_eq!(hostlist::count(&h).ok(), Some(names.len()));
            let again = hostlist::expand(&hostlist::compress(&names));
            prop_assert!(again.is_ok(), "compress of {:?} does not expand", h);
        }
        let _ = hostlist::expand_counts(&h);
        let t = text(&input(&seeds("time"), pick, &e));
        let _ = timefmt::parse_time_limit(&t);
        let _ = timefmt::parse_timestamp(&t, 1_800_000_000);
    }

    #[test]
    fn specs(pick in any::<usize>(), e in edits(), which in 0..5u8) {
        use slurm_common::jobspec;
        match which {
            0 => {
                let s = text(&input(&seeds("array"), pick, &e));
                if let Ok(a) = jobspec::parse_array(&s, 1001) {
                    prop_assert!(a.tasks.len() <= 1001);
                    prop_assert!(a.tasks.iter().all(|t| *t < 1001));
                    prop_assert!(a.tasks.windows(2).all(|w| w[0] < w[1]));
                }
            }
            1 => { let _ = jobspec::parse_dependency(&text(&input(&seeds("dependency"), pick, &e))); }
            2 => { let _ = slurm_common::constraint::Constraint::parse(&text(&input(&seeds("spec"), pick, &e))); }
            3 => { let _ = slurm_common::gres::parse_list(&text(&input(&seeds("spec"), pick, &e))); }
            _ => { let _ = slurm_common::licenses::parse(&text(&input(&seeds("spec"), pick, &e))); }
        }
    }

    #[test]
    fn sbatch_scripts(pick in any::<usize>(), e in edits(), args in prop::collection::vec("[-a-zA-Z0-9=:,%_]{0,12}", 0..4)) {
        use slurm_cli::sbatch::{prepare, Context, Term};
        let script = input(&seeds("sbatch"), pick, &e);
        let argv: Vec<String> = std::iter::once("sbatch".to_string()).chain(args).collect();
        let ctx = Context { cwd: "/tmp".into(), hostname: "login1".into(), now: 1_800_000_000, prio: 0, uid: 0, umask: "0022".into() };
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let mut term = Term { out: &mut out, err: &mut err };
        let _ = prepare(&argv, &[], &ctx, &mut &script[..], &mut term);
    }

    #[test]
    fn rest_bodies(
        pick in any::<usize>(),
        e in edits(),
        tree in prop::collection::vec((any::<u16>(), slurm_tests::fuzz::json_value()), 0..4),
    ) {
        use slurmrestd::request as r;
        // Bytes edited (mostly malformed), then values of every type put
        // in the places of a valid body.
        let b = input(&seeds("rest"), pick, &e);
        let mut bodies = vec![b];
        let all = seeds("rest");
        if let Ok(mut v) = serde_json::from_slice::<serde_json::Value>(&all[pick % all.len()]) {
            slurm_tests::fuzz::json_mutate(&mut v, &tree);
            bodies.push(serde_json::to_vec(&v).unwrap());
        }
        for b in bodies {
            let Ok(v) = r::parse_json(&b) else { continue };
            let _ = r::submit_request(&v, 1000, "/home/u", "login1");
            let _ = r::alloc_request(&v, 1000, "/home/u", "login1");
            let _ = r::job_update(&v);
            let _ = r::kill_jobs(&v);
            let _ = r::node_update(&v);
            let _ = r::create_node(&v);
            let _ = r::reservation(&v, "reservation");
            let _ = r::db_accounts(&v);
            let _ = r::db_users(&v);
            let _ = r::db_assocs(&v);
            let _ = r::db_qos(&v);
            let _ = r::db_clusters(&v);
        }
    }

    #[test]
    fn wire_messages(pick in any::<usize>(), e in edits()) {
        let b = input(&seeds("wire"), pick, &e);
        let _ = serde_json::from_slice::<slurm_proto::Request>(&b);
        let _ = serde_json::from_slice::<slurm_proto::Response>(&b);
        let _ = serde_json::from_slice::<slurm_proto::acct::DbdRequest>(&b);
        let _ = serde_json::from_slice::<slurm_proto::acct::AcctResponse>(&b);
        // slurmdbd's messages as its service decodes them, then acts on them.
        {
            use prost::Message;
            use slurm_proto::grpc::{dbd::DbdCall, pb};
            if let Ok(m) = pb::RecordBatch::decode(&b[..]) {
                let _ = DbdCall::SendRecords(m).into_body();
            }
            if let Ok(m) = pb::ModifyQosRequest::decode(&b[..]) {
                let _ = DbdCall::ModifyQos(m).into_body();
            }
            if let Ok(m) = pb::AcctJobQuery::decode(&b[..]) {
                let _ = DbdCall::GetJobs(m).into_body();
            }
            if let Ok(m) = pb::DbdReply::decode(&b[..]) {
                let _ = slurm_proto::grpc::dbd::acct_response(m);
            }
            // The controller's: a submission, an update, a cancel, a listing.
            use slurm_proto::grpc::commands::{command_response, listing_response, CommandCall};
            if let Ok(m) = pb::JobDesc::decode(&b[..]) {
                let _ = CommandCall::SubmitJob(Box::new(m)).into_body();
            }
            if let Ok(m) = pb::UpdateJobRequest::decode(&b[..]) {
                let _ = CommandCall::UpdateJob(m).into_body();
            }
            if let Ok(m) = pb::CancelFilter::decode(&b[..]) {
                let _ = CommandCall::CancelJobs(m).into_body();
            }
            if let Ok(m) = pb::JobListing::decode(&b[..]) {
                let _ = listing_response(m);
            }
            if let Ok(m) = pb::CommandReply::decode(&b[..]) {
                let _ = command_response(m);
            }
        }
    }
}

/// The controller's state files, damaged anywhere: start-up returns an
/// error or a state, never panics, and with `-i` never an empty cluster
/// when a previous snapshot holds jobs.
fn journal_seeds() -> Vec<Vec<u8>> {
    use slurmctld::journal::{Entry, Journal, Payload};
    let d = tempfile::tempdir().unwrap();
    let (mut j, _) = Journal::open(d.path(), false, false).unwrap();
    for id in 1..=3u32 {
        j.append(&Entry::NextJobId(id + 1));
        j.append(&Entry::Payload(
            id,
            std::sync::Arc::new(Payload {
                script: format!("#!/bin/sh\n# é {id}\n"),
                environment: vec!["A=b".into()],
            }),
        ));
        j.commit().unwrap();
    }
    drop(j);
    let mut v = seeds("journal");
    v.push(std::fs::read(d.path().join("journal.log")).unwrap());
    v
}

proptest! {
    #![proptest_config(config(150))]

    #[test]
    fn state_files(pick in any::<usize>(), e in edits(), ignore in any::<bool>()) {
        use slurmctld::journal::Journal;
        let journal = input(&journal_seeds(), pick, &e);
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("journal.log"), &journal).unwrap();
        let _ = Journal::open(d.path(), ignore, false);
        // The snapshot it wrote, damaged in turn.
        if let Ok(snap) = std::fs::read(d.path().join("state.json")) {
            let bad = slurm_tests::fuzz::mutate(&snap, &e);
            std::fs::write(d.path().join("state.json"), bad).unwrap();
            let _ = Journal::open(d.path(), ignore, false);
        }
    }
}
