fn main() {
    std::process::exit(slurm_cli::squeue::main())
}
