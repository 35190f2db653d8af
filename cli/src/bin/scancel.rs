fn main() {
    std::process::exit(slurm_cli::scancel::main())
}
