//! Whole-cluster test harness: starts the real binaries on loopback in a
//! temporary directory. The tests themselves live in `tests/tests/cluster.rs`
//! (one integration-test binary).
