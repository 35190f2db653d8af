use super::multifactor::{age_factor, job_size_factor, to_priority, MAX_PRIORITY};
use super::params::{parse_slurm_duration, parse_tres_weights, SlurmDuration};
use super::*;
use crate::fairshare::{Algorithm, FairShareTree, Shares, UsageReset};
use proptest::prelude::*;

const DAY: i64 = 86_400;

fn conf(entries: &[(&str, &str)]) -> Vec<(String, String)> {
    entries
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn params(entries: &[(&str, &str)]) -> PriorityParams {
    PriorityParams::from_config(&conf(entries)).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

/// 10 nodes of 8 CPUs and 16 GB; two partitions with PriorityJobFactor up
/// to 2; 8 GPUs.
fn ctx() -> PriorityContext {
    PriorityContext {
        total_nodes: 10,
        total_cpus: 80,
        total_mem_mb: 160_000,
        tres_totals: vec![("gres/gpu".into(), 8.0)],
        max_partition_job_factor: 2,
        max_qos_priority: 100,
        max_assoc_priority: 10,
    }
}

fn job() -> PriorityInput {
    PriorityInput {
        job_id: 7,
        partition: "batch".into(),
        submit_time: 0,
        eligible_time: Some(0),
        req_nodes: 2,
        req_cpus: 16,
        req_mem_mb: 40_000,
        time_limit: Some(60),
        partition_priority_job_factor: 1,
        ..PriorityInput::default()
    }
}

#[test]
fn defaults() {
    let p = PriorityParams::from_config(&[]).unwrap();
    assert_eq!(p, PriorityParams::default());
    assert_eq!(p.max_age, Some(7 * 86_400));
    assert_eq!(p.decay_half_life, 7 * 86_400);
    assert_eq!(p.calc_period, 300);
    assert_eq!(p.usage_reset, UsageReset::None);
    assert_eq!(p.weight_fairshare, 0);
    assert_eq!(p.algorithm(), Algorithm::FairTree);
}

#[test]
fn parses_every_setting() {
    let p = params(&[
        ("SlurmctldPort", "6817"),
        ("PriorityType", "priority/multifactor"),
        ("priorityweightage", "1000"),
        ("PriorityWeightFairshare", "10000"),
        ("PRIORITYWEIGHTJOBSIZE", "1000"),
        ("PriorityWeightPartition", "1000"),
        ("PriorityWeightQOS", "0"),
        ("PriorityWeightAssoc", "4294967295"),
        ("PriorityWeightTRES", "CPU=1000,Mem=2000,GRES/gpu=3000"),
        ("PriorityMaxAge", "14-0"),
        ("PriorityFavorSmall", "YES"),
        ("PriorityDecayHalfLife", "1-12:30"),
        ("PriorityUsageResetPeriod", "monthly"),
        ("PriorityCalcPeriod", "1"),
        (
            "PriorityFlags",
            "small_relative_to_time, MAX_TRES,INCR_ONLY",
        ),
        ("FairShareDampeningFactor", "3"),
    ]);
    assert_eq!(p.weight_age, 1000);
    assert_eq!(p.weight_fairshare, 10_000);
    assert_eq!(p.weight_job_size, 1000);
    assert_eq!(p.weight_partition, 1000);
    assert_eq!(p.weight_qos, 0);
    assert_eq!(p.weight_assoc, u32::MAX);
    assert_eq!(
        p.weight_tres,
        vec![
            ("cpu".to_string(), 1000.0),
            ("mem".to_string(), 2000.0),
            ("gres/gpu".to_string(), 3000.0)
        ]
    );
    assert_eq!(p.tres_weight("GRES/GPU"), 3000.0);
    assert_eq!(p.tres_weight("license/x"), 0.0);
    assert_eq!(p.max_age, Some(14 * 86_400));
    assert!(p.favor_small);
    assert_eq!(p.decay_half_life, 86_400 + 12 * 3600 + 30 * 60);
    assert_eq!(p.usage_reset, UsageReset::Monthly);
    assert_eq!(p.calc_period, 60);
    assert!(p.flags.small_relative_to_time && p.flags.max_tres && p.flags.incr_only);
    assert!(!p.flags.no_fair_tree);
    assert_eq!(p.dampening, 3);
    assert_eq!(
        p.usage_policy(3600),
        crate::fairshare::UsagePolicy {
            half_life: p.decay_half_life,
            reset: UsageReset::Monthly,
            utc_offset: 3600
        }
    );
}

#[test]
fn flags() {
    let f = PriorityFlags::parse("NO_NORMAL_ALL").unwrap();
    assert!(f.no_normal_assoc && f.no_normal_part && f.no_normal_qos && f.no_normal_tres);
    let f = PriorityFlags::parse("DEPTH_OBLIVIOUS").unwrap();
    assert!(f.no_fair_tree);
    assert_eq!(f.algorithm(), Algorithm::DepthOblivious);
    let f = PriorityFlags::parse("NO_FAIR_TREE,ACCRUE_ALWAYS,CALCULATE_RUNNING").unwrap();
    assert_eq!(f.algorithm(), Algorithm::Classic);
    assert!(f.accrue_always && f.calculate_running);
    assert_eq!(
        PriorityFlags::parse("FAIR_TREE,").unwrap(),
        PriorityFlags::default()
    );
    assert_eq!(
        PriorityFlags::parse("MAX_TRES,BOGUS"),
        Err("BOGUS".to_string())
    );
    use crate::fairshare::BillingMode;
    assert_eq!(PriorityFlags::default().billing_mode(), BillingMode::Sum);
    assert_eq!(
        PriorityFlags::parse("max_tres").unwrap().billing_mode(),
        BillingMode::MaxTres
    );
    assert_eq!(
        PriorityFlags::parse("MAX_TRES_GRES")
            .unwrap()
            .billing_mode(),
        BillingMode::MaxTresGres
    );
}

#[test]
fn bad_values_name_key_and_value() {
    for (k, v) in [
        ("PriorityWeightAge", "-1"),
        ("PriorityWeightAge", "lots"),
        ("PriorityWeightQOS", "4294967296"),
        ("PriorityWeightTRES", "CPU"),
        ("PriorityWeightTRES", "CPU=-3"),
        ("PriorityMaxAge", "7 days"),
        ("PriorityMaxAge", "1:2:3:4"),
        ("PriorityDecayHalfLife", "-5"),
        ("PriorityCalcPeriod", "0"),
        ("PriorityCalcPeriod", "INFINITE"),
        ("PriorityFavorSmall", "maybe"),
        ("PriorityUsageResetPeriod", "HOURLY"),
        ("PriorityFlags", "NO_NORMAL_EVERYTHING"),
        ("FairShareDampeningFactor", "0"),
    ] {
        let e = PriorityParams::from_config(&conf(&[(k, v)])).unwrap_err();
        assert_eq!(e.key, k);
        assert_eq!(e.value, v);
        let msg = e.to_string();
        assert!(
            msg.starts_with(&format!("invalid {k}={v}: expected ")),
            "{msg}"
        );
    }
    let e = PriorityParams::from_config(&conf(&[("PriorityFavorSmall", "maybe")])).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid PriorityFavorSmall=maybe: expected YES or NO"
    );
}

#[test]
fn unsupported_settings_warn() {
    let w = PriorityParams::unsupported(&conf(&[
        ("PrioritySiteFactorPlugin", "site_factor/x"),
        ("PriorityWeightAge", "1"),
    ]));
    assert_eq!(
        w,
        vec!["PrioritySiteFactorPlugin is not supported yet: ignored"]
    );
}

#[test]
fn slurm_time_strings() {
    let s = |x: &str| parse_slurm_duration(x);
    assert_eq!(s("7-0"), Some(SlurmDuration::Secs(7 * 86_400)));
    assert_eq!(s("30"), Some(SlurmDuration::Secs(1800)));
    assert_eq!(s("0"), Some(SlurmDuration::Secs(0)));
    assert_eq!(s("5:30"), Some(SlurmDuration::Secs(330)));
    assert_eq!(s("2:00:00"), Some(SlurmDuration::Secs(7200)));
    assert_eq!(s("1-12"), Some(SlurmDuration::Secs(86_400 + 12 * 3600)));
    assert_eq!(s("1-2:3"), Some(SlurmDuration::Secs(86_400 + 7200 + 180)));
    assert_eq!(s("1-2:3:4"), Some(SlurmDuration::Secs(86_400 + 7200 + 184)));
    assert_eq!(s("UNLIMITED"), Some(SlurmDuration::Infinite));
    assert_eq!(s("infinite"), Some(SlurmDuration::Infinite));
    for bad in [
        "",
        "-",
        "1-",
        "a",
        "1:2:3:4",
        "+5",
        "1.5",
        "99999999999999999999",
    ] {
        assert_eq!(s(bad), None, "{bad}");
    }
    assert_eq!(parse_tres_weights(""), Some(vec![]));
    assert_eq!(
        parse_tres_weights("cpu=1,CPU=2"),
        Some(vec![("cpu".to_string(), 2.0)])
    );
    assert_eq!(parse_tres_weights("=1"), None);
}

#[test]
fn age_factor_normalisation() {
    let p = params(&[("PriorityMaxAge", "2-0")]);
    let j = job();
    assert_eq!(age_factor(&p, &j, 0), 0.0);
    assert!(close(age_factor(&p, &j, DAY), 0.5));
    assert_eq!(age_factor(&p, &j, 2 * DAY), 1.0);
    assert_eq!(age_factor(&p, &j, 30 * DAY), 1.0);
    // Clock before eligibility: no negative age.
    assert_eq!(age_factor(&p, &j, -5), 0.0);
    // Not eligible: no age, unless ACCRUE_ALWAYS.
    let held = PriorityInput {
        eligible_time: None,
        ..job()
    };
    assert_eq!(age_factor(&p, &held, DAY), 0.0);
    let p2 = params(&[
        ("PriorityMaxAge", "2-0"),
        ("PriorityFlags", "ACCRUE_ALWAYS"),
    ]);
    assert!(close(age_factor(&p2, &held, DAY), 0.5));
    // Eligible later than submitted: age counts from eligibility.
    let late = PriorityInput {
        eligible_time: Some(DAY),
        ..job()
    };
    assert!(close(age_factor(&p, &late, 2 * DAY), 0.5));
    assert!(close(age_factor(&p2, &late, DAY), 0.5));
    // Unlimited: grows but never reaches 1.
    let pu = params(&[("PriorityMaxAge", "UNLIMITED")]);
    let a = age_factor(&pu, &j, 365 * DAY);
    assert!(a > 0.0 && a < 0.01 && a > age_factor(&pu, &j, DAY));
    // Zero: maxed out at once.
    let pz = params(&[("PriorityMaxAge", "0")]);
    assert_eq!(age_factor(&pz, &j, 0), 1.0);
    assert_eq!(age_factor(&pz, &held, 0), 0.0);
}

#[test]
fn job_size_factor_variants() {
    let p = PriorityParams::default();
    let c = ctx();
    let sized = |nodes: u32, cpus: u32| PriorityInput {
        req_nodes: nodes,
        req_cpus: cpus,
        ..job()
    };
    // All the machine → 1.
    assert_eq!(job_size_factor(&p, &sized(10, 80), &c), 1.0);
    assert!(close(job_size_factor(&p, &sized(2, 16), &c), 0.2));
    // CPUs dominate when the job asks for a larger share of them.
    assert!(close(job_size_factor(&p, &sized(1, 40), &c), 0.5));
    // Favor small: the single-node, single-CPU job gets 1.
    let fs = params(&[("PriorityFavorSmall", "yes")]);
    assert_eq!(job_size_factor(&fs, &sized(1, 1), &c), 1.0);
    assert!(close(
        job_size_factor(&fs, &sized(10, 80), &c),
        0.1f64.min(1.0 / 80.0)
    ));
    assert!(job_size_factor(&fs, &sized(2, 16), &c) > job_size_factor(&fs, &sized(4, 32), &c));
    // Relative to time: a full-system one-minute job gets 1.
    let rt = params(&[("PriorityFlags", "SMALL_RELATIVE_TO_TIME")]);
    let whole_minute = PriorityInput {
        time_limit: Some(1),
        ..sized(10, 80)
    };
    assert_eq!(job_size_factor(&rt, &whole_minute, &c), 1.0);
    let tiny_long = PriorityInput {
        time_limit: Some(10_000),
        ..sized(1, 1)
    };
    assert!(job_size_factor(&rt, &tiny_long, &c) < 1e-5);
    let unlimited = PriorityInput {
        time_limit: None,
        ..sized(1, 1)
    };
    assert_eq!(job_size_factor(&rt, &unlimited, &c), 0.0);
    let rts = params(&[
        ("PriorityFlags", "SMALL_RELATIVE_TO_TIME"),
        ("PriorityFavorSmall", "YES"),
    ]);
    assert_eq!(job_size_factor(&rts, &whole_minute, &c), 0.0);
    // An empty cluster: 0, no division by zero.
    let empty = PriorityContext::default();
    assert_eq!(job_size_factor(&p, &sized(1, 1), &empty), 0.0);
    assert_eq!(job_size_factor(&fs, &sized(1, 1), &empty), 0.0);
}

#[test]
fn worked_example() {
    // The multifactor page's first configuration example, for a job that
    // waited a week of the two-week maximum, with fair share 0.75, two of
    // ten nodes, the lower of two partition factors, and nice 100:
    //   age 1000*0.5 + fairshare 10000*0.75 + size 1000*0.2
    //   + partition 1000*0.5 + qos 0 - nice 100 = 8600.
    let p = params(&[
        ("PriorityType", "priority/multifactor"),
        ("PriorityDecayHalfLife", "14-0"),
        ("PriorityFavorSmall", "NO"),
        ("PriorityMaxAge", "14-0"),
        ("PriorityWeightAge", "1000"),
        ("PriorityWeightFairshare", "10000"),
        ("PriorityWeightJobSize", "1000"),
        ("PriorityWeightPartition", "1000"),
        ("PriorityWeightQOS", "0"),
    ]);
    let j = PriorityInput {
        nice: 100,
        qos_priority: 50,
        ..job()
    };
    let f = multifactor_with_fairshare(&p, &j, &ctx(), 0.75, 7 * DAY);
    assert_eq!(f.age, 500.0);
    assert_eq!(f.fairshare, 7500.0);
    assert!(close(f.job_size, 200.0));
    assert_eq!(f.partition, 500.0);
    assert_eq!(f.qos, 0.0);
    assert_eq!(f.norm.qos, 0.5);
    assert_eq!(f.nice, 100);
    assert_eq!(f.priority, 8600);
    assert_eq!((f.job_id, f.partition_name.as_str()), (7, "batch"));
    // Negative nice (privileged) raises it; the site factor adds.
    let j2 = PriorityInput {
        nice: -100,
        site_factor: 1000,
        ..j.clone()
    };
    assert_eq!(
        multifactor_with_fairshare(&p, &j2, &ctx(), 0.75, 7 * DAY).priority,
        9800
    );
    // Held: 0 whatever the factors.
    let held = PriorityInput { held: true, ..j };
    assert_eq!(
        multifactor_with_fairshare(&p, &held, &ctx(), 0.75, 7 * DAY).priority,
        0
    );
}

#[test]
fn tres_factors() {
    let p = params(&[("PriorityWeightTRES", "CPU=1000,Mem=2000,GRES/gpu=3000")]);
    let j = PriorityInput {
        req_cpus: 8,
        tres: vec![("GRES/gpu".into(), 2.0)],
        ..job()
    };
    let f = multifactor_with_fairshare(&p, &j, &ctx(), 0.0, 0);
    assert_eq!(
        f.norm.tres,
        vec![
            ("cpu".to_string(), 0.1),
            ("mem".to_string(), 0.25),
            ("gres/gpu".to_string(), 0.25)
        ]
    );
    assert_eq!(
        f.tres,
        vec![
            ("cpu".to_string(), 100.0),
            ("mem".to_string(), 500.0),
            ("gres/gpu".to_string(), 750.0)
        ]
    );
    assert_eq!(f.priority, 1350);
    // NO_NORMAL_TRES: the raw count is the factor.
    let p = params(&[
        ("PriorityWeightTRES", "GRES/gpu=3000"),
        ("PriorityFlags", "NO_NORMAL_TRES"),
    ]);
    let f = multifactor_with_fairshare(&p, &j, &ctx(), 0.0, 0);
    assert_eq!(f.tres, vec![("gres/gpu".to_string(), 6000.0)]);
    // A TRES the cluster has none of: factor 0.
    let p = params(&[("PriorityWeightTRES", "license/matlab=50")]);
    let f = multifactor_with_fairshare(&p, &j, &ctx(), 0.0, 0);
    assert_eq!(f.tres, vec![("license/matlab".to_string(), 0.0)]);
}

#[test]
fn partition_qos_assoc_normalisation() {
    let p = params(&[
        ("PriorityWeightPartition", "1000"),
        ("PriorityWeightQOS", "1000"),
        ("PriorityWeightAssoc", "1000"),
    ]);
    // A single partition: its own factor is the maximum → 1.
    let single = PriorityContext {
        max_partition_job_factor: 1,
        ..ctx()
    };
    let j = PriorityInput {
        qos_priority: 25,
        assoc_priority: 10,
        ..job()
    };
    let f = multifactor_with_fairshare(&p, &j, &single, 0.0, 0);
    assert_eq!(f.norm.partition, 1.0);
    assert_eq!(f.norm.qos, 0.25);
    assert_eq!(f.norm.assoc, 1.0);
    assert_eq!(f.priority, 2250);
    // All maxima 0 (nothing configured): factors 0, not NaN.
    let zero = PriorityContext {
        max_partition_job_factor: 0,
        max_qos_priority: 0,
        max_assoc_priority: 0,
        ..ctx()
    };
    let f = multifactor_with_fairshare(&p, &j, &zero, 0.0, 0);
    assert_eq!(
        (f.norm.partition, f.norm.qos, f.norm.assoc),
        (0.0, 0.0, 0.0)
    );
    assert_eq!(f.priority, 1);
    // NO_NORMAL_*: the raw values.
    let p = params(&[
        ("PriorityWeightPartition", "10"),
        ("PriorityWeightQOS", "10"),
        ("PriorityWeightAssoc", "10"),
        (
            "PriorityFlags",
            "NO_NORMAL_PART,NO_NORMAL_QOS,NO_NORMAL_ASSOC",
        ),
    ]);
    let f = multifactor_with_fairshare(&p, &j, &ctx(), 0.0, 0);
    assert_eq!(
        (f.norm.partition, f.norm.qos, f.norm.assoc),
        (1.0, 25.0, 10.0)
    );
    assert_eq!(f.priority, 360);
}

#[test]
fn all_weights_zero_gives_one() {
    let p = PriorityParams::default();
    let f = multifactor_with_fairshare(&p, &job(), &ctx(), 1.0, 100 * DAY);
    assert_eq!(f.priority, 1);
    assert_eq!(f.total(), 0.0);
    // A large nice cannot push an eligible job below 1.
    let j = PriorityInput {
        nice: 2_147_483_645,
        ..job()
    };
    assert_eq!(
        multifactor_with_fairshare(&p, &j, &ctx(), 1.0, 0).priority,
        1
    );
}

#[test]
fn rounding_and_limits() {
    assert_eq!(to_priority(1000.9), 1000);
    assert_eq!(to_priority(0.5), 1);
    assert_eq!(to_priority(-7.0), 1);
    assert_eq!(to_priority(f64::NAN), 1);
    assert_eq!(to_priority(1e20), MAX_PRIORITY);
    let p = params(&[("PriorityWeightAge", "1000"), ("PriorityMaxAge", "3")]);
    // One minute of three: 333.33 → 333.
    let f = multifactor_with_fairshare(&p, &job(), &ctx(), 0.0, 60);
    assert_eq!(f.priority, 333);
    // Every weight at the maximum and every factor at 1: capped, no overflow.
    let m = "4294967295";
    let p = params(&[
        ("PriorityWeightAge", m),
        ("PriorityWeightFairshare", m),
        ("PriorityWeightJobSize", m),
        ("PriorityWeightPartition", m),
        ("PriorityWeightQOS", m),
        ("PriorityWeightAssoc", m),
    ]);
    let f = multifactor_with_fairshare(&p, &job(), &ctx(), 1.0, 30 * DAY);
    assert_eq!(f.priority, MAX_PRIORITY);
}

#[test]
fn incr_only_never_lowers() {
    let p = params(&[
        ("PriorityWeightFairshare", "1000"),
        ("PriorityFlags", "INCR_ONLY"),
    ]);
    let j = PriorityInput {
        prev_priority: Some(900),
        ..job()
    };
    assert_eq!(
        multifactor_with_fairshare(&p, &j, &ctx(), 0.5, 0).priority,
        900
    );
    assert_eq!(
        multifactor_with_fairshare(&p, &j, &ctx(), 0.95, 0).priority,
        950
    );
    let p = params(&[("PriorityWeightFairshare", "1000")]);
    assert_eq!(
        multifactor_with_fairshare(&p, &j, &ctx(), 0.5, 0).priority,
        500
    );
}

#[test]
fn fair_share_from_the_tree() {
    let p = params(&[
        ("PriorityWeightFairshare", "1000"),
        ("PriorityCalcPeriod", "5"),
    ]);
    let mut m = Multifactor::new(p, 0);
    m.tree
        .add_account("physics", "root", Shares::Value(1))
        .unwrap();
    m.tree
        .add_account("chem", "root", Shares::Value(1))
        .unwrap();
    m.tree
        .add_user("alice", "physics", Shares::Value(1))
        .unwrap();
    m.tree.add_user("bob", "chem", Shares::Value(1)).unwrap();
    assert!(m.tick(0));
    let alice = PriorityInput {
        assoc_path: Some("root/physics/alice".into()),
        ..job()
    };
    let bob = PriorityInput {
        assoc_path: Some("root/chem/bob".into()),
        job_id: 8,
        ..job()
    };
    // No usage yet: both tie at the top.
    assert_eq!(m.priority(&alice, &ctx(), 0).priority, 1000);
    assert_eq!(m.priority(&bob, &ctx(), 0).priority, 1000);
    // Alice runs a job; not recomputed until the calc period has passed.
    m.tree
        .record_job_usage("alice", "physics", 8, 3600, 60)
        .unwrap();
    assert!(!m.tick(60));
    assert_eq!(m.priority(&alice, &ctx(), 60).priority, 1000);
    assert!(m.tick(300));
    assert_eq!(m.priority(&alice, &ctx(), 300).priority, 500);
    assert_eq!(m.priority(&bob, &ctx(), 300).priority, 1000);
    assert_eq!(m.report().factor_for_user("alice", "physics"), Some(0.5));
    // An unknown association: fair share 0.
    let stranger = PriorityInput {
        assoc_path: Some("root/none/x".into()),
        ..job()
    };
    assert_eq!(m.priority(&stranger, &ctx(), 300).norm.fairshare, 0.0);
    // Switching to classic recomputes at once.
    let mut classic = m.params.clone();
    classic.flags.no_fair_tree = true;
    m.reconfigure(classic);
    assert_eq!(m.report().algorithm, Algorithm::Classic);
    let f = m.priority(&alice, &ctx(), 300).norm.fairshare;
    // alice: S .5, usage all hers (UE 1) → 2^-2.
    assert!(close(f, 0.25), "{f}");
    // The same via the free function.
    let direct = multifactor(&m.params, &alice, &ctx(), Some(m.report()), 300);
    assert_eq!(direct, m.priority(&alice, &ctx(), 300));
}

#[test]
fn deterministic() {
    let p = params(&[
        ("PriorityWeightAge", "1000"),
        ("PriorityWeightFairshare", "10000"),
        ("PriorityWeightJobSize", "1000"),
        ("PriorityWeightTRES", "CPU=1000,Mem=2000,GRES/gpu=3000"),
    ]);
    let mut t = FairShareTree::default();
    t.record_job_usage("u", "a", 3, 77, 5).unwrap();
    t.record_job_usage("v", "a", 1, 12, 9).unwrap();
    let r = t.compute(p.algorithm(), 1.0);
    let j = PriorityInput {
        assoc_path: Some("a/v".into()),
        ..job()
    };
    let a = multifactor(&p, &j, &ctx(), Some(&r), 12_345);
    for _ in 0..5 {
        let t2 = t.clone();
        let r2 = t2.compute(p.algorithm(), 1.0);
        assert_eq!(multifactor(&p, &j, &ctx(), Some(&r2), 12_345), a);
    }
}

fn arb_params() -> impl Strategy<Value = PriorityParams> {
    (
        prop::array::uniform6(0u32..100_000),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        prop_oneof![Just(None), (0u64..30 * 86_400).prop_map(Some)],
        prop::collection::vec(0.0f64..5000.0, 0..3),
    )
        .prop_map(|(w, favor_small, relative, accrue, max_age, tw)| {
            let mut p = PriorityParams {
                weight_age: w[0],
                weight_assoc: w[1],
                weight_fairshare: w[2],
                weight_job_size: w[3],
                weight_partition: w[4],
                weight_qos: w[5],
                favor_small,
                max_age,
                ..PriorityParams::default()
            };
            p.flags.small_relative_to_time = relative;
            p.flags.accrue_always = accrue;
            let names = ["cpu", "mem", "gres/gpu"];
            p.weight_tres = tw
                .into_iter()
                .enumerate()
                .map(|(i, w)| (names[i].to_string(), w))
                .collect();
            p
        })
}

fn arb_job() -> impl Strategy<Value = PriorityInput> {
    (
        (
            0i64..1_000_000,
            prop::option::of(0i64..1_000_000),
            any::<bool>(),
            -10_000i32..10_000,
        ),
        (
            0u32..200,
            0u32..10_000,
            0u64..10_000_000,
            prop::option::of(0u32..100_000),
            0.0f64..100.0,
        ),
        (0u32..1000, 0u32..1000, 0u32..1000),
    )
        .prop_map(
            |((submit, elig, held, nice), (nodes, cpus, mem, tl, gpus), (pj, q, a))| {
                PriorityInput {
                    job_id: 1,
                    partition: "p".into(),
                    submit_time: submit,
                    eligible_time: elig,
                    held,
                    nice,
                    req_nodes: nodes,
                    req_cpus: cpus,
                    req_mem_mb: mem,
                    time_limit: tl,
                    tres: vec![("gres/gpu".into(), gpus)],
                    partition_priority_job_factor: pj,
                    qos_priority: q,
                    assoc_priority: a,
                    ..PriorityInput::default()
                }
            },
        )
}

fn arb_ctx() -> impl Strategy<Value = PriorityContext> {
    (
        0u32..100,
        0u32..10_000,
        0u64..10_000_000,
        0.0f64..64.0,
        0u32..1000,
        0u32..1000,
        0u32..1000,
    )
        .prop_map(|(n, c, m, g, pj, q, a)| PriorityContext {
            total_nodes: n,
            total_cpus: c,
            total_mem_mb: m,
            tres_totals: vec![("gres/gpu".into(), g)],
            max_partition_job_factor: pj,
            max_qos_priority: q,
            max_assoc_priority: a,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn factors_within_unit_interval(
        p in arb_params(), j in arb_job(), c in arb_ctx(),
        fs in -1.0f64..2.0, now in -1000i64..3_000_000,
    ) {
        let f = multifactor_with_fairshare(&p, &j, &c, fs, now);
        let n = &f.norm;
        for (name, v) in [("age", n.age), ("assoc", n.assoc), ("fairshare", n.fairshare),
                          ("job_size", n.job_size), ("partition", n.partition), ("qos", n.qos)] {
            prop_assert!((0.0..=1.0).contains(&v), "{} = {}", name, v);
        }
        for (name, v) in &n.tres {
            prop_assert!((0.0..=1.0).contains(v), "{} = {}", name, v);
        }
        if j.held {
            prop_assert_eq!(f.priority, 0);
        } else {
            prop_assert!(f.priority >= 1);
        }
        prop_assert_eq!(&f, &multifactor_with_fairshare(&p, &j, &c, fs, now));
    }

    #[test]
    fn priority_monotone_in_age(
        p in arb_params(), j in arb_job(), c in arb_ctx(), fs in 0.0f64..1.0,
        now in 0i64..2_000_000, later in 0i64..2_000_000,
    ) {
        let a = multifactor_with_fairshare(&p, &j, &c, fs, now);
        let b = multifactor_with_fairshare(&p, &j, &c, fs, now + later);
        prop_assert!(b.norm.age >= a.norm.age);
        prop_assert!(b.priority >= a.priority, "{} < {}", b.priority, a.priority);
    }

    #[test]
    fn priority_monotone_in_fairshare(
        p in arb_params(), j in arb_job(), c in arb_ctx(),
        fs in 0.0f64..1.0, more in 0.0f64..1.0, now in 0i64..2_000_000,
    ) {
        let a = multifactor_with_fairshare(&p, &j, &c, fs, now);
        let b = multifactor_with_fairshare(&p, &j, &c, (fs + more).min(1.0), now);
        prop_assert!(b.priority >= a.priority, "{} < {}", b.priority, a.priority);
    }
}
