fn main() {
    std::process::exit(slurm_cli::sdiag::main())
}
