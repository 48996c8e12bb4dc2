//! An NDJSON batch body, read as fast as the client sends it and kept until the line reader
//! takes it.
//!
//! Why it exists: nginx's proxy stops passing a request body to the upstream once it has passed
//! the upstream's response header on to the client (`ngx_http_upstream_send_request_handler`
//! swaps in a dummy write handler when `u->header_sent`; only `grpc_pass` sets `preserve_output`).
//! An answer that starts while the body is still coming therefore stalls the body for good the
//! first time the upstream socket is full, and the request hangs until `proxy_read_timeout`. So
//! the batch answer starts only once the whole body is in, and the body must never wait for the
//! links to be written: it waits here instead, the first [`MEMORY_LIMIT`] bytes in memory and
//! the rest in an unlinked temporary file (about 110 bytes a link: 110 MB for a million).

use axum::body::{Body, Bytes};
use futures_util::StreamExt;
use shortlink_core::sync::LockOrRecover;
use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::{oneshot, Notify};

/// Body bytes kept in memory, not yet read; beyond this they go to the file.
pub const MEMORY_LIMIT: usize = 8 << 20;
/// Most bytes handed to the reader from the file at once.
const FILE_READ: u64 = 256 << 10;

/// Why the body could not be read in full.
#[derive(Debug, thiserror::Error)]
pub enum SpoolError {
    /// The client went away or broke the body off.
    #[error("the request body could not be read: {0}")]
    Body(#[source] axum::Error),
    /// The temporary file could not be created, written or read.
    #[error("the request body could not be kept: {0}")]
    File(#[source] std::io::Error),
}

/// Starts reading `body` into a spool: returns its reader and a receiver told once the body has
/// been read to its end, or has failed, or the reader was dropped (it wanted no more).
pub fn spool(body: Body) -> (SpoolReader, oneshot::Receiver<Result<(), SpoolError>>) {
    let shared = Arc::new(Shared::default());
    let (read, body_read) = oneshot::channel();
    tokio::spawn(fill(body, shared.clone(), read));
    (SpoolReader { shared }, body_read)
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    /// Data, the end or a failure arrived.
    readable: Notify,
    /// The reader is gone: stop reading the body.
    reader_gone: Notify,
}

#[derive(Default)]
struct State {
    /// What the reader has not taken yet, in order.
    segments: VecDeque<Segment>,
    memory_bytes: usize,
    file: Option<Arc<File>>,
    file_len: u64,
    /// Set once the body has ended (`Ok`) or failed.
    end: Option<Result<(), ()>>,
}

enum Segment {
    Memory(Bytes),
    File { offset: u64, len: u64 },
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while the lock was held left no half-made change that matters here.
        self.state.lock_or_recover()
    }

    async fn append(&self, bytes: Bytes) -> Result<(), SpoolError> {
        let (file, offset) = {
            let mut state = self.state();
            if state.memory_bytes + bytes.len() <= MEMORY_LIMIT {
                state.memory_bytes += bytes.len();
                state.segments.push_back(Segment::Memory(bytes));
                drop(state);
                self.readable.notify_one();
                return Ok(());
            }
            (state.file.clone(), state.file_len)
        };
        let len = bytes.len() as u64;
        // Only this task appends, so `offset` stays the end of the file while it writes.
        let file = tokio::task::spawn_blocking(move || {
            let file = match file {
                Some(file) => file,
                None => Arc::new(tempfile::tempfile()?),
            };
            file.write_all_at(&bytes, offset).map(|()| file)
        })
        .await
        .map_err(|joined| SpoolError::File(std::io::Error::other(joined)))?
        .map_err(SpoolError::File)?;
        let mut state = self.state();
        state.file.get_or_insert(file);
        state.file_len += len;
        match state.segments.back_mut() {
            Some(Segment::File {
                offset: at,
                len: run,
            }) if *at + *run == offset => *run += len,
            _ => state.segments.push_back(Segment::File { offset, len }),
        }
        drop(state);
        self.readable.notify_one();
        Ok(())
    }

    fn end(&self, outcome: Result<(), ()>) {
        self.state().end = Some(outcome);
        self.readable.notify_one();
    }
}

/// Reads the body into the spool until it ends, fails, or the reader is dropped.
async fn fill(body: Body, shared: Arc<Shared>, read: oneshot::Sender<Result<(), SpoolError>>) {
    let mut data = body.into_data_stream();
    let outcome = loop {
        let frame = tokio::select! {
            frame = data.next() => frame,
            () = shared.reader_gone.notified() => break Ok(()),
        };
        match frame {
            Some(Ok(bytes)) => {
                if let Err(error) = shared.append(bytes).await {
                    break Err(error);
                }
            }
            Some(Err(error)) => break Err(SpoolError::Body(error)),
            None => break Ok(()),
        }
    };
    shared.end(outcome.as_ref().map(|_| ()).map_err(|_| ()));
    let _ = read.send(outcome);
}

/// The body in order, as the client sent it.
pub struct SpoolReader {
    shared: Arc<Shared>,
}

impl SpoolReader {
    /// The next bytes of the body; `None` at its end, `Some(Err(()))` if it broke off (the
    /// writer's receiver says why).
    pub async fn next(&mut self) -> Option<Result<Bytes, ()>> {
        loop {
            let from_file = {
                let mut state = self.shared.state();
                match state.segments.front_mut() {
                    Some(Segment::Memory(_)) => {
                        let Some(Segment::Memory(bytes)) = state.segments.pop_front() else {
                            unreachable!("the front segment was just seen in memory")
                        };
                        state.memory_bytes -= bytes.len();
                        return Some(Ok(bytes));
                    }
                    Some(Segment::File { offset, len }) => {
                        let piece = (*len).min(FILE_READ);
                        let at = *offset;
                        *offset += piece;
                        *len -= piece;
                        if *len == 0 {
                            state.segments.pop_front();
                        }
                        state.file.clone().map(|file| (file, at, piece))
                    }
                    None => match state.end {
                        Some(Ok(())) => return None,
                        Some(Err(())) => return Some(Err(())),
                        None => None,
                    },
                }
            };
            match from_file {
                Some((file, at, piece)) => return Some(read_file(file, at, piece).await),
                // `notify_one` keeps a permit when nobody waits, so no wake-up is lost between
                // the look at the state and this wait.
                None => self.shared.readable.notified().await,
            }
        }
    }
}

impl Drop for SpoolReader {
    fn drop(&mut self) {
        self.shared.reader_gone.notify_one();
    }
}

async fn read_file(file: Arc<File>, at: u64, len: u64) -> Result<Bytes, ()> {
    tokio::task::spawn_blocking(move || {
        let mut buffer = vec![0; len as usize];
        file.read_exact_at(&mut buffer, at).map(|()| buffer)
    })
    .await
    .map_err(std::io::Error::other)
    .and_then(|read| read)
    .map(Bytes::from)
    .map_err(|error| tracing::error!(%error, "reading a spooled batch body failed"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::stream;

    fn body_of(frames: Vec<std::result::Result<Vec<u8>, std::io::Error>>) -> Body {
        Body::from_stream(stream::iter(frames))
    }

    async fn read_all(reader: &mut SpoolReader) -> (Vec<u8>, bool) {
        let mut out = Vec::new();
        while let Some(piece) = reader.next().await {
            match piece {
                Ok(bytes) => out.extend_from_slice(&bytes),
                Err(()) => return (out, false),
            }
        }
        (out, true)
    }

    #[tokio::test]
    async fn a_body_larger_than_memory_comes_back_whole_and_in_order() {
        // Frames of distinct content, past the memory limit, so order mistakes show.
        let frames: Vec<Vec<u8>> = (0..40u8).map(|i| vec![i; 300_000]).collect();
        let expected = frames.concat();
        assert!(expected.len() > MEMORY_LIMIT);
        let (mut reader, body_read) = spool(body_of(frames.into_iter().map(Ok).collect()));
        // The whole body is read before anything is taken from the spool.
        body_read.await.unwrap().unwrap();
        assert!(
            reader.shared.state().file_len > 0,
            "the rest went to the file"
        );
        let (read, complete) = read_all(&mut reader).await;
        assert!(complete);
        assert_eq!(read.len(), expected.len());
        assert!(read == expected, "the body came back in order");
    }

    #[tokio::test]
    async fn a_broken_body_reads_as_broken_after_what_arrived() {
        let frames = vec![
            Ok(b"{\"url\":1}\n".to_vec()),
            Err(std::io::Error::other("client gone")),
        ];
        let (mut reader, body_read) = spool(body_of(frames));
        assert!(matches!(body_read.await.unwrap(), Err(SpoolError::Body(_))));
        let (read, complete) = read_all(&mut reader).await;
        assert_eq!(read, b"{\"url\":1}\n");
        assert!(!complete);
    }

    #[tokio::test]
    async fn dropping_the_reader_stops_the_reading() {
        // A body that never ends: only the reader going away can stop the spool.
        let endless =
            Body::from_stream(stream::pending::<std::result::Result<Bytes, std::io::Error>>());
        let (reader, body_read) = spool(endless);
        drop(reader);
        assert!(body_read.await.unwrap().is_ok());
    }
}
