fn main() {
    std::process::exit(slurm_cli::local::main())
}
