//! `scripts/compat-report`: how many of the options, environment variables
//! and command words of Slurm 25.11's man pages each command supports.
//! `--markdown` prints `docs/compat.md` instead; `--write` rewrites it and
//! the README's table.

use std::path::PathBuf;

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let pages = match slurm_tests::compat::load(&root.join("cli/compat/slurm-25.11")) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("compat-report: {e}");
            std::process::exit(1);
        }
    };
    let arg = |a: &str| std::env::args().any(|x| x == a);
    if arg("--write") {
        let readme = root.join("README.md");
        let text = std::fs::read_to_string(&readme).unwrap_or_default();
        let Some(new) = slurm_tests::compat::with_summary(&text, &pages) else {
            eprintln!("compat-report: README.md has no <!-- compat-report --> block");
            std::process::exit(1);
        };
        let md = slurm_tests::compat::markdown(&pages);
        for (path, body) in [(readme, new), (root.join("docs/compat.md"), md)] {
            if let Err(e) = std::fs::write(&path, body) {
                eprintln!("compat-report: cannot write {}: {e}", path.display());
                std::process::exit(1);
            }
        }
        return;
    }
    let text = if arg("--markdown") {
        slurm_tests::compat::markdown(&pages)
    } else {
        slurm_tests::compat::summary(&pages)
    };
    use std::io::Write;
    let _ = std::io::stdout().write_all(text.as_bytes());
}
