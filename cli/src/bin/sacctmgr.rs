fn main() {
    std::process::exit(slurm_cli::sacctmgr::main())
}
