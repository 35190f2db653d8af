fn main() {
    std::process::exit(slurm_cli::scontrol::main())
}
