//! The I/O of a step's tasks, between its node daemons and its `srun`.
//!
//! It travels in the node daemon's `RunTasks` gRPC stream (see
//! [`crate::grpc::run_tasks`]) as frames: node → srun, task stdout, stderr
//! and exit (payload: raw wait status, i32 BE); srun → node, stdin for
//! task 0 and its end.

/// Largest payload of one frame.
pub const MAX_IO: usize = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum IoKind {
    Stdout = 1,
    Stderr = 2,
    Exit = 3,
    Stdin = 4,
    StdinEof = 5,
}

impl IoKind {
    pub fn from_u8(b: u8) -> Option<IoKind> {
        Some(match b {
            1 => IoKind::Stdout,
            2 => IoKind::Stderr,
            3 => IoKind::Exit,
            4 => IoKind::Stdin,
            5 => IoKind::StdinEof,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IoFrame {
    pub kind: IoKind,
    pub task: u32,
    pub data: Vec<u8>,
}

impl IoFrame {
    pub fn exit(task: u32, status: i32) -> IoFrame {
        IoFrame {
            kind: IoKind::Exit,
            task,
            data: status.to_be_bytes().to_vec(),
        }
    }

    /// The status of an `Exit` frame.
    pub fn status(&self) -> i32 {
        let mut b = [0u8; 4];
        for (i, v) in self.data.iter().take(4).enumerate() {
            b[i] = *v;
        }
        i32::from_be_bytes(b)
    }
}
