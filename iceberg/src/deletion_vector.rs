//! Deletion vectors: the deleted row positions of one data file as a Puffin
//! `deletion-vector-v1` blob, how format-version 3 tables record row-level deletes.
//!
//! ```text
//!   blob (Puffin spec, "deletion-vector-v1"):
//!     length: u32 big-endian ─ bytes of magic + vector
//!     magic:  D1 D3 39 64
//!     vector: 64-bit Roaring bitmap, portable form (buckets: u64 LE count, then per bucket
//!             u32 LE high key + a 32-bit portable Roaring bitmap of the low bits)
//!     crc:    u32 big-endian ─ CRC-32 of magic + vector
//!   manifest entry (table spec, "Deletion Vectors"): content = position deletes, format PUFFIN,
//!     referenced_data_file, content_offset / content_size_in_bytes = the blob's bytes,
//!     record_count = the number of positions
//! ```
//!
//! roaring's `RoaringTreemap` serializes exactly the portable 64-bit form, so the vector itself
//! is the library's; this module adds the framing and checks it on read. A table has at most
//! one deletion vector per data file: a writer deleting more rows of a file writes a new vector
//! holding the old positions too and removes the old one in the same commit.

use std::collections::HashMap;

use iceberg::io::FileIO;
use iceberg::puffin::{Blob, CompressionCodec, DELETION_VECTOR_V1, PuffinWriter};
use iceberg::{Error, ErrorKind, Result};
use roaring::RoaringTreemap;

/// The four bytes after the length in every deletion-vector blob.
pub use iceflight_input::deletion_vector::MAGIC;

/// Field id of the row position metadata column `_pos` (table spec, "Reserved Field IDs"),
/// the one field a deletion-vector blob names.
pub use iceberg::metadata_columns::RESERVED_FIELD_ID_POS as ROW_POSITION_FIELD_ID;

/// The blob of `positions` (`input/src/deletion_vector.rs`).
pub use iceflight_input::deletion_vector::encode;

/// The positions in `blob` (`input/src/deletion_vector.rs`, where the framing is checked).
///
/// Errors: `DataInvalid` for a blob whose length, magic bytes or checksum do not match, or
/// whose bitmap does not parse (`what` names the file in the message).
pub fn decode(blob: &[u8], what: &str) -> Result<RoaringTreemap> {
    iceflight_input::deletion_vector::decode(blob, what)
        .map_err(|e| Error::new(ErrorKind::DataInvalid, e))
}

/// Reads the deletion vector stored at bytes `[offset, offset + length)` of the Puffin file at
/// `path` (the manifest entry's `content_offset` and `content_size_in_bytes`).
///
/// Errors: the file cannot be read, or [`decode`]'s.
pub async fn read(
    file_io: &FileIO,
    path: &str,
    offset: u64,
    length: u64,
) -> Result<RoaringTreemap> {
    // The offset and length come from a manifest another engine may have written.
    let Some(end) = offset.checked_add(length) else {
        return Err(Error::new(
            ErrorKind::DataInvalid,
            format!("deletion vector in {path}: offset {offset} and length {length} overflow"),
        ));
    };
    let reader = file_io.new_input(path)?.reader().await?;
    let bytes = reader.read(offset..end).await?;
    decode(&bytes, path)
}

/// Where one written deletion vector lies: what its manifest entry records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrittenVector {
    /// The data file whose rows it deletes.
    pub referenced_data_file: String,
    /// Byte offset of the blob in the Puffin file.
    pub content_offset: u64,
    /// Bytes of the blob.
    pub content_size_in_bytes: u64,
    /// Positions it deletes.
    pub cardinality: u64,
}

/// Writes one Puffin file at `path` holding a deletion vector per `(data file, positions)`
/// (blob properties `referenced-data-file` and `cardinality`, snapshot id and sequence number
/// −1 as the Puffin spec asks of deletion vectors: both are inherited from the manifest).
/// Returns each vector's place, in input order, and the file's size in bytes.
///
/// Errors: an empty `vectors`, or the write fails.
pub async fn write_puffin(
    file_io: &FileIO,
    path: &str,
    vectors: Vec<(String, RoaringTreemap)>,
) -> Result<(Vec<WrittenVector>, u64)> {
    if vectors.is_empty() {
        return Err(Error::new(
            ErrorKind::Unexpected,
            "a deletion-vector file needs at least one vector",
        ));
    }
    let output = file_io.new_output(path)?;
    let properties = HashMap::from([(
        iceberg::puffin::CREATED_BY_PROPERTY.to_string(),
        "iceflight".to_string(),
    )]);
    let mut writer = PuffinWriter::new(&output, properties, false).await?;
    // The Puffin header is 4 magic bytes; blobs follow back to back, uncompressed.
    let mut offset = 4u64;
    let mut written = Vec::with_capacity(vectors.len());
    for (data_file, positions) in vectors {
        let data = encode(&positions);
        let length = data.len() as u64;
        let blob = Blob::builder()
            .r#type(DELETION_VECTOR_V1.to_string())
            .fields(vec![ROW_POSITION_FIELD_ID])
            .snapshot_id(-1)
            .sequence_number(-1)
            .data(data)
            .properties(HashMap::from([
                ("referenced-data-file".to_string(), data_file.clone()),
                ("cardinality".to_string(), positions.len().to_string()),
            ]))
            .build();
        writer.add(blob, CompressionCodec::None).await?;
        written.push(WrittenVector {
            referenced_data_file: data_file,
            content_offset: offset,
            content_size_in_bytes: length,
            cardinality: positions.len(),
        });
        offset += length;
    }
    writer.close().await?;
    let size = file_io.new_input(path)?.metadata().await?.size;
    Ok((written, size))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vector_round_trips_and_a_damaged_one_is_refused() {
        let positions: RoaringTreemap = [0u64, 1, 7, 65_536, 1 << 33].into_iter().collect();
        let blob = encode(&positions);
        assert_eq!(&blob[4..8], &MAGIC);
        assert_eq!(decode(&blob, "t").unwrap(), positions);
        let mut bad = blob.clone();
        let last = bad.len() - 5;
        bad[last] ^= 1;
        let e = decode(&bad, "t").unwrap_err();
        assert!(e.to_string().contains("checksum"), "{e}");
        assert!(decode(&blob[..blob.len() - 1], "t").is_err());
    }

    /// The portable layout for a vector of positions 1 and 3 (one bucket, high key 0, an
    /// array container): what Iceberg's Java writer and DuckDB produce for it.
    #[test]
    fn the_layout_is_the_portable_one() {
        let positions: RoaringTreemap = [1u64, 3].into_iter().collect();
        let blob = encode(&positions);
        let vector = &blob[8..blob.len() - 4];
        let mut expected = vec![];
        expected.extend_from_slice(&1u64.to_le_bytes()); // buckets
        expected.extend_from_slice(&0u32.to_le_bytes()); // high key
        expected.extend_from_slice(&12346u32.to_le_bytes()); // SERIAL_COOKIE_NO_RUNCONTAINER
        expected.extend_from_slice(&1u32.to_le_bytes()); // containers
        expected.extend_from_slice(&0u16.to_le_bytes()); // container key
        expected.extend_from_slice(&1u16.to_le_bytes()); // cardinality − 1
        expected.extend_from_slice(&16u32.to_le_bytes()); // offset of the first container
        expected.extend_from_slice(&1u16.to_le_bytes());
        expected.extend_from_slice(&3u16.to_le_bytes());
        assert_eq!(vector, expected.as_slice());
        assert_eq!(
            u32::from_be_bytes(blob[0..4].try_into().unwrap()) as usize,
            4 + expected.len()
        );
    }
}
