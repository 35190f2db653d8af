fn main() {
    std::process::exit(slurm_cli::srun::srun_main())
}
