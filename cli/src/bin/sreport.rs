fn main() {
    std::process::exit(slurm_cli::sreport::main())
}
