fn main() {
    std::process::exit(slurm_cli::sbatch::main())
}
