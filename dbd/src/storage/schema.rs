//! The schema, as a list of versioned migrations. `schema_version` holds the
//! version the database is at; a daemon applies the migrations above it in
//! order and refuses a database newer than it knows.
//!
//! DDL is written once with holes the backend fills ([`Backend::ddl`]):
//! integers are BIGINT, short names VARCHAR (they are keys), long strings
//! TEXT. Column names avoid words reserved on any of the three servers
//! (`user`, `partition`, `usage`, `end`, `key`...).
//!
//! Append new migrations; never edit one that has shipped.

use super::sql::{Backend, Q};

pub struct Migration {
    pub version: u32,
    pub name: &'static str,
    pub statements: &'static [&'static str],
}

/// The newest schema this build knows.
pub const LATEST: u32 = 11;

pub const VERSION_TABLE: &str = "CREATE TABLE IF NOT EXISTS schema_version (
    id BIGINT NOT NULL PRIMARY KEY,
    version BIGINT NOT NULL,
    updated BIGINT NOT NULL){opts}";

pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "clusters, accounts, users, associations, qos, jobs, steps, ingest sequence",
        statements: &[
            "CREATE TABLE clusters (
                name VARCHAR(64) NOT NULL PRIMARY KEY,
                control_host VARCHAR(255) NOT NULL DEFAULT '',
                control_port BIGINT NOT NULL DEFAULT 0,
                rpc_version BIGINT NOT NULL DEFAULT 0,
                cpus BIGINT NOT NULL DEFAULT 0,
                nodes BIGINT NOT NULL DEFAULT 0,
                tres {text},
                created BIGINT NOT NULL){opts}",
            "CREATE TABLE accounts (
                name VARCHAR(128) NOT NULL PRIMARY KEY,
                description VARCHAR(255) NOT NULL DEFAULT '',
                organization VARCHAR(255) NOT NULL DEFAULT '',
                created BIGINT NOT NULL){opts}",
            "CREATE TABLE users (
                name VARCHAR(128) NOT NULL PRIMARY KEY,
                default_account VARCHAR(128) NOT NULL DEFAULT '',
                admin_level BIGINT NOT NULL DEFAULT 0,
                created BIGINT NOT NULL){opts}",
            "CREATE TABLE assocs (
                id {id},
                cluster VARCHAR(64) NOT NULL,
                account VARCHAR(128) NOT NULL,
                user_name VARCHAR(128) NOT NULL DEFAULT '',
                part VARCHAR(64) NOT NULL DEFAULT '',
                parent_acct VARCHAR(128),
                shares BIGINT NOT NULL DEFAULT 1,
                grp_jobs BIGINT,
                grp_submit_jobs BIGINT,
                grp_wall BIGINT,
                max_jobs BIGINT,
                max_submit_jobs BIGINT,
                max_wall BIGINT,
                grp_tres VARCHAR(512),
                grp_tres_mins VARCHAR(512),
                max_tres VARCHAR(512),
                max_tres_per_user VARCHAR(512),
                max_tres_mins VARCHAR(512),
                qos_list VARCHAR(1024) NOT NULL DEFAULT '',
                default_qos VARCHAR(64),
                created BIGINT NOT NULL,
                modified BIGINT NOT NULL){opts}",
            "CREATE UNIQUE INDEX assocs_key ON assocs (cluster, account, user_name, part)",
            "CREATE INDEX assocs_parent ON assocs (cluster, parent_acct)",
            "CREATE TABLE qos (
                id {id},
                name VARCHAR(64) NOT NULL,
                description VARCHAR(255) NOT NULL DEFAULT '',
                priority BIGINT NOT NULL DEFAULT 0,
                flags VARCHAR(1024) NOT NULL DEFAULT '',
                preempt VARCHAR(1024) NOT NULL DEFAULT '',
                preempt_mode VARCHAR(32) NOT NULL DEFAULT 'cluster',
                grace_time BIGINT NOT NULL DEFAULT 0,
                usage_factor {dbl} NOT NULL DEFAULT 1.0,
                grp_jobs BIGINT,
                grp_submit_jobs BIGINT,
                grp_wall BIGINT,
                max_jobs_per_user BIGINT,
                max_submit_jobs_per_user BIGINT,
                max_jobs_per_account BIGINT,
                max_submit_jobs_per_account BIGINT,
                max_wall BIGINT,
                grp_tres VARCHAR(512),
                grp_tres_mins VARCHAR(512),
                max_tres_per_user VARCHAR(512),
                max_tres_per_job VARCHAR(512),
                max_tres_per_node VARCHAR(512),
                max_tres_per_account VARCHAR(512),
                min_tres_per_job VARCHAR(512),
                created BIGINT NOT NULL){opts}",
            "CREATE UNIQUE INDEX qos_name ON qos (name)",
            "CREATE TABLE jobs (
                cluster VARCHAR(64) NOT NULL,
                job_id BIGINT NOT NULL,
                submit_time BIGINT NOT NULL,
                array_job_id BIGINT,
                array_task_id BIGINT,
                name {text} NOT NULL,
                user_name VARCHAR(128) NOT NULL,
                uid BIGINT NOT NULL,
                group_name VARCHAR(128) NOT NULL,
                gid BIGINT NOT NULL,
                account VARCHAR(128) NOT NULL,
                part VARCHAR(64) NOT NULL,
                qos VARCHAR(64) NOT NULL,
                state VARCHAR(20) NOT NULL,
                exit_status BIGINT NOT NULL,
                eligible_time BIGINT,
                start_time BIGINT,
                end_time BIGINT,
                time_limit BIGINT,
                priority BIGINT NOT NULL,
                nodelist {text} NOT NULL,
                node_count BIGINT NOT NULL,
                alloc_cpus BIGINT NOT NULL,
                req_cpus BIGINT NOT NULL,
                req_mem BIGINT NOT NULL,
                alloc_tres {text} NOT NULL,
                req_tres {text} NOT NULL,
                work_dir {text} NOT NULL,
                modified BIGINT NOT NULL,
                PRIMARY KEY (cluster, job_id, submit_time)){opts}",
            "CREATE INDEX jobs_end ON jobs (cluster, end_time)",
            "CREATE INDEX jobs_start ON jobs (cluster, start_time)",
            "CREATE INDEX jobs_user ON jobs (user_name)",
            "CREATE INDEX jobs_account ON jobs (account)",
            "CREATE TABLE steps (
                cluster VARCHAR(64) NOT NULL,
                job_id BIGINT NOT NULL,
                job_submit BIGINT NOT NULL,
                step_id BIGINT NOT NULL,
                name {text} NOT NULL,
                state VARCHAR(20) NOT NULL,
                nodelist {text} NOT NULL,
                node_count BIGINT NOT NULL,
                ntasks BIGINT NOT NULL,
                alloc_cpus BIGINT NOT NULL,
                start_time BIGINT NOT NULL,
                end_time BIGINT,
                exit_status BIGINT NOT NULL,
                total_cpu_usec BIGINT NOT NULL,
                user_cpu_usec BIGINT NOT NULL,
                sys_cpu_usec BIGINT NOT NULL,
                max_rss_kib BIGINT NOT NULL,
                max_rss_node VARCHAR(128) NOT NULL,
                max_vmsize_kib BIGINT NOT NULL,
                alloc_tres {text} NOT NULL,
                PRIMARY KEY (cluster, job_id, job_submit, step_id)){opts}",
            "CREATE INDEX steps_end ON steps (cluster, end_time)",
            "CREATE TABLE acct_seq (
                cluster VARCHAR(64) NOT NULL,
                epoch BIGINT NOT NULL,
                applied_through BIGINT NOT NULL,
                PRIMARY KEY (cluster, epoch)){opts}",
            "CREATE TABLE records_seen (
                cluster VARCHAR(64) NOT NULL,
                epoch BIGINT NOT NULL,
                seq BIGINT NOT NULL,
                PRIMARY KEY (cluster, epoch, seq)){opts}",
            "INSERT INTO qos (name, description, created) VALUES ('normal', 'Normal QOS default', 0)",
            "INSERT INTO accounts (name, description, organization, created)
                VALUES ('root', 'default root account', 'root', 0)",
            "INSERT INTO users (name, default_account, admin_level, created) VALUES ('root', 'root', 2, 0)",
        ],
    },
    Migration {
        version: 2,
        name: "node events, usage rollups, submit line and comment",
        statements: &[
            "CREATE TABLE node_events (
                cluster VARCHAR(64) NOT NULL,
                node VARCHAR(128) NOT NULL,
                time_start BIGINT NOT NULL,
                time_end BIGINT,
                state VARCHAR(64) NOT NULL,
                reason {text},
                reason_uid BIGINT,
                cpus BIGINT NOT NULL,
                PRIMARY KEY (cluster, node, time_start)){opts}",
            "CREATE INDEX node_events_end ON node_events (cluster, time_end)",
            "CREATE TABLE usage_cluster (
                cluster VARCHAR(64) NOT NULL,
                span BIGINT NOT NULL,
                time_start BIGINT NOT NULL,
                cpu_count BIGINT NOT NULL,
                total_secs BIGINT NOT NULL,
                alloc_secs BIGINT NOT NULL,
                down_secs BIGINT NOT NULL,
                idle_secs BIGINT NOT NULL,
                PRIMARY KEY (cluster, span, time_start)){opts}",
            "CREATE TABLE usage_assoc (
                cluster VARCHAR(64) NOT NULL,
                span BIGINT NOT NULL,
                time_start BIGINT NOT NULL,
                account VARCHAR(128) NOT NULL,
                user_name VARCHAR(128) NOT NULL,
                alloc_secs BIGINT NOT NULL,
                PRIMARY KEY (cluster, span, time_start, account, user_name)){opts}",
            "CREATE TABLE rollup_state (
                cluster VARCHAR(64) NOT NULL PRIMARY KEY,
                hour_done BIGINT NOT NULL){opts}",
            "ALTER TABLE jobs ADD COLUMN submit_line {text}",
            "ALTER TABLE jobs ADD COLUMN job_comment {text}",
        ],
    },
    Migration {
        version: 3,
        name: "who cancelled a job",
        statements: &["ALTER TABLE jobs ADD COLUMN requid BIGINT"],
    },
    Migration {
        version: 4,
        name: "time a job spent suspended",
        statements: &["ALTER TABLE jobs ADD COLUMN time_suspended BIGINT"],
    },
    Migration {
        version: 5,
        name: "when a job's current suspension began",
        statements: &["ALTER TABLE jobs ADD COLUMN suspend_start BIGINT"],
    },
    Migration {
        version: 6,
        name: "batch scripts and environments (AccountingStoreFlags), each kept once",
        statements: &[
            "CREATE TABLE job_texts (
                hash VARCHAR(64) NOT NULL PRIMARY KEY,
                body {longtext} NOT NULL){opts}",
            "ALTER TABLE jobs ADD COLUMN script_hash VARCHAR(64)",
            "ALTER TABLE jobs ADD COLUMN env_hash VARCHAR(64)",
        ],
    },
    Migration {
        version: 7,
        name: "workload characterization keys",
        statements: &["ALTER TABLE jobs ADD COLUMN wckey {text}"],
    },
    Migration {
        version: 8,
        name: "constraints, scheduler flag, pending reason, reservation, restarts, file \
               patterns and failed node of jobs",
        statements: &[
            "ALTER TABLE jobs ADD COLUMN constraints {text}",
            "ALTER TABLE jobs ADD COLUMN sched_flag VARCHAR(32)",
            "ALTER TABLE jobs ADD COLUMN state_reason {text}",
            "ALTER TABLE jobs ADD COLUMN reservation VARCHAR(128)",
            "ALTER TABLE jobs ADD COLUMN restarts BIGINT",
            "ALTER TABLE jobs ADD COLUMN std_out {text}",
            "ALTER TABLE jobs ADD COLUMN std_err {text}",
            "ALTER TABLE jobs ADD COLUMN std_in {text}",
            "ALTER TABLE jobs ADD COLUMN failed_node VARCHAR(128)",
        ],
    },
    Migration {
        version: 9,
        name: "transactions: the changes made through slurmdbd",
        statements: &[
            "CREATE TABLE txns (
                id {id},
                time_stamp BIGINT NOT NULL,
                action VARCHAR(64) NOT NULL,
                actor VARCHAR(128) NOT NULL,
                cluster VARCHAR(64) NOT NULL DEFAULT '',
                name_where {text} NOT NULL,
                info {text} NOT NULL){opts}",
            "CREATE INDEX txns_time ON txns (time_stamp)",
        ],
    },
    Migration {
        version: 10,
        name: "coordinators: users who manage accounts and their sub-accounts",
        statements: &[
            "CREATE TABLE coords (
                user_name VARCHAR(128) NOT NULL,
                account VARCHAR(128) NOT NULL,
                created BIGINT NOT NULL){opts}",
            "CREATE UNIQUE INDEX coords_key ON coords (user_name, account)",
        ],
    },
    Migration {
        version: 11,
        name: "reservations: a record per time each held the same resources",
        statements: &[
            "CREATE TABLE resvs (
                cluster VARCHAR(64) NOT NULL,
                resv_name VARCHAR(128) NOT NULL,
                time_start BIGINT NOT NULL,
                time_end BIGINT NOT NULL,
                nodelist {text} NOT NULL,
                node_count BIGINT NOT NULL,
                cpus BIGINT NOT NULL,
                flags {text} NOT NULL,
                users {text} NOT NULL,
                accounts {text} NOT NULL,
                PRIMARY KEY (cluster, resv_name, time_start)){opts}",
            "CREATE INDEX resvs_time ON resvs (cluster, time_start, time_end)",
            "CREATE INDEX jobs_resv ON jobs (cluster, reservation)",
        ],
    },
];

/// The statements of `m` for `b`.
pub fn statements(m: &Migration, b: Backend) -> Vec<String> {
    m.statements.iter().map(|s| b.ddl(s)).collect()
}

/// Record that the database is at `version`.
pub fn set_version(version: u32, now: i64) -> Q {
    let mut q = Q::new("UPDATE schema_version SET version=");
    q.bind(version)
        .push(", updated=")
        .bind(now)
        .push(" WHERE id=1");
    q
}
