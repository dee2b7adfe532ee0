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
//! is the library's; this module adds the framing and checks it on read. A blob is read from
//! another engine's files: every outcome of [`decode`] is a vector or an error line, never a
//! panic (fuzz target `deletion_vector`); `iceberg/src/deletion_vector.rs` reads and writes
//! the Puffin files around it. A table has at most
//! one deletion vector per data file: a writer deleting more rows of a file writes a new vector
//! holding the old positions too and removes the old one in the same commit.

use roaring::RoaringTreemap;

/// The four bytes after the length in every deletion-vector blob.
pub const MAGIC: [u8; 4] = [0xD1, 0xD3, 0x39, 0x64];

/// The blob of `positions` (module docs).
pub fn encode(positions: &RoaringTreemap) -> Vec<u8> {
    let mut body = Vec::with_capacity(4 + positions.serialized_size());
    body.extend_from_slice(&MAGIC);
    positions
        .serialize_into(&mut body)
        .expect("writing to a Vec does not fail");
    let mut out = Vec::with_capacity(body.len() + 8);
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    let crc = crc32fast::hash(&body);
    out.extend_from_slice(&body);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

/// The positions in `blob` (module docs).
///
/// Errors: one line for a blob whose length, magic bytes or checksum do not match, or whose
/// bitmap does not parse (`what` names the file in the message).
pub fn decode(blob: &[u8], what: &str) -> Result<RoaringTreemap, String> {
    let invalid = |why: &str| format!("deletion vector in {what}: {why}");
    if blob.len() < 12 {
        return Err(invalid("shorter than its framing"));
    }
    let length = u32::from_be_bytes(blob[0..4].try_into().expect("4 bytes")) as usize;
    if length + 8 != blob.len() {
        return Err(invalid(&format!(
            "its length field says {length} bytes, the blob has {}",
            blob.len() - 8
        )));
    }
    let body = &blob[4..4 + length];
    if body[..4] != MAGIC {
        return Err(invalid("wrong magic bytes"));
    }
    let crc = u32::from_be_bytes(blob[4 + length..].try_into().expect("4 bytes"));
    if crc32fast::hash(body) != crc {
        return Err(invalid("checksum mismatch"));
    }
    RoaringTreemap::deserialize_from(&body[4..]).map_err(|e| invalid(&e.to_string()))
}
