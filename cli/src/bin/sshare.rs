fn main() {
    std::process::exit(slurm_cli::shares::sshare_main())
}
