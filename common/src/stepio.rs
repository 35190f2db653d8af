//! The I/O stream between a step's node daemons and its `srun`.
//!
//! Each node daemon connects to the address `srun` gave, sends one JSON
//! frame ([`IoHello`], proving with the step credential's signature that it
//! serves this step), then binary frames both ways:
//! `[kind: u8][task: u32 BE][len: u32 BE][payload]`. Node → srun: task
//! stdout, stderr and exit (payload: raw wait status, i32 BE). srun → node:
//! stdin for a task and its end.

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct IoHello {
    pub job_id: u32,
    pub step_id: u32,
    pub node_index: u32,
    /// The step credential's signature.
    pub key: String,
}

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
    fn from_u8(b: u8) -> Option<IoKind> {
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

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(9 + self.data.len());
        out.push(self.kind as u8);
        out.extend_from_slice(&self.task.to_be_bytes());
        out.extend_from_slice(&(self.data.len() as u32).to_be_bytes());
        out.extend_from_slice(&self.data);
        out
    }
}

pub async fn write_io<W: AsyncWrite + Unpin>(w: &mut W, f: &IoFrame) -> std::io::Result<()> {
    w.write_all(&f.encode()).await
}

/// Read one frame; `Ok(None)` at a clean end of stream.
pub async fn read_io<R: AsyncRead + Unpin>(r: &mut R) -> std::io::Result<Option<IoFrame>> {
    let mut head = [0u8; 9];
    match r.read_exact(&mut head).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let kind = IoKind::from_u8(head[0]).ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidData, "bad I/O frame kind")
    })?;
    let task = u32::from_be_bytes([head[1], head[2], head[3], head[4]]);
    let len = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) as usize;
    if len > MAX_IO {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "I/O frame too large",
        ));
    }
    let mut data = vec![0u8; len];
    r.read_exact(&mut data).await?;
    Ok(Some(IoFrame { kind, task, data }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_round_trip_and_bad_ones_are_refused() {
        let frames = vec![
            IoFrame {
                kind: IoKind::Stdout,
                task: 3,
                data: b"hello\n".to_vec(),
            },
            IoFrame::exit(7, 256),
        ];
        let mut buf = Vec::new();
        for f in &frames {
            write_io(&mut buf, f).await.unwrap();
        }
        let mut r = &buf[..];
        assert_eq!(read_io(&mut r).await.unwrap().unwrap(), frames[0]);
        let e = read_io(&mut r).await.unwrap().unwrap();
        assert_eq!((e.kind, e.task, e.status()), (IoKind::Exit, 7, 256));
        assert!(read_io(&mut r).await.unwrap().is_none());
        let mut bad: &[u8] = &[9, 0, 0, 0, 0, 0, 0, 0, 0];
        assert!(read_io(&mut bad).await.is_err());
    }
}
