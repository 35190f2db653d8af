fn main() {
    std::process::exit(slurm_cli::sinfo::main())
}
