fn main() {
    std::process::exit(slurm_cli::shares::sprio_main())
}
