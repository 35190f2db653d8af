//! The Standard Workload Format of the Parallel Workloads Archive
//! (<https://www.cs.huji.ac.il/labs/parallel/workload/swf.html>).
//!
//! A trace is text, plain or gzip-compressed (recognised by its magic
//! bytes, not its name): header lines start with `;` and are kept as they
//! are (they carry the acknowledgements the archive asks users to cite);
//! every other non-blank line is one job of 18 whitespace-separated fields,
//! `-1` meaning unknown. Fields 6, 7 and 10 (CPU time and memory) may be
//! decimals in some traces; all the others are integers.
//!
//! This module only reads; what a record means for the simulation (which
//! jobs are usable, their time limits) is decided in [`crate::workload`].

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// The fields of one SWF record, named as the format defines them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SwfJob {
    /// 1: job number.
    pub id: i64,
    /// 2: submit time, seconds from the start of the trace.
    pub submit: i64,
    /// 3: wait time (ignored: the simulation produces its own).
    pub wait: i64,
    /// 4: run time, seconds.
    pub run: i64,
    /// 5: allocated processors.
    pub procs: i64,
    /// 6: average CPU time used, seconds.
    pub avg_cpu: f64,
    /// 7: used memory, KB per processor.
    pub used_mem: f64,
    /// 8: requested processors.
    pub req_procs: i64,
    /// 9: requested time, seconds (the user's estimate: the time limit).
    pub req_time: i64,
    /// 10: requested memory, KB per processor.
    pub req_mem: f64,
    /// 11: status: 1 completed, 0 failed, 5 cancelled; 2, 3, 4 partial
    /// executions of a checkpointed job.
    pub status: i64,
    /// 12: user id.
    pub user: i64,
    /// 13: group id.
    pub group: i64,
    /// 14: executable (application) number.
    pub exe: i64,
    /// 15: queue number.
    pub queue: i64,
    /// 16: partition number.
    pub partition: i64,
    /// 17: preceding job number.
    pub preceding: i64,
    /// 18: think time from the preceding job, seconds.
    pub think: i64,
}

/// A whole trace as read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trace {
    /// The `;` header lines, verbatim (without the line break).
    pub header: Vec<String>,
    /// The records in file order.
    pub jobs: Vec<SwfJob>,
    /// Malformed lines skipped in lenient mode: (line number, why).
    pub bad_lines: Vec<(usize, String)>,
}

#[derive(Debug, thiserror::Error)]
pub enum SwfError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}:{line}: {message}")]
    Line {
        path: String,
        line: usize,
        message: String,
    },
}

const NAMES: [&str; 18] = [
    "job number",
    "submit time",
    "wait time",
    "run time",
    "allocated processors",
    "average CPU time",
    "used memory",
    "requested processors",
    "requested time",
    "requested memory",
    "status",
    "user id",
    "group id",
    "executable number",
    "queue number",
    "partition number",
    "preceding job number",
    "think time",
];

/// Fields that may hold decimals (0-based).
const DECIMAL: [usize; 3] = [5, 6, 9];

impl Trace {
    /// Read the trace at `path` (plain or gzip). With `lenient`, malformed
    /// lines are skipped and listed in [`Trace::bad_lines`]; otherwise the
    /// first one is an error naming its line.
    pub fn read_path(path: &Path, lenient: bool) -> Result<Trace, SwfError> {
        let name = path.display().to_string();
        let io = |source| SwfError::Io {
            path: name.clone(),
            source,
        };
        let file = File::open(path).map_err(io)?;
        Trace::read(file, &name, lenient)
    }

    /// Read a trace from `r`; `name` is used in messages.
    pub fn read<R: Read>(r: R, name: &str, lenient: bool) -> Result<Trace, SwfError> {
        let io = |source| SwfError::Io {
            path: name.to_string(),
            source,
        };
        let mut buf = BufReader::new(r);
        let gz = buf.fill_buf().map_err(io)?.starts_with(&[0x1f, 0x8b]);
        if gz {
            let dec = flate2::bufread::MultiGzDecoder::new(buf);
            Trace::read_text(BufReader::new(dec), name, lenient)
        } else {
            Trace::read_text(buf, name, lenient)
        }
    }

    /// Parse SWF text.
    pub fn parse_str(text: &str, name: &str, lenient: bool) -> Result<Trace, SwfError> {
        Trace::read_text(text.as_bytes(), name, lenient)
    }

    fn read_text<R: BufRead>(mut r: R, name: &str, lenient: bool) -> Result<Trace, SwfError> {
        let mut trace = Trace::default();
        let mut raw = Vec::new();
        let mut lineno = 0;
        loop {
            raw.clear();
            let n = r
                .read_until(b'\n', &mut raw)
                .map_err(|source| SwfError::Io {
                    path: name.to_string(),
                    source,
                })?;
            if n == 0 {
                break;
            }
            lineno += 1;
            let parsed = match std::str::from_utf8(&raw) {
                Ok(line) => {
                    let line = line.trim_end_matches(['\n', '\r']);
                    let t = line.trim_start();
                    if t.starts_with(';') {
                        trace.header.push(line.to_string());
                        continue;
                    }
                    if t.trim().is_empty() {
                        continue;
                    }
                    parse_record(t)
                }
                Err(_) => Err("not valid UTF-8 text".to_string()),
            };
            match parsed {
                Ok(job) => trace.jobs.push(job),
                Err(message) if lenient => trace.bad_lines.push((lineno, message)),
                Err(message) => {
                    return Err(SwfError::Line {
                        path: name.to_string(),
                        line: lineno,
                        message,
                    })
                }
            }
        }
        Ok(trace)
    }
}

/// One record line (not a header, not blank).
pub fn parse_record(line: &str) -> Result<SwfJob, String> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    if fields.len() != 18 {
        return Err(format!("expected 18 fields, found {}", fields.len()));
    }
    let mut ints = [0i64; 18];
    let mut decs = [0f64; 18];
    for (i, f) in fields.iter().enumerate() {
        let bad = || format!("field {} ({}): '{f}' is not a number", i + 1, NAMES[i]);
        if DECIMAL.contains(&i) {
            decs[i] = f
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(bad)?;
        } else {
            ints[i] = f.parse::<i64>().map_err(|_| bad())?;
        }
    }
    let job = SwfJob {
        id: ints[0],
        submit: ints[1],
        wait: ints[2],
        run: ints[3],
        procs: ints[4],
        avg_cpu: decs[5],
        used_mem: decs[6],
        req_procs: ints[7],
        req_time: ints[8],
        req_mem: decs[9],
        status: ints[10],
        user: ints[11],
        group: ints[12],
        exe: ints[13],
        queue: ints[14],
        partition: ints[15],
        preceding: ints[16],
        think: ints[17],
    };
    if job.id < 1 {
        return Err(format!("field 1 (job number): {} is not positive", job.id));
    }
    if job.submit < 0 {
        return Err(format!(
            "field 2 (submit time): {} is negative (unknown submit times cannot be replayed)",
            job.submit
        ));
    }
    Ok(job)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    const SMALL: &str = "\
; Version: 2.2
; Acknowledge: somebody
;
    1        0     -1   1451  128     -1    -1   -1     -1    -1 -1   1   1  -1 -1 -1 -1 -1

2   10 5  20 4 12.5 1024.0 4 60 -1 1 7 1 3 1 0 -1 -1
";

    #[test]
    fn header_and_records() {
        let t = Trace::parse_str(SMALL, "small.swf", false).unwrap();
        assert_eq!(
            t.header,
            vec!["; Version: 2.2", "; Acknowledge: somebody", ";"]
        );
        assert_eq!(t.jobs.len(), 2);
        let j = t.jobs[0];
        assert_eq!(
            (j.id, j.submit, j.run, j.procs, j.req_time),
            (1, 0, 1451, 128, -1)
        );
        let j = t.jobs[1];
        assert_eq!((j.id, j.wait, j.avg_cpu, j.req_time), (2, 5, 12.5, 60));
        assert_eq!((j.status, j.user, j.queue, j.partition), (1, 7, 1, 0));
    }

    #[test]
    fn bad_lines_name_their_line_or_are_counted() {
        let text = "; h\n1 0 -1 10 1 -1 -1 -1 -1 -1 1 1 1 -1 -1 -1 -1 -1\n2 5 -1 10 1\n\
                    3 6 -1 ten 1 -1 -1 -1 -1 -1 1 1 1 -1 -1 -1 -1 -1\n";
        let e = Trace::parse_str(text, "t.swf", false).unwrap_err();
        assert_eq!(e.to_string(), "t.swf:3: expected 18 fields, found 5");
        let t = Trace::parse_str(text, "t.swf", true).unwrap();
        assert_eq!(t.jobs.len(), 1);
        assert_eq!(
            t.bad_lines,
            vec![
                (3, "expected 18 fields, found 5".to_string()),
                (4, "field 4 (run time): 'ten' is not a number".to_string())
            ]
        );
        let e = Trace::parse_str(
            "0 0 -1 10 1 -1 -1 -1 -1 -1 1 1 1 -1 -1 -1 -1 -1",
            "t.swf",
            false,
        )
        .unwrap_err();
        assert!(e.to_string().contains("job number"), "{e}");
        let e = Trace::parse_str(
            "1 -1 -1 10 1 -1 -1 -1 -1 -1 1 1 1 -1 -1 -1 -1 -1",
            "t.swf",
            false,
        )
        .unwrap_err();
        assert!(e.to_string().contains("submit time"), "{e}");
        let e = Trace::parse_str(
            "1 0 -1 10 1 -1 -1 -1 -1 -1 1 1 1 -1 -1 -1 -1 1e400",
            "t",
            false,
        )
        .unwrap_err();
        assert!(e.to_string().contains("think time"), "{e}");
    }

    #[test]
    fn gzip_is_recognised_by_content() {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(SMALL.as_bytes()).unwrap();
        let bytes = gz.finish().unwrap();
        let t = Trace::read(&bytes[..], "x", false).unwrap();
        assert_eq!(t, Trace::parse_str(SMALL, "x", false).unwrap());
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("trace.swf");
        std::fs::write(&p, &bytes).unwrap();
        assert_eq!(Trace::read_path(&p, false).unwrap().jobs.len(), 2);
        let e = Trace::read_path(&dir.path().join("missing.swf"), false).unwrap_err();
        assert!(e.to_string().contains("missing.swf"), "{e}");
    }

    #[test]
    fn truncated_gzip_is_an_error_not_a_panic() {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(SMALL.repeat(50).as_bytes()).unwrap();
        let bytes = gz.finish().unwrap();
        assert!(Trace::read(&bytes[..bytes.len() / 2], "x", false).is_err());
        assert!(Trace::read(&b"\xff\xfe garbage"[..], "x", false).is_err());
        assert!(Trace::read(&b"\xff\xfe garbage"[..], "x", true).is_ok());
    }
}
