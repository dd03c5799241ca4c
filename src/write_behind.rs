//! A file written on a thread of its own. A large output (a pyramidal mosaic of several
//! gigabytes) outgrows the page cache's allowance for unwritten data, after which each
//! write waits for the disk; written from the thread that composes it, composing stops
//! while it waits. Here the bytes are handed over in blocks, a few in flight, and the
//! caller goes on composing while the disk catches up.

use std::fs::File;
use std::io::{self, Write};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::thread::JoinHandle;

/// Bytes handed to the writing thread at a time.
const BLOCK: usize = 4 << 20;
/// Blocks waiting for the writing thread at most (memory: `DEPTH * BLOCK`).
const DEPTH: usize = 8;

/// A file written behind its writer ([`into_file`](Self::into_file) waits for every
/// byte). A write that fails is reported by a later call: the file's contents are then
/// incomplete. Dropped, it waits for what was handed over.
pub struct WriteBehind {
    block: Vec<u8>,
    to_disk: Option<SyncSender<Vec<u8>>>,
    thread: Option<JoinHandle<io::Result<File>>>,
}

impl WriteBehind {
    /// Starts the thread that writes `file` from where it stands.
    pub fn new(mut file: File) -> io::Result<WriteBehind> {
        let (to_disk, blocks) = sync_channel::<Vec<u8>>(DEPTH);
        let thread = std::thread::Builder::new().name("tessera-write".into()).spawn(move || {
            for block in blocks {
                file.write_all(&block)?;
            }
            Ok(file)
        })?;
        Ok(WriteBehind { block: Vec::new(), to_disk: Some(to_disk), thread: Some(thread) })
    }

    /// Every byte written, and the file (standing after them).
    pub fn into_file(mut self) -> io::Result<File> {
        self.hand_over()?;
        self.to_disk = None;
        self.join()
    }

    fn hand_over(&mut self) -> io::Result<()> {
        if self.block.is_empty() {
            return Ok(());
        }
        let block = std::mem::take(&mut self.block);
        match self.to_disk.as_ref().map(|t| t.send(block)) {
            Some(Ok(())) => Ok(()),
            // The thread has stopped: at its error.
            _ => {
                self.to_disk = None;
                Err(self.join().err().unwrap_or_else(|| io::Error::other("the writing thread stopped")))
            }
        }
    }

    /// The writing thread's end: the file, or why it stopped.
    fn join(&mut self) -> io::Result<File> {
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(done)) => done,
            Some(Err(_)) => Err(io::Error::other("the writing thread panicked")),
            None => Err(io::Error::other("the file was already handed back")),
        }
    }
}

impl Write for WriteBehind {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.block.capacity() == 0 {
            self.block = crate::io::try_vec(BLOCK).map_err(io::Error::other)?;
        }
        let room = BLOCK - self.block.len();
        let n = buf.len().min(room);
        self.block.extend_from_slice(&buf[..n]);
        if self.block.len() == BLOCK {
            self.hand_over()?;
        }
        Ok(n)
    }

    /// Hands the bytes so far to the writing thread (not to the disk: that is
    /// [`into_file`](Self::into_file)'s).
    fn flush(&mut self) -> io::Result<()> {
        self.hand_over()
    }
}

impl Drop for WriteBehind {
    fn drop(&mut self) {
        self.to_disk = None;
        let _ = self.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn every_byte_arrives_in_order() {
        let path = std::env::temp_dir().join(format!("tessera-write-behind-{}.bin", std::process::id()));
        let mut w = WriteBehind::new(File::create(&path).unwrap()).unwrap();
        let data: Vec<u8> = (0..3 * BLOCK + 12_345).map(|i| (i * 7 % 251) as u8).collect();
        for chunk in data.chunks(100_003) {
            w.write_all(chunk).unwrap();
        }
        drop(w.into_file().unwrap());
        let mut back = Vec::new();
        File::open(&path).unwrap().read_to_end(&mut back).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(back, data);
    }

    #[test]
    fn a_failing_disk_is_an_error_not_a_loss() {
        // /dev/full refuses every write with ENOSPC.
        let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else { return };
        let mut w = WriteBehind::new(full).unwrap();
        let block = vec![1u8; BLOCK];
        let failed = (0..DEPTH + 4).map(|_| w.write_all(&block)).find(|r| r.is_err());
        let err = match failed {
            Some(e) => e.unwrap_err(),
            None => w.into_file().unwrap_err(),
        };
        assert_eq!(err.raw_os_error(), Some(28), "{err}");
    }
}
