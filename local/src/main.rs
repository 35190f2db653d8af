fn main() {
    std::process::exit(slurm_local::main())
}
