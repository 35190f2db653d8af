//! Compiles the gRPC services in `slurm/v1/*.proto` (with the protoc that
//! `scripts/setup` installs, or the one `PROTOC` names).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "slurm/v1/common.proto",
        "slurm/v1/slurmd.proto",
        "slurm/v1/slurmctld.proto",
        "slurm/v1/slurmdbd.proto",
    ];
    for f in files {
        println!("cargo:rerun-if-changed={f}");
    }
    tonic_build::configure()
        // Job listings are assembled from per-job encodings the controller
        // keeps: shared buffers, not copies.
        .bytes([".slurm.v1.EncodedJobs.jobs", ".slurm.v1.Bcast.data"])
        .build_server(true)
        .build_client(true)
        .compile_protos(&files, &["."])?;
    Ok(())
}
