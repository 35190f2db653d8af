fn main() {
    std::process::exit(slurm_cli::srun::salloc_main())
}
