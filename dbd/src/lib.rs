//! `slurmdbd`, the accounting daemon, is built in the accounting issue. The
//! crate exists so the workspace has DESIGN.md's layout; it holds no code yet.
