//! `scripts/compat-report`: how many of the options, environment variables
//! and command words of Slurm 25.11's man pages each command supports.
//! `--markdown` prints `docs/compat.md` instead.

use std::path::PathBuf;

fn main() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../cli/compat/slurm-25.11");
    let pages = match slurm_tests::compat::load(&dir) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("compat-report: {e}");
            std::process::exit(1);
        }
    };
    let markdown = std::env::args().any(|a| a == "--markdown");
    let text = if markdown {
        slurm_tests::compat::markdown(&pages)
    } else {
        slurm_tests::compat::summary(&pages)
    };
    use std::io::Write;
    let _ = std::io::stdout().write_all(text.as_bytes());
}
