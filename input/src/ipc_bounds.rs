//! A bound on what an uploaded Arrow IPC message may ask the server to allocate, checked
//! before arrow-ipc decodes it.
//!
//! A buffer compressed with LZ4 or ZSTD starts with its uncompressed length (8 bytes, little
//! endian), and arrow-ipc 58 reserves that many bytes before decompressing
//! (`Vec::with_capacity`; `input/UPSTREAM.md`): a few kilobytes declaring terabytes would make
//! the allocator abort the whole process, which no `catch_unwind` stops. So every compressed
//! buffer's declared length is read from the message first, and a message whose buffers
//! declare more than the bound together is refused.
//!
//! ```text
//!   FlightData { data_header: flatbuffer Message, data_body }
//!     RecordBatch | DictionaryBatch with BodyCompression ──► for each Buffer {offset, length}:
//!       body[offset..offset + 8] as i64 (−1: not compressed; 0: empty) ──► summed ≤ bound
//! ```

use arrow_flight::FlightData;

/// The most uncompressed bytes the buffers of one uploaded message may declare: 1 GiB.
pub const MAX_DECLARED_BYTES: u64 = 1 << 30;

/// Refuses a message whose compressed buffers declare more than `max` uncompressed bytes
/// together (module docs). A header that does not parse, or a buffer outside the body, is left
/// for arrow-ipc to refuse.
///
/// Errors: one line naming the declared size and the bound.
pub fn check_declared_lengths(message: &FlightData, max: u64) -> Result<(), String> {
    let Ok(header) = arrow_ipc::root_as_message(&message.data_header) else {
        return Ok(());
    };
    let batch = header
        .header_as_record_batch()
        .or_else(|| header.header_as_dictionary_batch().and_then(|d| d.data()));
    let Some(batch) = batch else {
        return Ok(());
    };
    if batch.compression().is_none() {
        return Ok(());
    }
    let body = &message.data_body;
    let mut declared: u64 = 0;
    for buffer in batch.buffers().into_iter().flatten() {
        let Ok(start) = usize::try_from(buffer.offset()) else {
            continue;
        };
        let Some(prefix) = start.checked_add(8).and_then(|end| body.get(start..end)) else {
            continue;
        };
        let length = i64::from_le_bytes(prefix.try_into().unwrap_or([0; 8]));
        // −1: the buffer is stored uncompressed; other negatives arrow-ipc refuses itself.
        if let Ok(length) = u64::try_from(length) {
            declared = declared.saturating_add(length);
        }
    }
    match declared > max {
        true => Err(format!(
            "an uploaded Arrow message declares {declared} uncompressed bytes; at most {max} \
             are accepted per message"
        )),
        false => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Int64Array, RecordBatch};
    use arrow_flight::encode::FlightDataEncoderBuilder;
    use futures::TryStreamExt;
    use std::sync::Arc;

    /// A batch as a client sends it, compressed with `codec`.
    fn compressed(codec: arrow_ipc::CompressionType) -> FlightData {
        let batch = RecordBatch::try_from_iter([(
            "a",
            Arc::new(Int64Array::from_iter_values(0..1000)) as _,
        )])
        .unwrap();
        let options = arrow_ipc::writer::IpcWriteOptions::default()
            .try_with_compression(Some(codec))
            .unwrap();
        let messages: Vec<FlightData> = futures::executor::block_on(
            FlightDataEncoderBuilder::new()
                .with_options(options)
                .build(futures::stream::iter([Ok(batch)]))
                .try_collect(),
        )
        .unwrap();
        messages.into_iter().last().unwrap()
    }

    /// A real compressed message passes; the same with a declared length of a terabyte is
    /// refused before anything allocates it.
    #[test]
    fn a_forged_uncompressed_length_is_refused() {
        for codec in [
            arrow_ipc::CompressionType::LZ4_FRAME,
            arrow_ipc::CompressionType::ZSTD,
        ] {
            let mut message = compressed(codec);
            check_declared_lengths(&message, MAX_DECLARED_BYTES).unwrap();
            let header = arrow_ipc::root_as_message(&message.data_header).unwrap();
            let buffers: Vec<_> = header
                .header_as_record_batch()
                .unwrap()
                .buffers()
                .unwrap()
                .iter()
                .filter(|b| b.length() >= 8)
                .map(|b| b.offset() as usize)
                .collect();
            let mut body = message.data_body.to_vec();
            let start = *buffers.last().unwrap();
            body[start..start + 8].copy_from_slice(&(1i64 << 40).to_le_bytes());
            message.data_body = body.into();
            let e = check_declared_lengths(&message, MAX_DECLARED_BYTES).unwrap_err();
            assert!(e.contains("declares"), "{e}");
        }
    }
}
