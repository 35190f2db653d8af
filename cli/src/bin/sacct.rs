fn main() {
    std::process::exit(slurm_cli::sacct::main())
}
